"""Ops of recorded decoding (evermind_vk.train.decode): each reads the per-step scalars (each sequence's
position, cache slot and logits row; the sampling parameters, seed and step) from a small u32 device
buffer, `hyper`, so that one recorded program replays unchanged at every step.

hyper's layout (`hyper_words` builds it on the host): HEADER words [temperature (f32 bits), top_k, top_p
(f32 bits), repetition penalty (f32 bits), stop-token count, seed low, seed high, step], then ITEM words
per item r (a sequence of the program): [position of its first token, cache slot, logits row, flags (bit 0:
mark the chosen id seen)], then the stop-token ids."""
from __future__ import annotations

import math

import numpy as np

from ..errors import BindingLimitError, ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.select.decode import pick_decode_wg, pick_sample_wg
from ..runtime.tensor import Tensor
from ._util import FLOATS, like, per_thread, want

__all__ = ["HEADER", "ITEM", "hyper_words", "rope_at", "kv_write", "rope_kv_at", "attention_decode", "sample"]

HEADER = 8
ITEM = 4


def _f32_bits(x: float) -> int:
    return int(np.array([x], np.float32).view(np.uint32)[0])


def hyper_words(items, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                repetition_penalty: float = 1.0, stop_tokens=(), seed: int = 0, step: int = 0) -> np.ndarray:
    """The hyper buffer's words: items is a list of (position, slot, logits row, mark_seen) per item."""
    stops = [int(s) for s in stop_tokens]
    w = np.zeros(HEADER + ITEM * len(items) + len(stops), np.uint32)
    w[:HEADER] = [_f32_bits(temperature), int(top_k or 0), _f32_bits(1.0 if top_p is None else top_p),
                  _f32_bits(repetition_penalty), len(stops), seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF,
                  step & 0xFFFFFFFF]
    for r, (pos, slot, row, mark) in enumerate(items):
        w[HEADER + ITEM * r: HEADER + ITEM * (r + 1)] = [pos, slot, row, int(bool(mark))]
    w[HEADER + ITEM * len(items):] = stops
    return w


def _check_hyper(hyper: Tensor, items: int) -> None:
    want(hyper, "hyper", ndim=1, dtype="u32")
    if hyper.numel < HEADER + ITEM * items:
        raise ShapeError(f"hyper has {hyper.numel} words, {items} items need {HEADER + ITEM * items}")


def rope_at(x: Tensor, hyper: Tensor, tokens_per_item: int = 1, theta: float = 10000.0) -> Tensor:
    """ops.rope of token-major x [S, H, D] where token s is at position hyper's position of item
    s // tokens_per_item, plus s % tokens_per_item."""
    want(x, "x", ndim=3, dtype=FLOATS)
    S, H, D = x.shape
    if D % 2 or tokens_per_item < 1 or S % tokens_per_item:
        raise ShapeError(f"rope_at: head dim {D} must be even and {S} tokens whole items of {tokens_per_item}")
    _check_hyper(hyper, S // tokens_per_item)
    y = like(x)
    per_thread("rope_at", x.dtype, [x, hyper, y], dict(S=S, H=H, D=D, Q=tokens_per_item,
                                                         log2_theta=math.log2(theta)), S * H * (D // 2))
    return y


def kv_write(x: Tensor, cache: Tensor, hyper: Tensor, tokens_per_item: int = 1) -> None:
    """Write row s of x [S, row...] into cache [slots, L, row...] at (slot, position + s % tokens_per_item)
    of item s // tokens_per_item (slot and position from hyper). Rows past L are the caller's error (the
    positions live on the device and are not checked there)."""
    S, row = x.shape[0], x.numel // max(1, x.shape[0])
    if cache.ndim < 2 or cache.numel % (cache.shape[0] * cache.shape[1]) or \
            cache.numel // (cache.shape[0] * cache.shape[1]) != row or x.dtype != cache.dtype:
        raise ShapeError(f"kv_write: x {x.shape}/{x.dtype} rows do not fit cache {cache.shape}/{cache.dtype}")
    if tokens_per_item < 1 or S % tokens_per_item or tokens_per_item > cache.shape[1]:
        raise ShapeError(f"kv_write: {S} tokens are not whole items of {tokens_per_item} <= {cache.shape[1]}")
    _check_hyper(hyper, S // tokens_per_item)
    per_thread("kv_write", x.dtype, [x, hyper, cache], dict(S=S, row=row, Q=tokens_per_item, L=cache.shape[1]),
               S * row)


def rope_kv_at(q: Tensor, k: Tensor, v: Tensor, hyper: Tensor, k_cache: Tensor, v_cache: Tensor,
               tokens_per_item: int = 1, theta: float = 10000.0) -> Tensor:
    """rope_at(q), and rope_at(k) and v written into their caches (kv_write), in one kernel: q [S, H, D],
    k and v [S, KVH, D], caches [slots, L, KVH, D]. Returns q rotated; the same bits as the three ops, which
    run instead where the seven-buffer kernel exceeds the device's binding limit."""
    want(q, "q", ndim=3, dtype=FLOATS)
    want(k, "k", ndim=3, dtype=q.dtype)
    want(v, "v", shape=k.shape, dtype=q.dtype)
    S, H, D = q.shape
    KVH = k.shape[1]
    if k.shape[0] != S or k.shape[2] != D or k_cache.ndim != 4 or k_cache.shape != v_cache.shape \
            or k_cache.shape[2:] != (KVH, D) or not k_cache.dtype == v_cache.dtype == q.dtype:
        raise ShapeError(f"rope_kv_at: q {q.shape}, k/v {k.shape}/{v.shape}, caches {k_cache.shape}/{v_cache.shape}")
    if D % 2 or tokens_per_item < 1 or S % tokens_per_item or tokens_per_item > k_cache.shape[1]:
        raise ShapeError(f"rope_kv_at: head dim {D} must be even and {S} tokens whole items of "
                         f"{tokens_per_item} <= {k_cache.shape[1]}")
    _check_hyper(hyper, S // tokens_per_item)
    try:
        kernels.usable("rope_kv_at", q.dtype, q.device)
    except BindingLimitError:
        kv_write(rope_at(k, hyper, tokens_per_item, theta), k_cache, hyper, tokens_per_item)
        kv_write(v, v_cache, hyper, tokens_per_item)
        return rope_at(q, hyper, tokens_per_item, theta)
    qo = like(q)
    per_thread("rope_kv_at", q.dtype, [q, k, v, hyper, qo, k_cache, v_cache],
               dict(S=S, H=H, KVH=KVH, D=D, Q=tokens_per_item, L=k_cache.shape[1], log2_theta=math.log2(theta)),
               S * (H + 2 * KVH) * (D // 2))
    return qo


def attention_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, hyper: Tensor, score: Tensor,
                     scale: float | None = None) -> Tensor:
    """Attention of one query per item (q [R, H, D]) over keys and values 0..position of its cache slot
    (k_cache, v_cache [slots, L, KVH, D]; position and slot from hyper). score: an f32 scratch of at least
    R*H*L elements. Returns [R, H, D]."""
    want(q, "q", ndim=3, dtype=FLOATS)
    R, H, D = q.shape
    if k_cache.ndim != 4 or k_cache.shape != v_cache.shape or k_cache.shape[3] != D or H % k_cache.shape[2]:
        raise ShapeError(f"attention_decode: q {q.shape}, caches {k_cache.shape} / {v_cache.shape}")
    if not q.dtype == k_cache.dtype == v_cache.dtype:
        raise UnsupportedError(f"attention_decode: dtypes {q.dtype}, {k_cache.dtype}, {v_cache.dtype} differ")
    L, KVH = k_cache.shape[1], k_cache.shape[2]
    want(score, "score", ndim=1, dtype="f32")
    if score.numel < R * H * L:
        raise ShapeError(f"attention_decode: score needs {R * H * L} elements, has {score.numel}")
    _check_hyper(hyper, R)
    v = pick_decode_wg(kernels.usable("attention_decode", q.dtype, q.device), D, q.device.info.type)
    out = like(q)
    kernels.dispatch(v, [q, k_cache, v_cache, hyper, score, out],
                     dict(R=R, H=H, KVH=KVH, D=D, L=L, scale=1.0 / math.sqrt(D) if scale is None else float(scale)),
                     kernels.grid(R * H))
    return out


def sample(logits: Tensor, hyper: Tensor, seen: Tensor, picked: Tensor, items: int) -> None:
    """Choose the next token of each of `items` items on the device (templates/sample.comp.j2): item r
    reads logits row hyper[row of r] ([rows, V]); the penalty reads seen [slots, V] (u32, nonzero: in the
    sequence), and the chosen id is marked there when the item's flag says so. picked [2 * slots]: the id in
    picked[slot], 1 in picked[slots + slot] if it is a stop token."""
    want(logits, "logits", ndim=2, dtype=FLOATS)
    V = logits.shape[1]
    want(seen, "seen", ndim=2, dtype="u32")
    want(picked, "picked", ndim=1, dtype="u32")
    slots = seen.shape[0]
    if seen.shape[1] != V or picked.numel != 2 * slots or items < 1:
        raise ShapeError(f"sample: seen {seen.shape}, picked {picked.shape} for {items} items of {V} logits")
    _check_hyper(hyper, items)
    v = pick_sample_wg(kernels.usable("sample", logits.dtype, logits.device), logits.device.info.type)
    kernels.dispatch(v, [logits, hyper, seen, picked], dict(items=items, cols=V, slots=slots), kernels.grid(items))
