"""Elementwise ops: add, mul, scale (f32/f16), and word copy/fill used by the runtime."""
from __future__ import annotations

import numpy as np

from .. import kernels, select
from ..errors import ShapeError, UnsupportedError
from ..tensor import Tensor, empty


def _variant(op: str, dtype: str, n: int, device):
    cands = kernels.usable(op, dtype, device)
    vec = select.elementwise_vec(n, sorted({v.spec["VEC"] for v in cands}))
    return next(v for v in cands if v.spec["VEC"] == vec)


def _groups(v, n: int):
    per_group = v.spec["WG"] * v.spec["VEC"]
    return kernels.grid(-(-n // per_group))


def _binary(op: str, a: Tensor, b: Tensor, out: Tensor | None) -> Tensor:
    if a.shape != b.shape:
        raise ShapeError(f"{op}: shapes {a.shape} and {b.shape} differ")
    if a.dtype != b.dtype:
        raise UnsupportedError(f"{op}: dtypes {a.dtype} and {b.dtype} differ")
    out = empty(a.shape, a.dtype, a.device) if out is None else out
    if out.shape != a.shape or out.dtype != a.dtype:
        raise ShapeError(f"{op}: out is {out.shape}/{out.dtype}, want {a.shape}/{a.dtype}")
    v = _variant(op, a.dtype, a.numel, a.device)
    kernels.dispatch(v, [a, b, out], {"n": a.numel}, _groups(v, a.numel))
    return out


def add(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """a + b, elementwise (same shape and dtype)."""
    return _binary("add", a, b, out)


def mul(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """a * b, elementwise (same shape and dtype)."""
    return _binary("mul", a, b, out)


def scale(x: Tensor, alpha: float, out: Tensor | None = None) -> Tensor:
    """alpha * x (computed in f32)."""
    out = empty(x.shape, x.dtype, x.device) if out is None else out
    if out.shape != x.shape or out.dtype != x.dtype:
        raise ShapeError(f"scale: out is {out.shape}/{out.dtype}, want {x.shape}/{x.dtype}")
    v = _variant("scale", x.dtype, x.numel, x.device)
    kernels.dispatch(v, [x, out], {"n": x.numel, "alpha": alpha}, _groups(v, x.numel))
    return out


def copy_words(src: Tensor, dst: Tensor) -> None:
    """Copy src's raw words into dst (same byte size)."""
    if src.words != dst.words:
        raise ShapeError(f"copy of {src.words} words into {dst.words}")
    v = _variant("copy", "u32", src.words, src.device)
    kernels.dispatch(v, [src, dst], {"n": src.words, "alpha": 0.0}, _groups(v, src.words))


def fill_words(t: Tensor, word: int) -> None:
    """Set every 32-bit word of t to `word` (0 zeroes any dtype)."""
    v = _variant("fill", "u32", t.words, t.device)
    kernels.dispatch(v, [t, t], {"n": t.words, "alpha": np.uint32(word & 0xFFFFFFFF)}, _groups(v, t.words))
