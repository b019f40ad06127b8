"""RMSNorm and LayerNorm over the last dimension, forward and backward. Statistics in f32; norm
weights and biases are f32, and their gradients come back in f32."""
from __future__ import annotations

from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, like, rows_cols, run, run_rows, want
from .reduce import colsum

__all__ = ["rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward"]


def rms_norm(x: Tensor, w: Tensor, eps: float = 1e-6):
    """y = x / sqrt(mean(x^2) + eps) * w over the last dimension. Returns (y, rstd) (rstd f32 per row)."""
    want(x, "x", dtype=FLOATS)
    rows, cols = rows_cols(x)
    want(w, "w", shape=(cols,), dtype="f32")
    y, rstd = like(x), empty((rows,), "f32", x.device)
    run_rows("rms_norm", x.dtype, [x, w, y, rstd], dict(rows=rows, cols=cols, eps=eps), rows, cols)
    return y, rstd


def rms_norm_backward(x: Tensor, w: Tensor, dy: Tensor, rstd: Tensor):
    """(dx, dw) of rms_norm."""
    rows, cols = rows_cols(x)
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    dx, part = like(x), empty(x.shape, "f32", x.device)
    run_rows("rms_norm_backward", x.dtype, [x, w, dy, rstd, dx, part], dict(rows=rows, cols=cols), rows, cols)
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
