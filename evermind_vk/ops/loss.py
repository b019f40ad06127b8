"""Cross-entropy over logits rows, fused with the softmax; the mean is computed on the device."""
from __future__ import annotations

from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, like, run_rows, want
from .reduce import final_sum, n_partials, partial_sums

__all__ = ["cross_entropy", "cross_entropy_backward"]


def cross_entropy(logits: Tensor, targets: Tensor):
    """Mean over tokens of -log softmax(logits)[target], fused; targets >= vocab are ignored (neither
    in the sum nor in the count). Returns (loss [1] f32, count [1] f32)."""
    want(logits, "logits", ndim=2, dtype=FLOATS)
    rows, cols = logits.shape
    want(targets, "targets", shape=(rows,), dtype="u32")
    per_row, valid = empty((rows,), "f32", logits.device), empty((rows,), "f32", logits.device)
    run_rows("cross_entropy", logits.dtype, [logits, targets, per_row, valid], dict(rows=rows, cols=cols), rows, cols)
    count, loss = empty((1,), "f32", logits.device), empty((1,), "f32", logits.device)
    part = empty((n_partials(rows),), "f32", logits.device)
    final_sum(part, partial_sums(valid, part, 0, False), count)
    final_sum(part, partial_sums(per_row, part, 0, False), loss, divide_by=count)
    return loss, count


def cross_entropy_backward(logits: Tensor, targets: Tensor, count: Tensor, dloss: Tensor,
                           out: Tensor | None = None) -> Tensor:
    """dlogits = (softmax - onehot) * dloss / count, zero rows for ignored targets; into `out` when given, which
    may be logits itself (in place: a workgroup finishes its row's max and sum before it writes, and each
    invocation reads an element before it writes that element's gradient)."""
    rows, cols = logits.shape
    want(dloss, "dloss", shape=(1,), dtype="f32")
    if out is not None:
        want(out, "out", shape=logits.shape, dtype=logits.dtype)
    dx = like(logits) if out is None else out
    run_rows("cross_entropy_backward", logits.dtype, [logits, targets, count, dloss, dx], dict(rows=rows, cols=cols),
             rows, cols)
    return dx
