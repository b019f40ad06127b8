"""Every family's loop count of a launch, and the device loop cap rule the runtime checks before each
dispatch."""
from __future__ import annotations

from . import decode, embedding, matmul, reduce, rows, scan
from .loops import DEVICE_LOOP_CAP

# The families whose kernels loop over the problem: each has loop_count(op, spec, flags, push) -> int | None.
FAMILIES = (rows, reduce, embedding, matmul, scan, decode)


def launch_loop_count(op: str, spec: dict, flags, push: dict) -> int | None:
    """Upper bound of the loop iterations one invocation of a launch runs (exit tests and the
    workgroup reductions' log2(WG) steps included), or None for ops whose loops do not grow with the
    problem (elementwise maps) or are not described by any family."""
    for fam in FAMILIES:
        n = fam.loop_count(op, spec, flags, push)
        if n is not None:
            return n
    return None


def launch_loop_errors(op: str, spec: dict, flags, push: dict, device_type: str) -> list[str]:
    """Why a launch may not run on a device type because of its loop cap (empty: it may)."""
    cap = DEVICE_LOOP_CAP.get(device_type)
    n = launch_loop_count(op, spec, flags, push) if cap is not None else None
    if n is not None and n > cap:
        return [f"{op}: up to {n} loop iterations per invocation, past this device's cap of {cap} "
                "(lavapipe silently ends longer loops)"]
    return []
