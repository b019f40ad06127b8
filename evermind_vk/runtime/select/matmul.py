"""Matrix products: the strided, batched matmul kernels, which one runs a launch, and how a launch is split.

Algorithms (one template each, `templates/matmul_<kind>.comp.j2`, cm2's `.spvasm.j2`):
  tiled  shared-memory tiles, any shape and layout (the fallback)
  rb     GPUs: an RMxRN register block per thread from 16-byte loads (flag rbRMxRN)
  v4     CPU devices: large register blocks from 16-byte loads, no shared memory (flag v4)
  cm     cooperative matrices (tensor cores), f16 in / f32 accumulate, aligned shapes (flags cm, rbFMxFN)
  cm2    NVIDIA's VK_NV_cooperative_matrix2: workgroup-scope matrices the driver stages itself, f16 in / f32
         accumulate, aligned shapes (flags cm2, lN; templates/matmul_cm2.spvasm.j2, SPIR-V assembly)
Every f16 row has a twin with flag c32 that stores C in f32 (split-K's partial products); the selector
chooses among one set only (out32). `plan` turns one gemm_strided launch into what ops/matmul.py runs:
dispatches into C, or parts (batch pieces, or K chunks into an f32 workspace that a column sum adds).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...errors import ShapeError, UnsupportedError
from ..manifest import MAX_GROUPS, usable
from .loops import MAX_LOOP, loop_chunks
from .table import F, Row, Tuned, flag_int


# -- flags ----------------------------------------------------------------------------------------------
def register_block(flags) -> tuple | None:
    """The per-thread (rb) or per-subgroup (cm) block of an `rbRMxRN` flag, else None."""
    f = [f for f in flags if f.startswith("rb")]
    return tuple(int(x) for x in f[0][2:].split("x")) if f else None


def subgroup_grid(flags) -> tuple:
    """The WM x WN subgroups of a cm variant (flag wWMxWN; 2x2 without one)."""
    f = [f for f in flags if f.startswith("w") and "x" in f]
    return tuple(int(x) for x in f[0][1:].split("x")) if f else (2, 2)


def raster_group(flags) -> int:
    """Tile rows per raster group (flag gG: workgroups walk G tile rows column by column), 0 without one."""
    return flag_int(flags, "g")


def local_size(flags) -> int:
    """Threads a workgroup of a cm2 variant (flag lN: a template parameter, since workgroup-scope
    matrices need the size at compile time), 0 without one."""
    return flag_int(flags, "l")


def rb_shared_bytes(bm: int, bn: int, bk: int) -> int:
    """Shared memory of an rb tile: two buffers of BK rows of BM/4 + 1 and BN/4 + 1 vec4s."""
    return 2 * bk * (bm // 4 + 1 + bn // 4 + 1) * 16


def cm_shared_bytes(bm: int, bn: int, bk: int) -> int:
    """Shared memory of a cm tile: two buffers of A (BM rows of BK + 8 halves, or BK rows of BM + 8 when
    m-contiguous) and B (BK rows of BN + 8, or BN rows of BK + 8 when k-contiguous), the larger of each."""
    return 2 * 2 * (max(bm * (bk + 8), bk * (bm + 8)) + max(bk * (bn + 8), bn * (bk + 8)))


def matmul_kind(flags) -> str:
    """'cm' | 'cm2' | 'v4' | 'rb' | 'tiled' for a matmul variant's flags."""
    if "cm2" in flags:
        return "cm2"
    if "cm" in flags:
        return "cm"
    if "v4" in flags:
        return "v4"
    return "rb" if register_block(flags) else "tiled"


# Shared memory buffers each algorithm keeps (the selector counts them against the device limit).
MATMUL_BUFFERS = {"tiled": 1, "rb": 2, "v4": 0, "cm": 2, "cm2": 0}  # cm2: the driver's own (features.device_errors)


def matmul_row_errors(bm: int, bn: int, bk: int, wg_x: int, wg_y: int, flags) -> list[str]:
    """Why a (tile, workgroup, flags) row of the variant table cannot work with its template (empty: it can)."""
    kind, blk, nt = matmul_kind(flags), register_block(flags), wg_x * wg_y
    errs = []
    if kind == "cm2":
        if nt != local_size(flags) or wg_y != 1:
            errs.append(f"cm2 runs {local_size(flags)} threads (flag lN) as WG_X x 1, got {wg_x}x{wg_y}")
        if bm % 16 or bn % 16 or bk % 16:
            errs.append(f"cm2 tile {bm}x{bn}x{bk} must be multiples of 16")
    elif kind == "cm":
        if not blk:
            return ["a cm matmul needs its fragment block as an rbFMxFN flag"]
        la, lb = bm * bk / (8 * nt), bn * bk / (8 * nt)  # 16-byte (8-half) loads per thread, at most 8
        wm, wn = subgroup_grid(flags)
        if (bm, bn) != (16 * wm * blk[0], 16 * wn * blk[1]):
            errs.append(f"cm tile {bm}x{bn} must be the {blk} block of 16x16 fragments times {wm}x{wn} subgroups")
        if nt != 32 * wm * wn:
            errs.append(f"cm needs {32 * wm * wn} threads ({wm}x{wn} subgroups of 32), got {nt}")
        if cm_shared_bytes(bm, bn, bk) > 49152:
            errs.append(f"cm tile {bm}x{bn}x{bk} needs {cm_shared_bytes(bm, bn, bk)} bytes of shared memory (> 48 KiB)")
        if bk % 16:
            errs.append(f"cm BK {bk} must be a multiple of 16")
        if la not in range(1, 9) or lb not in range(1, 9):
            errs.append(f"cm tile {bm}x{bn}x{bk} needs 1..8 whole 16-byte loads per thread, got {la}, {lb}")
    elif kind == "rb":
        la, lb = bm * bk / (4 * nt), bn * bk / (4 * nt)  # 16-byte (4-float) loads per thread, at most 4
        if (bm, bn) != (blk[0] * wg_y, blk[1] * wg_x):
            errs.append(f"rb tile {bm}x{bn} must be the {blk} block times the {wg_y}x{wg_x} threads")
        if blk[0] % 4 or blk[1] % 4 or bk % 4:
            errs.append(f"rb block {blk} and BK {bk} must be multiples of 4")
        if la not in (1, 2, 3, 4) or lb not in (1, 2, 3, 4):
            errs.append(f"rb tile {bm}x{bn}x{bk} needs 1..4 whole 16-byte loads per thread, got {la}, {lb}")
        if aligned(flags) != bool(unit_layout(flags)):
            errs.append(f"an rb aligned twin (al) takes exactly one layout flag of {UNIT_LAYOUTS}, got {list(flags)}")
        if rb_shared_bytes(bm, bn, bk) > 49152:  # bench/results/selection-tuning.md: past it the device was lost
            errs.append(f"rb tile {bm}x{bn}x{bk} needs {rb_shared_bytes(bm, bn, bk)} bytes of shared memory (> 48 KiB)")
    elif kind == "v4":
        if bk != 4:
            errs.append(f"v4 reads k four at a time: BK must be 4, got {bk}")
        if bm % wg_y or bn % (4 * wg_x):
            errs.append(f"v4 tile {bm}x{bn} must be whole rows per thread and 4-column vectors on {wg_y}x{wg_x} threads")
        if "sb" in flags and ((wg_x, wg_y) != (8, 1) or bm % 8):
            errs.append(f"v4 sb broadcasts A from the 8 lanes of one subgroup: 8x1 threads and rows a multiple of 8, "
                        f"got {wg_x}x{wg_y} threads, {bm} rows")
    else:
        if bm % wg_y or bn % wg_x:
            errs.append(f"tiled {bm}x{bn} must be a whole number of outputs per thread on {wg_y}x{wg_x} threads")
    return errs


# -- the rows ------------------------------------------------------------------------------------------
# The k-step a matmul algorithm's tile names leave out (any other is named: t128x128k32).
USUAL_BK = {"cm": 16, "rb": 8, "cm2": 64}


def row(dtype: str, bm: int, bn: int, bk: int, wg_x: int, wg_y: int, flags=()) -> Row:
    """A matmul row; its flags pick the algorithm's template, matmul_<kind>. Raises ValueError for a row its
    template cannot run (matmul_row_errors)."""
    errors = matmul_row_errors(bm, bn, bk, wg_x, wg_y, flags)
    if errors:
        raise ValueError(f"matmul {dtype} {bm}x{bn}x{bk} on {wg_x}x{wg_y} threads, flags {list(flags)}:\n  "
                         + "\n  ".join(errors))
    kind = matmul_kind(flags)
    return Row("matmul_" + kind, "matmul", dtype, (("WG_X", wg_x), ("WG_Y", wg_y), ("BM", bm), ("BN", bn), ("BK", bk)),
               flags=tuple(flags), tile=f"t{bm}x{bn}" + (f"k{bk}" if bk != USUAL_BK.get(kind, bk) else ""))


def cm_row(fm: int, fn: int, wm: int, wn: int, bk: int, extra=()) -> Row:
    """A KHR cooperative-matrix row (f16): FMxFN 16x16 fragments per subgroup on WMxWN subgroups (flag wWMxWN,
    2x2 without one), extra flags (g8: raster groups; p2: two register sets)."""
    return row("f16", 16 * fm * wm, 16 * fn * wn, bk, 32 * wm * wn, 1,
               ["cm", f"rb{fm}x{fn}", *([f"w{wm}x{wn}"] if (wm, wn) != (2, 2) else []), *extra])


def cm2_row(bm: int, bn: int, bk: int, nt: int) -> Row:
    """A VK_NV_cooperative_matrix2 row (f16) on nt threads (flag lN)."""
    return row("f16", bm, bn, bk, nt, 1, ["cm2", f"l{nt}"])


def row_key(v) -> tuple:
    """What identifies a row among the manifest's variants, without its name: flags (a c32 twin ranks as its
    row) and tile. Works on table rows and manifest variants alike."""
    s = dict(v.spec)
    return (tuple(f for f in v.flags if f != "c32"), s["BM"], s["BN"], s["BK"])


ALIGNED_TWINS = ([], *(["al", u] for u in ("ukk", "ukn", "umn", "umk")))  # an rb row's flags: plain, then twins
CM_PARAMS = ((4, 4, 2, 2, 16, ()), (2, 2, 2, 2, 32, ()), (4, 4, 2, 2, 16, ("g8",)), (4, 2, 2, 4, 16, ()),
             (2, 4, 4, 2, 16, ()), (4, 2, 2, 4, 32, ()), (2, 2, 4, 4, 32, ()), (4, 4, 2, 4, 16, ()),
             (4, 4, 4, 2, 16, ()), (4, 4, 2, 4, 16, ("g8",)), (4, 4, 2, 2, 32, ("g8",)),
             # p2: two register sets, each tile loaded two steps before it is stored
             (4, 4, 2, 2, 16, ("p2",)), (4, 2, 2, 4, 16, ("p2",)), (4, 4, 2, 2, 32, ("p2",)), (4, 4, 2, 4, 16, ("p2",)))
CM2_PARAMS = ((128, 256, 64, 256), (128, 256, 32, 256), (128, 128, 64, 256), (128, 128, 128, 256), (64, 64, 64, 128))


@dataclass(frozen=True)
class Layout:
    """A strided, batched product's strides and offsets, as gemm_strided takes them (in elements).

    The batch has two levels, z = z1 * Z2 + z2 for z1 < Z1 (outer) and z2 < Z2 (inner, the 1-level
    `batch`): operand offsets are off + z1 * (outer stride) + z2 * (inner stride), B's z2 divided by
    bdiv first (grouped-query heads)."""
    a_strides: tuple  # (sam, sak)
    b_strides: tuple  # (sbk, sbn)
    c_strides: tuple  # (scm, scn)
    a_batch: tuple = (0, 0)  # (aoff, sab): inner
    b_batch: tuple = (0, 0, 1)  # (boff, sbb, bdiv): inner
    c_batch: tuple = (0, 0)  # (coff, scb): inner
    beta: float = 0.0
    outer: tuple = (1, 0, 0, 0)  # (Z1, sao, sbo, sco)

    @property
    def wide_loads(self) -> bool:
        """16-byte loads possible: each operand has a unit stride, its other stride and the offsets are
        multiples of 4 elements."""
        (sam, sak), (sbk, sbn) = self.a_strides, self.b_strides
        return (((sak == 1 and sam % 4 == 0) or (sam == 1 and sak % 4 == 0))
                and ((sbn == 1 and sbk % 4 == 0) or (sbk == 1 and sbn % 4 == 0))
                and all(x % 4 == 0 for x in (*self.a_batch, *self.b_batch[:2], *self.outer[1:3])))


def batch_chunks(z1: int, z2: int, bdiv: int, limit: int) -> list[tuple[int, int, int, int]]:
    """The dispatches of a two-level batch of z1 x z2 products with at most `limit` workgroups along z
    each: (z1 first, z1 count, z2 first, z2 count). Whole rows of z2 where they fit (as many z1 as fit in
    one dispatch); else one z1 at a time in pieces of z2 that are multiples of bdiv (so B's z2 / bdiv
    stays the piece's own index plus its first's)."""
    if min(z1, z2, bdiv, limit) < 1:
        raise ShapeError(f"matmul batch {z1} x {z2} (bdiv {bdiv}, limit {limit}) must be positive")
    if z2 <= limit:
        per = limit // z2
        return [(a, min(per, z1 - a), 0, z2) for a in range(0, z1, per)]
    step = (limit // bdiv) * bdiv
    if step < 1:
        raise UnsupportedError(f"matmul: bdiv {bdiv} exceeds {limit} workgroups along z")
    return [(a, 1, b, min(step, z2 - b)) for a in range(z1) for b in range(0, z2, step)]


def whole_tile_errors(what: str, spec: dict, M: int, N: int, K: int) -> list[str]:
    """The rule of a template without bounds checks: M, N and K whole multiples of its tile (empty: they are)."""
    BM, BN, BK = spec["BM"], spec["BN"], spec["BK"]
    if M % BM or N % BN or K % BK:
        return [f"{what} needs M, N, K multiples of its tile {BM}x{BN}x{BK}, got {M}x{N}x{K}"]
    return []


def matmul_launch_errors(kind: str, spec: dict, M: int, N: int, K: int, lay: Layout) -> list[str]:
    """Each assumption the `kind` template makes about a launch that this one breaks (empty: it may run)."""
    (sam, sak), (sbk, sbn), (scm, scn) = lay.a_strides, lay.b_strides, lay.c_strides
    errs = []
    if kind in ("cm", "cm2"):  # no bounds checks, 16-byte staging (cm) or unclamped tensor layouts (cm2), C
        errs += whole_tile_errors(kind, spec, M, N, K)  # loaded and stored with a unit column stride
        if scn != 1 or 1 not in (sak, sam) or 1 not in (sbk, sbn):
            errs.append(f"{kind} needs scn == 1 and A and B with a unit stride, got scn={scn} A={lay.a_strides} "
                        f"B={lay.b_strides}")
        a_far = sam if sak == 1 else sak
        b_far = sbk if sbn == 1 else sbn
        if any(x % 8 for x in (scm, *lay.c_batch, a_far, *lay.a_batch, *lay.b_batch[:2], b_far, *lay.outer[1:])):
            errs.append(f"{kind} needs row strides, batch strides and offsets that are multiples of 8 halves")
    elif kind == "v4":  # 16-byte loads of A along k (or m) and of B along n or k, N and K in whole vectors
        if not (lay.wide_loads and (sak == 1 or (sam == 1 and M % 4 == 0 and spec["BM"] // spec["WG_Y"] % 4 == 0))):
            errs.append("v4 needs A k-contiguous, or m-contiguous with M and the rows of a thread multiples of 4, "
                        "and 16-byte aligned strides and offsets")
        if K % 4 or N % 4:
            errs.append(f"v4 needs K and N multiples of 4, got K={K} N={N}")
    elif kind == "rb":
        if not lay.wide_loads:
            errs.append("rb needs a unit stride per operand and 16-byte aligned strides and offsets")
    return errs


# The aligned twins of the register blocks (flag al): loads without bounds checks, for launches of whole tiles,
# and the operands' layout fixed at compile time (flag uAB: A's unit stride along A = k or m, B's along B = n or
# k; the template then holds one loop, not both).
UNIT_LAYOUTS = ("ukk", "ukn", "umn", "umk")


def aligned(flags) -> bool:
    """Whether a register-block variant is an aligned twin (flag al)."""
    return "al" in flags


def unit_layout(flags) -> str:
    """An aligned twin's operand layout flag (UNIT_LAYOUTS), '' without one."""
    f = [f for f in flags if f in UNIT_LAYOUTS]
    return f[0] if f else ""


def variant_launch_errors(v, M: int, N: int, K: int, lay: Layout) -> list[str]:
    """Each assumption matmul variant `v` (an object with .flags and .spec) makes about a launch that this
    one breaks: its kind's (matmul_launch_errors), and for an aligned twin (flag al) whole tiles and the
    operand layout of its flag uAB (the template takes A k-contiguous where sak == 1, B n-contiguous where
    sbn == 1)."""
    errs = matmul_launch_errors(matmul_kind(v.flags), v.spec, M, N, K, lay)
    if not aligned(v.flags):
        return errs
    errs += whole_tile_errors("al (loads without bounds checks)", v.spec, M, N, K)
    u = unit_layout(v.flags)  # matmul_row_errors: every al row has one
    have = "u" + ("k" if lay.a_strides[1] == 1 else "m") + ("n" if lay.b_strides[1] == 1 else "k")
    if u != have:
        errs.append(f"{u} runs A and B as {u[1:]}; this launch is {have} (A strides {lay.a_strides}, "
                    f"B strides {lay.b_strides})")
    return errs


# -- tuned constants ----------------------------------------------------------------------------------
# Each: its value, why, and the bench/results file that justifies it (measurement notes:
# bench/results/selection-tuning.md).
TUNED = {
    "GPU_FIRST_AMONG_EQUALS": Tuned({(128, 128, 16)}, "GPUs: among rb tiles of equal area, 128x128 BK 16 first",
                                    "bench/results/evidence/h200-rb-tiles.txt"),
    "BIG_TILE_AREA": Tuned(32768, "tiles of this many outputs run in whole waves (one, up to 5% over, or >= two)",
                           "bench/results/evidence/h200-matmul-lm-tile-sweep.txt"),
    "GPU_GROUPS": Tuned(128, "workgroups that fill a GPU (one per multiprocessor of an H200 with 132)",
                        "bench/results/evidence/h200-matmul-lm.txt"),
    "CPU_GROUPS": Tuned(4, "workgroups that fill a CPU device (lavapipe, 2 cores)", "bench/results/selection-tuning.md"),
    "MAX_PADDED": Tuned(1.25, "a tile may waste at most this share of its area on padding",
                        "bench/results/evidence/h200-matmul-lm.txt"),
    "V4_MIN_WORK": Tuned(1, "CPU devices: every aligned product takes the v4 blocks (pipelines are built once)",
                         "bench/results/evidence/lavapipe-iree-cpu-rows.txt"),
    "V4_FEW_ROWS": Tuned(8, "CPU devices: products of fewer rows take the v4 tile that pads least (1 or 4 rows)",
                         "bench/results/evidence/lavapipe-decode-tuning.txt"),
    "CPU_V4_THREADS": Tuned((8, 1), "CPU devices: v4 on 8x1 threads (one 256-bit vector of lavapipe's)",
                            "bench/results/lavapipe_step_products-lavapipe.txt"),
    "V4_SB_TILE": Tuned((16, 64), "CPU devices with subgroupBroadcast in subgroups of 8: the v4 sb tile of "
                                  "products of V4_FEW_ROWS rows or more", "bench/results/lavapipe_step_products-lavapipe.txt"),
    "CM_ORDER": Tuned(((4, 2, 2, 4, 16, ()), (4, 4, 2, 2, 16, ()), (4, 4, 2, 2, 16, ("g8",)), (4, 4, 2, 4, 16, ("g8",)),
                       (4, 4, 2, 4, 16, ()), (2, 2, 4, 4, 32, ())),
                      "cm rows (cm_row's parameters) in measured order; unlisted ones after, largest tile first",
                      "bench/results/matmul_variants-h200.txt"),
    "CM_FEW": Tuned(((2, 2, 4, 4, 32, ()), 512), "below this many workgroups 16 subgroups on BK 32 come first",
                    "bench/results/evidence/h200-matmul-f16-lm.txt"),
    "CM2_ORDER": Tuned(((128, 256, 32, 256), (128, 256, 64, 256), (128, 128, 64, 256), (128, 128, 128, 256),
                        (64, 64, 64, 128)), "cm2 rows (cm2_row's parameters) in measured order, preferred over cm",
                       "bench/results/evidence/h200-cm2.txt"),
    "CM2_MIN_GROUPS": Tuned(128, "a cm2 launch takes the first row with this many workgroups, else the most",
                            "bench/results/evidence/h200-cm2.txt"),
    "CM2_PAIR_MIN_AREA": Tuned(128 * 128, "cm2 split in 2 along a long K: tiles at least this large",
                               "bench/results/evidence/h100-cm2-split.txt"),
    "CM2_PAIR_MIN_GROUPS": Tuned(40, "... with at least this many workgroups (measured at 44)",
                                 "bench/results/evidence/h100-cm2-split.txt"),
    "CM2_PAIR_MIN_K": Tuned(4096, "... and K at least this long (K = 512 lost)",
                            "bench/results/evidence/h100-cm2-split.txt"),
    "TRI_TILES": Tuned({"lower_c": (128, 128, 8), "lower_a": (64, 64, 16), "upper_a": (64, 64, 16)},
                       "GPUs: the rb tile of a causal product (fewer tiles straddle the diagonal)",
                       "bench/results/evidence/h200-attention-products-lm.txt"),
    "WAVE_SPLIT_MAX": Tuned(16, "f32 big tiles split in whole waves into at most this many chunks",
                            "bench/results/evidence/h200-split-waves.txt"),
    "WAVE_SPLIT_MIN": Tuned(3, "... and not into fewer (the column sum costs more than the larger tile gains)",
                            "bench/results/evidence/h200-matmul-f32-sweep.txt"),
}
GPU_FIRST_AMONG_EQUALS = TUNED["GPU_FIRST_AMONG_EQUALS"].value
BIG_TILE_AREA = TUNED["BIG_TILE_AREA"].value
GPU_GROUPS = TUNED["GPU_GROUPS"].value
CPU_GROUPS = TUNED["CPU_GROUPS"].value
MAX_PADDED = TUNED["MAX_PADDED"].value
V4_FEW_ROWS = TUNED["V4_FEW_ROWS"].value
V4_SB_TILE = TUNED["V4_SB_TILE"].value
V4_MIN_WORK = TUNED["V4_MIN_WORK"].value
CPU_V4_THREADS = TUNED["CPU_V4_THREADS"].value
CM_ORDER = tuple(row_key(cm_row(*p[:5], p[5])) for p in TUNED["CM_ORDER"].value)
CM_FEW = (row_key(cm_row(*TUNED["CM_FEW"].value[0][:5], TUNED["CM_FEW"].value[0][5])), TUNED["CM_FEW"].value[1])
CM2_ORDER = tuple(row_key(cm2_row(*p)) for p in TUNED["CM2_ORDER"].value)
CM2_MIN_GROUPS = TUNED["CM2_MIN_GROUPS"].value
CM2_PAIR_MIN_AREA = TUNED["CM2_PAIR_MIN_AREA"].value
CM2_PAIR_MIN_GROUPS = TUNED["CM2_PAIR_MIN_GROUPS"].value
CM2_PAIR_MIN_K = TUNED["CM2_PAIR_MIN_K"].value
TRI_TILES = TUNED["TRI_TILES"].value
WAVE_SPLIT_MAX = TUNED["WAVE_SPLIT_MAX"].value
WAVE_SPLIT_MIN = TUNED["WAVE_SPLIT_MIN"].value


def tile_preference(t, gpu: bool = False) -> tuple:
    """Larger area first; among equal areas, on GPUs, GPU_FIRST_AMONG_EQUALS; then the squarer tile (128x128
    over 256x64), then the taller one (256x128 over 128x256), then the shorter k-step."""
    return (t[0] * t[1], gpu and tuple(t) in GPU_FIRST_AMONG_EQUALS, -max(t[0], t[1]) / min(t[0], t[1]), t[0], -t[2])


def padded_area(M: int, N: int, bm: int, bn: int) -> int:
    """The outputs a bm x bn tiling of an M x N product computes, padding included."""
    return -(-M // bm) * bm * -(-N // bn) * bn


def matmul_tile(M: int, N: int, K: int, tiles, shared_memory: int, device_type: str, batch: int = 1,
                buffers: int = 1):
    """Pick a (BM, BN, BK) tile from `tiles` for an MxK . KxN product.

    Tiles whose shared memory (buffers x 4 bytes x BK x (BM + BN + 8)) exceeds the device limit are never chosen.
    Among the rest, prefer the largest tile that (a) wastes at most MAX_PADDED of its area on padding and
    (b) still yields enough workgroups to fill the device (GPU_GROUPS on a GPU, twice that for tiles of
    BIG_TILE_AREA unless they make one wave; CPU_GROUPS on a CPU device such as lavapipe), ordered by
    tile_preference; otherwise the tile with the least padded work, smallest first.
    """
    fits = [t for t in tiles if buffers * 4 * t[2] * (t[0] + t[1] + 8) <= shared_memory]
    if not fits:
        raise ValueError(f"no matmul tile fits {shared_memory} bytes of shared memory")
    gpu = device_type != "cpu"
    want_groups = GPU_GROUPS if gpu else CPU_GROUPS

    def groups(t):
        return math.ceil(M / t[0]) * math.ceil(N / t[1]) * batch

    def enough(t):
        g = groups(t)
        if gpu and t[0] * t[1] >= BIG_TILE_AREA:
            return want_groups <= g <= 1.05 * want_groups or g >= 2 * want_groups
        return g >= want_groups

    good = [t for t in fits if padded_area(M, N, t[0], t[1]) <= MAX_PADDED * M * N and enough(t)]
    if good:
        return max(good, key=lambda t: tile_preference(t, gpu))
    return min(fits, key=lambda t: (padded_area(M, N, t[0], t[1]), t[0] * t[1]))


def cm2_pair_split(groups: int, bm: int, bn: int, bk: int, K: int) -> bool:
    """Whether a cm2 bm x bn (BK bk) tile on `groups` workgroups runs split in 2 along K (CM2_PAIR_MIN_*): at
    least CM2_PAIR_MIN_AREA, CM2_PAIR_MIN_GROUPS..CM2_MIN_GROUPS - 1 workgroups, K >= CM2_PAIR_MIN_K and each
    half whole k-steps of bk (and of 16: k_chunks)."""
    return (bm * bn >= CM2_PAIR_MIN_AREA and CM2_PAIR_MIN_GROUPS <= groups < CM2_MIN_GROUPS
            and K >= CM2_PAIR_MIN_K and K % (2 * math.lcm(bk, 16)) == 0)


# Causal hints for square products (the matmul templates' k_range, push `tri`): what a product may skip
# because the op knows where its operands are zero or its output is unused. "lower_a": A[m,k] = 0 for k > m
# (P V and dS K in causal attention: a tile stops after its last row); "upper_a": A[m,k] = 0 for k < m (P^T dO
# and dS^T Q: a tile starts at its first row); "lower_c": only C[m,n] with n <= m is used (the scores Q K^T
# and dP = dO V^T, which the causal softmax and its backward mask): tiles wholly above the diagonal write
# zeros. Skipping adds no term that is not an exact zero, so the result equals the full product's.
TRI = {"": 0, "lower_a": 1, "upper_a": 2, "lower_c": 3}


def tri_errors(tri: str, M: int, N: int, K: int, beta: float, kd: int = 0) -> list[str]:
    """Why a causal hint cannot be given for this product (empty: it can). kd: the column of the square A
    where this launch's k = 0 lies (a chunk of a product split along K, tri_chunks)."""
    if tri not in TRI:
        return [f"unknown causal hint {tri!r} (one of {sorted(TRI)})"]
    if kd < 0 or (kd and tri not in ("lower_a", "upper_a")):
        return [f"a diagonal offset kd={kd} needs a lower_a or upper_a hint and kd >= 0"]
    if tri in ("lower_a", "upper_a") and kd + K > M:
        return [f"{tri} needs A to be columns kd..kd+K-1 of a square A (kd + K <= M), got M={M}, K={K}, kd={kd}"]
    if tri == "lower_c" and (M != N or beta != 0.0):
        return [f"lower_c needs a square C (M == N) and beta 0, got M={M}, N={N}, beta={beta}"]
    return []


def split_ways(groups: int, K: int) -> int:
    """K chunks for a split-K launch of `groups` output tiles: S doubles while the launch has fewer than
    256 workgroups and each chunk keeps >= 256 values of k in whole multiples of 16 (at most 16)."""
    s = 1
    while groups * s < 256 and s < 16 and K % (32 * s) == 0 and K // (2 * s) >= 256:
        s *= 2
    return s


def k_chunks(K: int, S: int) -> list[tuple[int, int]]:
    """[k0, k1) ranges splitting K into S chunks of ceil(K / S) rounded up to a multiple of 16, the last
    shorter; fewer than S ranges where S such chunks overshoot K (the caller checks len)."""
    kc = -(-K // (S * 16)) * 16
    return [(k0, min(K, k0 + kc)) for k0 in range(0, K, kc)]


def wave_split(groups: int, K: int, multiprocessors: int) -> int:
    """The chunk count S (1..WAVE_SPLIT_MAX; each chunk >= 256 values of k, S chunks in whole 16s) that
    minimises waves x chunk length, ceil(groups S / multiprocessors) x ceil(K / S); the fewest chunks on
    ties (less partial traffic for the column sum)."""
    best = (math.ceil(groups / multiprocessors) * K, 1)
    for s in range(2, WAVE_SPLIT_MAX + 1):
        ch = k_chunks(K, s)
        kc = ch[0][1] - ch[0][0]
        if len(ch) != s or kc < 256:
            continue
        best = min(best, (math.ceil(groups * s / multiprocessors) * kc, s))
    return best[1]


def wave_split_pays(groups: int, K: int, multiprocessors: int) -> bool:
    """Whether a tile of BIG_TILE_AREA on `groups` workgroups may be split in whole waves (wave_split): yes where
    the device's multiprocessors are unknown (0), else where it would be cut into at least WAVE_SPLIT_MIN chunks."""
    return not multiprocessors or wave_split(groups, K, multiprocessors) >= WAVE_SPLIT_MIN


def split_tile(order, groups, K: int):
    """The split-K tile rule, shared by the register blocks (f32) and the cooperative matrices (f16):
    walking `order` (tiles or variants, most preferred first; groups(t) = its workgroups whole), the
    first that, split at least 4 ways (split_ways), makes at least 128 workgroups; None where a tile
    earlier in the order fills the device whole (>= 128 workgroups: no split) or none qualifies."""
    for t in order:
        g = groups(t)
        if g >= 128:
            return None
        if split_ways(g, K) >= 4 and g * split_ways(g, K) >= 128:
            return t
    return None


# -- the selector ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Product:
    """The product a selector places: M x N x K over `batch` outputs, laid out as `lay`."""
    M: int
    N: int
    K: int
    lay: Layout
    batch: int = 1

    def groups(self, bm: int, bn: int) -> int:
        """Workgroups of a bm x bn tile over the whole launch."""
        return -(-self.M // bm) * -(-self.N // bn) * self.batch

    def tile_groups(self, v) -> int:
        """Workgroups of variant v's tile over the whole launch."""
        return self.groups(v.spec["BM"], v.spec["BN"])

    def fits(self, v) -> bool:
        """Whether variant v's template may run this product (variant_launch_errors)."""
        return not variant_launch_errors(v, self.M, self.N, self.K, self.lay)


def pick_cm2(cm2, p: Product, split: bool):
    """Among cm2 variants that fit: CM2_ORDER (then the larger tile, the longer k-step); the first with
    CM2_MIN_GROUPS workgroups, else split along K where none has them (split_tile), else the one with the
    most; a long K over a large tile of a few workgroups short runs split in 2 (cm2_pair_split)."""
    def rank(v):
        key = row_key(v)
        return (CM2_ORDER.index(key) if key in CM2_ORDER else len(CM2_ORDER), -v.spec["BM"] * v.spec["BN"],
                -v.spec["BK"])
    ordered = sorted(cm2, key=rank)
    big = [v for v in ordered if p.tile_groups(v) >= CM2_MIN_GROUPS]
    if split and big and big[0].spec["BM"] * big[0].spec["BN"] < CM2_PAIR_MIN_AREA:  # cm2_pair_split's case
        pair = [v for v in ordered if cm2_pair_split(p.tile_groups(v), v.spec["BM"], v.spec["BN"], v.spec["BK"], p.K)]
        if pair:
            return pair[0]
    hit = split_tile(ordered, p.tile_groups, p.K) if split and not big else None
    return hit or (big[0] if big else max(ordered, key=lambda v: (p.tile_groups(v), v.spec["BK"])))


def pick_cm(cm, p: Product, split: bool):
    """Among cm variants that fit: split along K where that pays (split_tile, walking CM_ORDER); else CM_FEW's
    row below its workgroup count, else CM_ORDER's first that fills the device (GPU_GROUPS), else the
    smallest tile."""
    def rank(v):
        key = row_key(v)
        return (CM_ORDER.index(key), 0) if key in CM_ORDER else (len(CM_ORDER), -v.spec["BM"] * v.spec["BN"])
    big = [v for v in cm if p.tile_groups(v) >= GPU_GROUPS]
    hit = split_tile(sorted(cm, key=rank), p.tile_groups, p.K) if split else None
    few = [v for v in big if row_key(v) == CM_FEW[0] and p.tile_groups(v) < CM_FEW[1]]
    return hit or (few[0] if few else min(big, key=rank) if big else min(cm, key=lambda v: v.spec["BM"]))


def pick_v4(v4s, p: Product):
    """Among v4 variants that fit: for V4_FEW_ROWS rows or more, where the device has the rows of flag sb (A loaded
    once a workgroup and broadcast; the candidates are usable ones), the largest of them up to V4_SB_TILE's
    rows (its columns) that still gives both cores work, else the smallest; otherwise among those
    without sb, on CPU_V4_THREADS where a row has them (for fewer than V4_FEW_ROWS rows, as a decode step's,
    only those that pad the product least: a tile of 8 rows computes 8 for its one): the largest block that
    still gives both cores work; None where none fits."""
    if p.M >= V4_FEW_ROWS:
        sb = sorted((v for v in v4s if "sb" in v.flags and v.spec["BN"] == V4_SB_TILE[1]
                     and v.spec["BM"] <= V4_SB_TILE[0] and p.fits(v)), key=lambda v: v.spec["BM"])
        if sb:
            big = [v for v in sb if p.tile_groups(v) >= 2]
            return big[-1] if big else sb[0]
    v4 = sorted((v for v in v4s if "sb" not in v.flags and p.fits(v)), key=lambda v: v.spec["BM"] * v.spec["BN"])
    v4 = [v for v in v4 if (v.spec["WG_X"], v.spec["WG_Y"]) == CPU_V4_THREADS] or v4
    if not v4:
        return None
    if p.M < V4_FEW_ROWS:
        least = min(padded_area(p.M, p.N, v.spec["BM"], v.spec["BN"]) for v in v4)
        v4 = [v for v in v4 if padded_area(p.M, p.N, v.spec["BM"], v.spec["BN"]) <= MAX_PADDED * least]
    big = [v for v in v4 if p.tile_groups(v) >= 2]
    return big[-1] if big else v4[0]


def pick_blocks(by_kind: dict, p: Product, device_type: str, shared_memory: int, split: bool, tri: str,
                multiprocessors: int):
    """Register blocks (GPUs, 16-byte loads possible) or shared-memory tiles: TRI_TILES' tile for a causal
    product on GPUs where it pads at most MAX_PADDED and fits; a split-K tile (split_tile; f32 tiles of
    BIG_TILE_AREA only where the whole-wave split pays); else matmul_tile's. Then the tile's aligned twin for
    the launch's layout (flags al uAB, UNIT_LAYOUTS) where the launch is whole tiles."""
    M, N = p.M, p.N
    kind = "rb" if device_type != "cpu" and p.lay.wide_loads and by_kind.get("rb") else "tiled"
    pool = by_kind.get(kind, [])
    if not pool:
        raise ValueError("no tiled matmul variant among the candidates")
    tiles = sorted({(v.spec["BM"], v.spec["BN"], v.spec["BK"]) for v in pool})
    tile = None
    want = TRI_TILES.get(tri) if kind == "rb" and device_type != "cpu" else None
    if want in tiles and rb_shared_bytes(*want) <= shared_memory \
            and padded_area(M, N, want[0], want[1]) <= MAX_PADDED * M * N:
        tile = want
    if tile is None and split and kind == "rb":
        waves = multiprocessors if pool[0].dtype == "f32" else 0  # matmul_split_k's whole-wave split: f32 only
        fits = [t for t in tiles if rb_shared_bytes(*t) <= shared_memory
                and (t[0] * t[1] < BIG_TILE_AREA or wave_split_pays(p.groups(t[0], t[1]), p.K, waves))]
        tile = split_tile(sorted(fits, key=lambda t: tile_preference(t, device_type != "cpu"), reverse=True),
                          lambda t: p.groups(t[0], t[1]), p.K)
    tile = tile or matmul_tile(M, N, p.K, tiles, shared_memory, device_type, p.batch, buffers=MATMUL_BUFFERS[kind])
    return max((v for v in pool if (v.spec["BM"], v.spec["BN"], v.spec["BK"]) == tile and p.fits(v)),
               key=lambda v: aligned(v.flags))


def pick_matmul(cands, M: int, N: int, K: int, lay: Layout, device_type: str, shared_memory: int,
                batch: int = 1, forced: str = "", split: bool = False, out32: bool = False, tri: str = "",
                multiprocessors: int = 0):
    """The matmul variant for a launch, from the usable candidates (objects with .name, .flags, .spec).

    A forced name (EVERMIND_VK_MATMUL_VARIANT) wins where its launch rules hold (an f16 row's name also
    forces its c32 twin: a forced tile runs the chunks of a split product too). Otherwise: cooperative
    matrices where the launch is aligned to their tile, cm2 first (pick_cm2), else cm (pick_cm); on CPU
    devices the v4 blocks for aligned products (pick_v4); otherwise register blocks or shared-memory tiles
    (pick_blocks). split: the product may be split along K (split_allowed); out32: choose among the f16
    rows' c32 twins (C in f32), else among the others; tri: the product's causal hint (TRI)."""
    p = Product(M, N, K, lay, batch)
    cands = [v for v in cands if ("c32" in v.flags) == out32]
    if forced:
        hit = [v for v in cands if v.name.replace("_c32", "") == forced.replace("_c32", "") and p.fits(v)]
        if hit:
            return hit[0]
    by_kind: dict[str, list] = {}
    for v in cands:
        by_kind.setdefault(matmul_kind(v.flags), []).append(v)
    cm2 = [v for v in by_kind.get("cm2", ()) if p.fits(v)]
    if cm2:
        return pick_cm2(cm2, p, split)
    cm = [v for v in by_kind.get("cm", ()) if p.fits(v)
          and cm_shared_bytes(v.spec["BM"], v.spec["BN"], v.spec["BK"]) <= shared_memory]
    if cm:
        return pick_cm(cm, p, split)
    if device_type == "cpu" and M * N * K * batch >= V4_MIN_WORK:
        v = pick_v4(by_kind.get("v4", ()), p)
        if v is not None:
            return v
    return pick_blocks(by_kind, p, device_type, shared_memory, split, tri, multiprocessors)


def c32_twin(v, cands):
    """An f16 matmul row's twin with C in f32 (flag c32, the same kind, tile and other flags) among `cands`;
    v itself where it is one. UnsupportedError where cands lack it (codegen gives every f16 row its twin)."""
    if "c32" in v.flags:
        return v
    want = sorted((*v.flags, "c32"))
    for c in cands:
        if c.op == v.op and c.dtype == v.dtype and sorted(c.flags) == want and c.spec == v.spec:
            return c
    raise UnsupportedError(f"{v.name} has no c32 twin among the usable variants")


def matmul_split_k(M: int, N: int, K: int, groups: int, device_type: str, dtype: str, batch: int, beta: float,
                   c_dense: bool, forced: str = "", multiprocessors: int = 0, tile: tuple = (),
                   kind: str = "") -> int:
    """Parallel split-K for GPUs: the number of K chunks S (1: no split) when a product's tile
    (`groups` workgroups) leaves the device short of work (fewer than 128) and K is long (split_ways):
    the chunks run as one batched launch into an [S, M, N] f32 workspace that a column sum adds up
    (deterministic, in chunk order; f16 operands write f32 partials through the c32 rows, and the sum
    is rounded once into an f16 C by colsum_cast). Only for a single product written densely (c_dense: C is [M, N]
    row-major at offset 0) with beta 0. forced (EVERMIND_VK_MATMUL_SPLIT_K): '0' never splits, 'n'
    splits n ways where that is possible (k_chunks: n chunks of whole 16s, the last one shorter where n
    does not divide K so; unequal chunks run as separate launches). An f32 product on tiles of
    BIG_TILE_AREA (`tile`: BM, BN, BK) on a device that reports its multiprocessors splits in whole waves instead
    (wave_split; its chunks need not be equal: k_chunks). A cm2 `tile` (`kind`) splits in 2 where
    cm2_pair_split says so."""
    if not split_allowed(dtype, batch, beta, c_dense, device_type, forced):
        return 1
    if forced:
        n = int(forced)
        return n if n > 1 and len(k_chunks(K, n)) == n else 1
    if kind == "cm2" and tile and batch == 1 and cm2_pair_split(groups, *tile, K):
        return 2
    if groups >= 128:
        return 1
    if multiprocessors > 0 and dtype == "f32" and tile and tile[0] * tile[1] >= BIG_TILE_AREA:
        return wave_split(groups, K, multiprocessors)
    return split_ways(groups, K)


def split_allowed(dtype: str, batch: int, beta: float, c_dense: bool, device_type: str, forced: str = "") -> bool:
    """Whether a product may be split along K (see matmul_split_k): f32, or f16 operands (f32 partials)."""
    if dtype not in ("f32", "f16") or batch != 1 or beta != 0.0 or not c_dense or forced == "0":
        return False
    return bool(forced) or device_type != "cpu"


def matmul_loop_count(kind: str, spec: dict, K: int) -> int:
    """Loop iterations one matmul invocation runs over K, as lavapipe counts them: one per k-step, and
    per k-step each staging loop of the tiled algorithm with its exit test (unrolled loops do not count).
    Measured: a 1 x 200,000 . 200,000 x 1 product on the 32x32x16 tile (256 threads: two staging loops of
    two iterations) summed 149,808 = 9,363 x 16 terms, i.e. the cap of 65,535 is on the invocation's total
    over all its loops, at 7 per k-step."""
    bk = spec["BK"]
    steps = -(-K // bk)
    if kind == "tiled":
        nt = spec["WG_X"] * spec["WG_Y"]
        return steps * (1 + (-(-bk * spec["BM"] // nt) + 1) + (-(-bk * spec["BN"] // nt) + 1))
    return steps


def matmul_k_splits(kind: str, spec: dict, K: int, device_type: str) -> list[tuple[int, int]]:
    """[k0, k1) ranges of one product, run as ordered dispatches accumulating into C (beta = 1 after the
    first), so that no invocation loops more than MAX_LOOP times. Only CPU devices (lavapipe) are split;
    ranges are multiples of 64 (keeps the 16-byte alignment of every algorithm's offsets). The partial
    sums live in C between dispatches, so an f16 C rounds each split's running sum to f16."""
    if device_type != "cpu" or matmul_loop_count(kind, spec, K) <= MAX_LOOP:
        return [(0, K)]
    per = matmul_loop_count(kind, spec, 64)  # loops per 64 values of k
    step = max(64, (MAX_LOOP // per) * 64)
    return loop_chunks(K, step)


def loop_count(op: str, spec: dict, flags, push: dict) -> int | None:
    """Loop iterations one invocation of a matmul launch runs (None: not a matmul)."""
    return matmul_loop_count(matmul_kind(flags), spec, push["K"]) if op == "matmul" else None


# -- plans -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Launch:
    """One strided, batched product as ops.matmul.gemm_strided takes it: dtypes and element counts of a, b
    and c, the product M x N x K, its layout (strides, two-level batch offsets, beta, outer batch), the inner
    batch, alpha, a causal hint and diagonal offset, and a variant the caller requires (None: the rule's)."""
    dtypes: tuple
    numels: tuple
    M: int
    N: int
    K: int
    layout: Layout
    batch: int = 1
    alpha: float = 1.0
    tri: str = ""
    kd: int = 0
    variant: object = None


@dataclass(frozen=True)
class Knobs:
    """Overrides: EVERMIND_VK_MATMUL_VARIANT (a variant name), EVERMIND_VK_MATMUL_SPLIT_K ('0' never splits,
    'n' splits n ways where possible); '' leaves the rule's choice."""
    variant: str = ""
    split_k: str = ""


@dataclass(frozen=True)
class Dispatch:
    """One matmul dispatch over (a, b, c): its variant, push constants, workgroups and the range of c it
    writes ({binding: (first, last + 1)}, or None)."""
    variant: object
    push: dict
    groups: tuple
    writes: dict | None = None


@dataclass(frozen=True)
class Plan:
    """What one launch runs, in order: `parts` (plans of their own), then `dispatches` into c. With a
    `workspace` (rows, cols) the parts write an f32 workspace of that shape instead of c, and a column sum
    of its rows into c follows them (the parallel split-K)."""
    dispatches: tuple = ()
    parts: tuple = ()
    workspace: tuple | None = None


def launch_bounds(launch: Launch) -> dict:
    """The last element of a, b and c the launch may address (strides are never negative), {} for an empty
    one; ShapeError where one lies outside its tensor."""
    lay, M, N, K = launch.layout, launch.M, launch.N, launch.K
    Z1, Z2, bdiv = int(lay.outer[0]), int(launch.batch), int(lay.b_batch[2])
    if not (M and N and Z1 and Z2):
        return {}
    (sam, sak), (sbk, sbn), (scm, scn) = lay.a_strides, lay.b_strides, lay.c_strides
    last = {"a": lay.a_batch[0] + (Z1 - 1) * lay.outer[1] + (Z2 - 1) * lay.a_batch[1] + (M - 1) * sam
            + (K - 1) * sak if K else -1,
            "b": lay.b_batch[0] + (Z1 - 1) * lay.outer[2] + ((Z2 - 1) // bdiv) * lay.b_batch[1] + (K - 1) * sbk
            + (N - 1) * sbn if K else -1,
            "c": lay.c_batch[0] + (Z1 - 1) * lay.outer[3] + (Z2 - 1) * lay.c_batch[1] + (M - 1) * scm + (N - 1) * scn}
    for name, numel in zip("abc", launch.numels):
        if last[name] >= numel:
            raise ShapeError(f"matmul: {M}x{N}x{K} over batch {Z1}x{Z2} reaches element {last[name]} of {name}, "
                             f"which has {numel}")
    return last


def _checked(launch: Launch) -> list:
    """The launch's dispatch pieces along z (batch_chunks), after checking its dtypes, outer batch and hint."""
    a, b, c = launch.dtypes
    if a != b or c not in (a, "f32"):
        raise UnsupportedError(f"matmul: dtypes {a}, {b}, {c}: a and b must share one, and c have it too or be f32")
    lay = launch.layout
    if len(lay.outer) != 4:
        raise ShapeError(f"matmul: outer is (Z1, sao, sbo, sco), got {lay.outer}")
    errs = tri_errors(launch.tri, launch.M, launch.N, launch.K, float(lay.beta), int(launch.kd))
    if errs:
        raise ShapeError("matmul: " + "; ".join(errs))
    return batch_chunks(int(lay.outer[0]), int(launch.batch), int(lay.b_batch[2]), MAX_GROUPS)


def _piece(launch: Launch, z1: int, n1: int, z2: int, n2: int) -> Launch:
    """The products z1..z1+n1-1 (outer) x z2..z2+n2-1 (inner) of a launch as a launch of their own."""
    lay = launch.layout
    (aoff, sab), (boff, sbb, bdiv), (coff, scb) = lay.a_batch, lay.b_batch, lay.c_batch
    _, sao, sbo, sco = lay.outer
    return replace(launch, batch=n2, variant=None, layout=replace(
        lay, a_batch=(aoff + z1 * sao + z2 * sab, sab), b_batch=(boff + z1 * sbo + (z2 // bdiv) * sbb, sbb, bdiv),
        c_batch=(coff + z1 * sco + z2 * scb, scb), outer=(n1, sao, sbo, sco)))


def plan(launch: Launch, device, knobs: Knobs = Knobs()) -> Plan:
    """The plan of one strided product on `device`: its pieces along z where it passes MAX_GROUPS
    workgroups; else its variant (launch.variant, or pick_matmul's), a parallel split along K where
    matmul_split_k asks for one (split_plan), else its dispatches (CPU devices: ordered K ranges,
    matmul_k_splits)."""
    chunks = _checked(launch)
    last = launch_bounds(launch)
    if len(chunks) > 1:  # more products than one dispatch's z range: consecutive pieces, each its own launch
        return Plan(parts=tuple(plan(_piece(launch, *ch), device, knobs) for ch in chunks))
    info, lay, (M, N, K) = device.info, launch.layout, (launch.M, launch.N, launch.K)
    dtype, nz = launch.dtypes[0], int(lay.outer[0]) * int(launch.batch)
    c_dense = tuple(lay.c_strides) == (N, 1) and lay.c_batch[0] == 0 and launch.numels[2] == M * N
    out32 = launch.dtypes[2] != dtype  # f16 operands into an f32 C: the c32 variants
    cands = usable("matmul", dtype, device)
    v = launch.variant or pick_matmul(
        cands, M, N, K, lay, info.type, info.shared_memory, nz, knobs.variant,
        split=split_allowed(dtype, nz, float(lay.beta), c_dense, info.type, knobs.split_k), out32=out32,
        tri=launch.tri, multiprocessors=info.multiprocessors)
    kind, tile = matmul_kind(v.flags), (v.spec["BM"], v.spec["BN"], v.spec["BK"])
    tiles = -(-M // tile[0]) * -(-N // tile[1]) * nz  # the launch's workgroups, whole
    split = matmul_split_k(M, N, K, tiles, info.type, dtype, nz, float(lay.beta), c_dense, knobs.split_k,
                           info.multiprocessors, tile, kind)
    if split > 1:
        return split_plan(launch, device, knobs, v, split, cands)
    splits = matmul_k_splits(kind, v.spec, K, info.type)
    if len(splits) > 1:  # split-K: later parts accumulate (beta = 1), so pick for that layout
        v = pick_matmul(cands, M, N, K, replace(lay, beta=1.0), info.type, info.shared_memory, nz, knobs.variant,
                        out32=out32, tri=launch.tri)
        splits = matmul_k_splits(matmul_kind(v.flags), v.spec, K, info.type)
    return Plan(dispatches=tuple(dispatches(launch, v, splits, last)))


def split_plan(launch: Launch, device, knobs: Knobs, v, split: int, cands) -> Plan:
    """Parallel split-K: `split` chunks of k into an f32 workspace [S, M*N], then a column sum into c
    (colsum_cast into an f16 C: the partials added in f32, rounded once). Equal chunks run as one batched
    launch, unequal ones (an f32 whole-wave split, wave_split) as a launch each on the planned tile. A cm2
    pair split's two chunks run on the planned tile's c32 twin (cm2_pair_split: its halves are whole
    k-steps of the tile); other f16 chunks on what the selector picks for them."""
    lay, (M, N, K), dtype = launch.layout, (launch.M, launch.N, launch.K), launch.dtypes[0]
    ks = k_chunks(K, split)
    tile = (v.spec["BM"], v.spec["BN"], v.spec["BK"])
    tiles = -(-M // tile[0]) * -(-N // tile[1]) * int(lay.outer[0]) * int(launch.batch)
    pair = matmul_kind(v.flags) == "cm2" and split == 2 and not knobs.split_k and cm2_pair_split(tiles, *tile, K)
    twin = c32_twin(v, cands) if pair else None
    (_, sak), (sbk, _) = lay.a_strides, lay.b_strides
    work = (len(ks), M * N)
    base = Launch((dtype, dtype, "f32"), (*launch.numels[:2], work[0] * work[1]), M, N, K,
                  Layout(lay.a_strides, lay.b_strides, (N, 1)), alpha=launch.alpha)
    kc = ks[0][1] - ks[0][0]
    if all(k1 - k0 == kc for k0, k1 in ks):  # equal chunks: one batched launch
        parts = [replace(base, K=kc, batch=split, variant=twin, layout=replace(
            base.layout, a_batch=(lay.a_batch[0], kc * sak), b_batch=(lay.b_batch[0], kc * sbk, 1),
            c_batch=(0, M * N)))]
    else:  # a launch a chunk on the planned tile, side by side (f16: each chunk on a c32 row)
        parts = [replace(base, K=k1 - k0, variant=v if dtype == "f32" else twin, layout=replace(
            base.layout, a_batch=(lay.a_batch[0] + k0 * sak, 0), b_batch=(lay.b_batch[0] + k0 * sbk, 0, 1),
            c_batch=(i * M * N, 0))) for i, (k0, k1) in enumerate(ks)]
    return Plan(parts=tuple(plan(p, device, knobs) for p in parts), workspace=work)


def dispatches(launch: Launch, v, splits, last: dict) -> list[Dispatch]:
    """The dispatches of variant v over the launch's K ranges `splits` (beta 1 after the first), each
    checked against every assumption v's template makes (variant_launch_errors)."""
    lay, (M, N) = launch.layout, (launch.M, launch.N)
    (sam, sak), (sbk, sbn), (scm, scn) = lay.a_strides, lay.b_strides, lay.c_strides
    groups = (-(-N // v.spec["BN"]), -(-M // v.spec["BM"]), int(lay.outer[0]) * int(launch.batch))
    # all of C the launch touches (the barrier plan lets launches on disjoint parts of one buffer overlap)
    writes = {2: (lay.c_batch[0], last["c"] + 1)} if last else None
    out = []
    for j, (k0, k1) in enumerate(splits):
        part = replace(lay, a_batch=(lay.a_batch[0] + k0 * sak, lay.a_batch[1]),
                       b_batch=(lay.b_batch[0] + k0 * sbk, lay.b_batch[1], lay.b_batch[2]),
                       beta=float(lay.beta) if j == 0 else 1.0)
        errs = variant_launch_errors(v, M, N, k1 - k0, part)
        if errs:  # the selector never does this; a template must never run outside its assumptions
            raise UnsupportedError(f"{v.name} cannot run {M}x{N}x{k1 - k0}: " + "; ".join(errs))
        push = dict(M=M, N=N, K=k1 - k0, sam=sam, sak=sak, sbk=sbk, sbn=sbn, scm=scm, scn=scn,
                    aoff=part.a_batch[0], sab=lay.a_batch[1], boff=part.b_batch[0], sbb=lay.b_batch[1],
                    bdiv=lay.b_batch[2], coff=lay.c_batch[0], scb=lay.c_batch[1], alpha=launch.alpha,
                    beta=part.beta, Z2=launch.batch, sao=lay.outer[1], sbo=lay.outer[2], sco=lay.outer[3],
                    tri=TRI[launch.tri], kd=launch.kd + k0)
        out.append(Dispatch(v, push, groups, writes))
    return out


# -- the variant table's matmul rows ---------------------------------------------------------------------
_ROWS = [
    # Shared-memory tiles, any layout.
    *(row(dt, bm, bn, bk, wx, wy) for dt in F for (bm, bn, bk, wx, wy) in ((32, 32, 16, 16, 16), (64, 64, 16, 16, 16))),
    # One-row tiles for decoding (M = 1 token per step with a KV cache): 64 threads, one output column each.
    *(row(dt, 1, 64, 16, 64, 1) for dt in F),
    # CPU devices (lavapipe): large register blocks from 16-byte loads, aligned shapes only; 8x1 threads with
    # 8-16 rows x 8 columns a thread are the CPU default (CPU_V4_THREADS); 1 and 4 rows a thread for the few
    # rows of a decode step (pick_v4: the least padding).
    *(row(dt, bm, bn, 4, wx, wy, ["v4"]) for dt in F
      for (bm, bn, wx, wy) in ((64, 64, 4, 4), (128, 64, 4, 4), (16, 64, 8, 1), (8, 64, 8, 1), (4, 64, 8, 1),
                               (1, 64, 8, 1))),
    # ... A loaded once per workgroup and shared by subgroup broadcasts (flag sb: 8 x 1 threads that are one
    # subgroup of 8, rows a multiple of 8).
    *(row(dt, bm, bn, 4, 8, 1, ["v4", "sb"]) for dt in F for (bm, bn) in ((8, 64), (16, 64), (32, 64), (16, 128))),
    # GPUs, 16-byte-aligned layouts: an RMxRN register block per thread. Every row has an aligned twin per
    # operand layout (flags al uAB: whole tiles loaded without bounds checks, the layout fixed at compile time;
    # UNIT_LAYOUTS, variant_launch_errors).
    *(row(dt, rm * wy, rn * wx, bk, wx, wy, [f"rb{rm}x{rn}", *al]) for dt in F for al in ALIGNED_TWINS
      for (rm, rn, bk, wx, wy) in ((8, 8, 8, 16, 16), (8, 4, 16, 16, 16), (4, 4, 16, 16, 16))),
    # ... larger blocks, and tiles visited in groups of 8 tile rows (flag g8).
    *(row("f32", rm * wy, rn * wx, bk, wx, wy, [f"rb{rm}x{rn}", *g, *al]) for al in ALIGNED_TWINS
      for (rm, rn, bk, wx, wy, g) in (
        (8, 8, 8, 16, 16, ["g8"]), (8, 16, 8, 16, 16, []), (16, 8, 8, 16, 16, []), (8, 4, 16, 16, 16, ["g8"]),
        (16, 8, 8, 16, 16, ["g8"]), (16, 4, 16, 16, 16, []), (16, 8, 8, 8, 16, []), (8, 8, 16, 16, 16, []))),
    # Tensor cores (KHR cooperative matrices), f16, aligned shapes only.
    *(cm_row(*p[:5], p[5]) for p in CM_PARAMS),
    # Tensor cores through VK_NV_cooperative_matrix2 (workgroup-scope matrices, the driver stages the tiles),
    # f16, aligned shapes only; flag lN: N threads a workgroup (a template parameter).
    *(cm2_row(*p) for p in CM2_PARAMS),
]
# Every f16 row again with flag c32: C stored in f32 (the partial products of f16 split-K, summed in f32 by
# colsum_cast before the one rounding to f16).
ROWS = _ROWS + [replace(r, flags=(*r.flags, "c32")) for r in _ROWS if r.dtype == "f16"]
