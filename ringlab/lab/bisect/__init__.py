"""``ringlab bisect``: the first commit of a kernel tree that changed what an experiment measures.

``engine`` runs the search (bisect.json, resume), ``steps`` one three-arm step and its call,
``gitrange`` the commits, ``report`` summary.md and the effect figure.  docs/bisect.md has
the method.
"""
from ringlab.lab.bisect.engine import Bisect, Config, load_state, start

__all__ = ["Bisect", "Config", "load_state", "start"]
