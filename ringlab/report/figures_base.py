"""Names the figure modules share: how a ptr_ring mode is named in a title."""
from __future__ import annotations

#: ptr_ring modes as the figures name them
MODE_NAMES = {0: "one thread alternating", 1: "SPSC, free-running", 2: "SPSC, near-full"}


def mode_label(mode) -> str:
    """'mode 1 (SPSC, free-running)'; 'mode X' for a mode without a name."""
    try:
        m = int(mode)
    except (TypeError, ValueError):
        return f"mode {mode}"
    return f"mode {m} ({MODE_NAMES[m]})" if m in MODE_NAMES else f"mode {m}"
