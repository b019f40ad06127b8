"""Reductions: column sums in stages, deterministic two-stage sums, overflow-free L2 norms (several tensors a
dispatch where the device's binding limit allows)."""
from __future__ import annotations

import math

from .bindings import binding_errors
from .loops import MAX_LOOP
from .table import F, flag_int, simple, subgroup_first, subgroup_row

ROWS = [
    *(simple("reduce", "colsum", dt, 256) for dt in F),
    simple("reduce", "colsum_cast", "f16", 256),  # f32 rows -> f16 sums (the last stage of f16 split-K)
    # Deterministic two-stage sums.
    *(simple("reduce", "partial_sums", dt, 256) for dt in F),
    simple("reduce", "final_sum", "f32", 256),
    # Overflow-free L2 norm (max |x|, then sum of (x / max)^2), for gradient clipping.
    *(simple("reduce", "norm_partials", dt, 256) for dt in F),
    # ... up to K tensors a dispatch (flag xK: K + 2 bindings; pick_norm_multi takes the largest K the
    # device's storage-buffer limit allows, 2 at Vulkan's guaranteed minimum of 4).
    *(simple("reduce", "norm_partials_multi", dt, 256, [f"x{k}"]) for k in (2, 4, 8) for dt in F),
    simple("reduce", "norm_final", "f32", 256),
    # ... and where the device runs subgroupBroadcast in subgroups of 8 (flag sb): workgroups of 8 that are one
    # subgroup, reductions without shared memory or barriers (pick_reduce and pick_norm_multi prefer them on
    # CPU devices; each stage-1 chunk is the same CHUNK elements, summed by 8 threads instead of 256).
    *(subgroup_row("reduce", op, dt) for op in ("partial_sums", "norm_partials") for dt in F),
    *(subgroup_row("reduce", "norm_partials_multi", dt, [f"x{k}"]) for k in (2, 4, 8) for dt in F),
    *(subgroup_row("reduce", op, "f32") for op in ("final_sum", "norm_final")),
]


def pick_reduce(cands, device_type: str):
    """The variant of a two-stage sum or L2 norm stage (partial_sums, final_sum, norm_partials, norm_final) on a
    device of `device_type`: on CPU devices the flag sb one where the device runs it (table.subgroup_first),
    else the one without."""
    return subgroup_first(cands, device_type)[0]


def multi_slots(flags) -> int:
    """Tensors one norm_partials_multi dispatch reads (flag xK), 0 without one."""
    return flag_int(flags, "x")


def pick_norm_multi(cands, limit: int, device_type: str = "gpu"):
    """The norm_partials_multi variant for a device whose dispatches may bind `limit` storage buffers: the
    one reading the most tensors (K, flag xK) whose K + 2 bindings fit, so the number of tensors a dispatch
    reads is bounded by the limit (8 on every desktop GPU and lavapipe; 2 at Vulkan's minimum of 4), among the
    flag sb ones on CPU devices that run them (table.subgroup_first). None where no multi variant fits (below
    4): then each tensor gets its own norm_partials dispatch (3 bindings), the same partials."""
    ok = [v for v in cands if not binding_errors(v, limit)]
    ok = subgroup_first(ok, device_type) if ok else ok
    return max(ok, key=lambda v: multi_slots(v.flags)) if ok else None



def colsum_plan(rows: int, cols: int = 1) -> list[tuple[int, int]]:
    """The stages of a two-stage (or deeper) column sum of a [rows, cols] matrix: (rows in, chunk) per
    stage; a stage makes ceil(rows / chunk) rows, the last makes one. Up to 256 rows: one stage; beyond,
    chunks of about sqrt(rows) rows (at most MAX_LOOP): two stages up to 65,536 rows, three up to
    MAX_LOOP^2 and beyond; each thread loops <= chunk times."""
    plan = []
    while True:
        chunk = rows if rows <= 256 else min(MAX_LOOP, math.isqrt(rows - 1) + 1)
        plan.append((rows, max(1, chunk)))
        rows = -(-rows // max(1, chunk))
        if rows <= 1:
            return plan



def final_sum_loops(n: int, wg: int) -> int:
    """Iterations per thread of final_sum (one workgroup adds n partials, wg threads)."""
    return -(-n // wg)



def loop_count(op: str, spec: dict, flags, push: dict) -> int | None:
    """Loop iterations one invocation of a reduction runs (None: not a reduction that loops)."""
    wg = spec.get("WG", 1)
    if op in ("colsum", "colsum_cast"):
        return push["chunk"] + 1
    if op == "partial_sums":
        return -(-push["chunk"] // wg) + 1 + 16
    if op in ("final_sum", "norm_final"):
        return -(-push["n"] // wg) + 1 + 16
    if op in ("norm_partials", "norm_partials_multi"):
        return -(-push["chunk"] // wg) + 1 + 16
    return None
