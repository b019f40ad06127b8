"""Elementwise ops (add, mul, scale; f32/f16), the broadcast bias add, and strided row copies."""
from __future__ import annotations

from ..errors import ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.tensor import Tensor, empty, zeros
from ._util import like, per_thread, rows_cols, want
from .reduce import colsum

__all__ = ["add", "mul", "scale", "cast", "bias_add", "bias_add_backward", "copy2d", "row_slice", "row_slice_backward",
           "col_slice", "col_slice_backward"]


def _binary(op: str, a: Tensor, b: Tensor, out: Tensor | None) -> Tensor:
    if a.shape != b.shape:
        raise ShapeError(f"{op}: shapes {a.shape} and {b.shape} differ")
    if a.dtype != b.dtype:
        raise UnsupportedError(f"{op}: dtypes {a.dtype} and {b.dtype} differ")
    out = empty(a.shape, a.dtype, a.device) if out is None else out
    if out.shape != a.shape or out.dtype != a.dtype:
        raise ShapeError(f"{op}: out is {out.shape}/{out.dtype}, want {a.shape}/{a.dtype}")
    v = kernels.elementwise_variant(op, a.dtype, a.numel, a.device)
    kernels.dispatch(v, [a, b, out], {"n": a.numel}, kernels.elementwise_groups(v, a.numel))
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
    v = kernels.elementwise_variant("scale", x.dtype, x.numel, x.device)
    kernels.dispatch(v, [x, out], {"n": x.numel, "alpha": alpha}, kernels.elementwise_groups(v, x.numel))
    return out


def cast(x: Tensor, dtype: str) -> Tensor:
    """x converted to dtype ("f32" or "f16"; x itself when it already has it): f32 -> f16 rounds to the
    nearest f16, ties to even (|x| >= 65520 gives inf, as numpy's astype(float16)); f16 -> f32 is exact."""
    if x.dtype == dtype:
        return x
    if {x.dtype, dtype} != {"f32", "f16"}:
        raise UnsupportedError(f"cast: {x.dtype} -> {dtype} (only f32 <-> f16)")
    y = empty(x.shape, dtype, x.device)
    per_thread("cast_" + dtype, "f16", [x, y], {"n": x.numel}, x.numel)
    return y


def bias_add(x: Tensor, b: Tensor) -> Tensor:
    """y = x + b broadcast over rows (b f32 [cols])."""
    rows, cols = rows_cols(x)
    want(b, "b", shape=(cols,), dtype="f32")
    y = like(x)
    per_thread("bias_add", x.dtype, [x, b, y], dict(rows=rows, cols=cols), rows * cols)
    return y


def bias_add_backward(dy: Tensor) -> Tensor:
    """db = column sum of dy (f32)."""
    return colsum(dy)


def copy2d(x: Tensor, y: Tensor, rows: int, cols: int, xoff: int, xstride: int, yoff: int, ystride: int) -> None:
    """y[yoff + r*ystride + c] = x[xoff + r*xstride + c] for r < rows, c < cols."""
    per_thread("copy2d", x.dtype, [x, y], dict(rows=rows, cols=cols, xoff=xoff, xstride=xstride, yoff=yoff,
                                               ystride=ystride), rows * cols)


def row_slice(x: Tensor, row: int) -> Tensor:
    """Row `row` of a 2-D tensor."""
    want(x, "x", ndim=2)
    R, C = x.shape
    if not 0 <= row < R:
        raise ShapeError(f"row {row} outside 0..{R - 1}")
    y = empty((C,), x.dtype, x.device)
    copy2d(x, y, 1, C, row * C, C, 0, C)
    return y


def row_slice_backward(dy: Tensor, rows: int, row: int) -> Tensor:
    """Zeros [rows, C] with dy in row `row`."""
    (C,) = dy.shape
    if not 0 <= row < rows:
        raise ShapeError(f"row {row} outside 0..{rows - 1}")
    dx = zeros((rows, C), dy.dtype, dy.device)
    copy2d(dy, dx, 1, C, 0, C, row * C, C)
    return dx


# -- per-token column slices (the Mamba in-projection splits) ------------------------------------------
def col_slice(x: Tensor, start: int, width: int) -> Tensor:
    """Columns [start, start + width) of each row of a 2-D tensor, as a new [rows, width] tensor."""
    want(x, "x", ndim=2)
    R, C = x.shape
    if width < 1 or start < 0 or start + width > C:
        raise ShapeError(f"columns {start}..{start + width - 1} outside 0..{C - 1}")
    y = empty((R, width), x.dtype, x.device)
    copy2d(x, y, R, width, start, C, 0, width)
    return y


def col_slice_backward(dy: Tensor, cols: int, start: int) -> Tensor:
    """Zeros [rows, cols] with dy in columns [start, start + width)."""
    R, W = dy.shape
    if start < 0 or start + W > cols:
        raise ShapeError(f"columns {start}..{start + W - 1} outside 0..{cols - 1}")
    dx = zeros((R, cols), dy.dtype, dy.device)
    copy2d(dy, dx, R, W, 0, W, start, cols)
    return dx
