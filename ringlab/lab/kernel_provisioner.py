"""The notebooks' kernel: launched by jupyter_client's local provisioner with CurveZMQ transport
encryption, so the kernel never runs over plain TCP (ipykernel warns "Kernel is running over TCP
without encryption" at every start otherwise).

jupyter_client provisions Curve keys only when asked (``transport_encryption``, 'disabled' by
default) and papermill has no option for it, so the kernelspec names this provisioner
(``metadata.kernel_provisioner``); it asks for ``auto`` (keys where the kernelspec declares
``supported_encryption: curve``, as ipykernel's does) when pyzmq has Curve and jupyter_client
knows the option, and otherwise launches the kernel exactly as the local provisioner does.

``python -m ringlab.lab.kernel_provisioner`` (the Makefile's venv step, after
``ipykernel install --sys-prefix``) names the provisioner in the kernelspec ``python3`` of the
running interpreter's prefix, and starts the kernel's Python with ``-P`` (3.11+): the kernel's
working directory is not on sys.path, so a checkout folder named ``ringlab`` there (papermill
started from the checkout's parent folder) never shadows the installed package.  The notebooks
import only ringlab and installed packages.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import zmq
from jupyter_client.provisioning import LocalProvisioner

#: the entry point name (pyproject.toml, group jupyter_client.kernel_provisioners)
NAME = "ringlab-curve-provisioner"


def encryption_available(km) -> bool:
    """Whether this jupyter_client and pyzmq can encrypt the kernel's transport."""
    return hasattr(km, "transport_encryption") and zmq.has("curve")


class CurveLocalProvisioner(LocalProvisioner):
    """LocalProvisioner asking for transport encryption where it is available."""

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        if self.parent is not None and encryption_available(self.parent):
            kwargs.setdefault("transport_encryption", "auto")
        return await super().pre_launch(**kwargs)


def install(kernel_json: Path) -> bool:
    """Name the provisioner in ``kernel_json`` and put ``-P`` in its argv; False when both are
    there already (the file is left alone)."""
    spec = json.loads(kernel_json.read_text(encoding="utf-8"))
    meta = spec.setdefault("metadata", {})
    want = {"provisioner_name": NAME, "config": {}}
    argv = list(spec.get("argv") or [])
    # the interpreter's options come before "-m ipykernel_launcher"
    isolate = (sys.version_info >= (3, 11) and "-m" in argv[1:]
               and "-P" not in argv[1:argv.index("-m", 1)])
    if meta.get("kernel_provisioner") == want and not isolate:
        return False
    meta["kernel_provisioner"] = want
    if isolate:
        spec["argv"] = [argv[0], "-P", *argv[1:]]
    kernel_json.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    path = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    if not path.is_file():
        print(f"ringlab: {path} not found; run `python -m ipykernel install --sys-prefix --name python3` first",
              file=sys.stderr)
        return 2
    install(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
