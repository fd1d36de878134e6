import sys

from ringlab.lab.cli import main

sys.exit(main())
