"""Shared-expert mixture of experts (builderforce's SharedExpertMoE), forward and backward, on N tokens.

Each token x [d] goes through a shared ReLU MLP and the top-k of E routed ReLU MLPs,
    y = Shared(x) + sum_{e in topk} gate_e Expert_e(x),   Expert(x) = W2 relu(W1 x + b1) + b2,
router logits Wr x (no bias), probs = softmax(logits), top-k by logit (ties to the lower index),
gates = softmax over the selected logits.

Experts are stacked, the shared one first (z = 0, routed expert e at z = e + 1), so one product runs
them all: w1 [(E+1)*h, d], b1 [(E+1)*h], w2 [(E+1)*d, h] (expert z's [d, h] block at rows z*d),
b2 [(E+1)*d], wr [E, d]. Every expert is computed densely for every token and the gates mask the
unselected ones: (E+1)/(k+1) times the FLOPs of sparse dispatch, in 4 products (router, W1, W2 as a
batched product over experts, and their backward counterparts) however many tokens there are. That
is the right trade for builderforce's small E (4..8); a gather-by-expert path would be needed for
large E. f32 (the primitive kernels also take f16 storage).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ShapeError, UnsupportedError
from ..runtime.kernels import fill_words
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, like, per_thread, want
from .matmul import gemm, gemm_strided, matmul

__all__ = ["moe_route", "moe_bias_relu", "moe_relu_backward", "moe_combine", "moe_combine_backward",
           "moe_gate_grad", "moe_aux", "moe_router_backward", "moe_ffn", "moe_ffn_backward", "moe_load_stats",
           "MoEContext"]

MAX_EXPERTS = 256  # moe_route loops k*E per token
ONE_F32 = 0x3F800000


def moe_route(logits: Tensor, k: int):
    """(probs [N,E] f32, gates [N,E+1] f32 with gates[:,0] = 1, sel [N,k] u32 highest logit first,
    dispatch [N,E] f32 one-hot of the selection)."""
    want(logits, "logits", ndim=2, dtype=FLOATS)
    N, E = logits.shape
    if not 1 <= E <= MAX_EXPERTS:
        raise UnsupportedError(f"moe: {E} experts; 1..{MAX_EXPERTS} supported")
    if not 1 <= k <= E:
        raise ShapeError(f"MoE topK ({k}) must be in 1..numExperts ({E})")
    dev = logits.device
    probs, gates = empty((N, E), "f32", dev), empty((N, E + 1), "f32", dev)
    sel, disp = empty((N, k), "u32", dev), empty((N, E), "f32", dev)
    per_thread("moe_route", logits.dtype, [logits, probs, gates, sel, disp], dict(N=N, E=E, k=k), N)
    return probs, gates, sel, disp


def moe_bias_relu(x: Tensor, b: Tensor) -> Tensor:
    """relu(x + b), b [cols] added to every row of x [rows, cols]."""
    want(x, "x", ndim=2, dtype=FLOATS)
    want(b, "b", shape=(x.shape[1],), dtype="f32")
    y = like(x)
    per_thread("moe_bias_relu", x.dtype, [x, b, y], dict(n=x.numel, cols=x.shape[1]), x.numel)
    return y


def moe_relu_backward(h: Tensor, dh: Tensor) -> Tensor:
    """dh where the ReLU output h is > 0, else 0."""
    want(dh, "dh", shape=h.shape, dtype=h.dtype)
    out = like(h)
    per_thread("moe_relu_backward", h.dtype, [h, dh, out], dict(n=h.numel), h.numel)
    return out


def moe_combine(y: Tensor, b2: Tensor, gates: Tensor) -> Tensor:
    """out [N,d] = sum_z gates[:,z] (y[:,z,:] + b2[z]) for expert outputs y [N, Z, d], b2 [Z*d]."""
    want(y, "y", ndim=3, dtype=FLOATS)
    N, Z, d = y.shape
    want(b2, "b2", shape=(Z * d,), dtype="f32")
    want(gates, "gates", shape=(N, Z), dtype="f32")
    out = empty((N, d), y.dtype, y.device)
    per_thread("moe_combine", y.dtype, [y, b2, gates, out], dict(N=N, Z=Z, d=d), N * d)
    return out


def moe_combine_backward(dout: Tensor, gates: Tensor) -> Tensor:
    """dy [N, Z, d] = gates[:, z] dout (the gradient of each expert's output)."""
    want(dout, "dout", ndim=2, dtype=FLOATS)
    N, d = dout.shape
    want(gates, "gates", ndim=2, dtype="f32")
    if gates.shape[0] != N:
        raise ShapeError(f"moe_combine_backward: gates {gates.shape} for {N} tokens")
    Z = gates.shape[1]
    dy = empty((N, Z, d), dout.dtype, dout.device)
    per_thread("moe_combine_backward", dout.dtype, [dout, gates, dy], dict(N=N, Z=Z, d=d), N * Z * d)
    return dy


def moe_gate_grad(dout: Tensor, y: Tensor, b2: Tensor) -> Tensor:
    """dg [N, Z] f32 = <dout[n], y[n, z] + b2[z]> (the gradient of each combine weight)."""
    want(y, "y", ndim=3, dtype=FLOATS)
    N, Z, d = y.shape
    want(dout, "dout", shape=(N, d), dtype=y.dtype)
    want(b2, "b2", shape=(Z * d,), dtype="f32")
    dg = empty((N, Z), "f32", y.device)
    per_thread("moe_gate_grad", y.dtype, [dout, y, b2, dg], dict(N=N, Z=Z, d=d), N * Z)
    return dg


def moe_aux(counts: Tensor, psum: Tensor, tokens: int):
    """(f [E] dispatch fractions counts/sum(counts), aux [1] = E sum_e f_e psum_e / tokens): the
    load-balance loss of Switch/GShard as builderforce computes it."""
    want(counts, "counts", ndim=1, dtype="f32")
    E = counts.numel
    want(psum, "psum", shape=(E,), dtype="f32")
    f, aux = empty((E,), "f32", counts.device), empty((1,), "f32", counts.device)
    per_thread("moe_aux", "f32", [counts, psum, f, aux], dict(N=tokens, E=E), 1)
    return f, aux


def moe_router_backward(dg: Tensor, gates: Tensor, sel: Tensor, probs: Tensor, f: Tensor | None = None,
                        aux_scale: float = 0.0, dtype: str = "f32") -> Tensor:
    """dlogits [N, E]: through the softmax over the selected logits, plus (aux_scale != 0) the
    load-balance gradient aux_scale P_e (f_e - sum_j f_j P_j) with f treated as a constant."""
    N, E = probs.shape
    k = sel.shape[1]
    want(dg, "dg", shape=(N, E + 1), dtype="f32")
    want(gates, "gates", shape=(N, E + 1), dtype="f32")
    if aux_scale != 0.0 and f is None:
        raise ShapeError("moe_router_backward: an aux_scale needs the dispatch fractions f")
    out = empty((N, E), dtype, probs.device)
    per_thread("moe_router_backward", dtype, [dg, gates, sel, probs, probs if f is None else f, out],
               dict(N=N, E=E, k=k, aux_scale=float(aux_scale)), N)
    return out


def _ones(n: int, dev) -> Tensor:
    t = empty((1, n), "f32", dev)
    fill_words(t, ONE_F32)
    return t


@dataclass
class MoEContext:
    """What the forward keeps for the backward (and the routing, for inspection)."""
    x: Tensor
    probs: Tensor
    gates: Tensor
    sel: Tensor
    dispatch: Tensor
    h: Tensor  # [N, (E+1)*h] ReLU outputs
    y: Tensor  # [N, E+1, d] expert outputs without b2
    E: int
    hidden: int


def moe_ffn(x: Tensor, wr: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor, k: int):
    """(out [N, d], MoEContext) of the shared-expert MoE on x [N, d] (parameters as in the module doc)."""
    want(x, "x", ndim=2, dtype="f32")
    N, d = x.shape
    want(wr, "wr", ndim=2, dtype="f32")
    E = wr.shape[0]
    if wr.shape[1] != d:
        raise ShapeError(f"moe: wr {wr.shape} is not [E, {d}]")
    want(w1, "w1", ndim=2, dtype="f32")
    Z = E + 1
    if w1.shape[1] != d or w1.shape[0] % Z:
        raise ShapeError(f"moe: w1 {w1.shape} is not [(E+1)*h, {d}] for E = {E}")
    h = w1.shape[0] // Z
    want(b1, "b1", shape=(Z * h,), dtype="f32")
    want(w2, "w2", shape=(Z * d, h), dtype="f32")
    want(b2, "b2", shape=(Z * d,), dtype="f32")
    probs, gates, sel, disp = moe_route(matmul(x, wr, transpose_b=True), k)
    hid = moe_bias_relu(matmul(x, w1, transpose_b=True), b1)
    y = empty((N, Z, d), "f32", x.device)
    # y[n, z, :] = W2_z hid[n, z, :] for every expert z in one batched product.
    gemm_strided(hid, w2, y, N, d, h, a_strides=(Z * h, 1), b_strides=(1, h), c_strides=(Z * d, 1), batch=Z,
                 a_batch=(0, h), b_batch=(0, d * h, 1), c_batch=(0, d))
    out = moe_combine(y, b2, gates)
    return out, MoEContext(x, probs, gates, sel, disp, hid, y, E, h)


def moe_load_stats(ctx: MoEContext):
    """(f [E], aux [1]) of the tokens in ctx: dispatch fractions and the load-balance loss."""
    N = ctx.x.shape[0]
    ones = _ones(N, ctx.x.device)
    counts, psum = empty((1, ctx.E), "f32", ctx.x.device), empty((1, ctx.E), "f32", ctx.x.device)
    gemm(ones, ctx.dispatch, counts, 1, ctx.E, N)
    gemm(ones, ctx.probs, psum, 1, ctx.E, N)
    return moe_aux(counts.reshape(ctx.E), psum.reshape(ctx.E), N)


def moe_ffn_backward(ctx: MoEContext, wr: Tensor, w1: Tensor, w2: Tensor, b2: Tensor, dout: Tensor,
                     aux_scale: float = 0.0, f: Tensor | None = None):
    """(dx, dwr, dw1, db1, dw2, db2) given dout [N, d]; with aux_scale, the router also gets the
    load-balance gradient (f from moe_load_stats: constant, as in builderforce)."""
    x, E, h = ctx.x, ctx.E, ctx.hidden
    N, d = x.shape
    Z = E + 1
    want(dout, "dout", shape=(N, d), dtype="f32")
    dev = x.device
    dg = moe_gate_grad(dout, ctx.y, b2)
    dy = moe_combine_backward(dout, ctx.gates)  # [N, Z, d]
    db2 = empty((Z, d), "f32", dev)
    gemm(ctx.gates, dout, db2, Z, d, N, trans_a=True)  # db2[z] = sum_n gates[n, z] dout[n]
    dw2 = empty((Z * d, h), "f32", dev)
    gemm_strided(dy, ctx.h, dw2, d, h, N, a_strides=(1, Z * d), b_strides=(Z * h, 1), c_strides=(h, 1), batch=Z,
                 a_batch=(0, d), b_batch=(0, h, 1), c_batch=(0, d * h))
    dh = empty((N, Z * h), "f32", dev)
    gemm_strided(dy, w2, dh, N, h, d, a_strides=(Z * d, 1), b_strides=(h, 1), c_strides=(Z * h, 1), batch=Z,
                 a_batch=(0, d), b_batch=(0, d * h, 1), c_batch=(0, h))
    dpre = moe_relu_backward(ctx.h, dh)
    dw1 = empty((Z * h, d), "f32", dev)
    gemm(dpre, x, dw1, Z * h, d, N, trans_a=True)
    db1 = empty((1, Z * h), "f32", dev)
    gemm(_ones(N, dev), dpre, db1, 1, Z * h, N)
    dlogits = moe_router_backward(dg, ctx.gates, ctx.sel, ctx.probs)
    # The load-balance gradient reaches the router weights only (builderforce's auxGradStep).
    dl_wr = dlogits if aux_scale == 0.0 else moe_router_backward(dg, ctx.gates, ctx.sel, ctx.probs, f, aux_scale)
    dwr = empty((E, d), "f32", dev)
    gemm(dl_wr, x, dwr, E, d, N, trans_a=True)
    dx = empty((N, d), "f32", dev)
    gemm(dpre, w1, dx, N, d, Z * h)
    gemm(dlogits, wr, dx, N, d, E, beta=1.0)
    return dx, dwr, dw1, db1.reshape(Z * h), dw2, db2.reshape(Z * d)
