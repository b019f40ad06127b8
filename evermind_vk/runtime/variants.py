"""Every rule about which kernel variant may run where, in one place. Pure: no device access.

Used by both sides of the contract:
  * `tools/codegen.py` builds the variant table with `matmul_row_errors` (tile divisibility of each
    matmul algorithm) and `features_for` (the device features a dtype or flag needs);
  * the ops pick variants at run time with `pick_matmul` / `elementwise_vec` / `matmul_tile`, and
    `check_matmul_launch` asserts, before every matmul dispatch, each assumption the chosen
    algorithm's template makes about its inputs (a forced variant is checked the same way).

Matmul algorithms (one template each, `templates/matmul_<kind>.comp.j2`, cm2's `.spvasm.j2`):
  tiled  shared-memory tiles, any shape and layout (the fallback)
  rb     GPUs: an RMxRN register block per thread from 16-byte loads (flag rbRMxRN)
  v4     CPU devices: large register blocks from 16-byte loads, no shared memory (flag v4)
  cm     cooperative matrices (tensor cores), f16 in / f32 accumulate, aligned shapes (flags cm, rbFMxFN)
  cm2    NVIDIA's VK_NV_cooperative_matrix2: workgroup-scope matrices the driver stages itself, f16 in / f32
         accumulate, aligned shapes (flags cm2, lN; templates/matmul_cm2.spvasm.j2, SPIR-V assembly)
Every f16 row has a twin with flag c32 that stores C in f32 (split-K's partial products); pick_matmul
chooses among one set only (out32).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import BindingLimitError, ShapeError, UnsupportedError

# -- features ----------------------------------------------------------------------------------------
# Device features a dtype or a code-changing flag needs (names as in Device.caps).
DTYPE_FEATURES = {"f16": ("storage_buffer_16bit_access",)}
FLAG_FEATURES = {"cm": ("cooperative_matrix", "coopmat_f16_16x16x16_f32", "shader_float16", "subgroup_size_32",
                        "vulkan_memory_model"),
                 "cm2": ("cooperative_matrix2", "shader_float16", "vulkan_memory_model")}


def features_for(dtype: str, flags=()) -> list[str]:
    out = list(DTYPE_FEATURES.get(dtype, ()))
    for f in flags:
        out += FLAG_FEATURES.get(f, ())
    return sorted(set(out))


# VK_NV_cooperative_matrix2's flexible shapes, as ci/patches/0011 reports them: (M, N, K granularity, A, B, C,
# Result component type, scope, workgroup invocations: the workgroup size a workgroup-scope shape takes). The
# cm2 kernels multiply f16 A and B (FLOAT16 = 0) into f32 C and results (FLOAT32 = 1) at workgroup scope (2).
CM2_TYPES = (0, 0, 1, 1, 2)


def device_errors(v, info) -> list[str]:
    """Why a variant cannot run on a device (a DeviceInfo) beyond the features it names (empty: it can):
    a cm2 tile must be whole multiples of a flexible shape of its types for its workgroup size."""
    if matmul_kind(v.flags) != "cm2":
        return []
    nt, (bm, bn, bk) = local_size(v.flags), (v.spec["BM"], v.spec["BN"], v.spec["BK"])
    if any(tuple(s[3:8]) == CM2_TYPES and s[8] == nt and bm % s[0] == 0 and bn % s[1] == 0 and bk % s[2] == 0
           for s in info.cooperative_matrix_flexible_shapes):
        return []
    return [f"{v.name}: no f16 x f16 -> f32 workgroup-scope flexible shape of the device for {nt} threads divides "
            f"{bm}x{bn}x{bk}"]


# -- storage-buffer bindings ---------------------------------------------------------------------------
# Every kernel binds one storage buffer per tensor (templates/_interface.glsl.j2 declares nothing else:
# no uniforms, images or samplers), all in descriptor set 0. kp gives each Algorithm its own descriptor
# pool holding exactly one set with exactly its bindings (Algorithm::createParameters; patch 0008's shared
# algorithms allocate their own pool and set the same way), and binds that one set per dispatch, so no
# limit adds up over a sequence: each dispatch's pipeline layout holds one set of n storage buffers, and n
# counts against maxPerStageDescriptorStorageBuffers (Vulkan guarantees 4), maxDescriptorSetStorageBuffers
# (24) and maxPerStageResources (128; compute has no attachments, so the buffers are its only resources)
# alike. Descriptor pools are sized by kp per algorithm and have no device limit besides memory.


def binding_count(v) -> int:
    """Storage buffers a variant binds: its manifest bindings (generated from the template's INTERFACE;
    tests/runtime/test_binding_limits.py checks them against every SPIR-V module's Binding decorations).
    The one place the count comes from."""
    return len(v.bindings)


def max_bindings(info) -> int:
    """The most storage buffers one dispatch may bind on a device (a DeviceInfo): the least of its
    per-stage, per-set and per-stage-resource limits (see above)."""
    return min(info.max_per_stage_descriptor_storage_buffers, info.max_descriptor_set_storage_buffers,
               info.max_per_stage_resources)


def binding_errors(v, limit: int) -> list[str]:
    """Why a variant cannot run under a limit of `limit` storage buffers a dispatch (empty: it can)."""
    n = binding_count(v)
    return [] if n <= limit else [f"{v.name} binds {n} storage buffers, the device allows {limit} a dispatch "
                                  "(maxPerStageDescriptorStorageBuffers, maxDescriptorSetStorageBuffers, "
                                  "maxPerStageResources)"]


def within_binding_limit(cands, limit: int) -> list:
    """The candidates whose bindings fit the device's limit, never one that does not (its pipeline would
    fail to build, or worse). Raises BindingLimitError, naming the kernel with the fewest bindings, its
    count and the limit, where none fits."""
    ok = [v for v in cands if not binding_errors(v, limit)]
    if cands and not ok:
        least = min(cands, key=binding_count)
        raise BindingLimitError(f"no {least.op} kernel fits this device's storage-buffer limit: " +
                                binding_errors(least, limit)[0])
    return ok


def multi_slots(flags) -> int:
    """Tensors one norm_partials_multi dispatch reads (flag xK), 0 without one."""
    f = [f for f in flags if f[:1] == "x" and f[1:].isdigit()]
    return int(f[0][1:]) if f else 0


def pick_norm_multi(cands, limit: int):
    """The norm_partials_multi variant for a device whose dispatches may bind `limit` storage buffers: the
    one reading the most tensors (K, flag xK) whose K + 2 bindings fit, so the number of tensors a dispatch
    reads is bounded by the limit (8 on every desktop GPU and lavapipe; 2 at Vulkan's minimum of 4). None
    where no multi variant fits (below 4): then each tensor gets its own norm_partials dispatch
    (3 bindings), the same partials."""
    ok = [v for v in cands if not binding_errors(v, limit)]
    return max(ok, key=lambda v: multi_slots(v.flags)) if ok else None


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


def subgroup_grid(flags) -> tuple:
    """The WM x WN subgroups of a cm variant (flag wWMxWN; 2x2 without one)."""
    f = [f for f in flags if f.startswith("w") and "x" in f]
    return tuple(int(x) for x in f[0][1:].split("x")) if f else (2, 2)


def raster_group(flags) -> int:
    """Tile rows per raster group (flag gG: workgroups walk G tile rows column by column), 0 without one."""
    f = [f for f in flags if f[:1] == "g" and f[1:].isdigit()]
    return int(f[0][1:]) if f else 0


def local_size(flags) -> int:
    """Threads a workgroup of a cm2 variant (flag lN: a template parameter, since workgroup-scope
    matrices need the size at compile time), 0 without one."""
    f = [f for f in flags if f[:1] == "l" and f[1:].isdigit()]
    return int(f[0][1:]) if f else 0


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
MATMUL_BUFFERS = {"tiled": 1, "rb": 2, "v4": 0, "cm": 2, "cm2": 0}  # cm2: the driver's own (device_errors)


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
        if rb_shared_bytes(bm, bn, bk) > 49152:  # 256x128x16 (50 KiB) lost the H200's device when forced
            errs.append(f"rb tile {bm}x{bn}x{bk} needs {rb_shared_bytes(bm, bn, bk)} bytes of shared memory (> 48 KiB)")
    elif kind == "v4":
        if bk != 4:
            errs.append(f"v4 reads k four at a time: BK must be 4, got {bk}")
        if bm % (4 * wg_y) or bn % (4 * wg_x):
            errs.append(f"v4 tile {bm}x{bn} must be whole 4-row groups per thread and 4-column vectors on {wg_y}x{wg_x} threads")
    else:
        if bm % wg_y or bn % wg_x:
            errs.append(f"tiled {bm}x{bn} must be a whole number of outputs per thread on {wg_y}x{wg_x} threads")
    return errs


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
        if not (lay.wide_loads and (sak == 1 or (sam == 1 and M % 4 == 0))):
            errs.append("v4 needs A k-contiguous, or m-contiguous with M a multiple of 4, and 16-byte aligned "
                        "strides and offsets")
        if K % 4 or N % 4:
            errs.append(f"v4 needs K and N multiples of 4, got K={K} N={N}")
    elif kind == "rb":
        if not lay.wide_loads:
            errs.append("rb needs a unit stride per operand and 16-byte aligned strides and offsets")
    return errs


# The aligned twins of the register blocks (flag al): loads without bounds checks, for launches of whole tiles,
# and the operands' layout fixed at compile time (flag uAB: A's unit stride along A = k or m, B's along B = n or
# k; the template then holds one loop, not both). On the LM's f32 products (H200) the bounds checks cost 1-15%
# (most 4-11%; bench/results/round12-h200-matmul-f32-lm-first.txt) and the run-time layout another 1-8% (most
# 2-6%; bench/results/round12-h200-matmul-f32-layouts.txt).
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


# GPUs: among register-block tiles of equal area one comes first. Round 5 (NVIDIA H200,
# bench/results/round5-h200-matmul-lm.txt) it was 256x64 with BK 16 (rb16x4: 64 outputs a thread), ahead of 128x128
# with BK 8 (0.788 vs 0.745 of cuBLAS on 4096x512x512, 0.684 vs 0.662 on its dX, 0.702 vs 0.590 on 4096x1408x512).
# Round 10 (bench/results/round10-h200-rb-tiles.txt) 128x128 with BK 16 beat both wherever 256x64 was taken:
# 0.836 vs 0.798 (fwd 4096x512x512), 0.737 vs 0.702 (its dX), 0.718 vs 0.688 (dX 4096x512x256), 0.757 vs
# 0.724 (dX 4096x1408x512). (256x64 with BK 8, rb16x8 on 128 threads, lost to 128x128: 0.62 vs 0.74, round 3.)
GPU_FIRST_AMONG_EQUALS = {(128, 128, 16)}
# Tiles of 32,768 outputs (256x128, 128x256: 128 a thread, one workgroup a multiprocessor) run in whole waves or
# not at all: one wave (up to 5% over the 128 workgroups that fill a GPU) or at least two. At 176 workgroups
# (4096x1408x512: a second wave a third full) 256x128 made 0.617 of cuBLAS against 0.702 for 256x64 at 352; at
# 352 (4096x2816x512) 0.744 against 0.646; at 128 (512x512 split 16 ways) 0.762 against 0.656 (H200, round 5).
BIG_TILE_AREA = 32768


def tile_preference(t, gpu: bool = False) -> tuple:
    """Larger area first; among equal areas, on GPUs, GPU_FIRST_AMONG_EQUALS; then the squarer tile (128x128
    over 256x64 with BK 8: 0.74 vs 0.62 of cuBLAS on 4096x512x512, H200), then the taller one (256x128 over
    128x256), then the shorter k-step."""
    return (t[0] * t[1], gpu and tuple(t) in GPU_FIRST_AMONG_EQUALS, -max(t[0], t[1]) / min(t[0], t[1]), t[0], -t[2])


# A tile may waste at most this share of its area on padding (matmul_tile's rule, and TRI_TILES').
MAX_PADDED = 1.25


def padded_area(M: int, N: int, bm: int, bn: int) -> int:
    """The outputs a bm x bn tiling of an M x N product computes, padding included."""
    return -(-M // bm) * bm * -(-N // bn) * bn


def matmul_tile(M: int, N: int, K: int, tiles, shared_memory: int, device_type: str, batch: int = 1,
                buffers: int = 1):
    """Pick a (BM, BN, BK) tile from `tiles` for an MxK . KxN product.

    Tiles whose shared memory (buffers x 4 bytes x BK x (BM + BN + 8)) exceeds the device limit are never chosen.
    Among the rest, prefer the largest tile that (a) wastes at most 25% of its area on padding and
    (b) still yields enough workgroups to fill the device (128 on a GPU: one per multiprocessor of an
    H200 with 132, where 64 left half of it idle, bench/results/h200-matmul-lm.txt; twice that for tiles of
    BIG_TILE_AREA unless they make one wave; 4 on a CPU device such as lavapipe), ordered by tile_preference;
    otherwise the tile with the least padded work, smallest first.
    """
    fits = [t for t in tiles if buffers * 4 * t[2] * (t[0] + t[1] + 8) <= shared_memory]
    if not fits:
        raise ValueError(f"no matmul tile fits {shared_memory} bytes of shared memory")
    gpu = device_type != "cpu"
    want_groups = 128 if gpu else 4

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


# The smallest product (M*N*K*batch) given the v4 blocks on CPU devices. It was 256^3 while every tensor set built
# its own pipeline (0.15-0.7 s each on lavapipe); with pipelines built once per variant (patch 0008) the build
# is paid once per device, and the blocks beat the shared-memory tiles 2-20x on the training step's products
# down to 32x64x512 (bench/results/lavapipe-iree.txt), so every aligned product takes them.
V4_MIN_WORK = 1

# The v4 workgroup CPU devices take when a variant has it: 8 x 1 threads, as wide as one 256-bit vector of
# lavapipe's (its subgroup size; 4 x 4 threads likely fill half of each vector along x) with 8-16 rows x 8
# columns a thread. On lavapipe the default LM step's 39 products took
# 42.7 ms as 16x64 blocks on 8x1 threads against 64.4 ms as 128x64 on 4x4 (interleaved, loaded 2-core machine),
# and 256^3 .. 1024x256x256 and 512^3 were no slower (bench/results/lavapipe-step-round5.txt).
CPU_V4_THREADS = (8, 1)


# Cooperative-matrix variants in the order measured on an NVIDIA H200 at 4096^3 and 8192^3
# (bench/results/h200-matmul-variants.txt, round 3); unlisted ones come after, largest tile first.
CM_ORDER = ("cm_rb4x2_w2x4_t128x128", "cm_rb4x4_t128x128", "cm_rb4x4_g8_t128x128", "cm_rb4x4_w2x4_g8_t128x256",
            "cm_rb4x4_w2x4_t128x256", "cm_rb2x2_w4x4_t128x128k32")
# ... except on launches of few workgroups: there 16 subgroups on BK 32 (twice the k per barrier) beat CM_ORDER's
# first row, which wins from about 700 workgroups up. H200, the LM's products whole (M 4096;
# bench/results/round6-h200-matmul-f16-lm.txt), TFLOP/s of rb2x2_w4x4 k32 against rb4x2_w2x4: 128
# workgroups 80.0/70.3 (4096x512x512), 149.3/121.6 (x2816), 123.2/102.1 (x1408), 52.4/46.4 (x256); 352:
# 90.9/77.9 (4096x1408x512); 704: 94.7/97.7 (4096x2816x512); 1024: 162/180 (4096^3, round 3).
CM_FEW = ("cm_rb2x2_w4x4_t128x128k32", 512)  # (the row, below how many workgroups it comes first)

# VK_NV_cooperative_matrix2 rows (kind cm2, preferred over cm wherever both may run) in the order measured on
# an NVIDIA H200 (bench/results/round11-h200-cm2.txt, TFLOP/s at 4096^3 nn / nt / tn and 8192^3 nn; cuBLAS
# 740-760): 128x256 BK 32 268/238/280/277, 128x256 BK 64 247/254/254/253, 128x128 BK 64 245/240/246, 128x128
# BK 128 207/226/218, 64x64 on 128 threads 160/161/159 (cm's best 183/169/197/190). A launch takes the first
# with at least CM2_MIN_GROUPS workgroups, else the one with the most; it is split along K only where no cm2
# tile makes CM2_MIN_GROUPS whole (split whole-filling products lost: 4096x512x1408 0.32 of cuBLAS split
# 4 ways against 0.58 whole, 4096x512x2816 0.22 against 0.33; 512x512x4096, 16 tiles whole, 0.71 split
# against 0.55).
CM2_ORDER = ("cm2_l256_t128x256k32", "cm2_l256_t128x256", "cm2_l256_t128x128", "cm2_l256_t128x128k128",
             "cm2_l128_t64x64")
CM2_MIN_GROUPS = 128

# ... except one case where only the 64x64 tile fills the device whole: a tile of at least CM2_PAIR_MIN_AREA with
# CM2_PAIR_MIN_GROUPS or more workgroups (but fewer than CM2_MIN_GROUPS) over a long K runs split in 2, its two
# chunks on the tile's c32 twin. NVIDIA H100, the 23.7M LM's weight gradients (K = 4,096 tokens), TFLOP/s in one
# session (bench/results/round14-h100-cm2-split.txt): dW 2816x512x4096, 64x64 whole 118-119, 128x256 BK 32
# (44 workgroups) split 2 161, 4 146, 8 135, 128x128 split 2 146, 4 163, 8 130; dW 512x1408x4096, 64x64 whole
# 115, 128x128 (44 workgroups) split 2 135, 4 122, 8 123. The same split of K = 512 lost (fwd 4096x256x512:
# 64x64 whole 1.6 of cuBLAS, 128x128 split 2 1.06).
CM2_PAIR_MIN_AREA = 128 * 128
CM2_PAIR_MIN_GROUPS = 40  # measured at 44
CM2_PAIR_MIN_K = 4096


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
# The register-block tile (BM, BN, BK) a causal product takes on GPUs, where it pads at most 25%: smaller than
# matmul_tile's, because fewer tiles straddle the diagonal, and a k range cut at the diagonal (the *_a hints)
# leaves workgroups of unequal length that more, smaller tiles balance. Measured per product on an NVIDIA
# H200 (bench/attention_products.py, f32, bench/results/round7-h200-attention-products-lm.txt, -bar.txt), ms of the
# matmul_tile pick against this tile: B 16 x S 256, 8/4 heads, hd 64 (the 23.7M LM): scores 0.062/0.044, pv
# 0.051/0.039, dp 0.047/0.040, dq 0.042/0.040, dk 0.057/0.049, dv 0.052/0.049; one sequence, 4/2 heads, S 4096,
# hd 128: scores 0.327/0.291, pv 0.520/0.455, dp 0.316/0.284, dq 0.514/0.458, dk 0.612/0.595. lower_c: 64x64
# was 2-8% faster again at S <= 1024 but 13-30% slower at S >= 2048; 128x128 held within 8% everywhere.
TRI_TILES = {"lower_c": (128, 128, 8), "lower_a": (64, 64, 16), "upper_a": (64, 64, 16)}


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


# Causal *_a products (P V, dS K, dS^T Q, P^T dO) have an S x hd output, few tiles, and k ranges that grow
# along the diagonal to S: at long S the launch is a few hundred workgroups whose longest runs S / BK steps
# while the device idles. Split along K (gemm_chunks; chunks of whole 64s, each told its diagonal offset so
# a chunk past a tile's diagonal runs no step there), the chunks' f32 partials summed by colsum.
TRI_SPLIT_BELOW = 256   # only launches of fewer workgroups (TRI_TILES' tile) split,
TRI_SPLIT_GROUPS = 512  # into chunks while their workgroups (empty ones too) stay at most this many
TRI_SPLIT_MIN_K = 256   # and each chunk keeps at least this many k


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


def split_ways(groups: int, K: int) -> int:
    """K chunks for a split-K launch of `groups` output tiles: S doubles while the launch has fewer than
    256 workgroups and each chunk keeps >= 256 values of k in whole multiples of 16 (at most 16)."""
    s = 1
    while groups * s < 256 and s < 16 and K % (32 * s) == 0 and K // (2 * s) >= 256:
        s *= 2
    return s


# Split-K in whole waves (f32 tiles of BIG_TILE_AREA, one workgroup a multiprocessor, where the device says how
# many it has: ci/patches/0010). A split product's time follows waves x chunk length: its S chunks of
# ceil(K/S) (whole 16s) run ceil(groups x S / multiprocessors) waves. H200 (132), dW of the 23.7M LM, K = 4,096
# tokens (bench/results/round9-h200-split-waves.txt, ratio to cuBLAS f32 in the same run): 2816x512 on 44 tiles
# of 256x128, 3 chunks (132 workgroups, one wave of 1,376) 0.726 against 8 (three waves of 512) 0.627 and 4 (two
# of 1,024) 0.581; 512x1408 on 22 tiles, 6 chunks (one wave of 688) 0.758 against 16 (three of 256) 0.624 and 3
# 0.406. Chunks that K's 16s do not divide evenly run as separate launches (ops.matmul.gemm_chunks), side by side.
WAVE_SPLIT_MAX = 16


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


# ... but not into fewer than WAVE_SPLIT_MIN chunks: split 2 ways, 256x128 lost to 128x128 run whole on the 128
# workgroups of fwd 4096x512x1408 (0.820 against 0.838 of cuBLAS; round 12 0.812 against 0.842) and dX 4096x512x2816
# (0.858 against 0.863; 0.856 against 0.869): the column sum over the partials costs more than the larger tile
# gains (H200, bench/results/round13-h200-matmul-f32-sweep.txt).
WAVE_SPLIT_MIN = 3


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


def pick_matmul(cands, M: int, N: int, K: int, lay: Layout, device_type: str, shared_memory: int,
                batch: int = 1, forced: str = "", split: bool = False, out32: bool = False, tri: str = "",
                multiprocessors: int = 0):
    """The matmul variant for a launch, from the usable candidates (objects with .name, .flags, .spec).

    A forced name (EVERMIND_VK_MATMUL_VARIANT) wins where its launch rules hold (an f16 row's name
    also forces its c32 twin: a forced tile runs the chunks of a split product too). Otherwise:
    cooperative matrices where the launch is aligned to their tile: cm2 first (CM2_ORDER, CM2_MIN_GROUPS),
    else cm (CM_ORDER; CM_FEW's row first below its workgroup count); on CPU devices the v4
    blocks for aligned products (A k- or m-contiguous); on other devices register blocks where 16-byte loads are possible;
    otherwise the shared-memory tiles. Tiles come from matmul_tile, except that where the product may be
    split along K (split: see matmul_split_k) register blocks take the largest tile that, split at
    least 4 ways, makes at least 128 workgroups (H200, bench/results/h200-matmul-lm.txt: 256x128 split
    4 ways 0.80 of cuBLAS against 0.71 for 128x128 whole on 4096x512x2816; split only 2 ways, 128x128
    tiles lost to 128x64 whole on 4096x256x512, 0.68 against 0.75, and 256x128 only tied 128x128
    whole on 4096x512x512). Cooperative matrices split the same way (split_tile), walking their
    variants in CM_ORDER; f32 tiles of BIG_TILE_AREA, which split in whole waves where the device reports its
    `multiprocessors` (matmul_split_k), only where that split pays (wave_split_pays). out32: choose among the
    f16 rows' c32 twins (C in f32), else among the others.
    tri: the product's causal hint (TRI); register blocks on GPUs then take TRI_TILES' tile where it pads at
    most 25% and fits in shared memory.
    """
    def ok(v):
        return not variant_launch_errors(v, M, N, K, lay)

    cands = [v for v in cands if ("c32" in v.flags) == out32]

    def groups(bm: int, bn: int) -> int:  # workgroups of a bm x bn tile over the whole launch
        return -(-M // bm) * -(-N // bn) * batch

    if forced:
        hit = [v for v in cands if v.name.replace("_c32", "") == forced.replace("_c32", "") and ok(v)]
        if hit:
            return hit[0]
    by_kind: dict[str, list] = {}
    for v in cands:
        by_kind.setdefault(matmul_kind(v.flags), []).append(v)

    def row(v):  # the name CM2_ORDER, CM_ORDER and CM_FEW use: a c32 twin ranks as its row
        return v.name.split("_", 2)[2].replace("_c32", "")
    cm2 = [v for v in by_kind.get("cm2", ()) if ok(v)]
    if cm2:
        def rank2(v):  # CM2_ORDER, then the larger tile, the longer k-step
            return (CM2_ORDER.index(row(v)) if row(v) in CM2_ORDER else len(CM2_ORDER),
                    -v.spec["BM"] * v.spec["BN"], -v.spec["BK"])
        ordered = sorted(cm2, key=rank2)
        big = [v for v in ordered if groups(v.spec["BM"], v.spec["BN"]) >= CM2_MIN_GROUPS]
        if split and big and big[0].spec["BM"] * big[0].spec["BN"] < CM2_PAIR_MIN_AREA:  # cm2_pair_split's case
            pair = [v for v in ordered if cm2_pair_split(groups(v.spec["BM"], v.spec["BN"]), v.spec["BM"],
                                                         v.spec["BN"], v.spec["BK"], K)]
            if pair:
                return pair[0]
        hit = split_tile(ordered, lambda v: groups(v.spec["BM"], v.spec["BN"]), K) if split and not big else None
        return hit or (big[0] if big else max(ordered, key=lambda v: (groups(v.spec["BM"], v.spec["BN"]),
                                                                       v.spec["BK"])))
    cm = [v for v in by_kind.get("cm", ()) if ok(v)
          and cm_shared_bytes(v.spec["BM"], v.spec["BN"], v.spec["BK"]) <= shared_memory]
    if cm:
        big = [v for v in cm if groups(v.spec["BM"], v.spec["BN"]) >= 128]

        def rank(v):
            return (CM_ORDER.index(row(v)), 0) if row(v) in CM_ORDER else (len(CM_ORDER), -v.spec["BM"] * v.spec["BN"])
        hit = split_tile(sorted(cm, key=rank), lambda v: groups(v.spec["BM"], v.spec["BN"]), K) if split else None
        few = [v for v in big if row(v) == CM_FEW[0] and groups(v.spec["BM"], v.spec["BN"]) < CM_FEW[1]]
        return hit or (few[0] if few else min(big, key=rank) if big else min(cm, key=lambda v: v.spec["BM"]))
    if device_type == "cpu" and M * N * K * batch >= V4_MIN_WORK:
        v4 = sorted((v for v in by_kind.get("v4", ()) if ok(v)), key=lambda v: v.spec["BM"] * v.spec["BN"])
        v4 = [v for v in v4 if (v.spec["WG_X"], v.spec["WG_Y"]) == CPU_V4_THREADS] or v4
        if v4:  # the largest block that still gives both cores work
            big = [v for v in v4 if groups(v.spec["BM"], v.spec["BN"]) >= 2]
            return big[-1] if big else v4[0]
    kind = "rb" if device_type != "cpu" and lay.wide_loads and by_kind.get("rb") else "tiled"
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
                and (t[0] * t[1] < BIG_TILE_AREA or wave_split_pays(groups(t[0], t[1]), K, waves))]
        tile = split_tile(sorted(fits, key=lambda t: tile_preference(t, device_type != "cpu"), reverse=True),
                          lambda t: groups(t[0], t[1]), K)
    tile = tile or matmul_tile(M, N, K, tiles, shared_memory, device_type, batch, buffers=MATMUL_BUFFERS[kind])
    # the tile's aligned twin for the launch's layout (flags al uAB, UNIT_LAYOUTS) where the launch is whole tiles
    return max((v for v in pool if (v.spec["BM"], v.spec["BN"], v.spec["BK"]) == tile and ok(v)),
               key=lambda v: aligned(v.flags))


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


# -- loop bounds: no invocation loops more than MAX_LOOP times ----------------------------------------
# Mesa's lavapipe (the CPU Vulkan driver) ends every shader loop after 65,535 iterations, silently
# (LP_MAX_TGSI_LOOP_ITERATIONS): a one-thread sum of 65,536 ones returns 65,535. Every launch whose
# per-invocation loop count grows with the problem is planned here so that no invocation loops more
# than MAX_LOOP times (16x below that cap, counting all its loops together: lavapipe's cap is on an
# invocation's total over all its loops, see matmul_loop_count): long reductions become two-stage
# (colsum), long accumulations become several ordered dispatches (embedding_backward, split-K matmul
# on CPU devices), and a launch that still cannot fit is refused (check_loop). GPUs have no such cap;
# the reductions are planned the same way there (more parallel), matmul is split only on CPU devices.
MAX_LOOP = 4096


class LoopLimitError(UnsupportedError):
    """A launch whose invocations would loop more than MAX_LOOP times."""


def check_loop(what: str, iterations: int) -> None:
    """Refuse a launch whose invocations loop `iterations` times when that exceeds MAX_LOOP."""
    if iterations > MAX_LOOP:
        raise LoopLimitError(f"{what}: {iterations} loop iterations per invocation exceed MAX_LOOP = {MAX_LOOP} "
                             "(lavapipe silently ends loops after 65,535; split the launch)")


def loop_chunks(n: int, limit: int = MAX_LOOP) -> list[tuple[int, int]]:
    """[lo, hi) ranges of at most `limit` covering range(n) in order (at least one, possibly empty)."""
    if limit < 1:
        raise ValueError(f"loop chunk limit {limit} < 1")
    return [(lo, min(lo + limit, n)) for lo in range(0, n, limit)] or [(0, 0)]


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


def forced_variant(cands, spec: str, value: int, env: str):
    """The candidate whose specialization constant `spec` is `value`, as the variable `env` asked for: an
    error naming the values there are if none has it."""
    hit = [v for v in cands if v.spec[spec] == value]
    if not hit:
        raise UnsupportedError(f"{env}={value}: no variant with {spec} {value} "
                               f"(have {sorted(v.spec[spec] for v in cands)})")
    return hit[0]


def pick_row_wg(cands, cols: int, device_type: str, forced: int = 0):
    """The variant of a one-workgroup-per-row kernel (rms_norm, cross_entropy, their backwards) for rows of `cols`: the
    forced workgroup size (EVERMIND_VK_ROW_WG; an error if no variant has it); else on CPU devices the
    smallest workgroup that still gives each thread at most CPU_ROW_ELEMS elements (lavapipe runs a
    workgroup's invocations in turn around each barrier, so idle threads and reduction steps cost time:
    measured on the 90k model's 64-wide rows, 128 threads 27 ms per step, 32 threads 6 ms, 8 threads
    2.7 ms), and on GPUs the largest."""
    if forced:
        return forced_variant(cands, "WG", forced, "EVERMIND_VK_ROW_WG")
    by_wg = sorted(cands, key=lambda v: v.spec["WG"])
    if device_type != "cpu":
        return by_wg[-1]
    fit = [v for v in by_wg if -(-cols // v.spec["WG"]) <= CPU_ROW_ELEMS]
    return fit[0] if fit else by_wg[-1]


CPU_ROW_ELEMS = 8

# rms_norm_backward's blocks (templates/norms.comp.j2): on CPU devices NORM_BLOCK_ROWS consecutive rows a
# workgroup, each thread summing dw's parts of its first NORM_REG_COLS columns in registers (the
# template's PK), one row of partial sums per block: lavapipe, 4096 x 512 with the column sums, 60-83 ms
# against 101-132 ms with a row a workgroup (three interleaved rounds). GPUs keep a row a workgroup: on an
# NVIDIA H200 16-row blocks took 0.055 ms a launch against 0.014 (too few workgroups to hide each row's
# reductions), and the 256-row column sum after them 0.018 ms against 0.0075. Rows wider than
# NORM_REG_COLS threads' columns keep one row a block (their extra columns would be summed in device
# memory), and so does a block whose loop would pass MAX_LOOP.
NORM_BLOCK_ROWS = 16
NORM_REG_COLS = 8


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
    on CPU devices the most rows a workgroup (lavapipe, causal fwd + bwd, 16 rows against 1: 7.4 against 75 ms
    at 8192x64, 10.6/47 at 4096x256, 10.4/23 at 512x4096: a workgroup's threads run in turn around each
    barrier), and on GPUs the fewest threads a row that leave each at most SOFTMAX_ROW_ELEMS elements, or
    one row a workgroup for longer rows: NVIDIA H200, causal fwd + bwd, ms with 1 / 4 / 16 rows a workgroup,
    0.184 / 0.134 / 0.175 at 32768x256, 0.188 / 0.222 / 0.321 at 16384x1024, 0.577 / 0.691 / 1.035 at 16384x4096
    (bench/bench.py --softmax; bench/results/round7-h200-softmax.txt)."""
    if forced:
        return forced_variant(cands, "ROWS", forced, "EVERMIND_VK_SOFTMAX_ROWS")
    by_rows = sorted(cands, key=lambda v: v.spec["ROWS"])
    if device_type == "cpu":
        return by_rows[-1]
    fit = [v for v in by_rows if cols <= SOFTMAX_ROW_ELEMS * (v.spec["WG"] // v.spec["ROWS"])]
    return fit[-1] if fit else by_rows[0]


SOFTMAX_ROW_ELEMS = 8


def embedding_backward_cols(D: int, transpose: bool) -> int:
    """Table columns one embedding_backward thread sums: 4 for a [V, D] table with D % 4 == 0 (each id
    test over the tokens then serves four sums: ~4x less work on lavapipe, same order, same bits), else 1."""
    return 4 if not transpose and D % 4 == 0 else 1


EMBEDDING_BACKWARD_PATHS = ("scan", "sorted")


# embedding_rank's threads a token on GPUs: one thread a token left the 23.7M LM's 4,096 tokens on 16
# workgroups, each thread counting over all 4,096 (0.135 ms of the step on an NVIDIA H200); lanes of one
# token split the count. Up to RANK_THREADS threads in all; CPU devices (few cores, and a workgroup's
# threads run in turn) keep one.
RANK_LANES = 32
RANK_THREADS = 1 << 20


def embedding_rank_lanes(T: int, device_type: str, forced: int = 0) -> int:
    """Threads counting for each token in embedding_rank (a power of two dividing its workgroup);
    forced: EVERMIND_VK_RANK_LANES's count."""
    if forced:
        if forced & (forced - 1) or forced > 256:
            raise UnsupportedError(f"EVERMIND_VK_RANK_LANES={forced}: want a power of two up to 256")
        return forced
    if device_type == "cpu":
        return 1
    lanes = RANK_LANES
    while lanes > 1 and T * lanes > RANK_THREADS:
        lanes //= 2
    return lanes


def embedding_backward_path(T: int, V: int, D: int, cols: int, forced: str = "") -> str:
    """'scan' (every table thread loops over all T tokens: V * D / cols * T steps) or 'sorted' (a
    counting sort of the ids, T * T steps, then each thread loops over its id's tokens only: T * D / cols
    plus binary searches). Sorted where T * T < V * D / cols * T, i.e. T < V * D / cols (the LM's
    [256, 64] table from 512 tokens: 4,096 threads x 512 tokens scanned before, 512 x 512 counts now).
    forced: EVERMIND_VK_EMBEDDING_BACKWARD ('' , 'scan' or 'sorted')."""
    if forced and forced not in EMBEDDING_BACKWARD_PATHS:
        raise UnsupportedError(f"EVERMIND_VK_EMBEDDING_BACKWARD={forced!r}: want one of "
                               f"{', '.join(EMBEDDING_BACKWARD_PATHS)}")
    if forced:
        return forced
    return "sorted" if T < V * D // cols else "scan"


def search_loops(n: int) -> int:
    """Iterations of one binary search over n sorted values (embedding_backward_sorted runs two)."""
    return n.bit_length() + 1


def final_sum_loops(n: int, wg: int) -> int:
    """Iterations per thread of final_sum (one workgroup adds n partials, wg threads)."""
    return -(-n // wg)


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


# Loop caps of device types, as the driver enforces them (iterations per invocation, all loops together):
# lavapipe's 65,535; no GPU driver we know of has one. Launches are planned for MAX_LOOP; `dispatch`
# refuses, before recording, any launch whose count (launch_loop_count) could pass the device's cap.
DEVICE_LOOP_CAP = {"cpu": 65535}

# Row kernels (one workgroup per row, or softmax's ROWS rows): loops over the row per op (templates/norms,
# softmax, cross_entropy).
ROW_PASSES = {"rms_norm": 2, "add_rms_norm": 2, "rms_norm_backward": 2, "layer_norm": 3, "layer_norm_backward": 2,
              "softmax": 3, "softmax_backward": 2, "cross_entropy": 2, "cross_entropy_backward": 3}


def launch_loop_count(op: str, spec: dict, flags, push: dict) -> int | None:
    """Upper bound of the loop iterations one invocation of a launch runs (exit tests and the
    workgroup reductions' log2(WG) steps included), or None for ops whose loops do not grow with the
    problem (elementwise maps) or are not described here."""
    wg = spec.get("WG", 1)
    if op == "rms_norm_backward":  # rpw rows a workgroup, one after another
        return push["rpw"] * norm_backward_row_loops(push["cols"], wg) + 2 * NORM_REG_COLS + 2
    if op in ROW_PASSES:  # WG / ROWS threads a row (softmax's ROWS; one row a workgroup elsewhere)
        return ROW_PASSES[op] * (-(-push["cols"] // (wg // spec.get("ROWS", 1))) + 1) + 32
    if op in ("colsum", "colsum_cast"):
        return push["chunk"] + 1
    if op == "embedding_backward":
        return push["t1"] - push["t0"] + 1
    if op == "embedding_rank":
        return -(-(push["c1"] - push["c0"]) // push["lanes"]) + 1 + push["lanes"].bit_length() + 1
    if op == "embedding_backward_sorted":
        return 2 * search_loops(push["T"]) + push["p1"] - push["p0"] + 1
    if op == "partial_sums":
        return -(-push["chunk"] // wg) + 1 + 16
    if op == "final_sum":
        return -(-push["n"] // wg) + 1 + 16
    if op == "matmul":
        return matmul_loop_count(matmul_kind(flags), spec, push["K"])
    if op.startswith(("ssd_", "cssd_")):
        return ssd_loop_count(op.removeprefix("c"), spec, push)
    return None


def launch_loop_errors(op: str, spec: dict, flags, push: dict, device_type: str) -> list[str]:
    """Why a launch may not run on a device type because of its loop cap (empty: it may)."""
    cap = DEVICE_LOOP_CAP.get(device_type)
    n = launch_loop_count(op, spec, flags, push) if cap is not None else None
    if n is not None and n > cap:
        return [f"{op}: up to {n} loop iterations per invocation, past this device's cap of {cap} "
                "(lavapipe silently ends longer loops)"]
    return []
# -- selective scan (issue 12) ------------------------------------------------------------------------
# lavapipe ends any shader loop after 65,535 iterations, so no scan invocation may walk a whole
# sequence: the chunk pass loops over one chunk (<= SCAN_MAX_CHUNK tokens), the carry pass over the
# chunk summaries (<= SCAN_MAX_CHUNKS of them). One (batch, chunk, channel) thread keeps its N states
# in registers: N <= the variant's NMAX.
SCAN_MAX_CHUNK = 4096
SCAN_MAX_CHUNKS = 4096


def scan_chunk_len(seq_len: int, requested: int, batch: int = 1) -> int:
    """Tokens per chunk: `requested`, raised just enough that the batch's sequences need <= SCAN_MAX_CHUNKS
    chunks in all (the carry loops over one sequence's chunks; the A_log and D gradients sum one partial
    per chunk of every sequence)."""
    if requested < 1:
        raise ShapeError(f"scan chunk length must be >= 1, got {requested}")
    ch = max(requested, -(-seq_len // (SCAN_MAX_CHUNKS // max(batch, 1) or 1)))
    while batch * -(-seq_len // ch) > SCAN_MAX_CHUNKS and ch < seq_len:
        ch += 1
    if ch > SCAN_MAX_CHUNK:
        raise UnsupportedError(f"a sequence of {seq_len} tokens needs chunks of {ch} > {SCAN_MAX_CHUNK} tokens")
    return ch


def scan_errors(n_state: int, nmax: int) -> list[str]:
    """Why a scan variant with NMAX registers of state cannot run N states (empty: it can)."""
    return [] if 1 <= n_state <= nmax else [f"d_state {n_state} outside 1..{nmax} (the scan keeps the states in registers)"]
# -- Mamba-2 SSD, the chunked quadratic form (issue 12) ----------------------------------------------
# templates/ssd.comp.j2: one workgroup per (batch, chunk, head) holds the chunk's cumulative decays, and
# ssd_output the Q×Q block, in shared memory: Q <= the variant's QMAX (QMAX^2 floats must fit), and the
# workgroup's threads cover the chunk's tokens (WG >= QMAX). The inter-chunk recurrence is scan_carry,
# over <= SCAN_MAX_CHUNKS chunks, so a sequence may have at most QMAX * SCAN_MAX_CHUNKS tokens.
def ssd_shared_bytes(spec: dict) -> int:
    """Shared memory of the largest SSD kernel (ssd_output / cssd_output: the Q×Q block and two decay
    arrays; ssd_da's arrays and tree sums are smaller)."""
    return (spec["QMAX"] * spec["QMAX"] + 2 * spec["QMAX"] + 2 * spec["WG"]) * 4


def ssd_row_errors(spec: dict) -> list[str]:
    """Why an SSD row of the variant table cannot work with its template (empty: it can)."""
    wg, qmax = spec["WG"], spec["QMAX"]
    errs = []
    if wg & (wg - 1) or wg < qmax:
        errs.append(f"WG {wg} must be a power of two >= QMAX {qmax} (one thread per token of a chunk, tree sums)")
    if ssd_shared_bytes(spec) > 32768:
        errs.append(f"QMAX {qmax}: the Q×Q block and the decays pass 32 KiB of shared memory")
    return errs


def ssd_launch_errors(spec: dict, shared_memory: int) -> list[str]:
    """Why an SSD variant cannot run on a device (empty: it can)."""
    need = ssd_shared_bytes(spec)
    return [] if need <= shared_memory else [
        f"the SSD's {spec['QMAX']}x{spec['QMAX']} block needs {need} bytes of shared memory, the device has {shared_memory}"]


def ssd_chunk_len(seq_len: int, requested: int, qmax: int) -> int:
    """Tokens per SSD chunk: `requested` (1..qmax), raised just enough that one sequence has
    <= SCAN_MAX_CHUNKS chunks (the inter-chunk scan loops over them); any chunk length gives the same
    result up to f32 rounding."""
    if not 1 <= requested <= qmax:
        raise UnsupportedError(f"SSD chunk length {requested} outside 1..{qmax} (the Q×Q block lives in shared memory)")
    q = max(requested, -(-seq_len // SCAN_MAX_CHUNKS))
    if q > qmax:
        raise UnsupportedError(f"a sequence of {seq_len} tokens needs more than {SCAN_MAX_CHUNKS} SSD chunks of "
                               f"<= {qmax} tokens (at most {qmax * SCAN_MAX_CHUNKS} tokens a sequence)")
    return q


def ssd_loop_count(op: str, spec: dict, push: dict) -> int:
    """Upper bound of the loop iterations one invocation of an SSD launch runs (exit tests and tree sums
    included): the decays' cumulative sum (Q), then the op's own loops over the chunk, the head's
    channels (hd) and the states (N). The complex form (cssd_*) has the same loops."""
    wg, Q, N, hd = spec["WG"], push["Q"], push["N"], push["hd"]
    base = Q + 2
    if op == "ssd_state":
        return base + Q + 1
    if op == "ssd_output":
        return base + (-(-Q * Q // wg) + 1) * (N + 1) + N + Q * (Q + N + 2) + 1
    if op == "ssd_dgrid":
        return base + hd + N + 2
    if op == "ssd_dbc":
        return base + 4 * (Q + 1) + 2 * (hd + 1)
    if op == "ssd_da":
        return base + -(-hd * N // wg) + 1 + N + 1 + Q + 2 * (wg.bit_length() + 1)
    raise ValueError(op)


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
                   shared_memory: int, subgroup_size: int, forced: str = "", *, max_bindings: int):
    """The fused variant for one pass, or None where none may run (the caller then takes the matmul path).

    A variant binding more storage buffers than the device allows a dispatch (max_bindings: the forward
    binds 5, the backward passes 8) is never picked, forced or not: where any pass has none that fits,
    attention takes the matmul path for every pass, the other documented path (strided matmul and row
    softmax kernels, 2-3 bindings each).
    A forced configuration (EVERMIND_VK_ATTENTION_VARIANT: the name's tail, e.g. `d64_p2_r64x64`, the
    same for every pass) wins where its launch rules hold. Otherwise: the smallest HD that holds D; on CPU devices one thread per row (TPR 1: no exchange), on others
    split rows (TPR > 1); then the largest ROWS that still gives 128 workgroups (a GPU) or 4 (a CPU),
    else the smallest ROWS."""
    P = {v.name: attention_params(v) for v in cands}
    ok = [v for v in cands if not attention_launch_errors(P[v.name], stage, S, D, shared_memory, subgroup_size)
          and not binding_errors(v, max_bindings)]
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


def attention_path(forced: str, fused_available: bool, device_type: str = "cpu") -> str:
    """'fused' or 'matmul'. forced (EVERMIND_VK_ATTENTION) is '', 'matmul' or 'fused'; a forced fused
    path where no fused variant may run is an error, not a silent fallback. Unforced, the fused kernels
    run on CPU devices only: measured on an NVIDIA H200 (bench/results/h200-attention.txt) they take
    1.5-2.6x the time of the matmul path (S 1024-4096, hd 64/128), and in the 23.7M LM's step (S 256) the
    step ran at 0.91x (f32) and 0.77x (f16) of its matmul-path speed (round7-h200-train-23.7m-fused.txt).
    On lavapipe they took 0.3-0.8x until softmax ran 16 rows a workgroup (round 7); since then attention
    alone is 1.3-3x faster on the matmul path (S 64-1024, hd 32-128, round7-lavapipe-attention.txt), but the
    small config's training step showed no steady difference (three interleaved pairs went to fused, one
    earlier to matmul), so CPU devices keep the fused kernels and their O(S hd) memory."""
    if forced and forced not in ATTENTION_PATHS:
        raise UnsupportedError(f"EVERMIND_VK_ATTENTION={forced!r}: want one of {', '.join(ATTENTION_PATHS)}")
    if forced == "matmul":
        return "matmul"
    if forced == "fused" and not fused_available:
        raise UnsupportedError("EVERMIND_VK_ATTENTION=fused, but no fused attention variant fits this launch "
                         f"(head dim > {ATTENTION_MAX_HD}, shared memory, subgroup size or storage-buffer bindings)")
    return "fused" if fused_available and (forced == "fused" or device_type == "cpu") else "matmul"
