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

from ..errors import BindingLimitError, ConfigError, ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.select import decode as select_decode
from ..runtime.select.decode import MAX_STOPS, pick_decode_wg, pick_sample_wg
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, knob, like, per_thread, want
from .scan import _dtin

__all__ = ["HEADER", "ITEM", "MAX_STOPS", "hyper_words", "rope_at", "kv_write", "rope_kv_at", "attention_decode", "sample",
           "LAYER_WEIGHTS", "decode_layer", "decode_step_plan", "MAMBA1_WEIGHTS", "mamba1_decode", "HATTN_WEIGHTS",
           "hybrid_attn_decode", "evermind_layer"]

# decode_layer's weights, in its binding order (TransformerLM's names after "layers.{i}.")
LAYER_WEIGHTS = ("attn_norm.weight", "attn.wq", "attn.wk", "attn.wv", "attn.wo", "mlp_norm.weight",
                 "mlp.w_gate_up", "mlp.w_down")

# mamba1_decode's weights, in its binding order (HybridMambaModel's names after "layer{i}.")
MAMBA1_WEIGHTS = ("normWeight", "wInProj", "bInProj", "wConv", "bConv", "wXProj", "bXProj", "wDtProj", "bDtProj",
                  "A_log", "D_vec", "wOutProj", "bOutProj")

# hybrid_attn_decode's weights, in its binding order (HybridMambaModel's attention layer names after "layer{i}.")
HATTN_WEIGHTS = ("normWeight", "wQKV", "bQKV", "wO", "bO")

HEADER = 8
ITEM = 4


def _f32_bits(x: float) -> int:
    return int(np.array([x], np.float32).view(np.uint32)[0])


def hyper_words(items, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                repetition_penalty: float = 1.0, stop_tokens=(), seed: int = 0, step: int = 0) -> np.ndarray:
    """The hyper buffer's words: items is a list of (position, slot, logits row, mark_seen) per item; at most
    MAX_STOPS stop tokens (the sampler's loop over them is planned for that many)."""
    stops = [int(s) for s in stop_tokens]
    if len(stops) > MAX_STOPS:
        raise ConfigError(f"at most {MAX_STOPS} stop tokens on the device, got {len(stops)}")
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


def _check_embedding(op: str, ids: Tensor | None, table: Tensor | None, ids_offset: int, R: int, d: int) -> None:
    """A fused layer 0's embedding lookup: ids (u32, R of them from word ids_offset) and table [V, d] come
    together or not at all."""
    if (ids is None) != (table is None):
        raise ShapeError(f"{op}: ids and table come together (layer 0's embedding) or not at all")
    if ids is not None:
        want(ids, "ids", ndim=1, dtype="u32")
        want(table, "table", ndim=2, dtype="f32")
        if ids_offset < 0 or ids.numel < ids_offset + R or table.shape[1] != d:
            raise ShapeError(f"{op}: {ids.numel} ids (from {ids_offset}) for {R} items, table {table.shape} "
                             f"for width {d}")


def _check_final(op: str, d: int, R: int, table: Tensor | None, final_norm: Tensor | None,
                 head: Tensor | None, logits: Tensor | None, norm: bool = True) -> int:
    """A fused last layer's final norm [d] and tied head [V, d] with its logits [R, V] (decode_layer: its next
    norm; mamba1_decode, hybrid_attn_decode; evermind_layer with norm=False: its head reads the block's output
    unnormed): head and logits come together, and with the final norm where the model has one. Returns V (the
    head's rows, else the table's, else 0)."""
    V = 0 if table is None else table.shape[0]
    if (head is None) != (logits is None) or (norm and head is not None and final_norm is None):
        raise ShapeError(f"{op}: head and logits come together" + (", and with the final norm" if norm else "")
                         + " (the last block)")
    if final_norm is not None:
        want(final_norm, "final_norm", shape=(d,), dtype="f32")
    if head is not None:
        want(head, "head", ndim=2, dtype="f32")
        want(logits, "logits", shape=(R, head.shape[0]), dtype="f32")
        if head.shape[1] != d or (table is not None and table.shape[0] != head.shape[0]):
            raise ShapeError(f"{op}: head {head.shape} for width {d} (and table "
                             f"{None if table is None else table.shape})")
        V = head.shape[0]
    return V


def _out_rows(out: Tensor | None, R: int, d: int, device) -> Tensor:
    """The [R, d] f32 rows a fused layer writes (its next or final norm's output): `out`, checked, or new."""
    y = empty((R, d), "f32", device) if out is None else out
    want(y, "out", shape=(R, d), dtype="f32")
    return y


def _check_head_loops(op: str, n: int, V: int) -> None:
    """A fused layer whose loops, with the head's V rows folded in, run n iterations an invocation: past the loop
    cap (which the variant's own checks count without the head), the head must run as its own product."""
    if n > select_decode.MAX_LOOP:
        raise UnsupportedError(f"{op}: {n} loop iterations an invocation with a head of {V} rows > MAX_LOOP = "
                               f"{select_decode.MAX_LOOP}, the loop cap (run the head's product apart)")


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
    v = pick_sample_wg(kernels.usable("sample", logits.dtype, logits.device), logits.device.info.type, V)
    kernels.dispatch(v, [logits, hyper, seen, picked], dict(items=items, cols=V, slots=slots), kernels.grid(items))


def decode_step_plan(launch, device) -> select_decode.Plan:
    """Whether a decode step (select.decode.Launch, MambaLaunch, ConvLaunch) runs on its fused kernel
    (plan.variant: decode_layer, mamba1_decode or hybrid_attn_decode (plan.layers: a HybridMamba stack's layer kinds
    that run fused), evermind_layer) or on the per-op kernels (None): the rule
    runtime.select.decode.plan with EVERMIND_VK_DECODE_FUSED."""
    return select_decode.plan(launch, device, select_decode.Knobs(knob("EVERMIND_VK_DECODE_FUSED")))


def decode_layer(x: Tensor, hyper: Tensor, k_cache: Tensor, v_cache: Tensor, weights, next_norm: Tensor, *,
                 eps: float = 1e-6, theta: float = 10000.0, limit: float = 0.0, ids: Tensor | None = None,
                 table: Tensor | None = None, out: Tensor | None = None, head: Tensor | None = None,
                 logits: Tensor | None = None, ids_offset: int = 0) -> Tensor:
    """One TransformerLM block (models/transformer.py) for the newest token of each of R sequences, in one
    dispatch (templates/decode.comp.j2, one workgroup a sequence): x [R, d] is the residual stream in and out
    (updated in place; with ids and table, layer 0: x is written from the embedding rows
    table[ids[ids_offset + r]], ids >= V give zero rows, and its old contents are not read; ids may be the hyper
    buffer itself, the ids in words past its items and stops, which saves the decode step an upload). The token of item r is at position hyper[8 + 4r]
    of cache slot hyper[8 + 4r + 1]; its key and value are written there (caches [slots, L, KVH, D]) and it
    attends to positions 0..position. weights: the block's eight tensors in LAYER_WEIGHTS order (norm gains
    [d], wq [H*D, d], wk and wv [KVH*D, d], wo [d, H*D], w_gate_up [2*ff, d] rows [gate | up], w_down [d, ff]).
    Returns y = rms_norm(x, next_norm) [R, d] (into `out` when given); the SwiGLU is clamped to +-limit when
    limit > 0 (ops.glu). With head ([V, d], the last block) and logits ([R, V]), the same dispatch also writes
    logits = y head^T. Raises UnsupportedError where decode_layer cannot run the launch
    (select.decode.layer_errors: shapes, shared memory, loop count, f32 only)."""
    wn1, wq, wk, wv, wo, wn2, wgu, wd = weights
    want(x, "x", ndim=2, dtype="f32")
    R, d = x.shape
    for t, name in ((wn1, "attn norm"), (wn2, "mlp norm"), (next_norm, "next norm")):
        want(t, name, shape=(d,), dtype="f32")
    want(wq, "wq", ndim=2, dtype="f32")
    HD = wq.shape[0]
    if k_cache.ndim != 4 or k_cache.shape != v_cache.shape or k_cache.dtype != "f32" or v_cache.dtype != "f32":
        raise ShapeError(f"decode_layer: caches {k_cache.shape}/{k_cache.dtype}, {v_cache.shape}/{v_cache.dtype}")
    slots, L, KVH, D = k_cache.shape
    if D < 2 or D % 2 or HD % D or (HD // D) % KVH:
        raise ShapeError(f"decode_layer: wq {wq.shape} is not whole heads of {D} (even) over {KVH} kv heads")
    H = HD // D
    want(wq, "wq", shape=(HD, d))
    want(wk, "wk", shape=(KVH * D, d), dtype="f32")
    want(wv, "wv", shape=(KVH * D, d), dtype="f32")
    want(wo, "wo", shape=(d, HD), dtype="f32")
    want(wgu, "w_gate_up", ndim=2, dtype="f32")
    if wgu.shape[0] % 2 or wgu.shape[1] != d:
        raise ShapeError(f"decode_layer: w_gate_up {wgu.shape} is not [2 ff, {d}]")
    ff = wgu.shape[0] // 2
    want(wd, "w_down", shape=(d, ff), dtype="f32")
    _check_hyper(hyper, R)
    _check_embedding("decode_layer", ids, table, ids_offset, R, d)
    V = _check_final("decode_layer", d, R, table, next_norm, head, logits)
    launch = select_decode.Launch(d, H, KVH, D, ff, L, vocab=V, items=R)
    plan = select_decode.plan(launch, x.device, select_decode.Knobs("1"))

    y = _out_rows(out, R, d, x.device)
    push = select_decode.layer_push(launch, R, ids is not None, V, eps, theta, limit, head is not None, plan.seqs,
                                    ids_offset)
    if head is not None:
        _check_head_loops("decode_layer", select_decode.layer_loop_count(push, plan.variant.spec["WG"]), V)
    kernels.dispatch(plan.variant, [x, hyper if ids is None else ids, x if table is None else table, wn1, wq, wk, wv,
                                    wo, wn2, wgu, wd, next_norm, k_cache, v_cache, hyper, y,
                                    x if head is None else head, y if logits is None else logits],
                     push, kernels.grid(-(-R // plan.seqs)))
    return y


def mamba1_decode(x: Tensor, weights, conv: Tensor | None, h: Tensor, *, first: int = 0, eps: float = 1e-6,
                  discretization: str = "zoh", ids: Tensor | None = None, table: Tensor | None = None,
                  ids_offset: int = 0, final_norm: Tensor | None = None, out: Tensor | None = None,
                  head: Tensor | None = None, logits: Tensor | None = None) -> Tensor | None:
    """One mamba1 block of HybridMambaModel (models/mamba.py, _mamba1_step) for one new token of each of R
    sequences, in one dispatch (templates/decode.comp.j2, one workgroup a sequence or up to four): x [R, d] is the
    residual stream in and out (updated in place; with ids and table, layer 0: x is written from the embedding
    rows table[ids[ids_offset + r]], ids >= V give zero rows, and its old contents are not read). Sequence r's
    recurrent state is slot first + r of conv [slots * (dConv - 1), dInner] (its last dConv - 1 conv inputs,
    oldest first; None when dConv is 1) and h [slots, dInner, dState], both updated in place. weights: the
    block's thirteen tensors in MAMBA1_WEIGHTS order. discretization: the scan's input term ("zoh" or "euler",
    ops.selective_scan). With final_norm (the last block), returns y = rms_norm(x, final_norm) [R, d] (into
    `out` when given), and with head ([V, d]) and logits ([R, V]) the same dispatch also writes
    logits = y head^T; without, returns None. Raises UnsupportedError where mamba1_decode cannot run the launch
    (select.decode.mamba_errors: shapes, shared memory, loop count, f32 only, the device)."""
    wn, win, bin_, wconv, bconv, wx, bx, wdt, bdt, alog, dv, wout, bout = weights
    want(x, "x", ndim=2, dtype="f32")
    R, d = x.shape
    want(wn, "normWeight", shape=(d,), dtype="f32")
    want(win, "wInProj", ndim=2, dtype="f32")
    if win.shape[0] % 2 or win.shape[1] != d:
        raise ShapeError(f"mamba1_decode: wInProj {win.shape} is not [2 dInner, {d}]")
    Di = win.shape[0] // 2
    want(h, "h", ndim=3, dtype="f32")
    slots, N = h.shape[0], h.shape[2]
    if h.shape[1] != Di:
        raise ShapeError(f"mamba1_decode: state h {h.shape} is not [slots, {Di}, dState]")
    want(wconv, "wConv", ndim=2, dtype="f32")
    K = wconv.shape[1]
    want(wconv, "wConv", shape=(Di, K))
    want(wx, "wXProj", ndim=2, dtype="f32")
    DR = wx.shape[0] - 2 * N
    if DR < 1:
        raise ShapeError(f"mamba1_decode: wXProj {wx.shape} has no dt rows past 2 dState = {2 * N}")
    for t, name, shape in ((bin_, "bInProj", (2 * Di,)), (bconv, "bConv", (Di,)), (wx, "wXProj", (DR + 2 * N, Di)),
                           (bx, "bXProj", (DR + 2 * N,)), (wdt, "wDtProj", (Di, DR)), (bdt, "bDtProj", (Di,)),
                           (alog, "A_log", (Di, N)), (dv, "D_vec", (Di,)), (wout, "wOutProj", (d, Di)),
                           (bout, "bOutProj", (d,))):
        want(t, name, shape=shape, dtype="f32")
    if (K > 1) != (conv is not None):
        raise ShapeError(f"mamba1_decode: a conv window state comes with dConv > 1 (dConv {K})")
    if conv is not None:
        want(conv, "conv", shape=(slots * (K - 1), Di), dtype="f32")
    if first < 0 or first + R > slots:
        raise ShapeError(f"mamba1_decode: {R} sequences from slot {first} in a state of {slots} slots")
    _check_embedding("mamba1_decode", ids, table, ids_offset, R, d)
    V = _check_final("mamba1_decode", d, R, table, final_norm, head, logits)
    launch = select_decode.MambaLaunch(d, Di, N, K, DR, vocab=V, items=R)
    plan = select_decode.plan(launch, x.device, select_decode.Knobs("1"))
    y = None if final_norm is None else _out_rows(out, R, d, x.device)
    push = select_decode.mamba_push(launch, R, ids is not None, final_norm is not None, head is not None, plan.seqs,
                                    first, ids_offset, eps, _dtin(discretization))
    _check_head_loops("mamba1_decode", select_decode.mamba_loop_count(push, plan.variant.spec["WG"]), V)
    kernels.dispatch(plan.variant, [x, x if ids is None else ids, x if table is None else table, wn, win, bin_, wconv,
                                    bconv, wx, bx, wdt, bdt, alog, dv, wout, bout, x if conv is None else conv, h,
                                    wn if final_norm is None else final_norm, x if y is None else y,
                                    x if head is None else head, x if logits is None else logits],
                     push, kernels.grid(-(-R // plan.seqs)))
    return y


def hybrid_attn_decode(x: Tensor, hyper: Tensor, k_cache: Tensor, v_cache: Tensor, weights, *, eps: float = 1e-6,
                       ids: Tensor | None = None, table: Tensor | None = None, ids_offset: int = 0,
                       final_norm: Tensor | None = None, out: Tensor | None = None, head: Tensor | None = None,
                       logits: Tensor | None = None) -> Tensor | None:
    """One attention layer of HybridMambaModel (models/mamba.py, _attention_step) for the newest token of each of
    R sequences, in one dispatch (templates/decode.comp.j2, decode_layer's section without RoPE and MLP; one
    workgroup a sequence or up to four): x [R, d] is the residual stream in and out (updated in place; with ids
    and table, layer 0: x is written from the embedding rows table[ids[ids_offset + r]], ids >= V give zero
    rows, and its old contents are not read). h = rms_norm(x, normWeight), [q | k | v] = h wQKV^T + bQKV (MHA:
    H heads of d / H), k and v written into the caches [slots, L, H, d / H] at (slot, position) of item r
    (hyper[8 + 4r + 1], hyper[8 + 4r]), q attends over positions 0..position, x += a wO^T + bO. weights: the
    layer's five tensors in HATTN_WEIGHTS order. With final_norm (the last layer), returns y =
    rms_norm(x, final_norm) [R, d] (into `out` when given), and with head ([V, d]) and logits ([R, V]) the same
    dispatch also writes logits = y head^T; without, returns None. Raises UnsupportedError where
    hybrid_attn_decode cannot run the launch (select.decode.hattn_errors: shapes, shared memory, loop count,
    f32 only)."""
    wn, wqkv, bqkv, wo, bo = weights
    want(x, "x", ndim=2, dtype="f32")
    R, d = x.shape
    if k_cache.ndim != 4 or k_cache.shape != v_cache.shape or k_cache.dtype != "f32" or v_cache.dtype != "f32" \
            or k_cache.shape[2] * k_cache.shape[3] != d:
        raise ShapeError(f"hybrid_attn_decode: caches {k_cache.shape}/{k_cache.dtype}, {v_cache.shape}/"
                         f"{v_cache.dtype} are not [slots, L, heads, {d} / heads] f32")
    slots, L, H, _ = k_cache.shape
    for t, name, shape in ((wn, "normWeight", (d,)), (wqkv, "wQKV", (3 * d, d)), (bqkv, "bQKV", (3 * d,)),
                           (wo, "wO", (d, d)), (bo, "bO", (d,))):
        want(t, name, shape=shape, dtype="f32")
    _check_hyper(hyper, R)
    _check_embedding("hybrid_attn_decode", ids, table, ids_offset, R, d)
    V = _check_final("hybrid_attn_decode", d, R, table, final_norm, head, logits)
    launch = select_decode.MambaLaunch(d, 0, 0, 0, 0, layers=("attention",), vocab=V, items=R, heads=H, max_len=L)
    plan = select_decode.plan(launch, x.device, select_decode.Knobs("1"))
    y = None if final_norm is None else _out_rows(out, R, d, x.device)
    push = select_decode.hattn_push(launch, R, ids is not None, final_norm is not None, head is not None, plan.seqs,
                                    ids_offset, eps)
    _check_head_loops("hybrid_attn_decode", select_decode.hattn_loop_count(push, plan.variant.spec["WG"]), V)
    kernels.dispatch(plan.variant, [x, hyper if ids is None else ids, x if table is None else table, wn, wqkv, bqkv,
                                    wo, bo, k_cache, v_cache, hyper, wn if final_norm is None else final_norm,
                                    x if y is None else y, x if head is None else head,
                                    x if logits is None else logits],
                     push, kernels.grid(-(-R // plan.seqs)))
    return y


# ---- EvermindLM's fused decode step (train/decode.py ConvDecoder) -----------------------------------------------
def evermind_layer(x: Tensor, hyper: Tensor, window: Tensor | None, conv: Tensor, n_conv: Tensor, n_moe: Tensor,
                   moe, *, top_k: int, eps: float = 1e-5, table: Tensor | None = None, ids_offset: int = 0,
                   head: Tensor | None = None, logits: Tensor | None = None) -> Tensor:
    """One EvermindLM block (models/evermind_lm.py) for the newest token of each of R sequences, in one dispatch
    (templates/decode_evermind.comp.j2, one workgroup a sequence, or up to 4 sharing each weight load on CPU
    devices: select.decode.layer_seqs): x [R, d], the residual stream, is updated in
    place: a = x + conv(RMSNorm(x; n_conv)), x = a + MoE(RMSNorm(a; n_moe)). Item r's conv window is slot
    hyper[8 + 4r + 1] of `window` ([slots * (K - 1), d], its last K - 1 conv inputs oldest first; None for
    K = 1), shifted in place; conv [d, K] (tap j reads t - j). moe: (wr [E, d], w1 [(E+1) h, d], b1
    [(E+1) h], w2 [(E+1) d, h], b2 [(E+1) d]), expert 0 the shared one (ops.moe_ffn's route: the top_k largest
    router logits, ties to the lower index, gates their softmax; experts combined in index order, zero gates
    skipped); only the shared and the selected experts are computed. With table [V, d] (layer 0) x is first
    the table's rows of the ids hyper[ids_offset + r] (ids >= V: zero rows) and its old contents are not read;
    with head [V, d] (the last block, the tied table) and logits [R, V] it also writes logits = x head^T.
    Returns x. Raises UnsupportedError where evermind_layer cannot run (select.decode.conv_layer_errors)."""
    want(x, "x", ndim=2, dtype="f32")
    R, d = x.shape
    wr, w1, b1, w2, b2 = moe
    want(wr, "wr", ndim=2, dtype="f32")
    E = wr.shape[0]
    want(w1, "w1", ndim=2, dtype="f32")
    if wr.shape[1] != d or w1.shape[1] != d or w1.shape[0] % (E + 1):
        raise ShapeError(f"evermind_layer: wr {wr.shape}, w1 {w1.shape} for width {d} and {E} experts")
    h = w1.shape[0] // (E + 1)
    want(b1, "b1", shape=(w1.shape[0],), dtype="f32")
    want(w2, "w2", shape=((E + 1) * d, h), dtype="f32")
    want(b2, "b2", shape=((E + 1) * d,), dtype="f32")
    want(conv, "conv", ndim=2, dtype="f32")
    want(n_conv, "n_conv", shape=(d,), dtype="f32")
    want(n_moe, "n_moe", shape=(d,), dtype="f32")
    K = conv.shape[1]
    if conv.shape[0] != d:
        raise ShapeError(f"evermind_layer: conv {conv.shape} is not [{d}, K]")
    if (window is None) != (K == 1):
        raise ShapeError(f"evermind_layer: a conv of {K} taps needs {'no' if K == 1 else 'a'} window")
    if window is not None:
        want(window, "window", ndim=2, dtype="f32")
        if window.shape[1] != d or window.shape[0] % (K - 1):
            raise ShapeError(f"evermind_layer: window {window.shape} is not [slots * {K - 1}, {d}]")
    _check_hyper(hyper, R)
    if table is not None:
        want(table, "table", ndim=2, dtype="f32")
        if table.shape[1] != d or ids_offset < HEADER + ITEM * R or hyper.numel < ids_offset + R:
            raise ShapeError(f"evermind_layer: table {table.shape} for width {d}, {hyper.numel} hyper words for "
                             f"{R} ids from {ids_offset}")
    V = _check_final("evermind_layer", d, R, table, None, head, logits, norm=False)
    launch = select_decode.ConvLaunch(d, h, E, top_k, K, V, R)
    plan = select_decode.plan(launch, x.device, select_decode.Knobs("1"))
    push = select_decode.conv_layer_push(launch, R, table is not None, head is not None, eps, ids_offset, plan.seqs)
    _check_head_loops("evermind_layer", select_decode.conv_layer_loop_count(push, plan.variant.spec["WG"]), V)
    kernels.dispatch(plan.variant, [x, hyper, x if table is None else table, conv, n_conv, n_moe, wr, w1, b1, w2,
                                    b2, x if window is None else window, x if head is None else head,
                                    x if logits is None else logits],
                     push, kernels.grid(-(-R // plan.seqs)))
    return x
# ---- end of evermind_layer --------------------------------------------------------------------------------------
