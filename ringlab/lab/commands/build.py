"""Build the C ring tests (standalone binaries into build/bin/, plus the cffi module's description)."""
from __future__ import annotations

import json
import platform
import sys

import click

from ringlab.build import native
from ringlab.build.cflags import BuildError
from ringlab.build.driver import SANITIZERS, build_all
from ringlab.build.targets import ring_binary
from ringlab.errors import ParamError
from ringlab.lab.commands import options
from ringlab.sources.header_files import KernelHeaderError
from ringlab.sources.header_source import resolve_source
from ringlab.sources.kernel_header import detect_generation, parse_spec


@click.command(cls=options.Command)
@click.option("--kernel-header", multiple=True, metavar="NAME=SOURCE",
              help=f"also build {ring_binary('NAME')} from a real kernel ptr_ring.h; SOURCE is a "
                   "file, a kernel tree or a headers package root, git:TREE@REV, BASE+PATCH "
                   "or BASE+lore:MSGID; repeatable")
@click.option("--cflags", default="", metavar='"FLAGS"',
              help="extra compiler flags, appended after the defaults (split like a shell "
                   "would, never run through one); --cflags -O3 and --cflags=-O3 both work")
@click.option("--sanitize", default=None, metavar="KIND",
              help="thread | address | undefined | address,undefined "
                   "(builds into build/bin-<KIND>/)")
@click.option("--json", is_flag=True, help="print the BuildInfo as JSON")
def command(**params) -> int:
    return run(options.Args(params))


def _parse_specs(specs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in specs:
        name, path = parse_spec(spec)   # KernelHeaderError (exit 2) naming the spec
        if name in out:
            raise ParamError(f"--kernel-header: NAME {name!r} given twice; allowed: unique names")
        out[name] = str(path)
    return out


def _check_sources(headers: dict[str, str]) -> None:
    """Resolve every header source before compiling: a bad file, revision or patch is the
    user's to fix (ParamError, exit 2), not a failed build (exit 1).  Resolved sources are
    cached, so the build that follows does not fetch them again."""
    if not headers:
        return
    for name, spec in headers.items():
        try:
            detect_generation(resolve_source(spec).header)
        except KernelHeaderError as e:
            raise ParamError(f"--kernel-header {name}={spec}: {e}; allowed: a file, a kernel tree or "
                             "headers package, git:TREE@REV, BASE+PATCH, BASE+lore:MSGID") from None


def _native_description() -> dict:
    try:
        return native.describe()
    except Exception as e:  # the extension is optional for the binaries: report, do not fail
        return {"error": f"{type(e).__name__}: {e}"}


def run(args) -> int:
    if args.sanitize is not None and args.sanitize.replace(" ", "") not in (*SANITIZERS, "undefined,address"):
        raise ParamError(f"--sanitize {args.sanitize!r}: allowed: {', '.join(SANITIZERS)}")
    headers = _parse_specs(args.kernel_header)
    _check_sources(headers)
    try:
        info = build_all(kernel_headers=headers, cflags=args.cflags, sanitize=args.sanitize)
    except BuildError as e:
        print(f"ringlab build: error: {e}", file=sys.stderr)
        return 1
    cffi_module = _native_description()
    if args.json:
        d = info.to_dict()
        d["native"] = cffi_module
        print(json.dumps(d, indent=1))
        return 0
    for b in info.binaries.values():
        print(b.path)
    for name, why in info.skipped.items():
        print(f"# skipped {name}: {why}", file=sys.stderr)
    print(f"compiler: {info.compiler} ({info.compiler_version})")
    print(f"flags: {' '.join(info.cflags)}")
    if info.target and not info.target.startswith(platform.machine()):
        print(f"target: {info.target} (cross-built: run under qemu-user for functional checks only)")
    if "error" in cffi_module:
        print(f"cffi module: unavailable ({cffi_module['error']})")
    else:
        print(f"cffi module: {cffi_module.get('compiler')} flags: {' '.join(cffi_module.get('flags', []))}"
              f" (cache {cffi_module.get('cache_dir')})")
    return 0
