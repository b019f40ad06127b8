"""The generated kernel set (generated/manifest.json + SPIR-V), one way to dispatch a variant, and the
two word kernels the runtime itself needs (copy and fill)."""
from __future__ import annotations

import functools
import json
import struct
from dataclasses import dataclass
from importlib import resources

import numpy as np

from ..errors import BindingLimitError, KernelError, ShapeError, UnsupportedError
from . import dtypes, variants

SCHEMA = "evermind-vk.kernels/1"
MAX_GROUPS = 65535  # the minimum maxComputeWorkGroupCount every Vulkan device supports


@dataclass(frozen=True)
class Variant:
    """One generated kernel variant as the manifest describes it: op, dtype, SPIR-V module, specialization,
    bindings, push constants, required features and flags."""
    name: str
    op: str
    dtype: str
    module: str
    spirv: str
    spec_constants: tuple  # ((name, value), ...) in constant_id order
    bindings: tuple  # ((name, type, access), ...) in binding order
    push_constants: tuple  # ((name, type), ...)
    features: tuple
    flags: tuple = ()

    @property
    def spec(self) -> dict:
        """The specialization constants as a dict (WG, VEC, tile sizes, ...)."""
        return dict(self.spec_constants)


def _files():
    return resources.files("evermind_vk.generated")


@functools.lru_cache(maxsize=1)
def manifest() -> dict[str, Variant]:
    """All variants by name. Raises KernelError if the manifest is missing or of another schema."""
    try:
        data = json.loads((_files() / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError) as e:
        raise KernelError(f"generated/manifest.json unreadable ({e}); run `python tools/codegen.py`") from e
    if data.get("schema") != SCHEMA:
        raise KernelError(f"generated/manifest.json has schema {data.get('schema')!r}, this runtime reads {SCHEMA!r}")
    out = {}
    for v in data["variants"]:
        out[v["name"]] = Variant(
            name=v["name"], op=v["op"], dtype=v["dtype"], module=v["module"], spirv=v["spirv"],
            spec_constants=tuple((n, int(x)) for n, x in v["spec_constants"]),
            bindings=tuple((b["name"], b["type"], b["access"]) for b in v["bindings"]),
            push_constants=tuple((p["name"], p["type"]) for p in v["push_constants"]),
            features=tuple(v["features"]), flags=tuple(v.get("flags", ())))
    return out


def variants_of(op: str, dtype: str) -> list[Variant]:
    """Every variant of op for dtype in the manifest."""
    return [v for v in manifest().values() if v.op == op and v.dtype == dtype]


def usable(op: str, dtype: str, device) -> list[Variant]:
    """Variants of (op, dtype) the device can run: it has their features and their storage buffers fit its
    binding limit (runtime.variants.within_binding_limit). Raises UnsupportedError if no variant has the
    features, BindingLimitError if none of those fits the limit."""
    return variants.within_binding_limit(with_features(op, dtype, device), variants.max_bindings(device.info))


def run_errors(variant: Variant, device) -> list[str]:
    """Why `device` cannot run `variant` (empty: it can): the features it lacks or has switched off, then the
    device rules of runtime.variants.device_errors (a cm2 tile against the device's flexible shapes)."""
    missing = [f for f in variant.features if not device.has(f)]
    lacks = [f"{variant.name} needs {', '.join(missing)}, which {device.info.name} lacks"] if missing else []
    return lacks + variants.device_errors(variant, device.info)


def with_features(op: str, dtype: str, device) -> list[Variant]:
    """Variants of (op, dtype) whose features the device has, whatever they bind (for selectors that
    apply the binding limit themselves: fused attention, norm_partials_multi). Raises UnsupportedError if none."""
    cands = variants_of(op, dtype)
    if not cands:
        have = sorted({v.dtype for v in manifest().values() if v.op == op})
        raise UnsupportedError(f"no {op} kernel for dtype {dtype}" + (f" (have: {', '.join(have)})" if have else ""))
    ok = [v for v in cands if not run_errors(v, device)]
    if not ok:
        need = sorted({f for v in cands for f in v.features if not device.has(f)})
        raise UnsupportedError(f"{op} in {dtype} needs device feature(s) {', '.join(need)}, "
                               f"which {device.info.name} lacks or has switched off")
    return ok


@functools.lru_cache(maxsize=None)
def spirv(module_path: str) -> bytes:
    try:
        return (_files() / module_path).read_bytes()
    except FileNotFoundError as e:
        raise KernelError(f"generated/{module_path} missing; run `python tools/codegen.py`") from e


def pack_push(variant: Variant, values: dict) -> np.ndarray:
    """Push constants as 32-bit words in the manifest's order (floats by their bits)."""
    names = [n for n, _ in variant.push_constants]
    if set(values) != set(names):
        raise KernelError(f"{variant.name}: push constants {sorted(values)} != manifest {sorted(names)}")
    words = np.empty(max(1, len(names)), dtype=np.uint32)
    for i, (n, t) in enumerate(variant.push_constants):
        if t == "f32" and isinstance(values[n], np.uint32):  # raw bits, passed through untouched
            words[i] = values[n]
        elif t == "f32":
            words[i] = struct.unpack("<I", struct.pack("<f", float(values[n])))[0]
        else:
            v = int(values[n])
            if not 0 <= v < 2**32:
                raise UnsupportedError(f"{variant.name}: push constant {n}={v} does not fit 32 bits")
            words[i] = v
    return words


def grid(n_groups: int) -> tuple[int, int, int]:
    """A 1-D count of workgroups as (x, y, 1) with x, y <= 65535 (kernels linearise y*nx + x)."""
    if n_groups <= MAX_GROUPS:
        return (max(1, n_groups), 1, 1)
    y = -(-n_groups // MAX_GROUPS)
    if y > MAX_GROUPS:
        raise UnsupportedError(f"{n_groups} workgroups exceed one dispatch")
    return (MAX_GROUPS, y, 1)


def dispatch(variant: Variant, tensors: list, push: dict, groups: tuple, writes: dict | None = None) -> None:
    """Run (or record, inside `record()`) one variant over tensors given in binding order. writes: {binding
    index: (first, last + 1) element}: all that a written binding reads and writes lies in that range (a
    recording then lets dispatches that touch disjoint ranges of one buffer run side by side,
    runtime/program.py)."""
    if len(tensors) != len(variant.bindings):
        raise KernelError(f"{variant.name}: {len(tensors)} tensors for {len(variant.bindings)} bindings")
    device = tensors[0].device
    for t, (name, btype, _) in zip(tensors, variant.bindings):
        if t.device is not device:
            raise UnsupportedError(f"{variant.name}: tensors on different devices")
        if t.dtype != btype and btype != "u32":  # u32 bindings (copy/fill) take any dtype's words
            raise UnsupportedError(f"{variant.name}: binding {name} wants {btype}, got {t.dtype}")
    cannot = run_errors(variant, device)
    if cannot:
        raise UnsupportedError(cannot[0])
    bindings = variants.binding_errors(variant, variants.max_bindings(device.info))
    if bindings:  # the selectors never pick such a variant; a forced or hand-picked one stops here
        raise BindingLimitError(bindings[0])
    if any(g < 1 or g > MAX_GROUPS for g in groups):
        raise UnsupportedError(f"{variant.name}: workgroup count {groups} outside 1..{MAX_GROUPS}")
    loops = variants.launch_loop_errors(variant.op, variant.spec, variant.flags, push, device.info.type)
    if loops:
        raise variants.LoopLimitError(f"{variant.name}: " + "; ".join(loops))
    ranges = None
    if writes:
        ranges = [None] * len(tensors)
        for i, (lo, hi) in writes.items():
            t = tensors[i]
            if "w" not in variant.bindings[i][2] or not 0 <= lo < hi <= t.numel:
                raise KernelError(f"{variant.name}: write range {lo}..{hi} of binding {variant.bindings[i][0]} "
                                  f"(access {variant.bindings[i][2]}, {t.numel} elements)")
            size = dtypes.DTYPES[t.dtype].itemsize
            ranges[i] = (lo * size, hi * size)
    algo = device.algorithm(variant, tensors, tuple(int(g) for g in groups), spirv(variant.spirv))
    device.submit(algo, pack_push(variant, push), variant.name, tensors, [b[2] for b in variant.bindings],
                  launch_shape(push, groups), ranges)


# Push constants that are sizes, in the order a launch's shape is written (matmul: M, N, K).
SHAPE_FIELDS = ("M", "N", "K", "rows", "cols", "n")


def launch_shape(push: dict, groups) -> str:
    """A launch's sizes for the profiler's per-shape rows: its size push constants, and the batch (the
    workgroup grid's z) when there is one, e.g. "M=4096 N=512 K=512" or "M=256 N=256 K=64 z=128"."""
    parts = [f"{k}={int(push[k])}" for k in SHAPE_FIELDS if k in push]
    if groups[2] > 1:
        parts.append(f"z={int(groups[2])}")
    return " ".join(parts) or "groups=" + "x".join(str(int(g)) for g in groups)


# -- elementwise launches, and the runtime's own word kernels -----------------------------------------
def elementwise_variant(op: str, dtype: str, n: int, device) -> Variant:
    """The variant of an elementwise op for n elements (the widest VEC that still fills the device)."""
    cands = usable(op, dtype, device)
    vec = variants.elementwise_vec(n, sorted({v.spec["VEC"] for v in cands}))
    return next(v for v in cands if v.spec["VEC"] == vec)


def elementwise_groups(v: Variant, n: int) -> tuple[int, int, int]:
    """The workgroup grid for an elementwise variant over n elements (WG * VEC elements a workgroup)."""
    return grid(-(-n // (v.spec["WG"] * v.spec["VEC"])))


def copy_words(src, dst) -> None:
    """Copy src's raw 32-bit words into dst (same word count; any dtypes)."""
    if src.words != dst.words:
        raise ShapeError(f"copy of {src.words} words into {dst.words}")
    v = elementwise_variant("copy_words", "u32", src.words, src.device)
    dispatch(v, [src, dst], {"n": src.words, "alpha": 0.0}, elementwise_groups(v, src.words))


def fill_words(t, word: int) -> None:
    """Set every 32-bit word of t to `word` (0 zeroes any dtype)."""
    v = elementwise_variant("fill_words", "u32", t.words, t.device)
    dispatch(v, [t, t], {"n": t.words, "alpha": np.uint32(word & 0xFFFFFFFF)}, elementwise_groups(v, t.words))
