"""Row kernels: softmax (ROWS rows a workgroup), and the norms and cross entropy (one workgroup a row, or
a block of rows for rms_norm_backward on CPU devices): workgroup size and rows a workgroup."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import UnsupportedError
from ..manifest import grid, usable
from .loops import MAX_LOOP
from .table import SUBGROUP_WG, F, Row, Tuned, simple, subgroup_first, subgroup_row

NORM_OPS = ("rms_norm", "add_rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward")
SOFTMAX_OPS = ("softmax", "softmax_backward")

ROWS = [
    # Softmax: ROWS rows a workgroup, several for short rows (pick_softmax); same modules.
    *(Row("softmax", op, dt, (("WG", 128), ("ROWS", rows)), tile=f"r{rows}" if rows > 1 else "")
      for op in SOFTMAX_OPS for dt in F for rows in (1, 4, 16)),
    # One workgroup per row.
    *(simple("norms", op, dt, 128) for op in NORM_OPS for dt in F),
    # ... rms_norm_backward adding a residual's gradient into dx (flag res: one binding more).
    *(simple("norms", "rms_norm_backward", dt, 128, ["res"]) for dt in F),
    *(simple("cross_entropy", op, dt, 128) for op in ("cross_entropy", "cross_entropy_backward") for dt in F),
    # Rows on CPU devices (lavapipe): small workgroups (pick_row_wg); same modules.
    *(Row(tpl, op, dt, (("WG", wg),), flags=flags, tile=f"wg{wg}")
      for tpl, op, flags in (("norms", "rms_norm", ()), ("norms", "add_rms_norm", ()), ("norms", "rms_norm_backward", ()),
                             ("norms", "rms_norm_backward", ("res",)), ("cross_entropy", "cross_entropy", ()),
                             ("cross_entropy", "cross_entropy_backward", ())) for dt in F for wg in (8, 32)),
    # ... and where the device runs subgroupBroadcast in subgroups of 8 (flag sb): a workgroup of 8 that is one
    # subgroup, its reductions without shared memory or barriers (pick_row_wg prefers them on CPU devices).
    *(subgroup_row(tpl, op, dt, flags, tile="wg8")
      for tpl, op, flags in (("norms", "rms_norm", ()), ("norms", "add_rms_norm", ()), ("norms", "rms_norm_backward", ()),
                             ("norms", "rms_norm_backward", ("res",)), ("cross_entropy", "cross_entropy", ()),
                             ("cross_entropy", "cross_entropy_backward", ())) for dt in F),
]

TUNED = {
    "CPU_ROW_ELEMS": Tuned(8, "CPU devices: the smallest workgroup leaving each thread at most this many elements "
                              "(a workgroup's threads run in turn around each barrier)",
                           "bench/results/selection-tuning.md"),
    "SOFTMAX_ROW_ELEMS": Tuned(8, "GPUs: the fewest threads a softmax row that leave each at most this many elements",
                               "bench/results/bench-softmax-h200.txt"),
    "NORM_BLOCK_ROWS": Tuned(16, "CPU devices: rms_norm_backward rows a workgroup (one on GPUs, where blocks "
                                 "leave too few workgroups)", "bench/results/selection-tuning.md"),
}
CPU_ROW_ELEMS = TUNED["CPU_ROW_ELEMS"].value
SOFTMAX_ROW_ELEMS = TUNED["SOFTMAX_ROW_ELEMS"].value
NORM_BLOCK_ROWS = TUNED["NORM_BLOCK_ROWS"].value
# rms_norm_backward's blocks (templates/norms.comp.j2): each thread sums dw's parts of its first NORM_REG_COLS
# columns in registers (the template's PK), one row of partial sums per block. Rows wider than NORM_REG_COLS
# threads' columns keep one row a block (their extra columns would be summed in device memory), and so does a
# block whose loop would pass MAX_LOOP.
NORM_REG_COLS = 8

# Loops over the row per op (templates/norms, softmax, cross_entropy).
ROW_PASSES = {"rms_norm": 2, "add_rms_norm": 2, "rms_norm_backward": 2, "layer_norm": 3, "layer_norm_backward": 2,
              "softmax": 3, "softmax_backward": 2, "cross_entropy": 2, "cross_entropy_backward": 3}


def forced_variant(cands, spec: str, value: int, env: str):
    """The candidate whose specialization constant `spec` is `value`, as the variable `env` asked for: an
    error naming the values there are if none has it."""
    hit = [v for v in cands if v.spec[spec] == value]
    if not hit:
        raise UnsupportedError(f"{env}={value}: no variant with {spec} {value} "
                               f"(have {sorted(v.spec[spec] for v in cands)})")
    return hit[0]


def pick_row_wg(cands, cols: int, device_type: str, forced: int = 0):
    """The variant of a one-workgroup-per-row kernel (rms_norm, cross_entropy, their backwards) for rows of
    `cols`: the forced workgroup size (EVERMIND_VK_ROW_WG, among the variants without flag sb; an error if
    none has it); else on CPU devices the flag sb variant (one subgroup of 8, reductions by subgroupBroadcast:
    no barrier, so no reason to spread a row over more threads) where the device runs it
    (table.subgroup_first), else the smallest workgroup that still gives each thread at most CPU_ROW_ELEMS
    elements, and on GPUs the largest."""
    if forced:
        return forced_variant([v for v in cands if "sb" not in v.flags], "WG", forced, "EVERMIND_VK_ROW_WG")
    cands = subgroup_first(cands, device_type)
    if "sb" in cands[0].flags:
        return cands[0]
    by_wg = sorted(cands, key=lambda v: v.spec["WG"])
    if device_type != "cpu":
        return by_wg[-1]
    fit = [v for v in by_wg if -(-cols // v.spec["WG"]) <= CPU_ROW_ELEMS]
    return fit[0] if fit else by_wg[-1]


def norm_block_rows(rows: int, cols: int, wg: int, device_type: str = "cpu", forced: int = 0) -> int:
    """Rows a workgroup of rms_norm_backward runs (its launch has ceil(rows / that) workgroups); forced:
    EVERMIND_VK_NORM_BLOCK_ROWS's count (dispatch still refuses a block past the device's loop cap)."""
    if forced:
        return forced
    if device_type != "cpu" or cols > NORM_REG_COLS * wg:
        return 1
    per_row = norm_backward_row_loops(cols, wg)
    return max(1, min(NORM_BLOCK_ROWS, rows, MAX_LOOP // per_row))


def norm_backward_row_loops(cols: int, wg: int) -> int:
    """Loop iterations one rms_norm_backward invocation runs per row (exit tests and the reduction's steps
    included; the register columns' loop counted as if not unrolled)."""
    return ROW_PASSES["rms_norm_backward"] * (-(-cols // wg) + 1) + NORM_REG_COLS + 32


def pick_softmax(cands, cols: int, device_type: str, forced: int = 0):
    """The softmax (or softmax_backward) variant for rows of `cols`: ROWS rows a workgroup of WG threads, so
    WG / ROWS threads a row. The forced ROWS (EVERMIND_VK_SOFTMAX_ROWS; an error if no variant has it); else
    on CPU devices the most rows a workgroup (a workgroup's threads run in turn around each barrier), and
    on GPUs the fewest threads a row that leave each at most SOFTMAX_ROW_ELEMS elements, or one row a
    workgroup for longer rows."""
    if forced:
        return forced_variant(cands, "ROWS", forced, "EVERMIND_VK_SOFTMAX_ROWS")
    by_rows = sorted(cands, key=lambda v: v.spec["ROWS"])
    if device_type == "cpu":
        return by_rows[-1]
    fit = [v for v in by_rows if cols <= SOFTMAX_ROW_ELEMS * (v.spec["WG"] // v.spec["ROWS"])]
    return fit[-1] if fit else by_rows[0]


def loop_count(op: str, spec: dict, flags, push: dict) -> int | None:
    """Loop iterations one invocation of a row kernel runs (None: not a row kernel)."""
    wg = spec.get("WG", 1)
    if op == "rms_norm_backward":  # rpw rows a workgroup, one after another
        return push["rpw"] * norm_backward_row_loops(push["cols"], wg) + 2 * NORM_REG_COLS + 2
    if op in ROW_PASSES:  # WG / ROWS threads a row (softmax's ROWS; one row a workgroup elsewhere)
        return ROW_PASSES[op] * (-(-push["cols"] // (wg // spec.get("ROWS", 1))) + 1) + 32
    return None


@dataclass(frozen=True)
class Launch:
    """`rows` rows of `cols` through a row kernel; residual: rms_norm_backward adds a residual's gradient."""
    op: str
    dtype: str
    rows: int
    cols: int
    residual: bool = False


@dataclass(frozen=True)
class Knobs:
    """Overrides: EVERMIND_VK_ROW_WG, EVERMIND_VK_SOFTMAX_ROWS, EVERMIND_VK_NORM_BLOCK_ROWS (0: the rule's)."""
    row_wg: int = 0
    softmax_rows: int = 0
    norm_block_rows: int = 0


@dataclass(frozen=True)
class Plan:
    """One dispatch: the variant, its workgroups, the rows a workgroup runs (rms_norm_backward's rpw) and
    whether the residual's gradient is added by the kernel (flag res) rather than by a separate add."""
    variant: object
    groups: tuple
    rows_per_group: int = 1
    fused_residual: bool = False


def plan(launch: Launch, device, knobs: Knobs = Knobs()) -> Plan:
    """The launch of a row kernel on `device`."""
    cands = usable(launch.op, launch.dtype, device)
    kind = device.info.type
    if launch.op in SOFTMAX_OPS:
        v = pick_softmax(cands, launch.cols, kind, knobs.softmax_rows)
        return Plan(v, grid(-(-launch.rows // v.spec["ROWS"])), v.spec["ROWS"])
    if launch.op != "rms_norm_backward":
        return Plan(pick_row_wg(cands, launch.cols, kind, knobs.row_wg), grid(launch.rows))
    fused = launch.residual and any("res" in v.flags for v in cands)
    cands = [v for v in cands if ("res" in v.flags) == fused]
    if launch.cols > NORM_REG_COLS * SUBGROUP_WG:  # flag sb's 8 threads would run one row a block (norm_block_rows):
        cands = [v for v in cands if "sb" not in v.flags]  # a row of dw's partials for every row, not one a block
    if not cands:  # only res variants fit (never: they bind one buffer more)
        raise UnsupportedError(f"no rms_norm_backward kernel for {launch.dtype} without a residual gradient")
    v = pick_row_wg(cands, launch.cols, kind, knobs.row_wg)
    rpw = norm_block_rows(launch.rows, launch.cols, v.spec["WG"], kind, knobs.norm_block_rows)
    return Plan(v, grid(-(-launch.rows // rpw) if launch.rows else 0), rpw, fused)
