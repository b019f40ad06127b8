"""Attention: the fused (flash-style) kernels or the matmul path (strided products and row softmax), and on
the matmul path the K chunks of the causal products."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import UnsupportedError
from ..manifest import MAX_GROUPS, with_features
from .bindings import binding_errors, max_bindings
from .matmul import TRI_TILES
from .table import F, Row, Tuned

# A fused variant's parameters: HD (head-dim bound, a multiple of 4 * TPR) and TPR (threads per row,
# one subgroup's neighbours) are template parameters (flags dHD, pTPR); ROWS (rows a workgroup owns),
# TILE (rows streamed through shared memory per step) and WG = ROWS * TPR are specialization constants.
# Passes: "fwd" (op attention), "dq" and "dkv" (op attention_backward, flag dq or dkv).
# Flag uR (CPU devices; TPR 1, WG 8, ROWS = R, a template parameter): the R rows sit in registers, the same
# in every lane, and the 8 lanes split the streamed rows (lane l takes l, l + 8, ...), keeping partial sums
# that meet in shared memory at the end, instead of a shared tile every lane reads at the same address:
# Mesa 22.3 lavapipe runs each load (and each subgroup broadcast) as a loop over the lanes. TILE (a multiple
# of 8) is then the streamed rows of an outer-loop iteration only.
ATTENTION_MAX_HD = 128
ATTENTION_LOOP_LIMIT = 4096  # per-invocation tile-loop iterations allowed (lavapipe ends loops at 65535)


def attention_params(v) -> dict:
    """A fused attention variant's specialization constants plus HD and TPR from its flags, U (flag uR's R, 0
    without) and SA (1 with flag sa: the uR partials combined by subgroup arithmetic, not in shared memory)."""
    out = dict(v.spec, U=0, SA=int("sa" in v.flags))
    for f in v.flags:
        if f[0] in "dpu" and f[1:].isdigit():
            out[{"d": "HD", "p": "TPR", "u": "U"}[f[0]]] = int(f[1:])
    return out


def attention_shared_bytes(spec: dict, stage: str) -> int:
    """Shared memory a fused attention variant declares (two f32 tiles, the exchange buffer, dkv's stats;
    with flag uR the lanes' partials: a vec4 per (lane, row, HD / 4), the forward's running max and sum)."""
    if spec.get("U"):
        if spec.get("SA"):
            return 0
        return spec["WG"] * spec["U"] * spec["HD"] * 4 + (8 * spec["WG"] * spec["U"] if stage == "fwd" else 0)
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
    if wg != rows * tpr and not spec.get("U"):
        errs.append(f"WG {wg} must be ROWS * TPR = {rows * tpr}")
    if spec.get("U") and (tpr != 1 or wg != 8 or rows != spec["U"] or rows % 8 or tile % 8):
        errs.append(f"u{spec['U']}: TPR {tpr} must be 1, WG {wg} 8 (the lanes that split the streamed rows), "
                    f"ROWS {rows} R, and R and TILE {tile} multiples of 8")
    return errs


def attention_launch_errors(spec: dict, stage: str, S: int, D: int, shared_memory: int, subgroup_size: int) -> list[str]:
    """Each assumption the fused template makes about a launch that this one breaks (empty: it may run)."""
    errs = []
    if spec.get("U") and D % 4:
        errs.append(f"u{spec['U']} loads rows as whole 16-byte vectors (no branches): head dim {D} must be a "
                    "multiple of 4")
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
                   shared_memory: int, subgroup_size: int, forced: str = "", *, max_bindings: int):
    """The fused variant for one pass, or None where none may run (the caller then takes the matmul path).

    A variant binding more storage buffers than the device allows a dispatch (max_bindings: the forward
    binds 5, the backward passes 8) is never picked, forced or not: where any pass has none that fits,
    attention takes the matmul path for every pass, the other documented path (strided matmul and row
    softmax kernels, 2-3 bindings each).
    A forced configuration (EVERMIND_VK_ATTENTION_VARIANT: the name's tail, e.g. `d64_p2_r64x64`, the
    same for every pass) wins where its launch rules hold. Otherwise: the smallest HD that holds D; on CPU devices one thread per row (TPR 1: no exchange),
    with flag uR where one fits (D % 4 == 0, shared memory), with flag sa among those where the device runs it
    (subgroup arithmetic), on others split rows (TPR > 1); then the
    largest ROWS that still gives 128 workgroups (a GPU) or 4 (a CPU), else the smallest ROWS."""
    P = {v.name: attention_params(v) for v in cands}
    ok = [v for v in cands if not attention_launch_errors(P[v.name], stage, S, D, shared_memory, subgroup_size)
          and not binding_errors(v, max_bindings)]
    hit = [v for v in ok if forced and v.name.endswith("_" + forced)]
    if hit:
        return hit[0]
    ok = [v for v in ok if (P[v.name]["TPR"] == 1) == (device_type == "cpu")]
    if not ok:
        return None
    if device_type == "cpu" and any(P[v.name]["U"] for v in ok):
        ok = [v for v in ok if P[v.name]["U"]]
        if any(P[v.name]["SA"] for v in ok):  # uR with flag sa where the device runs it: no shared memory
            ok = [v for v in ok if P[v.name]["SA"]]
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
PATH_TUNED = {
    "FUSED_DEVICE_TYPES": Tuned(("cpu",), "unforced, fused kernels on CPU devices only: on GPUs the matmul path was "
                                          "faster, on lavapipe no steady difference and fused keeps O(S hd) memory",
                                "bench/results/evidence/h200-attention-paths.txt"),
}
FUSED_DEVICE_TYPES = PATH_TUNED["FUSED_DEVICE_TYPES"].value


def attention_path(forced: str, fused_available: bool, device_type: str = "cpu") -> str:
    """'fused' or 'matmul'. forced (EVERMIND_VK_ATTENTION) is '', 'matmul' or 'fused'; a forced fused
    path where no fused variant may run is an error, not a silent fallback. Unforced, the fused kernels
    run on the device types of PATH_TUNED["FUSED_DEVICE_TYPES"] only."""
    if forced and forced not in ATTENTION_PATHS:
        raise UnsupportedError(f"EVERMIND_VK_ATTENTION={forced!r}: want one of {', '.join(ATTENTION_PATHS)}")
    if forced == "matmul":
        return "matmul"
    if forced == "fused" and not fused_available:
        raise UnsupportedError("EVERMIND_VK_ATTENTION=fused, but no fused attention variant fits this launch "
                         f"(head dim > {ATTENTION_MAX_HD}, shared memory, subgroup size or storage-buffer bindings)")
    return "fused" if fused_available and (forced == "fused" or device_type in FUSED_DEVICE_TYPES) else "matmul"


def row(op: str, dtype: str, hd: int, rows: int, tile: int, tpr: int, flags=()) -> Row:
    """A fused attention row: head-dim bound HD and TPR threads a row (template parameters, flags dHD and
    pTPR: they size the named registers), ROWS per workgroup and TILE streamed rows (specialization).
    Raises ValueError for a row its template cannot run."""
    u = [f for f in flags if f[0] == "u" and f[1:].isdigit()]
    if "sa" in flags and not u:
        raise ValueError(f"{op} {dtype}: flag sa combines the uR rows' partials; it needs a flag uR")
    spec = dict(WG=8 if u else rows * tpr, ROWS=rows, TILE=tile)
    errors = attention_row_errors(dict(spec, HD=hd, TPR=tpr, U=int(u[0][1:]) if u else 0))
    if errors:
        raise ValueError(f"{op} {dtype} {spec} d{hd} p{tpr} {' '.join(u)}:\n  " + "\n  ".join(errors))
    # uR after dHD_pTPR, so a forced tail without it (d16_p1_r32x32) names only the shared-tile variant
    rest = tuple(f for f in flags if f not in u and f != "sa")
    sa = ("sa",) if "sa" in flags else ()
    return Row("attention", op, dtype, tuple(spec.items()), flags=(*rest, f"d{hd}", f"p{tpr}", *u, *sa),
               tile=f"r{rows}x{tile}")


# Fused attention configurations (HD, ROWS, TILE, TPR), the same for every pass. CPU devices: one thread per
# row, 32 rows (bench/results/evidence/lavapipe-attention-paths.txt), where no uR row below fits (D % 4 != 0,
# HD 128, less shared memory). GPUs: rows split over 2 or 4 threads of a subgroup;
# 32-row variants for launches with few heads (more workgroups).
CONFIGS = (
    *((hd, 32, 32, 1) for hd in (8, 16, 32, 64)), (128, 32, 16, 1),
    *((hd, rows, 64, 2) for hd in (8, 16, 32, 64) for rows in (32, 64)),
    *((128, rows, 32, 4) for rows in (16, 32)), (32, 16, 32, 4),
    # The GPU layouts of HD 64 and 128 with tiles small enough for 32 KiB of shared memory (lavapipe
    # runs them in the tests; devices with less shared memory than 48 KiB pick them).
    (64, 32, 32, 2), (128, 16, 16, 4),
)

# CPU devices (flag uR, TPR 1, WG 8): (HD, R, TILE). On lavapipe (small LM step, serialized) about 2x faster per
# pass than the TPR 1 shared-tile rows; R 32 measured no faster than R 16 at HD 16. HD 64's R 16 forward needs
# 33 KiB (its dq and dkv exactly lavapipe's 32 KiB), so lavapipe's HD 64 forward runs R 8.
U_CONFIGS = (*((hd, r, 32) for hd in (8, 16, 32, 64) for r in (8, 16)),)

ROWS = [
    # Fused attention: forward, and the two backward passes (dq, then dkv).
    *(row("attention", dt, *cfg) for dt in F for cfg in CONFIGS),
    *(row("attention_backward", dt, *cfg, flags=[stage]) for stage in ("dq", "dkv") for dt in F for cfg in CONFIGS),
    *(row("attention", dt, *cfg, 1, flags=[f"u{cfg[1]}"]) for dt in F for cfg in U_CONFIGS),
    *(row("attention_backward", dt, *cfg, 1, flags=[stage, f"u{cfg[1]}"]) for stage in ("dq", "dkv") for dt in F
      for cfg in U_CONFIGS),
    # ... and their twins with flag sa (devices with subgroup arithmetic in subgroups of 8): the lanes' partials
    # summed by subgroupAdd (the forward's max by subgroupMax) instead of through shared memory and barriers.
    # Lavapipe, interleaved A/B of the small LM's passes (this change's commit message).
    *(row("attention", dt, *cfg, 1, flags=[f"u{cfg[1]}", "sa"]) for dt in F for cfg in U_CONFIGS),
    *(row("attention_backward", dt, *cfg, 1, flags=[stage, f"u{cfg[1]}", "sa"]) for stage in ("dq", "dkv")
      for dt in F for cfg in U_CONFIGS),
]

# Causal *_a products (P V, dS K, dS^T Q, P^T dO) have an S x hd output, few tiles, and k ranges that grow
# along the diagonal to S: at long S the launch is a few hundred workgroups whose longest runs S / BK steps
# while the device idles. Split along K (chunks of whole 64s, each told its diagonal offset so a chunk past a
# tile's diagonal runs no step there), the chunks' f32 partials summed by colsum.
TUNED = {
    "TRI_SPLIT_BELOW": Tuned(256, "only causal *_a launches of fewer workgroups (TRI_TILES' tile) split",
                             "bench/results/evidence/h200-attention-products-lm.txt"),
    "TRI_SPLIT_GROUPS": Tuned(512, "chunks are added while the launch's workgroups (empty ones too) stay at most this",
                              "bench/results/evidence/h200-attention-products-lm.txt"),
    "TRI_SPLIT_MIN_K": Tuned(256, "each chunk keeps at least this many k",
                             "bench/results/evidence/h200-attention-products-lm.txt"),
}
TRI_SPLIT_BELOW = TUNED["TRI_SPLIT_BELOW"].value
TRI_SPLIT_GROUPS = TUNED["TRI_SPLIT_GROUPS"].value
TRI_SPLIT_MIN_K = TUNED["TRI_SPLIT_MIN_K"].value


def tri_split(tri: str, M: int, N: int, K: int, batch: int, device_type: str, forced: str = "") -> int:
    """How many K chunks a causal lower_a / upper_a product of `batch` M x N outputs runs as (1: whole).
    GPUs only; forced (EVERMIND_VK_TRI_SPLIT): '0' or '1' never splits, 'n' splits n ways (fewer where K
    has fewer than n whole 64s)."""
    if tri not in ("lower_a", "upper_a"):
        return 1
    if forced:
        if not forced.isdigit():
            raise UnsupportedError(f"EVERMIND_VK_TRI_SPLIT={forced!r}: want a chunk count (0 or 1: no split)")
        return max(1, min(int(forced), -(-K // 64)))
    if device_type == "cpu":
        return 1
    bm, bn, _ = TRI_TILES[tri]
    groups = -(-M // bm) * -(-N // bn) * batch
    if groups >= TRI_SPLIT_BELOW:
        return 1
    s = 1
    while groups * 2 * s <= TRI_SPLIT_GROUPS and K // (2 * s) >= TRI_SPLIT_MIN_K and s < 16:
        s *= 2
    return s


def tri_chunks(K: int, ways: int) -> list[tuple[int, int]]:
    """[(k0, k1)]: K cut into at most `ways` chunks of equal whole multiples of 64 (the last one shorter)."""
    step = max(64, -(-K // (max(1, ways) * 64)) * 64)
    return [(k0, min(K, k0 + step)) for k0 in range(0, K, step)]


# The matmul path's probabilities P [B*H, S, S]: kept from the forward for the backward, or recomputed there
# (the scores product and the row softmax again, once per layer: Megatron-LM's selective recomputation).
# P grows with S^2 while the layer's other activations grow with S: past this ratio of P's bytes to those
# of q, k, v and the output (H * S / ((2H + 2KVH) * D)), the backward recomputes. The 23.7M model at 256
# tokens (ratio 1.3) keeps them; the 124M and 350M models at 1,024 tokens (6.0, 5.3) recompute, trading
# about a tenth of the step's speed for a fifth of its peak (the 350M model's, in the cited file).
PROBS_TUNED = {
    "KEEP_PROBS_RATIO": Tuned(4.0, "the matmul path keeps P where its bytes are at most this many times q, k, v "
                                   "and out's; past it the backward recomputes P",
                              "bench/results/train_bench-350m-probs-h200.txt"),
}
KEEP_PROBS_RATIO = PROBS_TUNED["KEEP_PROBS_RATIO"].value
PROBS_CHOICES = ("keep", "recompute")


def keeps_probs(H: int, KVH: int, S: int, D: int, forced: str = "") -> bool:
    """Whether the matmul path keeps the probabilities for the backward (else the backward recomputes them).
    forced (EVERMIND_VK_ATTENTION_PROBS): '' (the ratio rule above), 'keep' or 'recompute'."""
    if forced and forced not in PROBS_CHOICES:
        raise UnsupportedError(f"EVERMIND_VK_ATTENTION_PROBS={forced!r}: want one of {', '.join(PROBS_CHOICES)}")
    if forced:
        return forced == "keep"
    return H * S <= KEEP_PROBS_RATIO * (2 * H + 2 * KVH) * D


@dataclass(frozen=True)
class Launch:
    """Attention over `batch` sequences of S tokens, H query heads of D (KVH key/value heads). saved: what
    the backward was given ('' none: the rule picks the path; 'lse': a logsumexp, so the fused kernels;
    'probs': probabilities, so the matmul path)."""
    dtype: str
    S: int
    H: int
    KVH: int
    D: int
    batch: int = 1
    causal: bool = True
    saved: str = ""


@dataclass(frozen=True)
class Knobs:
    """Overrides: EVERMIND_VK_ATTENTION (path), EVERMIND_VK_ATTENTION_VARIANT, EVERMIND_VK_TRI_SPLIT,
    EVERMIND_VK_ATTENTION_PROBS."""
    path: str = ""
    variant: str = ""
    tri_split: str = ""
    probs: str = ""


@dataclass(frozen=True)
class Plan:
    """'fused' with a variant per pass ({'fwd', 'dq', 'dkv'}), or 'matmul' with the K chunks of the causal
    products: q_chunks for P V and dS K (lower_a over B*H heads), kv_chunks for dS^T Q and P^T dO (upper_a
    over B*KVH), and whether the forward keeps the probabilities for the backward (keep_probs; the fused path
    always keeps its logsumexp)."""
    path: str
    fused: dict | None = None
    q_chunks: tuple = ()
    kv_chunks: tuple = ()
    keep_probs: bool = True


_STAGES = {"fwd": ("attention", None), "dq": ("attention_backward", "dq"), "dkv": ("attention_backward", "dkv")}


def fused_variants(launch: Launch, device, forced: str = "") -> dict | None:
    """{stage: variant} of the fused kernels for a launch, or None where some stage has none."""
    info, out = device.info, {}
    for stage, (op, flag) in _STAGES.items():
        cands = [v for v in with_features(op, launch.dtype, device) if flag is None or flag in v.flags]
        heads = launch.KVH if stage == "dkv" else launch.H
        v = pick_attention(cands, stage, launch.S, launch.D, heads * launch.batch, info.type, info.shared_memory,
                           info.subgroup_size, forced, max_bindings=max_bindings(info))
        if v is None:
            return None
        out[stage] = v
    return out


def plan(launch: Launch, device, knobs: Knobs = Knobs()) -> Plan:
    """The path of an attention launch (forward, or backward given what was saved) and what it runs."""
    S, D, kind = launch.S, launch.D, device.info.type
    if launch.saved == "probs":
        path, fused = "matmul", None
    else:
        fused = fused_variants(launch, device, knobs.variant) if launch.batch <= MAX_GROUPS else None
        path = attention_path(knobs.path, fused is not None, kind)
        if launch.saved == "lse" and path != "fused":  # a saved logsumexp: only the fused kernels use it
            fused = fused_variants(launch, device, knobs.variant)
            if fused is None:
                raise UnsupportedError(f"attention_backward: no fused variant for S={S} D={D} to use the logsumexp")
            path = "fused"
    if path == "fused":
        return Plan("fused", fused)
    tri_q, tri_kv = ("lower_a", "upper_a") if launch.causal else ("", "")
    q = tri_chunks(S, tri_split(tri_q, S, D, S, launch.batch * launch.H, kind, knobs.tri_split))
    kv = tri_chunks(S, tri_split(tri_kv, S, D, S, launch.batch * launch.KVH, kind, knobs.tri_split))
    keep = keeps_probs(launch.H, launch.KVH, S, D, knobs.probs)
    return Plan("matmul", None, tuple(q), tuple(kv), keep)
