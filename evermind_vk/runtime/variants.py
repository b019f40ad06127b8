"""Every rule about which kernel variant may run where, in one place. Pure: no device access.

Used by both sides of the contract:
  * `tools/codegen.py` builds the variant table with `matmul_row_errors` (tile divisibility of each
    matmul algorithm) and `features_for` (the device features a dtype or flag needs);
  * the ops pick variants at run time with `pick_matmul` / `elementwise_vec` / `matmul_tile`, and
    `check_matmul_launch` asserts, before every matmul dispatch, each assumption the chosen
    algorithm's template makes about its inputs (a forced variant is checked the same way).

Matmul algorithms (one template each, `templates/matmul_<kind>.comp.j2`):
  tiled  shared-memory tiles, any shape and layout (the fallback)
  rb     GPUs: an RMxRN register block per thread from 16-byte loads (flag rbRMxRN)
  v4     CPU devices: large register blocks from 16-byte loads, no shared memory (flag v4)
  cm     cooperative matrices (tensor cores), f16 in / f32 accumulate, aligned shapes (flags cm, rbFMxFN)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UnsupportedError

# -- features ----------------------------------------------------------------------------------------
# Device features a dtype or a code-changing flag needs (names as in Device.caps).
DTYPE_FEATURES = {"f16": ("storage_buffer_16bit_access",)}
FLAG_FEATURES = {"cm": ("cooperative_matrix", "coopmat_f16_16x16x16_f32", "shader_float16", "subgroup_size_32",
                        "vulkan_memory_model")}


def features_for(dtype: str, flags=()) -> list[str]:
    out = list(DTYPE_FEATURES.get(dtype, ()))
    for f in flags:
        out += FLAG_FEATURES.get(f, ())
    return sorted(set(out))


# -- elementwise ---------------------------------------------------------------------------------------
def elementwise_vec(n: int, vecs=(1, 4), wg: int = 256) -> int:
    """Elements per thread: the widest VEC whose workgroups still number at least 64."""
    best = min(vecs)
    for v in sorted(vecs):
        if n >= 64 * wg * v:
            best = v
    return best


# -- matmul: the algorithms and their tiles ------------------------------------------------------------
def register_block(flags) -> tuple | None:
    """The per-thread (rb) or per-subgroup (cm) block of an `rbRMxRN` flag, else None."""
    f = [f for f in flags if f.startswith("rb")]
    return tuple(int(x) for x in f[0][2:].split("x")) if f else None


def matmul_kind(flags) -> str:
    """'cm' | 'v4' | 'rb' | 'tiled' for a matmul variant's flags."""
    if "cm" in flags:
        return "cm"
    if "v4" in flags:
        return "v4"
    return "rb" if register_block(flags) else "tiled"


# Shared memory buffers each algorithm keeps (the selector counts them against the device limit).
MATMUL_BUFFERS = {"tiled": 1, "rb": 2, "v4": 0, "cm": 2}


def matmul_row_errors(bm: int, bn: int, bk: int, wg_x: int, wg_y: int, flags) -> list[str]:
    """Why a (tile, workgroup, flags) row of the variant table cannot work with its template (empty: it can)."""
    kind, blk, nt = matmul_kind(flags), register_block(flags), wg_x * wg_y
    errs = []
    if kind == "cm":
        if not blk:
            return ["a cm matmul needs its fragment block as an rbFMxFN flag"]
        la, lb = bm * bk / (8 * nt), bn * bk / (8 * nt)  # 16-byte (8-half) loads per thread, at most 8
        if (bm, bn) != (32 * blk[0], 32 * blk[1]):
            errs.append(f"cm tile {bm}x{bn} must be 32 x the {blk} fragment block (2x2 subgroups of 16x16)")
        if nt != 128:
            errs.append(f"cm needs 128 threads (4 subgroups of 32), got {nt}")
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
    elif kind == "v4":
        if bk != 4:
            errs.append(f"v4 reads k four at a time: BK must be 4, got {bk}")
        if bm % wg_y or bn % (4 * wg_x):
            errs.append(f"v4 tile {bm}x{bn} must be whole rows per thread and 4-column vectors on {wg_y}x{wg_x} threads")
    else:
        if bm % wg_y or bn % wg_x:
            errs.append(f"tiled {bm}x{bn} must be a whole number of outputs per thread on {wg_y}x{wg_x} threads")
    return errs


@dataclass(frozen=True)
class Layout:
    """A strided, batched product's strides and offsets, as gemm_strided takes them (in elements)."""
    a_strides: tuple  # (sam, sak)
    b_strides: tuple  # (sbk, sbn)
    c_strides: tuple  # (scm, scn)
    a_batch: tuple = (0, 0)  # (aoff, sab)
    b_batch: tuple = (0, 0, 1)  # (boff, sbb, bdiv)
    c_batch: tuple = (0, 0)  # (coff, scb)
    beta: float = 0.0

    @property
    def wide_loads(self) -> bool:
        """16-byte loads possible: each operand has a unit stride, its other stride and the offsets are
        multiples of 4 elements."""
        (sam, sak), (sbk, sbn) = self.a_strides, self.b_strides
        return (((sak == 1 and sam % 4 == 0) or (sam == 1 and sak % 4 == 0))
                and ((sbn == 1 and sbk % 4 == 0) or (sbk == 1 and sbn % 4 == 0))
                and all(x % 4 == 0 for x in (*self.a_batch, *self.b_batch[:2])))


def matmul_launch_errors(kind: str, spec: dict, M: int, N: int, K: int, lay: Layout) -> list[str]:
    """Each assumption the `kind` template makes about a launch that this one breaks (empty: it may run)."""
    (sam, sak), (sbk, sbn), (scm, scn) = lay.a_strides, lay.b_strides, lay.c_strides
    errs = []
    if kind == "cm":  # no bounds checks, 16-byte staging, coopMatStore with unit column stride
        BM, BN, BK = spec["BM"], spec["BN"], spec["BK"]
        if M % BM or N % BN or K % BK:
            errs.append(f"cm needs M, N, K multiples of its tile {BM}x{BN}x{BK}, got {M}x{N}x{K}")
        if lay.beta != 0.0:
            errs.append("cm does not accumulate into C (beta must be 0)")
        if scn != 1 or sak != 1 or 1 not in (sbk, sbn):
            errs.append(f"cm needs scn == 1, sak == 1 and B with a unit stride, got scn={scn} sak={sak} B={lay.b_strides}")
        b_far = sbk if sbn == 1 else sbn
        if any(x % 8 for x in (scm, *lay.c_batch, sam, *lay.a_batch, *lay.b_batch[:2], b_far)):
            errs.append("cm needs row strides and offsets that are multiples of 8 halves")
    elif kind == "v4":  # 16-byte loads of A along k and of B along n or k, N and K in whole vectors
        if not (lay.wide_loads and sak == 1):
            errs.append("v4 needs A k-contiguous and 16-byte aligned strides and offsets")
        if K % 4 or N % 4:
            errs.append(f"v4 needs K and N multiples of 4, got K={K} N={N}")
    elif kind == "rb":
        if not lay.wide_loads:
            errs.append("rb needs a unit stride per operand and 16-byte aligned strides and offsets")
    return errs


def matmul_tile(M: int, N: int, K: int, tiles, shared_memory: int, device_type: str, batch: int = 1,
                buffers: int = 1):
    """Pick a (BM, BN, BK) tile from `tiles` for an MxK . KxN product.

    Tiles whose shared memory (buffers x 4 bytes x BK x (BM + BN + 8)) exceeds the device limit are never chosen.
    Among the rest, prefer the largest tile that (a) wastes at most 25% of its area on padding and
    (b) still yields enough workgroups to fill the device (64 on a GPU, 4 on a CPU device such as
    lavapipe); otherwise the tile with the least padded work, smallest first.
    """
    fits = [t for t in tiles if buffers * 4 * t[2] * (t[0] + t[1] + 8) <= shared_memory]
    if not fits:
        raise ValueError(f"no matmul tile fits {shared_memory} bytes of shared memory")
    want_groups = 4 if device_type == "cpu" else 64

    def groups(t):
        return math.ceil(M / t[0]) * math.ceil(N / t[1]) * batch

    def padded(t):
        return math.ceil(M / t[0]) * t[0] * math.ceil(N / t[1]) * t[1]

    good = [t for t in fits if padded(t) <= 1.25 * M * N and groups(t) >= want_groups]
    if good:
        return max(good, key=lambda t: (t[0] * t[1], t[2]))
    return min(fits, key=lambda t: (padded(t), t[0] * t[1]))


V4_MIN_WORK = 1 << 24  # 256^3: v4 pipelines take 0.15-0.7 s to build on lavapipe, worth it only for big products


def pick_matmul(cands, M: int, N: int, K: int, lay: Layout, device_type: str, shared_memory: int,
                batch: int = 1, forced: str = ""):
    """The matmul variant for a launch, from the usable candidates (objects with .name, .flags, .spec).

    A forced name (EVERMIND_VK_MATMUL_VARIANT) wins where its launch rules hold. Otherwise:
    cooperative matrices where the launch is aligned to their tile; on CPU devices the v4 blocks for
    big aligned products; on other devices register blocks where 16-byte loads are possible;
    otherwise the shared-memory tiles. Tiles come from matmul_tile."""
    def ok(v):
        return not matmul_launch_errors(matmul_kind(v.flags), v.spec, M, N, K, lay)

    if forced:
        hit = [v for v in cands if v.name == forced and ok(v)]
        if hit:
            return hit[0]
    by_kind: dict[str, list] = {}
    for v in cands:
        by_kind.setdefault(matmul_kind(v.flags), []).append(v)
    cm = [v for v in by_kind.get("cm", ()) if ok(v)]
    if cm:
        big = [v for v in cm if -(-M // v.spec["BM"]) * -(-N // v.spec["BN"]) * batch >= 128]
        return max(big, key=lambda v: v.spec["BM"] * v.spec["BN"]) if big else min(cm, key=lambda v: v.spec["BM"])
    if device_type == "cpu" and M * N * K * batch >= V4_MIN_WORK:
        v4 = sorted((v for v in by_kind.get("v4", ()) if ok(v)), key=lambda v: v.spec["BM"] * v.spec["BN"])
        if v4:  # the largest block that still gives both cores work
            big = [v for v in v4 if -(-M // v.spec["BM"]) * -(-N // v.spec["BN"]) * batch >= 2]
            return big[-1] if big else v4[0]
    kind = "rb" if device_type != "cpu" and lay.wide_loads and by_kind.get("rb") else "tiled"
    pool = by_kind.get(kind, [])
    if not pool:
        raise ValueError("no tiled matmul variant among the candidates")
    tiles = sorted({(v.spec["BM"], v.spec["BN"], v.spec["BK"]) for v in pool})
    tile = matmul_tile(M, N, K, tiles, shared_memory, device_type, batch, buffers=MATMUL_BUFFERS[kind])
    return next(v for v in pool if (v.spec["BM"], v.spec["BN"], v.spec["BK"]) == tile)


# -- attention: fused (flash-style) kernels or the matmul-based path -----------------------------------
# A fused variant's parameters: HD (head-dim bound, a multiple of 4 * TPR) and TPR (threads per row,
# one subgroup's neighbours) are template parameters (flags dHD, pTPR); ROWS (rows a workgroup owns),
# TILE (rows streamed through shared memory per step) and WG = ROWS * TPR are specialization constants.
# Passes: "fwd" (op attention), "dq" and "dkv" (op attention_backward, flag dq or dkv).
ATTENTION_MAX_HD = 128
ATTENTION_LOOP_LIMIT = 4096  # per-invocation tile-loop iterations allowed (lavapipe ends loops at 65535)


def attention_params(v) -> dict:
    """A fused attention variant's specialization constants plus HD and TPR from its flags."""
    out = dict(v.spec)
    for f in v.flags:
        if f[0] in "dp" and f[1:].isdigit():
            out["HD" if f[0] == "d" else "TPR"] = int(f[1:])
    return out


def attention_shared_bytes(spec: dict, stage: str) -> int:
    """Shared memory a fused attention variant declares (two f32 tiles, the exchange buffer, dkv's stats)."""
    tiles = 2 * spec["TILE"] * (spec["HD"] + 4 * (spec["TPR"] - 1)) * 4  # rows padded one vec4 per part
    xch = 4 * spec["WG"] * 16 if spec["TPR"] > 1 else 16
    return tiles + xch + (8 * spec["TILE"] if stage == "dkv" else 0)


def attention_row_errors(spec: dict) -> list[str]:
    """Why a fused attention row of the variant table cannot work with its template (empty: it can)."""
    hd, rows, tile, tpr, wg = (spec[n] for n in ("HD", "ROWS", "TILE", "TPR", "WG"))
    errs = []
    if tpr not in (1, 2, 4):
        errs.append(f"TPR {tpr} must be 1, 2 or 4")
    if hd % (4 * tpr) or hd > ATTENTION_MAX_HD:
        errs.append(f"HD {hd} must be a multiple of 4 * TPR = {4 * tpr} and at most {ATTENTION_MAX_HD}")
    if tile % 4:
        errs.append(f"TILE {tile} must be a multiple of 4 (rows are consumed four at a time)")
    if wg != rows * tpr:
        errs.append(f"WG {wg} must be ROWS * TPR = {rows * tpr}")
    return errs


def attention_launch_errors(spec: dict, stage: str, S: int, D: int, shared_memory: int, subgroup_size: int) -> list[str]:
    """Each assumption the fused template makes about a launch that this one breaks (empty: it may run)."""
    errs = []
    if D > spec["HD"]:
        errs.append(f"head dim {D} exceeds the variant's HD {spec['HD']}")
    if attention_shared_bytes(spec, stage) > shared_memory:
        errs.append(f"needs {attention_shared_bytes(spec, stage)} bytes of shared memory, the device has {shared_memory}")
    if spec["TPR"] > 1 and (subgroup_size % spec["TPR"] or spec["WG"] % subgroup_size):
        errs.append(f"TPR {spec['TPR']} threads of a row must share a subgroup: subgroup size {subgroup_size} must "
                    f"divide WG {spec['WG']} and be a multiple of TPR")
    if -(-S // spec["TILE"]) > ATTENTION_LOOP_LIMIT:
        errs.append(f"{S} rows in tiles of {spec['TILE']} exceed {ATTENTION_LOOP_LIMIT} loop iterations per invocation")
    return errs


def pick_attention(cands, stage: str, S: int, D: int, groups_per_row_tile: int, device_type: str,
                   shared_memory: int, subgroup_size: int, forced: str = ""):
    """The fused variant for one pass, or None where none may run (the caller then takes the matmul path).

    A forced configuration (EVERMIND_VK_ATTENTION_VARIANT: the name's tail, e.g. `d64_p2_r64x64`, the
    same for every pass) wins where its launch rules hold. Otherwise: the smallest HD that holds D; on CPU devices one thread per row (TPR 1: no exchange), on others
    split rows (TPR > 1); then the largest ROWS that still gives 128 workgroups (a GPU) or 4 (a CPU),
    else the smallest ROWS."""
    P = {v.name: attention_params(v) for v in cands}
    ok = [v for v in cands if not attention_launch_errors(P[v.name], stage, S, D, shared_memory, subgroup_size)]
    hit = [v for v in ok if forced and v.name.endswith("_" + forced)]
    if hit:
        return hit[0]
    ok = [v for v in ok if (P[v.name]["TPR"] == 1) == (device_type == "cpu")]
    if not ok:
        return None
    hd = min(P[v.name]["HD"] for v in ok)
    ok = [v for v in ok if P[v.name]["HD"] == hd]
    want = 4 if device_type == "cpu" else 128

    def groups(v):
        return -(-S // v.spec["ROWS"]) * groups_per_row_tile

    full = [v for v in ok if groups(v) >= want]
    if full:
        return max(full, key=lambda v: (v.spec["ROWS"], v.spec["TILE"]))
    return min(ok, key=lambda v: (v.spec["ROWS"], -v.spec["TILE"]))


ATTENTION_PATHS = ("matmul", "fused")


def attention_path(forced: str, fused_available: bool) -> str:
    """'fused' or 'matmul'. forced (EVERMIND_VK_ATTENTION) is '', 'matmul' or 'fused'; a forced fused
    path where no fused variant may run is an error, not a silent fallback."""
    if forced and forced not in ATTENTION_PATHS:
        raise UnsupportedError(f"EVERMIND_VK_ATTENTION={forced!r}: want one of {', '.join(ATTENTION_PATHS)}")
    if forced == "matmul":
        return "matmul"
    if forced == "fused" and not fused_available:
        raise UnsupportedError("EVERMIND_VK_ATTENTION=fused, but no fused attention variant fits this launch "
                         f"(head dim > {ATTENTION_MAX_HD}, shared memory or subgroup size)")
    return "fused" if fused_available else "matmul"
