"""Differentiable ops: each runs the forward kernel(s) and notes, on the active Tape, one small
rule that maps the output's gradient to its inputs' gradients (None: no gradient)."""
from __future__ import annotations

from .. import ops
from ..runtime.tensor import Tensor
from .tape import track


def add(a: Tensor, b: Tensor) -> Tensor:
    return track("add", (a, b), ops.add(a, b), lambda g: (g, g))


def mul(a: Tensor, b: Tensor) -> Tensor:
    return track("mul", (a, b), ops.mul(a, b), lambda g: (ops.mul(g, b), ops.mul(g, a)))


def scale(x: Tensor, alpha: float) -> Tensor:
    return track("scale", (x,), ops.scale(x, alpha), lambda g: (ops.scale(g, alpha),))


def reshape(x: Tensor, *shape) -> Tensor:
    return track("reshape", (x,), x.reshape(*shape), lambda g: (g.reshape(x.shape),))


def matmul(x: Tensor, w: Tensor, transpose_b: bool = False) -> Tensor:
    return track("matmul", (x, w), ops.matmul(x, w, transpose_b),
                  lambda g: ops.matmul_backward(x, w, g, transpose_b))


def bias_add(x: Tensor, b: Tensor) -> Tensor:
    return track("bias_add", (x, b), ops.bias_add(x, b), lambda g: (g, ops.colsum(g)))


def rms_norm(x: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
    y, rstd = ops.rms_norm(x, w, eps)
    return track("rms_norm", (x, w), y, lambda g: ops.rms_norm_backward(x, w, g, rstd))


def layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
    y, mean, rstd = ops.layer_norm(x, w, b, eps)
    return track("layer_norm", (x, w, b), y, lambda g: ops.layer_norm_backward(x, w, g, mean, rstd))


def softmax(x: Tensor, causal: bool = False) -> Tensor:
    y = ops.softmax(x, causal=causal)
    return track("softmax", (x,), y, lambda g: (ops.softmax_backward(y, g),))


def silu(x: Tensor) -> Tensor:
    return track("silu", (x,), ops.silu(x), lambda g: (ops.silu_backward(x, g),))


def gelu(x: Tensor) -> Tensor:
    return track("gelu", (x,), ops.gelu(x), lambda g: (ops.gelu_backward(x, g),))


def glu(x: Tensor, act: str = "silu", limit: float = 0.0) -> Tensor:
    return track("glu", (x,), ops.glu(x, act, limit), lambda g: (ops.glu_backward(x, g, act, limit),))


def embedding(ids: Tensor, table: Tensor, transpose: bool = False, index_offset: int = 0,
              tokens: int | None = None) -> Tensor:
    y = ops.embedding(ids, table, transpose, index_offset, tokens)
    vocab = table.shape[1] if transpose else table.shape[0]
    return track("embedding", (ids, table), y,
                  lambda g: (None, ops.embedding_backward(ids, g, vocab, transpose, index_offset)))


def rope(x: Tensor, start_pos: int = 0, theta: float = 10000.0, seq_len: int | None = None) -> Tensor:
    return track("rope", (x,), ops.rope(x, start_pos, theta, seq_len),
                  lambda g: (ops.rope_backward(g, start_pos, theta, seq_len),))


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: float | None = None,
              batch: int = 1, recompute: bool = False) -> Tensor:
    out, p = ops.attention(q, k, v, causal, scale, save_probs=not recompute, batch=batch)
    return track("attention", (q, k, v), out,
                  lambda g: ops.attention_backward(q, k, v, g, p, causal, scale, batch, out=out))


def row_slice(x: Tensor, row: int) -> Tensor:
    return track("row_slice", (x,), ops.row_slice(x, row), lambda g: (ops.row_slice_backward(g, x.shape[0], row),))


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy over targets < vocab (a 1-element f32 tensor)."""
    loss, count = ops.cross_entropy(logits, targets)
    return track("cross_entropy", (logits, targets), loss,
                  lambda g: (ops.cross_entropy_backward(logits, targets, count, g), None))
