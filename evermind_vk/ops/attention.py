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
from ..runtime.tensor import Tensor, empty
from .matmul import gemm_strided
from .activations import softmax, softmax_backward
from ._util import run

__all__ = ["attention", "attention_backward", "attention_cached"]


def _geometry(q: Tensor, k: Tensor, v: Tensor, batch: int = 1):
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
    if batch < 1 or S % batch:
        raise ShapeError(f"attention: {S} tokens are not {batch} sequences of equal length")
    if not (q.dtype == k.dtype == v.dtype):
        raise UnsupportedError(f"attention: dtypes {q.dtype}, {k.dtype}, {v.dtype} differ")
    return S, H, KVH, D


def _scores(q, k, B, S, H, KVH, D, scale):
    """scores [B*H, S, S] = scale * Q_bh K_bh^T for every sequence b and head h."""
    G = H // KVH
    s = empty((B * H, S, S), q.dtype, q.device)
    for b in range(B):
        gemm_strided(q, k, s, S, S, D, batch=H,
                     a_strides=(H * D, 1), a_batch=(b * S * H * D, D),
                     b_strides=(1, KVH * D), b_batch=(b * S * KVH * D, D, G),
                     c_strides=(S, 1), c_batch=(b * H * S * S, S * S), alpha=scale)
    return s


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: float | None = None,
              save_probs: bool = True, batch: int = 1):
    """Returns (out [B*S, H, D], probs [B*H, S, S] or None). q, k, v hold `batch` sequences of S tokens
    one after another. Pass probs to attention_backward, or None to recompute them there (less memory)."""
    Sall, H, KVH, D = _geometry(q, k, v, batch)
    B, S = batch, Sall // batch
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    p = softmax(_scores(q, k, B, S, H, KVH, D, scale), causal=causal, seq=S)
    out = empty((Sall, H, D), q.dtype, q.device)
    for b in range(B):
        gemm_strided(p, v, out, S, D, S, batch=H,
                     a_strides=(S, 1), a_batch=(b * H * S * S, S * S),
                     b_strides=(KVH * D, 1), b_batch=(b * S * KVH * D, D, H // KVH),
                     c_strides=(H * D, 1), c_batch=(b * S * H * D, D))
    return out, (p if save_probs else None)


def attention_backward(q: Tensor, k: Tensor, v: Tensor, dout: Tensor, probs: Tensor | None = None,
                       causal: bool = True, scale: float | None = None, batch: int = 1):
    """(dq, dk, dv) of attention."""
    Sall, H, KVH, D = _geometry(q, k, v, batch)
    B, S = batch, Sall // batch
    if dout.shape != q.shape or dout.dtype != q.dtype:
        raise ShapeError(f"attention_backward: dout {dout.shape}/{dout.dtype}, want {q.shape}/{q.dtype}")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    G = H // KVH
    if probs is None:
        probs = softmax(_scores(q, k, B, S, H, KVH, D, scale), causal=causal, seq=S)
    elif probs.shape != (B * H, S, S):
        raise ShapeError(f"attention_backward: probs {probs.shape}, want {(B * H, S, S)}")

    dp = empty((B * H, S, S), q.dtype, q.device)
    for b in range(B):  # dP_h = dO_h V_h^T
        gemm_strided(dout, v, dp, S, S, D, batch=H,
                     a_strides=(H * D, 1), a_batch=(b * S * H * D, D),
                     b_strides=(1, KVH * D), b_batch=(b * S * KVH * D, D, G),
                     c_strides=(S, 1), c_batch=(b * H * S * S, S * S))
    ds = softmax_backward(probs, dp)  # masked entries: probs = 0 there, so ds = 0

    dq = empty(q.shape, q.dtype, q.device)
    dk = empty(k.shape, k.dtype, k.device)
    dv = empty(v.shape, v.dtype, v.device)
    for b in range(B):
        qo, ko, po = b * S * H * D, b * S * KVH * D, b * H * S * S
        # dQ_h = scale dS_h K_h  (token-major out)
        gemm_strided(ds, k, dq, S, D, S, batch=H,
                     a_strides=(S, 1), a_batch=(po, S * S),
                     b_strides=(KVH * D, 1), b_batch=(ko, D, G),
                     c_strides=(H * D, 1), c_batch=(qo, D), alpha=scale)
        # dK_g = scale sum_{h in g} dS_h^T Q_h ; dV_g = sum_{h in g} P_h^T dO_h. Batch z = kv head; the
        # G heads of a group are separate dispatches accumulating (beta = 1): no two threads write one element.
        for j in range(G):
            beta = 0.0 if j == 0 else 1.0
            gemm_strided(ds, q, dk, S, D, S, batch=KVH,
                         a_strides=(1, S), a_batch=(po + j * S * S, G * S * S),
                         b_strides=(H * D, 1), b_batch=(qo + j * D, G * D, 1),
                         c_strides=(KVH * D, 1), c_batch=(ko, D), alpha=scale, beta=beta)
            gemm_strided(probs, dout, dv, S, D, S, batch=KVH,
                         a_strides=(1, S), a_batch=(po + j * S * S, G * S * S),
                         b_strides=(H * D, 1), b_batch=(qo + j * D, G * D, 1),
                         c_strides=(KVH * D, 1), c_batch=(ko, D), beta=beta)
    return dq, dk, dv


# -- attention over a KV cache (generation) ----------------------------------------------------------------
def attention_cached(q: Tensor, k_cache: Tensor, v_cache: Tensor, start_pos: int, scale: float | None = None,
                     scratch: tuple | None = None, out: Tensor | None = None) -> Tensor:
    """Causal attention of Q new queries at positions start_pos..start_pos+Q-1 over the cached keys and
    values of positions 0..start_pos+Q-1: query i sees keys j <= start_pos + i. q: [Q, H, D]; k_cache,
    v_cache: [max_len, KVH, D] (rows past start_pos+Q are not read). Returns out [Q, H, D].

    scratch: (scores, probs), two buffers of at least H*Q*max_len elements of q's dtype, reused across
    calls (their kv-length-dependent part lives in push constants, so cached kernels are reused)."""
    if q.ndim != 3 or k_cache.ndim != 3 or k_cache.shape != v_cache.shape:
        raise ShapeError(f"attention_cached: q {q.shape}, k_cache {k_cache.shape}, v_cache {v_cache.shape}")
    Q, H, D = q.shape
    L, KVH, Dk = k_cache.shape
    kv = int(start_pos) + Q
    if Dk != D or KVH < 1 or H % KVH:
        raise ShapeError(f"attention_cached: q {q.shape} and cache {k_cache.shape} disagree (head_dim, GQA)")
    if start_pos < 0 or kv > L:
        raise ShapeError(f"attention_cached: positions {start_pos}..{kv - 1} outside the cache's {L}")
    if not (q.dtype == k_cache.dtype == v_cache.dtype):
        raise UnsupportedError(f"attention_cached: dtypes {q.dtype}, {k_cache.dtype}, {v_cache.dtype} differ")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    G = H // KVH
    if scratch is None:
        scratch = (empty((H * Q * kv,), q.dtype, q.device), empty((H * Q * kv,), q.dtype, q.device))
    s, p = scratch
    if s.numel < H * Q * kv or p.numel < H * Q * kv or s.dtype != q.dtype or p.dtype != q.dtype:
        raise ShapeError(f"attention_cached: scratch buffers need {H * Q * kv} {q.dtype} elements")
    # scores [H, Q, kv] packed at the start of s: S_h = scale Q_h K_h^T
    gemm_strided(q, k_cache, s, Q, kv, D, batch=H, a_strides=(H * D, 1), a_batch=(0, D),
                 b_strides=(1, KVH * D), b_batch=(0, D, G), c_strides=(kv, 1), c_batch=(0, Q * kv), alpha=scale)
    # row r = h*Q + i is query i: the causal softmax kernel shows it keys j <= i + (kv - Q) = start_pos + i
    run("softmax", q.dtype, [s, p], dict(rows=H * Q, cols=kv, causal=1, seq=Q), H * Q)
    out = empty((Q, H, D), q.dtype, q.device) if out is None else out
    if out.shape != (Q, H, D) or out.dtype != q.dtype:
        raise ShapeError(f"attention_cached: out is {out.shape}/{out.dtype}, want {(Q, H, D)}/{q.dtype}")
    gemm_strided(p, v_cache, out, Q, D, kv, batch=H, a_strides=(kv, 1), a_batch=(0, Q * kv),
                 b_strides=(KVH * D, 1), b_batch=(0, D, G), c_strides=(H * D, 1), c_batch=(0, D))
    return out
