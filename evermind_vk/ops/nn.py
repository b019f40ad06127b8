"""The op set of a small language model, forward and backward, each one kernel dispatch (or a few).

Norms and losses accumulate in f32; f16 tensors are f16 storage with f32 arithmetic. Norm weights and
biases are f32; weight gradients come back in f32.
"""
from __future__ import annotations

import math

from ..errors import ShapeError, UnsupportedError
from ..tensor import Tensor, empty, zeros
from ._util import like, per_thread, rows_cols, run, want

FLOATS = ("f32", "f16")


# -- softmax --------------------------------------------------------------------------------------
def softmax(x: Tensor, causal: bool = False, seq: int | None = None) -> Tensor:
    """Softmax over the last dimension. With causal, row r is query position r % seq (seq defaults
    to the number of columns) and sees keys j <= position + (cols - seq); masked entries are 0."""
    want(x, "x", dtype=FLOATS)
    rows, cols = rows_cols(x)
    seq = cols if seq is None else int(seq)
    if causal and not 1 <= seq <= cols:
        raise ShapeError(f"softmax: causal seq {seq} must be in 1..{cols}")
    y = like(x)
    run("softmax", x.dtype, [x, y], dict(rows=rows, cols=cols, causal=int(causal), seq=seq), rows)
    return y


def softmax_backward(y: Tensor, dy: Tensor) -> Tensor:
    """dx = y * (dy - sum(y * dy)) from the softmax output y."""
    want(dy, "dy", shape=y.shape, dtype=y.dtype)
    rows, cols = rows_cols(y)
    dx = like(y)
    run("softmax_bwd", y.dtype, [y, dy, dx], dict(rows=rows, cols=cols), rows)
    return dx


# -- norms ----------------------------------------------------------------------------------------
def colsum(x: Tensor) -> Tensor:
    """Sum over all rows of x viewed as [rows, last dim], in f32 (bias and norm weight gradients)."""
    rows, cols = rows_cols(x)
    y = empty((cols,), "f32", x.device)
    per_thread("colsum", x.dtype, [x, y], dict(rows=rows, cols=cols), cols)
    return y


def rms_norm(x: Tensor, w: Tensor, eps: float = 1e-6):
    """y = x / sqrt(mean(x^2) + eps) * w over the last dimension. Returns (y, rstd) (rstd f32 per row)."""
    want(x, "x", dtype=FLOATS)
    rows, cols = rows_cols(x)
    want(w, "w", shape=(cols,), dtype="f32")
    y, rstd = like(x), empty((rows,), "f32", x.device)
    run("rmsnorm", x.dtype, [x, w, y, rstd], dict(rows=rows, cols=cols, eps=eps), rows)
    return y, rstd


def rms_norm_backward(x: Tensor, w: Tensor, dy: Tensor, rstd: Tensor):
    """(dx, dw) of rms_norm."""
    rows, cols = rows_cols(x)
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    dx, part = like(x), empty(x.shape, "f32", x.device)
    run("rmsnorm_bwd", x.dtype, [x, w, dy, rstd, dx, part], dict(rows=rows, cols=cols), rows)
    return dx, colsum(part)


def layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last dimension. Returns (y, mean, rstd)."""
    want(x, "x", dtype=FLOATS)
    rows, cols = rows_cols(x)
    want(w, "w", shape=(cols,), dtype="f32")
    want(b, "b", shape=(cols,), dtype="f32")
    y, mean, rstd = like(x), empty((rows,), "f32", x.device), empty((rows,), "f32", x.device)
    run("layernorm", x.dtype, [x, w, b, y, mean, rstd], dict(rows=rows, cols=cols, eps=eps), rows)
    return y, mean, rstd


def layer_norm_backward(x: Tensor, w: Tensor, dy: Tensor, mean: Tensor, rstd: Tensor):
    """(dx, dw, db) of layer_norm."""
    rows, cols = rows_cols(x)
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    dx, part = like(x), empty(x.shape, "f32", x.device)
    run("layernorm_bwd", x.dtype, [x, w, dy, mean, rstd, dx, part], dict(rows=rows, cols=cols), rows)
    return dx, colsum(part), colsum(dy)


# -- reductions -----------------------------------------------------------------------------------
CHUNK = 4096  # elements per stage-1 workgroup


def partial_sums(x: Tensor, part: Tensor, offset: int, square: bool) -> int:
    """Stage 1: write one partial sum per CHUNK elements of x into part[offset:]; returns the count."""
    n = x.numel
    groups = max(1, -(-n // CHUNK))
    if offset + groups > part.numel:
        raise ShapeError(f"partials buffer of {part.numel} too small for {offset + groups}")
    run("reduce", x.dtype, [x, part], dict(n=n, chunk=CHUNK, square=int(square), poff=offset), groups)
    return groups


def final_sum(part: Tensor, n: int, out: Tensor, index: int = 0, accumulate: bool = False,
              divide_by: Tensor | None = None) -> None:
    """Stage 2: out[index] (+)= sum(part[:n]) (then / max(divide_by[0], 1))."""
    run("reduce_final", "f32", [part, out, divide_by if divide_by is not None else out],
        dict(n=n, oidx=index, accumulate=int(accumulate), use_div=int(divide_by is not None)), 1)


def reduce_sum(x: Tensor, square: bool = False) -> Tensor:
    """sum(x) (or sum(x^2)) as a 1-element f32 tensor, deterministic two-stage reduction."""
    want(x, "x", dtype=FLOATS)
    part = empty((max(1, -(-x.numel // CHUNK)),), "f32", x.device)
    n = partial_sums(x, part, 0, square)
    out = empty((1,), "f32", x.device)
    final_sum(part, n, out)
    return out


# -- cross-entropy --------------------------------------------------------------------------------
def cross_entropy(logits: Tensor, targets: Tensor):
    """Mean over tokens of -log softmax(logits)[target], fused; targets >= vocab are ignored (neither
    in the sum nor in the count). Returns (loss [1] f32, count [1] f32)."""
    want(logits, "logits", ndim=2, dtype=FLOATS)
    rows, cols = logits.shape
    want(targets, "targets", shape=(rows,), dtype="u32")
    per_row, valid = empty((rows,), "f32", logits.device), empty((rows,), "f32", logits.device)
    run("xent", logits.dtype, [logits, targets, per_row, valid], dict(rows=rows, cols=cols), rows)
    count, loss = empty((1,), "f32", logits.device), empty((1,), "f32", logits.device)
    part = empty((max(1, -(-rows // CHUNK)),), "f32", logits.device)
    final_sum(part, partial_sums(valid, part, 0, False), count)
    final_sum(part, partial_sums(per_row, part, 0, False), loss, divide_by=count)
    return loss, count


def cross_entropy_backward(logits: Tensor, targets: Tensor, count: Tensor, dloss: Tensor) -> Tensor:
    """dlogits = (softmax - onehot) * dloss / count, zero rows for ignored targets."""
    rows, cols = logits.shape
    want(dloss, "dloss", shape=(1,), dtype="f32")
    dx = like(logits)
    run("xent_bwd", logits.dtype, [logits, targets, count, dloss, dx], dict(rows=rows, cols=cols), rows)
    return dx


# -- embedding ------------------------------------------------------------------------------------
def embedding(ids: Tensor, table: Tensor, transpose: bool = False, index_offset: int = 0,
              tokens: int | None = None) -> Tensor:
    """y[t] = table[ids[t + index_offset]] ([V, D] table, or [D, V] with transpose); ids >= V give 0."""
    want(ids, "ids", ndim=1, dtype="u32")
    want(table, "table", ndim=2, dtype=FLOATS)
    V, D = (table.shape[1], table.shape[0]) if transpose else table.shape
    T = ids.numel - index_offset if tokens is None else int(tokens)
    if index_offset < 0 or T < 0 or T + index_offset > ids.numel:
        raise ShapeError(f"embedding: {T} tokens at offset {index_offset} exceed {ids.numel} ids")
    y = empty((T, D), table.dtype, table.device)
    per_thread("embedding", table.dtype, [ids, table, y],
               dict(T=T, D=D, V=V, transpose=int(transpose), offset=index_offset), T * D)
    return y


def embedding_backward(ids: Tensor, dy: Tensor, vocab: int, transpose: bool = False,
                       index_offset: int = 0) -> Tensor:
    """d table (f32, [V, D] or [D, V]); deterministic (token order) accumulation; ids >= V skipped."""
    T, D = dy.shape
    if T + index_offset > ids.numel:
        raise ShapeError(f"embedding_backward: {T} tokens at offset {index_offset} exceed {ids.numel} ids")
    dt = empty((D, vocab) if transpose else (vocab, D), "f32", dy.device)
    per_thread("embedding_bwd", dy.dtype, [ids, dy, dt],
               dict(T=T, D=D, V=vocab, transpose=int(transpose), offset=index_offset), vocab * D)
    return dt


# -- rope -----------------------------------------------------------------------------------------
def _rope(x: Tensor, start_pos: int, theta: float, sign: float, seq_len: int | None) -> Tensor:
    want(x, "x", ndim=3, dtype=FLOATS)
    S, H, D = x.shape
    if D % 2:
        raise ShapeError(f"rope needs an even head dimension, got {D}")
    period = S if seq_len is None else int(seq_len)
    if period < 1 or S % period:
        raise ShapeError(f"rope: {S} tokens are not whole sequences of {period}")
    y = like(x)
    per_thread("rope", x.dtype, [x, y], dict(S=S, H=H, D=D, start=start_pos, period=period,
                                             log2_theta=math.log2(theta), sign=sign), S * H * (D // 2))
    return y


def rope(x: Tensor, start_pos: int = 0, theta: float = 10000.0, seq_len: int | None = None) -> Tensor:
    """Rotary position embedding, half-split (NeoX), on token-major [S, H, D]; position = start_pos +
    (s % seq_len) (seq_len defaults to S: one sequence; smaller packs S / seq_len sequences)."""
    return _rope(x, start_pos, theta, 1.0, seq_len)


def rope_backward(dy: Tensor, start_pos: int = 0, theta: float = 10000.0, seq_len: int | None = None) -> Tensor:
    """The inverse rotation of dy (rope is orthogonal)."""
    return _rope(dy, start_pos, theta, -1.0, seq_len)


# -- bias, slices, activations --------------------------------------------------------------------
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


def _copy2d(x, y, rows, cols, xoff, xstride, yoff, ystride):
    per_thread("copy2d", x.dtype, [x, y], dict(rows=rows, cols=cols, xoff=xoff, xstride=xstride, yoff=yoff,
                                               ystride=ystride), rows * cols)


def row_slice(x: Tensor, row: int) -> Tensor:
    """Row `row` of a 2-D tensor."""
    want(x, "x", ndim=2)
    R, C = x.shape
    if not 0 <= row < R:
        raise ShapeError(f"row {row} outside 0..{R - 1}")
    y = empty((C,), x.dtype, x.device)
    _copy2d(x, y, 1, C, row * C, C, 0, C)
    return y


def row_slice_backward(dy: Tensor, rows: int, row: int) -> Tensor:
    """Zeros [rows, C] with dy in row `row`."""
    (C,) = dy.shape
    if not 0 <= row < rows:
        raise ShapeError(f"row {row} outside 0..{rows - 1}")
    dx = zeros((rows, C), dy.dtype, dy.device)
    _copy2d(dy, dx, 1, C, 0, C, row * C, C)
    return dx


def _act(op: str, x: Tensor) -> Tensor:
    want(x, "x", dtype=FLOATS)
    y = like(x)
    per_thread(op, x.dtype, [x, y], dict(n=x.numel, alpha=0.0), x.numel)  # these variants have VEC = 1
    return y


def _act_bwd(op: str, x: Tensor, dy: Tensor) -> Tensor:
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    dx = like(x)
    per_thread(op, x.dtype, [x, dy, dx], dict(n=x.numel), x.numel)
    return dx


def silu(x: Tensor) -> Tensor:
    return _act("silu", x)


def gelu(x: Tensor) -> Tensor:
    """tanh-approximated GELU."""
    return _act("gelu", x)


def silu_backward(x: Tensor, dy: Tensor) -> Tensor:
    return _act_bwd("silu_bwd", x, dy)


def gelu_backward(x: Tensor, dy: Tensor) -> Tensor:
    return _act_bwd("gelu_bwd", x, dy)


ACTIVATIONS = ("silu", "gelu")


def _glu_args(x: Tensor, act: str, limit: float):
    if act not in ACTIVATIONS:
        raise UnsupportedError(f"gated activation {act!r}: choose one of {ACTIVATIONS}")
    if not math.isfinite(limit) or limit < 0:
        raise UnsupportedError(f"swiglu_limit must be finite and >= 0, got {limit}")
    want(x, "x", dtype=FLOATS)
    rows, width = rows_cols(x)
    if width % 2:
        raise ShapeError(f"gated activation needs rows [gate | up] of even width, got {width}")
    return rows, width // 2


def glu(x: Tensor, act: str = "silu", limit: float = 0.0) -> Tensor:
    """Row-split gated activation: rows [gate | up] of width 2d -> act(gate) * up of width d, clamped
    to +-limit when limit > 0 (the SwiGLU limit)."""
    rows, d = _glu_args(x, act, limit)
    y = empty(x.shape[:-1] + (d,), x.dtype, x.device)
    per_thread(f"glu_{act}", x.dtype, [x, y], dict(rows=rows, d=d, limit=limit), rows * d)
    return y


def glu_backward(x: Tensor, dy: Tensor, act: str = "silu", limit: float = 0.0) -> Tensor:
    """d[gate | up]; where limit > 0 and |act(gate) * up| > limit (strict) both gradients are 0."""
    rows, d = _glu_args(x, act, limit)
    want(dy, "dy", shape=x.shape[:-1] + (d,), dtype=x.dtype)
    dx = like(x)
    per_thread(f"glu_{act}_bwd", x.dtype, [x, dy, dx], dict(rows=rows, d=d, limit=limit), rows * d)
    return dx
