"""Drive a real JupyterLab in headless Chromium: open a notebook, Run All, collect what rendered.

Used by the `browser` tests.  JupyterLab runs from this virtualenv with a token on a free
loopback port; Playwright drives the distribution's Chromium (``executable_path``, no browser
download).  The notebook is saved through the UI after the run, so the test can read both what
the browser rendered (images, tables, console errors) and the outputs the kernel produced.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

#: Chromium flags for a closed network and a root user: no sandbox, no GPU, no background fetches.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def chromium_path() -> str | None:
    """The distribution's Chromium, or None."""
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


def unavailable() -> str | None:
    """Why a browser test cannot run here, or None when it can."""
    if chromium_path() is None:
        return "no Chromium on PATH (Debian package 'chromium'; .ci/run installs it when it can)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip extra 'browser')"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "jupyterlab is not installed (pip extra 'browser')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def set_parameters(nb_path: Path, **values) -> None:
    """Rewrite the `parameters` cell's assignments NAME: type = VALUE in place (as a user would)."""
    nb = nbformat.read(nb_path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = cell.source.splitlines()
    for name, value in values.items():
        for i, line in enumerate(lines):
            head = line.split("=", 1)[0]
            if head.split(":")[0].strip() == name:
                comment = line.split("  # ", 1)[1] if "  # " in line else ""
                lines[i] = f"{head.rstrip()} = {value!r}" + (f"  # {comment}" if comment else "")
                break
        else:
            raise KeyError(f"parameter {name!r} not in the parameters cell of {nb_path.name}")
    cell.source = "\n".join(lines)
    nbformat.write(nb, nb_path)


def insert_cell_after_parameters(nb_path: Path, source: str) -> None:
    nb = nbformat.read(nb_path, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(source))
    nbformat.write(nb, nb_path)


@dataclass
class LabRun:
    """What one Run All showed."""
    notebook: Path
    images: int = 0                      # <img> outputs that loaded (naturalWidth > 0)
    image_titles: list[str] = field(default_factory=list)
    table_headers: list[list[str]] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    error_outputs: list[str] = field(default_factory=list)   # from the notebook saved by the UI
    unexecuted_cells: int = 0
    screenshot: Path | None = None


class JupyterLab:
    """A JupyterLab server on loopback, stopped on exit."""

    def __init__(self, root_dir: Path, work: Path, env: dict | None = None):
        self.root_dir, self.work = Path(root_dir), Path(work)
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.env = dict(os.environ, **(env or {}))
        for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                         ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")):
            d = self.work / sub
            d.mkdir(parents=True, exist_ok=True)
            self.env[var] = str(d)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "JupyterLab":
        argv = [sys.executable, "-m", "jupyterlab", "--no-browser",
                f"--ServerApp.token={self.token}", "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                f"--ServerApp.root_dir={self.root_dir}", "--LabApp.expose_app_in_browser=True",
                "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        if os.geteuid() == 0:
            argv.append("--allow-root")
        self.log = open(self.work / "jupyterlab.log", "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited {self.proc.returncode}: "
                                   f"{(self.work / 'jupyterlab.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2):
                    return self
            except OSError:
                time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError("jupyter lab did not answer within 120 s")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            import signal
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()

    def run_all(self, rel_path: str, shots: Path, timeout_s: float = 900) -> LabRun:
        """Open ``rel_path`` (relative to root_dir), Run All, wait, save, and collect the result."""
        from playwright.sync_api import sync_playwright
        result = LabRun(self.root_dir / rel_path)
        js_done = """() => {
            const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
            if (!w || !w.content || !w.sessionContext || !w.sessionContext.session) return false;
            const k = w.sessionContext.session.kernel;
            if (!k || k.status !== 'idle') return false;
            const cells = w.content.widgets.filter(c => c.model.type === 'code');
            // Run All stops at the first error: done when nothing is queued or running any more.
            const busy = cells.some(c => (c.node.querySelector('.jp-InputPrompt') || {textContent: ''}).textContent.includes('*'));
            return !busy && cells.some(c => c.model.executionCount !== null);
        }"""
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.on("console", lambda m: result.console_errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: result.page_errors.append(str(e)))
                page.goto(f"{self.url}/lab/tree/{rel_path}?token={self.token}")
                page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                                       " && window.jupyterapp.shell.currentWidget.sessionContext"
                                       " && window.jupyterapp.shell.currentWidget.sessionContext.session"
                                       " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
                                       " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
                                       timeout=120_000)
                page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
                page.wait_for_timeout(1000)
                page.wait_for_function(js_done, timeout=timeout_s * 1000, polling=1000)
                page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
                page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                                       timeout=60_000)
                # Render everything (JupyterLab virtualises long notebooks): scroll to the end.
                page.evaluate("() => window.jupyterapp.shell.currentWidget.content.widgets.forEach(c => c.node.scrollIntoView())")
                page.wait_for_timeout(1500)
                result.images = page.evaluate(
                    "() => Array.from(document.querySelectorAll('.jp-OutputArea-output img'))"
                    ".filter(i => i.complete && i.naturalWidth > 0).length")
                result.image_titles = page.evaluate(
                    "() => Array.from(document.querySelectorAll('.jp-OutputArea-output img'))"
                    ".map(i => i.getAttribute('alt') || i.getAttribute('title') || '')")
                result.table_headers = page.evaluate(
                    "() => Array.from(document.querySelectorAll('.jp-OutputArea-output table'))"
                    ".map(t => Array.from(t.querySelectorAll('th')).map(th => th.textContent.trim()))")
                shots.mkdir(parents=True, exist_ok=True)
                result.screenshot = shots / (Path(rel_path).stem + ".png")
                page.screenshot(path=str(result.screenshot), full_page=False)
            finally:
                browser.close()
        nb = json.loads((self.root_dir / rel_path).read_text())
        for c in nb["cells"]:
            if c["cell_type"] != "code":
                continue
            if c.get("execution_count") is None:
                result.unexecuted_cells += 1
            for o in c.get("outputs", []):
                if o.get("output_type") == "error":
                    result.error_outputs.append(f"{o.get('ename')}: {o.get('evalue')}")
        return result
