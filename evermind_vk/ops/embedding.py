"""Token embeddings (gather, and its deterministic scatter-add backward) and rotary position
embeddings (RoPE), on token-major tensors."""
from __future__ import annotations

import math

from ..errors import ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.select import embedding as select_embedding
from ..runtime.select import fixed as select_fixed
from ..runtime.select.loops import MAX_LOOP, loop_chunks
from ..runtime.knobs import get as knob
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, _forced_count, like, one_variant, per_thread, want

__all__ = ["embedding", "embedding_backward", "rope", "rope_backward"]


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
    """d table (f32, [V, D] or [D, V]); deterministic (token order) accumulation; ids >= V skipped.
    Tokens are split into ordered dispatches of at most MAX_LOOP (runtime.select.loops.loop_chunks), each
    adding its tokens' sums to the table, so no invocation loops past lavapipe's cap.

    Two paths (runtime.select.embedding.embedding_backward_path; EVERMIND_VK_EMBEDDING_BACKWARD=scan|sorted
    forces one): 'scan', every table thread tests every token's id; 'sorted', a counting sort of the
    ids (embedding_rank), then each thread sums only its id's tokens (embedding_backward_sorted). Both
    add in token order: below MAX_LOOP tokens they give the same bits."""
    T, D = dy.shape
    if T + index_offset > ids.numel:
        raise ShapeError(f"embedding_backward: {T} tokens at offset {index_offset} exceed {ids.numel} ids")
    dt = empty((D, vocab) if transpose else (vocab, D), "f32", dy.device)
    cols = select_embedding.embedding_backward_cols(D, transpose)
    path = select_embedding.embedding_backward_path(T, vocab, D, cols,
                                            knob("EVERMIND_VK_EMBEDDING_BACKWARD"))
    if path == "sorted" and T > 0:
        chunks = loop_chunks(T)
        rank = empty((T,), "u32", dy.device)
        order = empty((2 * T,), "u32", dy.device)  # ids ascending, then their token indices
        lanes = select_embedding.embedding_rank_lanes(T, dy.device.info.type,
                                              _forced_count("EVERMIND_VK_RANK_LANES", "a number of threads"))
        if one_variant("embedding_rank", "f32", dy.device).spec["WG"] % lanes:  # the template sums within a workgroup
            raise UnsupportedError(f"embedding_rank: {lanes} lanes a token do not divide its workgroup")
        for j, (c0, c1) in enumerate(chunks):
            per_thread("embedding_rank", "f32", [ids, rank, order],
                       dict(T=T, offset=index_offset, c0=c0, c1=c1, first=int(j == 0),
                            last=int(j == len(chunks) - 1), lanes=lanes), T * lanes)
        for j, (p0, p1) in enumerate(chunks):
            per_thread("embedding_backward_sorted", dy.dtype, [order, dy, dt],
                       dict(T=T, D=D, V=vocab, transpose=int(transpose), p0=p0, p1=p1, accumulate=int(j > 0),
                            cols=cols), vocab * D // cols)
        return dt
    for j, (t0, t1) in enumerate(loop_chunks(T)):
        per_thread("embedding_backward", dy.dtype, [ids, dy, dt],
                   dict(T=T, D=D, V=vocab, transpose=int(transpose), offset=index_offset, t0=t0, t1=t1,
                        accumulate=int(j > 0), cols=cols), vocab * D // cols)
    return dt


def _rope(x: Tensor, start_pos: int, theta: float, sign: float, seq_len: int | None) -> Tensor:
    want(x, "x", ndim=3, dtype=FLOATS)
    S, H, D = x.shape
    if D % 2:
        raise ShapeError(f"rope needs an even head dimension, got {D}")
    period = S if seq_len is None else int(seq_len)
    if period < 1 or S % period:
        raise ShapeError(f"rope: {S} tokens are not whole sequences of {period}")
    y = like(x)
    v = select_fixed.pick_cpu_twin(kernels.usable("rope", x.dtype, x.device), x.device.info.type,
                                   fits=D // 2 + 1 <= MAX_LOOP)
    threads = S * H if "th" in v.flags else S * H * (D // 2)  # th: a thread per (token, head), else per pair
    kernels.dispatch(v, [x, y], dict(S=S, H=H, D=D, start=start_pos, period=period, log2_theta=math.log2(theta),
                                     sign=sign), kernels.grid(-(-max(1, threads) // v.spec["WG"])))
    return y


def rope(x: Tensor, start_pos: int = 0, theta: float = 10000.0, seq_len: int | None = None) -> Tensor:
    """Rotary position embedding, half-split (NeoX), on token-major [S, H, D]; position = start_pos +
    (s % seq_len) (seq_len defaults to S: one sequence; smaller packs S / seq_len sequences)."""
    return _rope(x, start_pos, theta, 1.0, seq_len)


def rope_backward(dy: Tensor, start_pos: int = 0, theta: float = 10000.0, seq_len: int | None = None) -> Tensor:
    """The inverse rotation of dy (rope is orthogonal)."""
    return _rope(dy, start_pos, theta, -1.0, seq_len)
