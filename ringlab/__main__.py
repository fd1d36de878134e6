import sys

from ringlab.cli import main

sys.exit(main())
