"""Attention over a KV cache (kv_len != q_len, a start position) against a float64 oracle, and the
runtime pieces generation relies on (views share kernels, the arena reuses tensors)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import EvermindError, ShapeError
from evermind_vk.runtime import arena
import ref
from oracle import TINY16, TINY32, U16, U32, assert_within, rounded

NP = {"f32": np.float32, "f16": np.float16}
GQA = st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3)])


def oracle(q, kc, vc, start, scale, rnd=ref.same):
    Q, H, D = q.shape
    G = H // kc.shape[1]
    kv = start + Q
    out = np.zeros_like(q)
    for h in range(H):
        s = rnd(scale * q[:, h] @ kc[:kv, h // G].T)
        s = np.where(np.arange(kv)[None, :] <= start + np.arange(Q)[:, None], s, -np.inf)
        p = np.exp(s - s.max(1, keepdims=True))
        p = rnd(p / p.sum(1, keepdims=True))
        out[:, h] = p @ vc[:kv, h // G]
    return out


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@given(Q=st.integers(1, 9), start=st.integers(0, 30), extra=st.integers(0, 5), heads=GQA, D=st.integers(1, 12),
       seed=st.integers(0, 2**31))
def test_attention_cached_matches_oracle(device, dtype, Q, start, extra, heads, D, seed):
    H, KVH = heads
    L = start + Q + extra  # rows past start + Q hold garbage the op must not read
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((Q, H, D)).astype(NP[dtype])
    kc = rng.standard_normal((L, KVH, D)).astype(NP[dtype])
    vc = rng.standard_normal((L, KVH, D)).astype(NP[dtype])
    kc[start + Q:] = vc[start + Q:] = 1e4
    scale = 1 / np.sqrt(D)
    rnd = (lambda a: rounded(a, "f16")) if dtype == "f16" else ref.same
    want = oracle(rounded(q, dtype), rounded(kc, dtype), rounded(vc, dtype), start, scale, rnd)
    got = ops.attention_cached(ev.tensor(q), ev.tensor(kc), ev.tensor(vc), start).numpy().astype(np.float64)
    n = 4 * (start + Q + D) * (64 if dtype == "f16" else 1)
    tol = 8 * (n + 8) * U32 + (2 * U16 if dtype == "f16" else 0)
    tiny = TINY16 if dtype == "f16" else TINY32
    assert_within(got, want, tol * (np.abs(want) + np.abs(want).max()) + 2 * tiny, "attention_cached")


def test_attention_cached_equals_full_attention_rows(device):
    """Q queries appended after `start` cached positions give the last Q rows of causal attention."""
    rng = np.random.default_rng(1)
    S, H, KVH, D, start = 11, 4, 2, 6, 7
    q, k, v = (rng.standard_normal((S, h, D)).astype(np.float32) for h in (H, KVH, KVH))
    full, _ = ops.attention(ev.tensor(q), ev.tensor(k), ev.tensor(v), causal=True)
    part = ops.attention_cached(ev.tensor(q[start:]), ev.tensor(k), ev.tensor(v), start)
    assert np.allclose(part.numpy(), full.numpy()[start:], rtol=1e-5, atol=1e-6)


def test_attention_cached_errors(device):
    q = ev.tensor(np.zeros((2, 2, 4), np.float32))
    kc = ev.tensor(np.zeros((5, 1, 4), np.float32))
    with pytest.raises(ShapeError, match="outside the cache"):
        ops.attention_cached(q, kc, kc, 4)
    with pytest.raises(ShapeError, match="disagree"):
        ops.attention_cached(q, ev.tensor(np.zeros((5, 1, 3), np.float32)), ev.tensor(np.zeros((5, 1, 3), np.float32)), 0)


def test_views_share_kernels_and_arena_reuses_tensors(device):
    x = ev.tensor(np.arange(8, dtype=np.float32))
    assert x.reshape(2, 4).uid == x.uid and x.reshape(2, 4).reshape(8).uid == x.uid
    ops.scale(x.reshape(2, 4), 2.0)
    n = len(device._algorithms)
    ops.scale(x.reshape(4, 2), 2.0)  # another view of the same buffer: no new pipeline
    assert len(device._algorithms) == n
    pool = arena(device)
    got = []
    for _ in range(3):
        with pool:
            a, b = ops.scale(x, 2.0), ops.scale(x, 3.0)
            got.append((a, b))
            assert np.array_equal(b.numpy(), 3 * np.arange(8))
    assert got[0][0] is got[2][0] and got[0][1] is got[1][1] and got[0][0] is not got[0][1]
    with pool:
        with pytest.raises(EvermindError, match="nest"):
            with pool:
                pass
