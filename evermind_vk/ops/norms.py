"""RMSNorm and LayerNorm over the last dimension, forward and backward. Statistics in f32; norm
weights and biases are f32, and their gradients come back in f32."""
from __future__ import annotations

from ..errors import BindingLimitError
from ..runtime import kernels
from ..runtime.select import rows as select_rows
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, like, row_knobs, rows_cols, run, run_rows, want
from .elementwise import add
from .reduce import colsum

__all__ = ["rms_norm", "add_rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward"]


def rms_norm(x: Tensor, w: Tensor, eps: float = 1e-6):
    """y = x / sqrt(mean(x^2) + eps) * w over the last dimension. Returns (y, rstd) (rstd f32 per row)."""
    want(x, "x", dtype=FLOATS)
    rows, cols = rows_cols(x)
    want(w, "w", shape=(cols,), dtype="f32")
    y, rstd = like(x), empty((rows,), "f32", x.device)
    run_rows("rms_norm", x.dtype, [x, w, y, rstd], dict(rows=rows, cols=cols, eps=eps), rows, cols)
    return y, rstd


def add_rms_norm(x: Tensor, a: Tensor, w: Tensor, eps: float = 1e-6):
    """h = x + a, then rms_norm(h, w, eps), in one pass over the rows: (h, y, rstd), the same bits as add
    followed by rms_norm (the sum is rounded to x's dtype before the norm reads it). Where no add_rms_norm
    kernel fits the device's binding limit (it binds six buffers), the two kernels run."""
    want(x, "x", dtype=FLOATS)
    want(a, "a", shape=x.shape, dtype=x.dtype)
    rows, cols = rows_cols(x)
    want(w, "w", shape=(cols,), dtype="f32")
    try:
        kernels.usable("add_rms_norm", x.dtype, x.device)
    except BindingLimitError:
        h = add(x, a)
        return (h, *rms_norm(h, w, eps))
    h, y, rstd = like(x), like(x), empty((rows,), "f32", x.device)
    run_rows("add_rms_norm", x.dtype, [x, a, w, h, y, rstd], dict(rows=rows, cols=cols, eps=eps), rows, cols)
    return h, y, rstd


def rms_norm_backward(x: Tensor, w: Tensor, dy: Tensor, rstd: Tensor, dres: Tensor | None = None):
    """(dx, dw) of rms_norm. dres: a gradient x has from elsewhere (a residual stream's), added into dx by
    the same kernel (flag res; without a res variant that fits the device's binding limit, by an add).
    Each workgroup runs runtime.select.rows.norm_block_rows consecutive rows (one on GPUs) and writes one row
    of dw's partial sums, which a column sum adds."""
    rows, cols = rows_cols(x)
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    if dres is not None:
        want(dres, "dres", shape=x.shape, dtype=x.dtype)
    dev = x.device
    p = select_rows.plan(select_rows.Launch("rms_norm_backward", x.dtype, rows, cols, dres is not None), dev,
                         row_knobs())
    fused, rpw = p.fused_residual, p.rows_per_group
    blocks = -(-rows // rpw) if rows else 0
    dx, part = like(x), empty((blocks, cols), "f32", dev)
    kernels.dispatch(p.variant, [x, w, dy, rstd, *([dres] if fused else []), dx, part],
                     dict(rows=rows, cols=cols, rpw=rpw), p.groups)
    if dres is not None and not fused:
        dx = add(dx, dres)
    return dx, colsum(part)


def layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last dimension. Returns (y, mean, rstd)."""
    want(x, "x", dtype=FLOATS)
    rows, cols = rows_cols(x)
    want(w, "w", shape=(cols,), dtype="f32")
    want(b, "b", shape=(cols,), dtype="f32")
    y, mean, rstd = like(x), empty((rows,), "f32", x.device), empty((rows,), "f32", x.device)
    run("layer_norm", x.dtype, [x, w, b, y, mean, rstd], dict(rows=rows, cols=cols, eps=eps), rows)
    return y, mean, rstd


def layer_norm_backward(x: Tensor, w: Tensor, dy: Tensor, mean: Tensor, rstd: Tensor):
    """(dx, dw, db) of layer_norm."""
    rows, cols = rows_cols(x)
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    dx, part = like(x), empty(x.shape, "f32", x.device)
    run("layer_norm_backward", x.dtype, [x, w, dy, mean, rstd, dx, part], dict(rows=rows, cols=cols), rows)
    return dx, colsum(part), colsum(dy)
