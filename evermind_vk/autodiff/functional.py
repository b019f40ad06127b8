"""Differentiable ops: each runs the forward kernel(s) and notes, on the active Tape, one small
rule that maps the output's gradient to its inputs' gradients (None: no gradient)."""
from __future__ import annotations

from .. import ops
from ..errors import UnsupportedError
from ..runtime.tensor import Tensor
from .tape import Tape, track


def add(a: Tensor, b: Tensor) -> Tensor:
    """a + b (same shape and dtype), on the tape: both inputs get the output's gradient."""
    return track("add", (a, b), ops.add(a, b), lambda g: (g, g))


def mul(a: Tensor, b: Tensor) -> Tensor:
    """a * b elementwise (same shape and dtype), on the tape."""
    return track("mul", (a, b), ops.mul(a, b), lambda g: (ops.mul(g, b), ops.mul(g, a)))


def scale(x: Tensor, alpha: float) -> Tensor:
    """alpha * x, on the tape."""
    return track("scale", (x,), ops.scale(x, alpha), lambda g: (ops.scale(g, alpha),))


def cast(x: Tensor, dtype: str) -> Tensor:
    """x converted to dtype (x itself, untracked, when it has it already); the gradient goes back in x's dtype."""
    if x.dtype == dtype:
        return x
    src = x.dtype  # the rule keeps the dtype, not x (x's buffer may then be reused)
    return track("cast", (x,), ops.cast(x, dtype), lambda g: (ops.cast(g, src),))


def reshape(x: Tensor, *shape) -> Tensor:
    """x under another shape (no copy), on the tape (the gradient is reshaped back)."""
    xs = x.shape
    return track("reshape", (x,), x.reshape(*shape), lambda g: (g.reshape(xs),))


def transpose(x: Tensor) -> Tensor:
    """The transpose of a 2-D tensor (x.T), a new tensor, on the tape (the gradient is transposed back)."""
    return track("transpose", (x,), ops.transpose(x), lambda g: (ops.transpose(g),))


def sum_dim(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """x.sum(dim, keepdim) (ops.sum_dim), on the tape: the gradient is the output's, repeated along the
    summed dimension(s)."""
    xs = x.shape
    kept = (1,) * x.ndim if dim is None else tuple(1 if d == ops.normalize_dim(dim, x.ndim) else n
                                                   for d, n in enumerate(xs))
    return track("sum", (x,), ops.sum_dim(x, dim, keepdim), lambda g: (ops.expand(g.reshape(kept), xs),))


def index(x: Tensor, key) -> Tensor:
    """x[key] for basic indexing (ops.index), on the tape: the gradient is zeros with the output's
    gradient at the indexed positions."""
    xs = x.shape
    return track("index", (x,), ops.index(x, key), lambda g: (ops.index_backward(g, xs, key),))


def _tracked_matmul(x: Tensor, w: Tensor, wk: Tensor, transpose_b: bool, db_dtype: str | None = None) -> Tensor:
    """x.op(wk) on the tape as the product of (x, w): wk is what the kernels read (w, or its working copy),
    dW comes back as db_dtype (default wk's). Fused: x's gradient from elsewhere (q, k and v projections of
    one input) takes dX in place (beta 1)."""
    return track("matmul", (x, w), ops.matmul(x, wk, transpose_b),
                 lambda g: ops.matmul_backward(x, wk, g, transpose_b, db_dtype=db_dtype),
                 fuse=lambda g, acc: ops.matmul_backward(x, wk, g, transpose_b, into_a=acc, db_dtype=db_dtype),
                 fuse_in_place=True, fresh=True)


def matmul(x: Tensor, w: Tensor, transpose_b: bool = False) -> Tensor:
    """x @ w (x @ w.T with transpose_b), on the tape with the fused matmul backward."""
    return _tracked_matmul(x, w, w, transpose_b)


def matmul_master(x: Tensor, w: Tensor, transpose_b: bool = False) -> Tensor:
    """x.op(w) for an f32 master weight w under f16 activations x (mixed precision): the product runs on an
    f16 working copy of w (ops.cast, made in the step, so a replayed step reads the last update's weights),
    and w's gradient comes back in f32 straight from the product (f32 accumulation, the c32 variants),
    neither rounded to f16 nor cast back: one dispatch less per weight than matmul(x, cast(w, "f16")).
    With x and w of one dtype it is matmul(x, w)."""
    if x.dtype == w.dtype:
        return matmul(x, w, transpose_b)
    if (x.dtype, w.dtype) != ("f16", "f32"):
        raise UnsupportedError(f"matmul_master: {x.dtype} activations, {w.dtype} weight (f16 and f32, or one dtype)")
    return _tracked_matmul(x, w, ops.cast(w, x.dtype), transpose_b, db_dtype="f32")


def bias_add(x: Tensor, b: Tensor) -> Tensor:
    """x + b broadcast over rows (b f32 [cols]), on the tape (b's gradient: the column sums)."""
    return track("bias_add", (x, b), ops.bias_add(x, b), lambda g: (g, ops.colsum(g)))


def rms_norm(x: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
    """RMS normalization over the last dimension with gain w (ops.rms_norm), on the tape."""
    y, rstd = ops.rms_norm(x, w, eps)
    return track("rms_norm", (x, w), y, lambda g: ops.rms_norm_backward(x, w, g, rstd),
                 fuse=lambda g, acc: ops.rms_norm_backward(x, w, g, rstd, dres=acc))


def add_rms_norm(x: Tensor, a: Tensor, w: Tensor, eps: float = 1e-6) -> tuple:
    """(h, y): h = add(x, a) and y = rms_norm(h, w, eps), one kernel for both (ops.add_rms_norm), on the
    tape as the two ops they are."""
    h, y, rstd = ops.add_rms_norm(x, a, w, eps)
    track("add", (x, a), h, lambda g: (g, g))
    return h, track("rms_norm", (h, w), y, lambda g: ops.rms_norm_backward(h, w, g, rstd),
                    fuse=lambda g, acc: ops.rms_norm_backward(h, w, g, rstd, dres=acc))


def layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
    """Layer normalization over the last dimension with weight w and bias b (ops.layer_norm), on the tape."""
    y, mean, rstd = ops.layer_norm(x, w, b, eps)
    return track("layer_norm", (x, w, b), y, lambda g: ops.layer_norm_backward(x, w, g, mean, rstd))


def softmax(x: Tensor, causal: bool = False) -> Tensor:
    """Softmax over the last dimension (causal: masked above the diagonal), on the tape."""
    y = ops.softmax(x, causal=causal)
    return track("softmax", (x,), y, lambda g: (ops.softmax_backward(y, g, causal=causal),))


def silu(x: Tensor) -> Tensor:
    """SiLU (x * sigmoid(x)) of x, elementwise, on the tape."""
    return track("silu", (x,), ops.silu(x), lambda g: (ops.silu_backward(x, g),))


def gelu(x: Tensor) -> Tensor:
    """GELU of x, elementwise, on the tape."""
    return track("gelu", (x,), ops.gelu(x), lambda g: (ops.gelu_backward(x, g),))


def glu(x: Tensor, act: str = "silu", limit: float = 0.0) -> Tensor:
    """Gated linear unit of x [rows, 2 h] (act(gate) * up, ops.glu), on the tape."""
    return track("glu", (x,), ops.glu(x, act, limit), lambda g: (ops.glu_backward(x, g, act, limit),))


def embedding(ids: Tensor, table: Tensor, transpose: bool = False, index_offset: int = 0,
              tokens: int | None = None) -> Tensor:
    """Rows of table for ids (ops.embedding), on the tape: table gets the scattered gradient, ids none."""
    y = ops.embedding(ids, table, transpose, index_offset, tokens)
    vocab = table.shape[1] if transpose else table.shape[0]
    return track("embedding", (ids, table), y,
                  lambda g: (None, ops.embedding_backward(ids, g, vocab, transpose, index_offset)))


def rope(x: Tensor, start_pos: int = 0, theta: float = 10000.0, seq_len: int | None = None) -> Tensor:
    """Rotary position embedding of x [T, H, hd] from position start_pos (ops.rope), on the tape."""
    return track("rope", (x,), ops.rope(x, start_pos, theta, seq_len),
                  lambda g: (ops.rope_backward(g, start_pos, theta, seq_len),))


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: float | None = None,
              batch: int = 1, recompute: bool | None = None) -> Tensor:
    """Scaled dot-product attention of q [T, H, hd] with k, v [T, KVH, hd] (ops.attention), on the tape.
    recompute: True keeps no probabilities (the backward recomputes them), False keeps them, None: the
    attention plan's choice (select.attention.keeps_probs)."""
    out, p = ops.attention(q, k, v, causal, scale, save_probs=None if recompute is None else not recompute, batch=batch)
    return track("attention", (q, k, v), out,
                  lambda g: ops.attention_backward(q, k, v, g, p, causal, scale, batch, out=out))


def row_slice(x: Tensor, row: int) -> Tensor:
    """Row `row` of a 2-D tensor, on the tape (the gradient lands in that row of zeros)."""
    rows = x.shape[0]
    return track("row_slice", (x,), ops.row_slice(x, row), lambda g: (ops.row_slice_backward(g, rows, row),))


def cross_entropy(logits: Tensor, targets: Tensor, overwrite_logits: bool = False) -> Tensor:
    """Mean cross-entropy over targets < vocab (a 1-element f32 tensor). overwrite_logits: the backward writes
    the logits' gradient over the logits (their values are gone after backward()), so no second buffer of
    the logits' size is allocated: for a loss over logits nothing else reads (the models' loss(): 1.5 GiB
    less at 8 x 1,024 tokens of a 49,152-word vocabulary in f32)."""
    loss, count = ops.cross_entropy(logits, targets)
    out = logits if overwrite_logits else None
    return track("cross_entropy", (logits, targets), loss,
                  lambda g: (ops.cross_entropy_backward(logits, targets, count, g, out=out), None))


# -- image ops (NCHW) --------------------------------------------------------------------------
def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1) -> Tensor:
    """2-D convolution of x [N, C, H, W] by weight [OC, C, KH, KW] (ops.conv2d), on the tape."""
    y = ops.conv2d(x, weight, bias, stride, padding, dilation)
    return track("conv2d", (x, weight) if bias is None else (x, weight, bias), y,
                  lambda g: ops.conv2d_backward(x, weight, g, stride, padding, dilation, need_bias=bias is not None)
                  [:2 if bias is None else 3])


def group_norm(x: Tensor, num_groups: int, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """Group normalization of x [N, C, ...] with per-channel weight and bias (ops.group_norm), on the tape."""
    y, stats = ops.group_norm(x, num_groups, weight, bias, eps)
    return track("group_norm", (x, weight, bias), y, lambda g: ops.group_norm_backward(x, num_groups, weight, g, stats))


def upsample2d(x: Tensor, scale_factor=2) -> Tensor:
    """Nearest-neighbour upsampling of x [N, C, H, W] by scale_factor, on the tape."""
    return track("upsample2d", (x,), ops.upsample2d(x, scale_factor), lambda g: (ops.upsample2d_backward(g, scale_factor),))


def pixel_shuffle(x: Tensor, upscale_factor: int, layout: str = "nchw", grid=None) -> Tensor:
    """Pixel shuffle by upscale_factor (ops.pixel_shuffle), on the tape."""
    xs = x.shape
    return track("pixel_shuffle", (x,), ops.pixel_shuffle(x, upscale_factor, layout, grid),
                  lambda g: (ops.pixel_shuffle_backward(g, xs, upscale_factor, layout, grid),))


def mse_loss(y: Tensor, target: Tensor) -> Tensor:
    """Mean squared error (a 1-element f32 tensor); the target gets no gradient."""
    return track("mse_loss", (y, target), ops.mse_loss(y, target), lambda g: (ops.mse_loss_backward(y, target, g), None))
# -- causal depthwise conv1d (EvermindLM, Mamba) ------------------------------------------------------
def conv1d_causal(x: Tensor, kernel: Tensor, bias: Tensor | None = None, seq_len: int | None = None,
                  taps: str = "lag") -> Tensor:
    """Causal depthwise conv1d of x [T, C] (ops.conv1d_causal), on the tape; gradients for x, kernel and
    bias."""
    y = ops.conv1d_causal(x, kernel, bias, seq_len, taps)

    def rule(g):
        dx, dk, db = ops.conv1d_causal_backward(x, kernel, g, seq_len, taps, bias=bias is not None)
        return (dx, dk) if bias is None else (dx, dk, db)
    return track("conv1d_causal", (x, kernel) if bias is None else (x, kernel, bias), y, rule)


# -- shared-expert mixture of experts (builderforce's SharedExpertMoE) -------------------------------
def moe_ffn(x: Tensor, wr: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, k: int, aux_scale: float = 0.0):
    """(out, context, aux): the MoE of evermind_vk.ops.moe on x [N, d]. With aux_scale != 0 the load-balance
    loss of these tokens is returned (aux, 1 element) and its gradient, scaled by aux_scale, reaches the
    router weights only (builderforce's auxGradStep: the dispatch fractions are constants, x gets none)."""
    out, ctx = ops.moe_ffn(x, wr, w1, b1, w2, b2, k)
    f = aux = None
    if aux_scale != 0.0:
        f, aux = ops.moe_load_stats(ctx)

    def rule(g):
        return ops.moe_ffn_backward(ctx, wr, w1, w2, b2, g, aux_scale, f)
    return track("moe_ffn", (x, wr, w1, b1, w2, b2), out, rule), ctx, aux


# -- activation checkpointing ----------------------------------------------------------------------------
def checkpoint(fn, inputs: tuple) -> Tensor:
    """out = fn(*inputs) without keeping fn's intermediates: the forward runs under a throwaway tape, and
    the backward runs fn again under a fresh tape (same kernels, same order: identical gradients). Every
    tensor fn reads that needs a gradient (parameters included) must be among `inputs`."""
    with Tape():
        out = fn(*inputs)

    def rule(g):
        with Tape() as tape:
            again = fn(*inputs)
        grads = tape.backward({again: g})
        return tuple(grads.get(x) if x.dtype in ("f32", "f16") else None for x in inputs)
    return track("checkpoint", tuple(inputs), out, rule)
# -- Mamba -----------------------------------------------------------------------------------------------
def selective_scan(u: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, z: Tensor | None = None,
                   batch: int = 1, chunk: int = ops.SCAN_CHUNK, groups: int = 1, discretization: str = "zoh") -> Tensor:
    """y = (C·h + D u) ⊙ silu(z) of the selective scan from a zero state (ops.selective_scan; discretization:
    its input term, "zoh", "euler" or "none")."""
    kw = dict(batch=batch, chunk=chunk, groups=groups, discretization=discretization)
    y, _, H0 = ops.selective_scan(u, dt, A_log, B, C, D, z, **kw)

    def rule(g):
        du, ddt, dA, dB, dC, dD, dz, _ = ops.selective_scan_backward(u, dt, A_log, B, C, D, z, g, H0, **kw)
        return (du, ddt, dA, dB, dC, dD, dz)
    return track("selective_scan", (u, dt, A_log, B, C, D, z), y, rule)


def col_slice(x: Tensor, start: int, width: int) -> Tensor:
    """Columns [start, start + width) of every row of a 2-D x (a per-token split of a projection)."""
    cols = x.shape[1]
    return track("col_slice", (x,), ops.col_slice(x, start, width),
                  lambda g: (ops.col_slice_backward(g, cols, start),))


def _from_zero_state(name: str, forward, backward, inputs: tuple, kw: dict) -> Tensor:
    """A chunked scan op (y, h_last, H0 = forward(*inputs)) from a zero state, its backward given H0: one
    gradient per input (the initial state's gradient, if returned, dropped)."""
    y, _, H0 = forward(*inputs, **kw)
    return track(name, inputs, y, lambda g: backward(*inputs, g, H0, **kw)[:len(inputs)])


def ssd(x: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, batch: int = 1,
        chunk: int = ops.SSD_CHUNK, groups: int = 1) -> Tensor:
    """Mamba-2 SSD by the chunked quadratic form, from a zero state (ops.ssd)."""
    return _from_zero_state("ssd", ops.ssd, ops.ssd_backward, (x, dt, A_log, B, C, D),
                            dict(batch=batch, chunk=chunk, groups=groups))


def complex_ssd(x: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, batch: int = 1,
                chunk: int = ops.SSD_CHUNK, groups: int = 1) -> Tensor:
    """builderforce's Mamba-3 scan by the chunked quadratic form, from a zero state (ops.complex_ssd)."""
    return _from_zero_state("complex_ssd", ops.complex_ssd, ops.complex_ssd_backward, (x, dt, A_log, B, C, D),
                            dict(batch=batch, chunk=chunk, groups=groups))


def complex_scan(u: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, batch: int = 1,
                 chunk: int = ops.SCAN_CHUNK, groups: int = 1) -> Tensor:
    """builderforce's Mamba-3 scan from a zero state (ops.complex_scan)."""
    return _from_zero_state("complex_scan", ops.complex_scan, ops.complex_scan_backward, (u, dt, A_log, B, C, D),
                            dict(batch=batch, chunk=chunk, groups=groups))


def qlinear(x: Tensor, w) -> Tensor:
    """x W^T for a frozen quantized weight (ops.QuantWeight): the gradient flows to x only."""
    return track("qlinear", (x,), ops.qmatmul(x, w), lambda g: (ops.qmatmul_backward(g, w),))


def qembedding(ids: Tensor, w) -> Tensor:
    """Rows of a frozen quantized table (no gradient: the ids are integers, the table is frozen)."""
    return ops.qembedding(ids, w)
