"""Small helpers that keep the notebooks thin: validate parameters, pick the run
folder, run, report, and display bounded outputs.

A notebook's ``parameters`` cell holds plain typed literals; the next cell calls
:func:`params`, which validates them through the experiment's own ``Param``
definitions (the same ones ``ringlab run -p`` uses) and raises ``ParamError``
naming the parameter and its allowed values.  ``""``, ``0`` for counts and
``None`` mean "the profile's default".
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ringlab import catalog, fmt, paths, rundir, schema
from ringlab.report import mail
from ringlab.report.figures import round_ratio
from ringlab.errors import ParamError, RinglabError
from ringlab.names import check_name
from ringlab.run.prepare import draw_seed
from ringlab.experiments import get as get_experiment
from ringlab.lab.reproduce import run_dir_for
from ringlab.report import report as _report
from ringlab.rundir import RunOutput
from ringlab.run import run_experiment
from ringlab.run.skipped import record_skipped
from ringlab.rundir import annotate


def param_error(message: str, input: str | None = None) -> ParamError:
    """A bad notebook parameter: a ``ringlab.errors.ParamError`` that IPython shows as
    ``ParamError: <message>`` alone (no traceback: the message names the parameter and the
    allowed values, the stack is noise); the cell still fails, so papermill and ``ringlab
    reproduce`` report the notebook failed (papermill's ``ename`` is ``ParamError``)."""
    return _message_only(ParamError(message, input=input))


def _message_only(e: RinglabError) -> RinglabError:
    """Have IPython show a user-facing error as "Name: message", without the traceback."""
    e._render_traceback_ = lambda: [f"{type(e).__name__}: {e}"]
    return e


def params(experiment: str, profile: str = "quick", **values: Any) -> dict:
    """Validated parameter set for ``experiment``: profile defaults < non-empty notebook values.

    ``None`` and ``""`` mean "use the profile's default" (notebooks write ``count or None``
    for counts where 0 means default); a ``seed`` of -1 (the notebooks' default) draws a fresh
    one, as ``ringlab run`` does without ``-p seed``, and the resolved set holds it."""
    seed = values.get("seed", 0)
    if "seed" in values and (seed is None or (isinstance(seed, int) and not isinstance(seed, bool) and seed < 0)):
        values = {**values, "seed": draw_seed()[0]}     # a fresh seed per run, recorded in env.json
    overrides = {k: v for k, v in values.items() if v is not None and not (isinstance(v, str) and not v.strip())}
    try:
        return get_experiment(experiment).resolve(overrides, profile=profile)
    except ParamError as e:
        raise param_error(str(e), e.input) from None


def shared_budget(values: dict, runs: int) -> float | None:
    """The budget (seconds) each of ``runs`` further runs of a notebook gets, so that together
    they spend the budget ``values`` (a resolved parameter set) gives one run: the notebook's
    further questions cost what its main question costs, not that once per run.  None where
    ``values`` has no budget (the runs then have none either)."""
    budget = values.get("budget")
    if not isinstance(budget, (int, float)) or isinstance(budget, bool) or not budget > 0:
        return None
    if not isinstance(runs, int) or runs < 1:
        raise param_error(f"runs: {runs!r} not allowed; allowed: a whole number >= 1", "runs")
    return float(budget) / runs


def check_choice(name: str, value: Any, allowed) -> Any:
    allowed = list(allowed)
    if value not in allowed:
        raise param_error(f"parameter '{name}': unknown value {value!r}; allowed: "
                          f"{', '.join(map(str, allowed))}", name)
    return value


def run_dir(out_dir: str, experiment_folder: str, host: str = "") -> Path:
    """The run folder: ``out_dir`` if given, else a new scratch/<experiment>/<host>/<run-id>/.

    Only ``ringlab reproduce`` writes into results/ (it passes ``out_dir``): a notebook run
    from plain papermill or JupyterLab goes to the scratch folder (``$RINGLAB_SCRATCH``, default
    ``scratch/`` at the repository root, git-ignored), so it never shows up in results/."""
    if out_dir:
        return Path(out_dir).resolve()
    if host:
        try:
            check_name(host, "parameter 'host'")
        except ParamError as e:
            raise param_error(str(e), e.input) from None
    return run_dir_for(experiment_folder, host or None, root=paths.scratch_dir()).resolve()


def markdown(text: str, max_chars: int = 20000):
    """Display markdown, truncated so the executed notebook stays small."""
    # IPython comes with ipykernel (pip install ipykernel): imported only where a notebook displays
    from IPython.display import Markdown, display
    if len(text) > max_chars:
        text = text[:max_chars] + "\n\n*(truncated: see the files in the run folder)*"
    display(Markdown(text))


def table(df, max_rows: int = 40, floatfmt: str = ".4g"):
    """Display a DataFrame as a markdown table (bounded, deterministic text output)."""
    if len(df) > max_rows:
        shown = df.head(max_rows)
        note = f"\n\n*({len(df) - max_rows} more rows in the CSV)*"
    else:
        shown, note = df, ""
    markdown(fmt.df_to_markdown(shown, floatfmt) + note)



def figures(paths, width: int = 640):
    """Show saved PNG figures inline (the files in figures/ are the source of truth)."""
    # IPython comes with ipykernel (pip install ipykernel): imported only where a notebook displays
    from IPython.display import Image, display
    for p in paths:
        p = Path(p)
        if p.suffix == ".png" and p.exists():
            display(Image(filename=str(p), width=width))


def not_available(what: str, why: str):
    """Say visibly that ``what`` cannot be shown here, and why."""
    markdown(f"*{what}: not available here because {why}.*")


def show_figures(rep, *names: str, width: int = 640):
    """Show the report's figures by name (``rep.figures``); for each one this run cannot have,
    say "not available here because ..." so that a section never stays empty."""
    for name in names:
        if name in rep.figures:
            figures([rep.figures[name]], width=width)
        else:
            not_available(f"figure '{name}'", rep.why_missing(name))


def show_tables(rep, *names: str):
    """Show the report's tables by name (``rep.tables``), or say why one is not available."""
    for name in names:
        if name in rep.tables:
            table(rep.tables[name])
        else:
            not_available(f"table '{name}'", rep.why_missing(name))


def show_file(paths, name: str, why: str, width: int = 640):
    """Show the PNG called ``name`` among ``paths``, or say it is not available and why."""
    found = [Path(p) for p in paths if Path(p).name == name]
    if found:
        figures(found, width=width)
    else:
        not_available(name, why)


# -- a notebook that cannot measure here -------------------------------------------------------
def skip_rest_if(reason: str | None, experiment: str, run_dir: Path) -> bool:
    """Where ``reason`` is given (an input this notebook needs is not on the machine): record
    ``run_dir`` as a skipped run of ``experiment`` (env.json status ``skipped`` with the reason,
    summary.md), say so here, and have every later code cell print one line naming the reason
    instead of running, so that each section of the executed notebook says why it is empty and
    ``ringlab reproduce`` reports the notebook skipped, not failed.  False (nothing done) when
    ``reason`` is None or empty."""
    if not reason:
        return False
    record_skipped(experiment, run_dir, reason)
    markdown(f"**Not run here:** {reason}")
    # IPython comes with ipykernel: imported only where a notebook runs
    from IPython import get_ipython
    shell = get_ipython()
    if shell is not None:
        line = f"print({('not run here: ' + reason)!r})\n"
        shell.input_transformers_post.append(lambda _lines: [line])
    return True


# -- the steps every experiment notebook takes ------------------------------------------------
def run(experiment: str, values: dict, run_dir: Path):
    """Build, tune, run the trials into ``run_dir`` (quiet: no progress bar under papermill)."""
    try:
        return run_experiment(experiment, values, run_dir, progress=False,
                              log=lambda m: print(m, flush=True))
    except ParamError as e:
        raise param_error(str(e), e.input) from None
    except RinglabError as e:  # a locked folder, busy CPUs, a corrupt file: the message says it all
        raise _message_only(e) from None


def run_overview(run_dir: Path) -> str:
    """What ran, where, and what could not be done (from env.json and raw.csv)."""
    run = RunOutput(run_dir)
    env = run.env
    if run.status == "skipped":        # nothing could run here: raw.csv holds its header only
        df = pd.DataFrame(columns=["status", "warmup"])
    else:
        df = run.raw
    lines = []
    if run.status != "skipped":
        lines.append(f"**{mail.counters_text(run_dir)}**")
    if run.status_line:
        lines.append(f"**{run.status_line}** The tables below hold only the trials recorded.")
    lines.append(f"**Run** `{env.run_id}` of `{env.experiment}` on host `{env.host}`, "
                 f"{env.started_utc} to {env.ended_utc} ({run.status}).")
    counts = df["status"].value_counts().to_dict() if len(df) else {}
    lines.append("**Trials:** " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none")
                 + f" (of which warm-up: {int(schema.warmup_mask(df).sum())}).")
    gov = env.governor
    g = gov.get("governor") or {}
    if g:
        lines.append(f"**Governor:** {g.get('status')}" + (f" — {g.get('reason')}" if g.get("reason") else "")
                     + (", restored" if gov.get("restored") or g.get("restored") else ""))
    perf = env.perf_counters
    missing = sorted(k for k, v in perf.items() if not v.get("ok"))
    if missing:
        lines.append(f"**Counters not available here:** {', '.join(missing)} — "
                     f"{next(iter(perf[m]['reason'] for m in missing))}.  They are NaN in raw.csv, never 0.")
    if "icount_source" in df.columns and (df["icount_source"] == "callgrind").any():
        lines.append("**Instruction counts:** callgrind (measured region only, exact and repeatable).")
    b = env.build
    if b.compiler:
        comp = b.compiler
        lines.append(f"**Compiler:** {comp.get('version', comp) if isinstance(comp, dict) else comp}; "
                     f"flags `{' '.join(b.cflags or b.flags or [])}`.")
    for w in env.warnings:
        lines.append(f"**Warning:** {w}")
    bad = df[df["status"] != "ok"] if len(df) else df
    for _, r in bad.head(5).iterrows():
        lines.append(f"**{r['status']}** trial {r.get('variant')} #{r.get('trial')}: exit {r.get('exit_code')}, "
                     f"`{str(r.get('stderr_tail'))[-160:]}`")
    return "\n\n".join(lines)


def write_mail(run, baseline: str | None = None, notebook: tuple[str, dict] | None = None) -> str:
    """The run as a mailing-list reply (``ringlab mail RUN`` prints the same text), saved as the
    run folder's mail.txt by ``ringlab.rundir``; returns the text.  ``run`` is the run folder or
    its :func:`report` (the Report), whose comparisons the mail then renders instead of making
    them again."""
    run_dir = Path(getattr(run, "run_dir", run))
    _record_notebook(run_dir, notebook)
    text = mail.mail_text(run, baseline=baseline, notebook=notebook)
    rundir.write_text(run_dir, "mail.txt", text)
    return text


def _record_notebook(run_dir: Path, notebook: tuple[str, dict] | None) -> None:
    """Keep the notebook's name and parameters in env.json (``mail_notebook``), so that
    ``ringlab mail RUN`` later prints the same reproduce line as the notebook's mail.txt."""
    if notebook is not None and (Path(run_dir) / "env.json").is_file():
        name, values = notebook
        annotate(run_dir, mail_notebook={"name": str(name), "parameters": dict(values)})


#: the folder of notebook 21's ringlab SPSC run inside its kernel-tests run folder
SPSC_FOLDER = "ringlab-spsc"
#: the experiment of a kernel-tests run folder (notebook 21's first, ringlab.catalog)
_HARNESS_EXPERIMENT = catalog.notebook("21-kernel-tests").experiments[0]


def is_harness_folder(run_dir) -> bool:
    """True for a kernel-tests run folder (notebook 21): ringtest's raw.csv with the ringlab SPSC
    run beside it in ``ringlab-spsc/``."""
    run_dir = Path(run_dir)
    return ((run_dir / SPSC_FOLDER / "raw.csv").is_file()
            and RunOutput(run_dir).env_doc.experiment == _HARNESS_EXPERIMENT)


def harness_mail(run_dir, width: int = mail.WIDTH, notebook: tuple[str, dict] | None = None) -> str:
    """Notebook 21's reply: ringtest beside ringlab's SPSC (``report.mail_harness``)."""
    from ringlab.report.mail_harness import harness_mail_text
    from ringlab.studies import harness_compare
    run_dir = Path(run_dir)
    table = harness_compare.side_by_side(run_dir, run_dir / SPSC_FOLDER)
    return harness_mail_text(run_dir, run_dir / SPSC_FOLDER, table, width=width, notebook=notebook)


def write_harness_mail(run_dir: Path, notebook: tuple[str, dict] | None = None) -> str:
    """:func:`harness_mail` saved as the run folder's mail.txt (``ringlab mail RUN`` prints the
    same text); returns the text."""
    _record_notebook(run_dir, notebook)
    text = harness_mail(run_dir, notebook=notebook)
    rundir.write_text(run_dir, "mail.txt", text)
    return text


def real_header(kernel_headers: str, variants: str, name: str = "kernel") -> tuple[str, str]:
    """(kernel_headers, variants) with this machine's real ptr_ring.h added as the variant
    ``name`` when none is given and a distro headers package has one
    (``sources.kernel_header.debian_header()``, what ``ringlab env --headers`` lists)."""
    from ringlab.sources.kernel_header import debian_header
    if kernel_headers.strip():
        return kernel_headers, variants
    found = debian_header()
    if found is None:
        not_available("the real ptr_ring.h beside our rings", "no kernel headers package with "
                      "include/linux/ptr_ring.h was found (ringlab env --headers)")
        return kernel_headers, variants
    print(f"real header: {name} = {found}")
    return f"{name}={found}", ",".join([*variants.split(","), name])


def measured_loop(run_dir: Path, arms: tuple[str, ...] = catalog.SEED000.arms, head: int = 14, tail: int = 4):
    """Show ``objdump -d`` of the measured loop (``rl_measured_simple``) of each arm's binary that
    ran (trimmed), with its static instruction count; or say why it cannot be shown."""
    from ringlab.report.mail import run_binaries
    from ringlab.report.mail_objdump import SIMPLE_LOOP, loop_summary, trimmed
    loops = loop_summary(run_binaries(RunOutput(run_dir).env_doc, arms))
    if not loops:
        not_available(f"objdump of {SIMPLE_LOOP}", "the binaries that ran are gone or objdump is missing")
        return {}
    for arm, d in loops.items():
        body = "\n".join(trimmed(d["loop"], head, tail))
        markdown(f"**{arm}**: `{SIMPLE_LOOP}` is {d['instructions']} instructions"
                 + (f" ({d['bytes']} bytes)" if d.get("bytes") else "")
                 + f"; its loop over the operations, {d['loop_instructions']} of them:\n\n```\n{body}\n```")
    return loops


def round_ratio_figure(run_dir: Path, run, candidate: str, baseline: str) -> list[Path]:
    """Draw ``run``'s per-round ratio of ``candidate`` to ``baseline``
    (``ringlab.report.figures.round_ratio``) into ``run_dir/figures/round_ratio.png|svg`` and
    show it; [] with a visible "not available" when there is no round with both arms."""
    ratios = run.round_ratios(candidate, baseline=baseline)
    if not len(ratios):
        not_available("the per-round ratio figure", f"{run.name} has no round with both {candidate} and {baseline}")
        return []
    figs = rundir.write_figure(run_dir, "round_ratio", round_ratio(ratios, candidate, baseline, run.metric, run.name))
    figures(figs)
    return figs


def report(run_dir: Path, baseline: str | None = None, labels: dict | None = None, metric: str | None = None,
           patched: str | None = None):
    """The run's :class:`ringlab.report.Report` (summary.md/csv/tex and figures/ written too):
    ``r.tables["ab"]``, ``r.figures["spsc"]``, ``r.markdown``; :func:`show` displays them by name."""
    # Recorded so that `ringlab summarize RUN` renders the same summary.md as the notebook.
    asked = {k: v for k, v in dict(baseline=baseline, labels=labels, metric=metric, patched=patched).items()
             if v is not None}
    if asked and (Path(run_dir) / "env.json").is_file():
        annotate(run_dir, report=asked)
    return _report(run_dir, metric=metric, baseline=baseline, labels=labels, patched=patched)
