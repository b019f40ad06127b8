"""Differentiable ops: each runs the forward kernel(s) and notes, on the active Tape, one small
rule that maps the output's gradient to its inputs' gradients (None: no gradient)."""
from __future__ import annotations

from .. import ops
from ..errors import UnsupportedError
from ..runtime.tensor import Tensor
from .tape import Tape, track


def add(a: Tensor, b: Tensor) -> Tensor:
    return track("add", (a, b), ops.add(a, b), lambda g: (g, g))


def mul(a: Tensor, b: Tensor) -> Tensor:
    return track("mul", (a, b), ops.mul(a, b), lambda g: (ops.mul(g, b), ops.mul(g, a)))


def scale(x: Tensor, alpha: float) -> Tensor:
    return track("scale", (x,), ops.scale(x, alpha), lambda g: (ops.scale(g, alpha),))


def cast(x: Tensor, dtype: str) -> Tensor:
    """x converted to dtype (x itself, untracked, when it has it already); the gradient goes back in x's dtype."""
    if x.dtype == dtype:
        return x
    src = x.dtype  # the rule keeps the dtype, not x (x's buffer may then be reused)
    return track("cast", (x,), ops.cast(x, dtype), lambda g: (ops.cast(g, src),))


def reshape(x: Tensor, *shape) -> Tensor:
    xs = x.shape
    return track("reshape", (x,), x.reshape(*shape), lambda g: (g.reshape(xs),))


def _tracked_matmul(x: Tensor, w: Tensor, wk: Tensor, transpose_b: bool, db_dtype: str | None = None) -> Tensor:
    """x.op(wk) on the tape as the product of (x, w): wk is what the kernels read (w, or its working copy),
    dW comes back as db_dtype (default wk's). Fused: x's gradient from elsewhere (q, k and v projections of
    one input) takes dX in place (beta 1)."""
    return track("matmul", (x, w), ops.matmul(x, wk, transpose_b),
                 lambda g: ops.matmul_backward(x, wk, g, transpose_b, db_dtype=db_dtype),
                 fuse=lambda g, acc: ops.matmul_backward(x, wk, g, transpose_b, into_a=acc, db_dtype=db_dtype),
                 fuse_in_place=True, fresh=True)


def matmul(x: Tensor, w: Tensor, transpose_b: bool = False) -> Tensor:
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
    return track("bias_add", (x, b), ops.bias_add(x, b), lambda g: (g, ops.colsum(g)))


def rms_norm(x: Tensor, w: Tensor, eps: float = 1e-6) -> Tensor:
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
    y, mean, rstd = ops.layer_norm(x, w, b, eps)
    return track("layer_norm", (x, w, b), y, lambda g: ops.layer_norm_backward(x, w, g, mean, rstd))


def softmax(x: Tensor, causal: bool = False) -> Tensor:
    y = ops.softmax(x, causal=causal)
    return track("softmax", (x,), y, lambda g: (ops.softmax_backward(y, g, causal=causal),))


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
    rows = x.shape[0]
    return track("row_slice", (x,), ops.row_slice(x, row), lambda g: (ops.row_slice_backward(g, rows, row),))


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy over targets < vocab (a 1-element f32 tensor)."""
    loss, count = ops.cross_entropy(logits, targets)
    return track("cross_entropy", (logits, targets), loss,
                  lambda g: (ops.cross_entropy_backward(logits, targets, count, g), None))


# -- image ops (NCHW) --------------------------------------------------------------------------
def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1) -> Tensor:
    y = ops.conv2d(x, weight, bias, stride, padding, dilation)
    return track("conv2d", (x, weight) if bias is None else (x, weight, bias), y,
                  lambda g: ops.conv2d_backward(x, weight, g, stride, padding, dilation, need_bias=bias is not None)
                  [:2 if bias is None else 3])


def group_norm(x: Tensor, num_groups: int, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    y, stats = ops.group_norm(x, num_groups, weight, bias, eps)
    return track("group_norm", (x, weight, bias), y, lambda g: ops.group_norm_backward(x, num_groups, weight, g, stats))


def upsample2d(x: Tensor, scale_factor=2) -> Tensor:
    return track("upsample2d", (x,), ops.upsample2d(x, scale_factor), lambda g: (ops.upsample2d_backward(g, scale_factor),))


def pixel_shuffle(x: Tensor, upscale_factor: int, layout: str = "nchw", grid=None) -> Tensor:
    xs = x.shape
    return track("pixel_shuffle", (x,), ops.pixel_shuffle(x, upscale_factor, layout, grid),
                  lambda g: (ops.pixel_shuffle_backward(g, xs, upscale_factor, layout, grid),))


def mse_loss(y: Tensor, target: Tensor) -> Tensor:
    """Mean squared error (a 1-element f32 tensor); the target gets no gradient."""
    return track("mse_loss", (y, target), ops.mse_loss(y, target), lambda g: (ops.mse_loss_backward(y, target, g), None))
# -- causal depthwise conv1d (EvermindLM, Mamba) ------------------------------------------------------
def conv1d_causal(x: Tensor, kernel: Tensor, bias: Tensor | None = None, seq_len: int | None = None,
                  taps: str = "lag") -> Tensor:
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
                   batch: int = 1, chunk: int = ops.SCAN_CHUNK, groups: int = 1, delta_input: bool = True) -> Tensor:
    """y = (C·h + D u) ⊙ silu(z) of the selective scan from a zero state (ops.selective_scan)."""
    kw = dict(batch=batch, chunk=chunk, groups=groups, delta_input=delta_input)
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
