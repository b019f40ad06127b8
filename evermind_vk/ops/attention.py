"""Scaled dot-product attention on token-major tensors, forward and backward, on the device.

q: [S, H, D]; k, v: [S, KVH, D] with KVH dividing H (grouped-query attention: head h reads kv head
h // (H // KVH)). Per head: P = softmax(scale * Q K^T) (causal: key j <= query i), O = P V.
Backward (from the saved P, or recomputed from q, k):
    dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(P * dP)),  dQ = scale dS K,  dK = scale dS^T Q
with dK, dV summed over the heads of each group.

Two paths, chosen by `runtime.select.attention.plan` (override: EVERMIND_VK_ATTENTION=matmul|fused):
  fused   flash-style kernels (templates/attention.comp.j2): one dispatch for the forward over every
          sequence and head, online softmax over K/V tiles, no S x S matrix; the forward saves the
          per-row logsumexp [B*H, S] (f32, base 2 of the scaled scores); the backward is two dispatches
          (dQ and D = rowsum(dO * O), then dK and dV per key tile). Head dims up to 128.
  matmul  the strided batched matmul kernel plus the row softmax kernels, materialising the
          probabilities [B*H, S, S] (the reference, and the path for head dims > 128); causal products
          skip what lies past the diagonal (select.matmul.TRI), and on GPUs a causal P V, dQ, dK or dV of few
          workgroups runs in K chunks whose f32 partials a column sum adds (select.attention.tri_split).
`attention` returns (out, saved): saved is what the backward needs (the logsumexp on the fused
path, the probabilities on the matmul path) or None when save_probs is False (the backward then
recomputes it). attention_backward tells the two apart by rank; the fused one also needs `out`.
"""
from __future__ import annotations

import math

from ..errors import ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.select import attention as select_attention
from ..runtime.knobs import get as knob
from ..runtime.tensor import Tensor, empty
from .matmul import gemm_chunks, gemm_strided
from .reduce import colsum
from .activations import softmax, softmax_backward
from ._util import run_softmax

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


# The matmul path's products run over a two-level batch (gemm_strided's `outer`): z1 = sequence b
# (outer strides: one sequence of q/out/dout S*H*D, of k/v S*KVH*D, of an S x S block H*S*S), z2 = head
# h (inner strides D and S*S; k/v's head is h // G through bdiv): one dispatch per product for all B*H.
def _bh(S, H, KVH, D):
    """The (outer, inner) batch of the [S, H, D] token-major tensors and [B*H, S, S] blocks of B sequences."""
    return S * H * D, S * KVH * D, H * S * S


def _scores(q, k, B, S, H, KVH, D, scale, causal):
    """scores [B*H, S, S] = scale * Q_bh K_bh^T for every sequence b and head h: one dispatch (causal: tiles
    wholly above the diagonal, which the causal softmax masks, are written with zeros instead)."""
    G = H // KVH
    sq, sk, ss = _bh(S, H, KVH, D)
    s = empty((B * H, S, S), q.dtype, q.device)
    gemm_strided(q, k, s, S, S, D, batch=H, outer=(B, sq, sk, ss),
                 a_strides=(H * D, 1), a_batch=(0, D),
                 b_strides=(1, KVH * D), b_batch=(0, D, G),
                 c_strides=(S, 1), c_batch=(0, S * S), alpha=scale, tri=_tri("lower_c", causal))
    return s


def _tri(hint: str, causal: bool) -> str:
    """The causal hint of a matmul-path product (runtime/select/matmul.py TRI): causal probabilities and their
    gradients are zero above the diagonal, so the products skip those tiles and k ranges."""
    return hint if causal else ""


def _product_a(a, b, c, S, D, chunks, tri, sums=None, **kw):
    """c = the S x D x S product of a causal (lower_a) P V or dS K: whole, or in K chunks (the plan's) whose
    f32 partials a column sum adds in chunk order (rounded once into an f16 c); with `sums`, that column sum
    is left to the caller, appended as (partials, c)."""
    if len(chunks) == 1:
        gemm_strided(a, b, c, S, D, S, tri=tri, **kw)
        return
    work = gemm_chunks(a, b, empty((len(chunks), c.numel), "f32", a.device), 0, chunks, S, D, tri=tri, **kw)
    if sums is None:
        colsum(work, out=c)
    else:
        sums.append((work, c))


def _plan(q: Tensor, S: int, H: int, KVH: int, D: int, B: int, causal: bool, saved: str = ""):
    """runtime.select.attention's plan of this launch (saved: what the backward was given)."""
    knobs = select_attention.Knobs(path=knob("EVERMIND_VK_ATTENTION"),
                                   variant=knob("EVERMIND_VK_ATTENTION_VARIANT"),
                                   tri_split=knob("EVERMIND_VK_TRI_SPLIT"),
                                   probs=knob("EVERMIND_VK_ATTENTION_PROBS"))
    return select_attention.plan(select_attention.Launch(q.dtype, S, H, KVH, D, B, causal, saved), q.device, knobs)


def _launch(v, stage: str, tensors: list, S: int, H: int, KVH: int, D: int, B: int, causal: bool, scale: float):
    dev = tensors[0].device
    errs = select_attention.attention_launch_errors(select_attention.attention_params(v), stage, S, D,
                                                    dev.info.shared_memory, dev.info.subgroup_size)
    if errs:  # the selector never does this; a template must never run outside its assumptions
        raise UnsupportedError(f"{v.name} cannot run S={S} D={D}: " + "; ".join(errs))
    push = dict(S=S, H=H, KVH=KVH, D=D, causal=int(causal), scale=scale)
    groups = (-(-S // v.spec["ROWS"]), KVH if stage == "dkv" else H, B)
    kernels.dispatch(v, tensors, push, groups)


def _fused_forward(vs, q, k, v, B, S, H, KVH, D, causal, scale):
    out = empty(q.shape, q.dtype, q.device)
    lse = empty((B * H, S), "f32", q.device)
    _launch(vs["fwd"], "fwd", [q, k, v, out, lse], S, H, KVH, D, B, causal, scale)
    return out, lse


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: float | None = None,
              save_probs: bool | None = None, batch: int = 1):
    """Returns (out [B*S, H, D], saved or None). q, k, v hold `batch` sequences of S tokens one after
    another. saved (the logsumexp [B*H, S] on the fused path, the probabilities [B*H, S, S] on the
    matmul path) goes to attention_backward; save_probs=False returns None and the backward
    recomputes it; None (the default): the plan's choice (the fused path keeps its logsumexp, the matmul
    path its probabilities unless they outgrow the layer's other activations: select.attention.keeps_probs)."""
    Sall, H, KVH, D = _geometry(q, k, v, batch)
    B, S = batch, Sall // batch
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    plan = _plan(q, S, H, KVH, D, B, causal)
    if plan.path == "fused":
        out, lse = _fused_forward(plan.fused, q, k, v, B, S, H, KVH, D, causal, scale)
        return out, (None if save_probs is False else lse)
    p = softmax(_scores(q, k, B, S, H, KVH, D, scale, causal), causal=causal, seq=S)
    out = empty((Sall, H, D), q.dtype, q.device)
    sq, sk, ss = _bh(S, H, KVH, D)
    _product_a(p, v, out, S, D, plan.q_chunks, _tri("lower_a", causal), batch=H, outer=(B, ss, sk, sq),
               a_strides=(S, 1), a_batch=(0, S * S),
               b_strides=(KVH * D, 1), b_batch=(0, D, H // KVH),
               c_strides=(H * D, 1), c_batch=(0, D))
    keep = plan.keep_probs if save_probs is None else save_probs
    return out, (p if keep else None)


def attention_backward(q: Tensor, k: Tensor, v: Tensor, dout: Tensor, probs: Tensor | None = None,
                       causal: bool = True, scale: float | None = None, batch: int = 1,
                       out: Tensor | None = None):
    """(dq, dk, dv) of attention. probs: what attention saved (a [B*H, S] logsumexp from the fused
    path, used with the forward's `out`; [B*H, S, S] probabilities from the matmul path) or None
    (recomputed, on the path the rule picks). Without `out` the fused path recomputes the forward."""
    Sall, H, KVH, D = _geometry(q, k, v, batch)
    B, S = batch, Sall // batch
    if dout.shape != q.shape or dout.dtype != q.dtype:
        raise ShapeError(f"attention_backward: dout {dout.shape}/{dout.dtype}, want {q.shape}/{q.dtype}")
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    G = H // KVH
    if probs is None or probs.ndim == 2:
        if probs is not None and (probs.shape != (B * H, S) or probs.dtype != "f32"):
            raise ShapeError(f"attention_backward: logsumexp {probs.shape}/{probs.dtype}, want {(B * H, S)}/f32")
        if out is not None and (out.shape != q.shape or out.dtype != q.dtype):
            raise ShapeError(f"attention_backward: out {out.shape}/{out.dtype}, want {q.shape}/{q.dtype}")
        plan = _plan(q, S, H, KVH, D, B, causal, "" if probs is None else "lse")
        if plan.path == "fused":
            vs = plan.fused
            if probs is None or out is None:  # recompute both (the forward is deterministic)
                out, probs = _fused_forward(vs, q, k, v, B, S, H, KVH, D, causal, scale)
            delta = empty((B * H, S), "f32", q.device)
            dq, dk, dv = empty(q.shape, q.dtype, q.device), empty(k.shape, k.dtype, k.device), empty(v.shape, v.dtype, v.device)
            _launch(vs["dq"], "dq", [q, k, v, out, dout, probs, delta, dq], S, H, KVH, D, B, causal, scale)
            _launch(vs["dkv"], "dkv", [q, k, v, dout, probs, delta, dk, dv], S, H, KVH, D, B, causal, scale)
            return dq, dk, dv
    else:
        if probs.shape != (B * H, S, S):
            raise ShapeError(f"attention_backward: probs {probs.shape}, want {(B * H, S, S)}")
        plan = _plan(q, S, H, KVH, D, B, causal, "probs")
    if probs is None:
        probs = softmax(_scores(q, k, B, S, H, KVH, D, scale, causal), causal=causal, seq=S)

    sq, sk, ss = _bh(S, H, KVH, D)
    dp = empty((B * H, S, S), q.dtype, q.device)
    # dP_bh = dO_bh V_bh^T
    gemm_strided(dout, v, dp, S, S, D, batch=H, outer=(B, sq, sk, ss),
                 a_strides=(H * D, 1), a_batch=(0, D),
                 b_strides=(1, KVH * D), b_batch=(0, D, G),
                 c_strides=(S, 1), c_batch=(0, S * S), tri=_tri("lower_c", causal))
    ds = softmax_backward(probs, dp, causal=causal, seq=S)  # masked entries: probs = 0 there, so ds = 0

    dq = empty(q.shape, q.dtype, q.device)
    dk = empty(k.shape, k.dtype, k.device)
    dv = empty(v.shape, v.dtype, v.device)
    # dQ_bh = scale dS_bh K_bh (token-major out). dK_bg = scale sum_{h in g} dS_bh^T Q_bh ; dV_bg = sum_{h in g}
    # P_bh^T dO_bh: batch (b, kv head g), the G heads of a group G launches (member j of every group); folding the
    # group into K would need one k-stride over (head, token), which q's token-major layout does not have. With
    # G > 1, or split along K (the plan's kv_chunks), each (member, chunk) launch writes its own f32 row of a workspace (f16
    # operands through the c32 rows) and a column sum adds the rows in (member, chunk) order, rounded once.
    # Every launch here reads only ds, probs and the inputs and writes its own rows, so all of them run side by
    # side (runtime/program.py: disjoint ranges of one buffer need no barrier); the column sums come last.
    sums = []
    _product_a(ds, k, dq, S, D, plan.q_chunks, _tri("lower_a", causal), sums, batch=H, outer=(B, ss, sk, sq),
               a_strides=(S, 1), a_batch=(0, S * S), b_strides=(KVH * D, 1), b_batch=(0, D, G),
               c_strides=(H * D, 1), c_batch=(0, D), alpha=scale)
    tri, chunks = _tri("upper_a", causal), plan.kv_chunks
    rows = G * len(chunks)
    for out_, a, b_, alpha in ((dk, ds, q, scale), (dv, probs, dout, 1.0)):
        kw = dict(batch=KVH, outer=(B, ss, sq, sk), a_strides=(1, S), b_strides=(H * D, 1),
                  c_strides=(KVH * D, 1), alpha=alpha, tri=tri)
        if rows == 1:
            gemm_strided(a, b_, out_, S, D, S, a_batch=(0, G * S * S), b_batch=(0, G * D, 1), c_batch=(0, D), **kw)
            continue
        work = empty((rows, out_.numel), "f32", q.device)
        for j in range(G):
            gemm_chunks(a, b_, work, j * len(chunks), chunks, S, D, a_batch=(j * S * S, G * S * S),
                        b_batch=(j * D, G * D, 1), c_batch=(0, D), **kw)
        sums.append((work, out_))
    for work, out_ in sums:
        colsum(work, out=out_)
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
    run_softmax("softmax", [s, p], dict(rows=H * Q, cols=kv, causal=1, seq=Q), H * Q, kv)
    out = empty((Q, H, D), q.dtype, q.device) if out is None else out
    if out.shape != (Q, H, D) or out.dtype != q.dtype:
        raise ShapeError(f"attention_cached: out is {out.shape}/{out.dtype}, want {(Q, H, D)}/{q.dtype}")
    gemm_strided(p, v_cache, out, Q, D, kv, batch=H, a_strides=(kv, 1), a_batch=(0, Q * kv),
                 b_strides=(KVH * D, 1), b_batch=(0, D, G), c_strides=(H * D, 1), c_batch=(0, D))
    return out
