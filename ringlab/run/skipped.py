"""A run that cannot measure on this machine: its folder says so, and why.

Where an input a notebook needs is not on the machine (no kernel headers package for the
default base, no kernel source for ringtest), the notebook records its run folder as
``skipped`` instead of failing: env.json holds the status, ``skipped_reason`` and the same
description of the machine and checkout a measured run has, and summary.md says what was not
measured and how to get the input.  No raw.csv is written: there is no trial.
"""
from __future__ import annotations

from pathlib import Path

from ringlab import __version__, rundir, schema
from ringlab.run.prepare import host_id
from ringlab.system import checkout, envinfo


def summary_text(reason: str) -> str:
    """summary.md of a run that measured nothing here."""
    return f"# Not measured on this machine\n\n{reason}\n"


def record_skipped(experiment: str, out_dir, reason: str, host: str | None = None) -> Path:
    """Create the run folder ``out_dir`` as a skipped run of ``experiment`` (status
    ``skipped``, ``skipped_reason``), with summary.md and an empty figures/; its path."""
    out = Path(out_dir)
    with rundir.RunFolder(out, mode="create") as f:
        f.write_env(schema_version=schema.SCHEMA_VERSION, run_id=out.name, experiment=experiment,
                    host=host or host_id(), ringlab_version=__version__, git=checkout.git_info(),
                    environment=envinfo.collect(), skipped_reason=reason)
        f.finish("skipped", reason)
    rundir.write_text(out, "summary.md", summary_text(reason))
    (out / "figures").mkdir(exist_ok=True)
    return out
