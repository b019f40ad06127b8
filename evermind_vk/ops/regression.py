"""Regression loss: mean squared error, forward (a deterministic two-stage sum, f32 result) and
backward (the loss gradient read from device memory, so a recorded step replays unchanged)."""
from __future__ import annotations

from ..errors import ShapeError
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, like, per_thread, want
from .elementwise import scale
from .reduce import reduce_sum

__all__ = ["mse_loss", "mse_diff", "mse_loss_backward"]


def mse_diff(y: Tensor, target: Tensor) -> Tensor:
    """y - target, elementwise (f32 arithmetic)."""
    d = like(y)
    per_thread("mse_diff", y.dtype, [y, target, d], {"n": y.numel}, y.numel)
    return d


def mse_loss(y: Tensor, target: Tensor) -> Tensor:
    """torch.nn.functional.mse_loss (mean): sum((y - target)^2) / numel as a 1-element f32 tensor."""
    want(y, "y", dtype=FLOATS)
    want(target, "target", shape=y.shape, dtype=y.dtype)
    if y.numel == 0:
        raise ShapeError("mse_loss of an empty tensor")
    return scale(reduce_sum(mse_diff(y, target), square=True), 1.0 / y.numel)


def mse_loss_backward(y: Tensor, target: Tensor, g: Tensor) -> Tensor:
    """dy = 2 g[0] (y - target) / numel, g the loss gradient (f32 [1])."""
    want(g, "g", shape=(1,), dtype="f32")
    dy = empty(y.shape, y.dtype, y.device)
    per_thread("mse_loss_backward", y.dtype, [y, target, g, dy], {"n": y.numel}, y.numel)
    return dy
