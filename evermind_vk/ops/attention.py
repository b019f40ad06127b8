"""Scaled dot-product attention on token-major tensors, forward and backward, on the device.

q: [S, H, D]; k, v: [S, KVH, D] with KVH dividing H (grouped-query attention: head h reads kv head
h // (H // KVH)). Per head: P = softmax(scale * Q K^T) (causal: key j <= query i), O = P V.
Backward (from the saved P, or recomputed from q, k):
    dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)),  dQ = scale dS K,  dK = scale dS^T Q
with dK, dV summed over the heads of each group. Everything is the strided batched matmul kernel
plus the row softmax kernels; no host round trip.
"""
from __future__ import annotations

import math

from ..errors import ShapeError, UnsupportedError
from ..tensor import Tensor, empty
from .matmul import gemm_strided
from .nn import softmax, softmax_backward


def _geometry(q: Tensor, k: Tensor, v: Tensor):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 3:
            raise ShapeError(f"attention: {name} must be [S, heads, head_dim], got {t.shape}")
    S, H, D = q.shape
    if k.shape != v.shape:
        raise ShapeError(f"attention: k {k.shape} and v {v.shape} differ")
    Sk, KVH, Dk = k.shape
    if Sk != S or Dk != D:
        raise ShapeError(f"attention: q {q.shape} and k {k.shape} disagree on sequence or head_dim")
    if KVH < 1 or H % KVH:
        raise ShapeError(f"attention requires valid GQA geometry: {KVH} kv heads must divide {H} heads")
    if not (q.dtype == k.dtype == v.dtype):
        raise UnsupportedError(f"attention: dtypes {q.dtype}, {k.dtype}, {v.dtype} differ")
    return S, H, KVH, D


def _scores(q, k, S, H, KVH, D, scale):
    """scores [H, S, S] = scale * Q_h K_h^T for every head."""
    G = H // KVH
    s = empty((H, S, S), q.dtype, q.device)
    gemm_strided(q, k, s, S, S, D, batch=H,
                 a_strides=(H * D, 1), a_batch=(0, D),
                 b_strides=(1, KVH * D), b_batch=(0, D, G),
                 c_strides=(S, 1), c_batch=(0, S * S), alpha=scale)
    return s


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: float | None = None,
              save_probs: bool = True):
    """Returns (out [S, H, D], probs [H, S, S] or None). Pass probs to attention_backward, or None to
    recompute them there (less memory)."""
    S, H, KVH, D = _geometry(q, k, v)
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    p = softmax(_scores(q, k, S, H, KVH, D, scale), causal=causal, seq=S)
    out = empty((S, H, D), q.dtype, q.device)
    gemm_strided(p, v, out, S, D, S, batch=H,
                 a_strides=(S, 1), a_batch=(0, S * S),
                 b_strides=(KVH * D, 1), b_batch=(0, D, H // KVH),
                 c_strides=(H * D, 1), c_batch=(0, D))
    return out, (p if save_probs else None)


def attention_backward(q: Tensor, k: Tensor, v: Tensor, dout: Tensor, probs: Tensor | None = None,
                       causal: bool = True, scale: float | None = None):
    """(dq, dk, dv) of attention."""
    S, H, KVH, D = _geometry(q, k, v)
    if dout.shape != q.shape or dout.dtype != q.dtype:
        raise ShapeError(f"attention_backward: dout {dout.shape}/{dout.dtype}, want {q.shape}/{q.dtype}")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    G = H // KVH
    if probs is None:
        probs = softmax(_scores(q, k, S, H, KVH, D, scale), causal=causal, seq=S)
    elif probs.shape != (H, S, S):
        raise ShapeError(f"attention_backward: probs {probs.shape}, want {(H, S, S)}")

    # dP_h = dO_h V_h^T  [H, S, S]
    dp = empty((H, S, S), q.dtype, q.device)
    gemm_strided(dout, v, dp, S, S, D, batch=H,
                 a_strides=(H * D, 1), a_batch=(0, D),
                 b_strides=(1, KVH * D), b_batch=(0, D, G),
                 c_strides=(S, 1), c_batch=(0, S * S))
    ds = softmax_backward(probs, dp)  # masked entries: probs = 0 there, so ds = 0

    # dQ_h = scale dS_h K_h  (token-major out)
    dq = empty(q.shape, q.dtype, q.device)
    gemm_strided(ds, k, dq, S, D, S, batch=H,
                 a_strides=(S, 1), a_batch=(0, S * S),
                 b_strides=(KVH * D, 1), b_batch=(0, D, G),
                 c_strides=(H * D, 1), c_batch=(0, D), alpha=scale)

    # dK_g = scale sum_{h in g} dS_h^T Q_h ; dV_g = sum_{h in g} P_h^T dO_h. Batch z = kv head; the G
    # heads of a group are separate dispatches accumulating (beta = 1) so no two threads write one element.
    dk = empty(k.shape, k.dtype, k.device)
    dv = empty(v.shape, v.dtype, v.device)
    for j in range(G):
        beta = 0.0 if j == 0 else 1.0
        gemm_strided(ds, q, dk, S, D, S, batch=KVH,
                     a_strides=(1, S), a_batch=(j * S * S, G * S * S),
                     b_strides=(H * D, 1), b_batch=(j * D, G * D, 1),
                     c_strides=(KVH * D, 1), c_batch=(0, D), alpha=scale, beta=beta)
        gemm_strided(probs, dout, dv, S, D, S, batch=KVH,
                     a_strides=(1, S), a_batch=(j * S * S, G * S * S),
                     b_strides=(H * D, 1), b_batch=(j * D, G * D, 1),
                     c_strides=(KVH * D, 1), c_batch=(0, D), beta=beta)
    return dq, dk, dv
