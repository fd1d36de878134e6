"""Simulations of the verdict pipeline, for ``ringlab bench power`` (benchmarks/) and the tests.

* ``noise``      simulated runs of the machine: persistent two-state noise, layout spreads
* ``powersim``   A/A false positives, power and CI width on resampled committed rounds
* ``layoutsim``  the same across independent layouts, with ``noise`` runs
* ``stoppingsim`` staged runs through the run's own stopping code: A/A over all looks, coverage,
  next-run coverage (``ringlab bench stopping``)
* ``fitted``     the noise sizes read from the committed runs' fitted components

Nothing in the shipped pipeline imports this package (the import-linter contract in
pyproject.toml says so); it sits above ``ringlab.stats`` and uses it as any caller would.
"""
