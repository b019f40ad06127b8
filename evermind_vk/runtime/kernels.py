"""One way to dispatch a variant (the kernel set itself: runtime/manifest.py, re-exported here), and the
two word kernels the runtime itself needs (copy and fill)."""
from __future__ import annotations

import struct

import numpy as np

from ..errors import BindingLimitError, KernelError, ShapeError, UnsupportedError
from . import dtypes
from .manifest import (MAX_GROUPS, SCHEMA, Variant, grid, manifest, run_errors, spirv, usable,  # noqa: F401
                       variants_of, with_features)
from .select import bindings, elementwise, launch, loops


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
    too_many = bindings.binding_errors(variant, bindings.max_bindings(device.info))
    if too_many:  # the selectors never pick such a variant; a forced or hand-picked one stops here
        raise BindingLimitError(too_many[0])
    if any(g < 1 or g > MAX_GROUPS for g in groups):
        raise UnsupportedError(f"{variant.name}: workgroup count {groups} outside 1..{MAX_GROUPS}")
    over = launch.launch_loop_errors(variant.op, variant.spec, variant.flags, push, device.info.type)
    if over:
        raise loops.LoopLimitError(f"{variant.name}: " + "; ".join(over))
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
    vec = elementwise.elementwise_vec(n, sorted({v.spec["VEC"] for v in cands}))
    return next(v for v in cands if v.spec["VEC"] == vec)


def elementwise_groups(v: Variant, n: int) -> tuple[int, int, int]:
    """Workgroups of an elementwise variant over n elements."""
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
