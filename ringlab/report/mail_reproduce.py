"""How to reproduce a run, for ``ringlab mail``: the command lines, wrapped for a mail."""
from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from ringlab import paths
from ringlab.errors import DataError, ParamError
from ringlab.experiments import get as get_experiment
from ringlab.report.mailfmt import wrap_para, short_sha
from ringlab.rundir import RunEnv, RunOutput
from ringlab.rundir.inputs import read_input


def _executed_notebook(run_dir: Path) -> tuple[str, dict] | None:
    """(notebook file name, papermill parameters) of the executed notebook in the run folder."""
    for nb in RunOutput(run_dir).notebooks:
        meta = RunOutput.papermill(nb)
        if meta is None:
            continue
        if isinstance(meta.get("parameters"), dict):
            return nb.name, meta["parameters"]
    return None


def _recorded_notebook(env: RunEnv) -> tuple[str, dict] | None:
    """(notebook file name, parameters) a notebook recorded in env.json (``mail_notebook``) when
    it wrote its mail."""
    rec = env.mail_notebook
    if isinstance(rec, dict) and isinstance(rec.get("name"), str) and isinstance(rec.get("parameters"), dict):
        return rec["name"], rec["parameters"]
    return None


def _cmd_lines(words: list[str], width: int) -> list[str]:
    """A shell command in lines of at most ``width`` columns, joined by backslash continuations.

    A word too long for a line is split with backslash-newline, which the shell
    removes, so the continuation starts in column 0 and the word stays whole."""
    groups: list[str] = []
    i = 0
    while i < len(words):
        n = 3 if words[i] == "-p" else 2 if words[i] == "-k" else 1
        groups.append(" ".join(words[i:i + n]))
        i += n
    out: list[str] = []
    line = "  "
    for g in groups:
        if line.strip() and len(line) + 1 + len(g) + 2 > width:
            out.append(line + " \\")
            line = "    "
        line = line + (" " if line.strip() else "") + g
        while len(line) + 2 > width and "'" not in line:   # a word longer than a line
            out.append(line[:width - 1] + "\\")
            line = line[width - 1:]
    out.append(line)
    return out


def _patch_copies(kernel_headers: str, run_dir: Path) -> list[str]:
    """For each ``+PATCH`` file of kernel_headers, the copy kept in the run folder (same sha256)."""
    def sha(p: Path) -> str | None:
        try:
            return hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:
            return None

    def kept_sha(p: Path) -> str | None:   # a file of the run folder: never through a link
        try:
            return hashlib.sha256(read_input(p, "a patch file")).hexdigest()
        except (OSError, DataError):
            return None
    kept = {kept_sha(f): f.name for f in sorted(run_dir.iterdir())
            if f.is_file() and not f.is_symlink() and f.suffix in (".patch", ".mbox", ".diff", ".eml")}
    notes = []
    for part in kernel_headers.split(","):
        if "+" not in part:
            continue
        ref = part.split("+", 1)[1]
        h = sha(Path(ref)) if not ref.startswith(("lore:", "builtin:")) else None
        if h and h in kept:
            notes.append(f"{_relative(ref, paths.ROOT)} is the file {kept[h]} in the run folder "
                         f"(sha256 {h[:12]}).")
    return notes


def _relative(value: str, root: Path) -> str:
    prefix = str(root).rstrip("/") + "/"
    return value.replace(prefix, "")


def tree_root(env: RunEnv) -> Path | None:
    """The ringlab checkout the run was made in (its build folder's parent, as env.json's
    ``build.out_dir`` records it), or None."""
    out = RunEnv.of(env).build.out_dir
    if not out:
        return None
    p = Path(str(out))
    return p.parent.parent if p.name == "bin" and p.parent.name == "build" else p.parent


def relative_to_tree(value: str, env: RunEnv) -> str:
    """``value`` with the checkout of the run (and of this process) taken off its paths."""
    root = tree_root(env)
    if root is not None:
        value = _relative(value, root)
    return _relative(value, paths.ROOT)


def run_path(run_dir: Path, env: RunEnv) -> str:
    """The run folder relative to the tree: results/<experiment>/<host>/<run-id> when it is under
    a results folder, else its own name."""
    parts = Path(run_dir).resolve().parts
    if "results" in parts:
        i = len(parts) - 1 - parts[::-1].index("results")
        return "/".join(parts[i:])
    return relative_to_tree(str(run_dir), env)


def notebook_defaults(name: str, commit: str | None) -> dict:
    """The defaults of the notebook's ``parameters`` cell as it was at ``commit`` (the checkout the
    run was made in), as values; {} where that notebook or its cell cannot be read, so that every
    parameter is then spelled out.

    papermill.inspect_notebook reads a notebook from a path only; the notebook at a commit is in
    memory (git), and its parameters cell is plain assignments (``name: type = value``), so their
    literal values are read with ``ast`` here."""
    import ast
    import json
    if not commit:
        return {}
    try:
        from ringlab.system import git as hgit
        nb = json.loads(hgit.read_file(paths.ROOT, commit, f"notebooks/{name}", 8 << 20))
        cell = next(c for c in nb.get("cells", []) if "parameters" in (c.get("metadata") or {}).get("tags", []))
        src = cell.get("source")
        tree = ast.parse("".join(src) if isinstance(src, list) else str(src))
    except Exception:   # noqa: BLE001 - no such commit, notebook or cell here: every parameter stays
        return {}
    out = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
            try:
                out[target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def _is_default(value, default) -> bool:
    if isinstance(value, bool) or isinstance(default, bool):
        return value is default
    if isinstance(value, (int, float)) and isinstance(default, (int, float)):
        return float(value) == float(default)
    return value == default


def with_run_seed(nb_params: dict, run_params: dict) -> dict:
    """The notebook's parameters with the seed the run drew in place of ``-1`` (draw one), so
    the line rebuilds the run's own layouts and trial order; ``-p seed -1`` re-measures with new ones."""
    seed = run_params.get("seed")
    drawn = nb_params.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool) and isinstance(drawn, int) and drawn < 0:
        return {**nb_params, "seed": seed}
    return nb_params


def command_words(run_dir: Path, env: RunEnv, notebook: tuple[str, dict] | None = None) -> str:
    """The command the run came from, in a few words: "notebook 10-ptr-ring-reorder" or
    "ringlab run ptr_ring" (the reproduce line spells it out)."""
    env = RunEnv.of(env)
    nb = notebook or _recorded_notebook(env) or _executed_notebook(Path(run_dir))
    if nb:
        return f"notebook {Path(nb[0]).stem}"
    return f"ringlab run {env.experiment}" if env.experiment else "command not recorded"


def reproduce_lines(run_dir: Path, env: RunEnv, width: int,
                    notebook: tuple[str, dict] | None = None) -> list[str]:
    """The reproduce line: the notebook's papermill line with the parameters it was given when
    the run came from a notebook (those equal to that notebook's defaults at the run's commit left out), else ``ringlab run`` with every parameter; paths relative to
    the tree."""
    env = RunEnv.of(env)
    commit = short_sha(env.git.commit)
    nb = notebook or _recorded_notebook(env) or _executed_notebook(run_dir)
    params = env.parameters
    experiment = env.experiment
    if nb:
        name, nbp = nb
        nbp = with_run_seed(nbp, params)
        words = ["papermill", f"notebooks/{name}", "out.ipynb", "-k", "python3"]
        defaults = notebook_defaults(name, env.git.commit)
        for k, v in nbp.items():
            if k in ("out_dir", "host") or (k != "profile" and k in defaults and _is_default(v, defaults[k])):
                continue    # the notebook's own default gives the same value: the line stays short
            words += ["-p", k, shlex.quote(relative_to_tree(str(v), env))]
        out = wrap_para(f"reproduce (ringlab {commit}, notebook {Path(name).stem}):", width)
        return out + _cmd_lines(words, width)
    if experiment and params:
        try:
            spec = get_experiment(experiment).all_params()
        except ParamError:  # an unknown or renamed experiment: plain formatting
            spec = {}
        words = ["ringlab", "run", str(experiment)]
        for k, v in params.items():
            txt = spec[k].format(v) if k in spec else (",".join(map(str, v)) if isinstance(v, list)
                                                       else str(v).lower() if isinstance(v, bool) else str(v))
            words += ["-p", k, shlex.quote(relative_to_tree(txt, env))]
        out = wrap_para(f"reproduce (ringlab {commit}), every parameter spelled out:", width)
        out += _cmd_lines(words, width)
        for note in _patch_copies(str(params.get("kernel_headers") or ""), run_dir):
            out += wrap_para(note, width, 2)
        return out
    return wrap_para("reproduce: not recorded (env.json has no parameters)", width)
