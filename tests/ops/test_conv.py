"""Causal depthwise conv1d (forward, dx, dkernel, dbias) against a float64 numpy oracle on the same
rounded inputs (hypothesis over shapes, packed sequences, both tap orders, f32/f16), finite differences
of the device's own forward, the autodiff rule, a reduction past lavapipe's 65,535-iteration loop cap,
and builderforce's EvermindLM convention on a hand-checked vector."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.autodiff import Tape, functional as F
from evermind_vk.errors import ShapeError, UnsupportedError
from oracle import TINY16, TINY32, U16, U32, assert_within, rounded
from test_finite_differences import check

NP = {"f32": np.float32, "f16": np.float16}


def lags(K, taps):
    return np.arange(K) if taps == "lag" else np.arange(K)[::-1]


def ref_conv(x, k, b, L, taps):
    """y[t, c] = b[c] + sum_j k[c, j] x[t - lag_j, c] with lag_j <= t mod L (float64)."""
    T, C = x.shape
    y = np.zeros((T, C)) + (0 if b is None else b)
    s = np.arange(T) % L
    for j, lag in enumerate(lags(k.shape[1], taps)):
        if lag >= T:
            continue
        shifted = np.zeros_like(x)
        shifted[lag:] = x[:T - lag]
        y += np.where((s >= lag)[:, None], shifted * k[:, j], 0)
    return y


def ref_conv_bwd(x, k, dy, L, taps):
    """(dx, dk) of ref_conv, written out directly (not by transposing the forward)."""
    T, C = x.shape
    K = k.shape[1]
    dx, dk = np.zeros_like(x), np.zeros((C, K))
    for t in range(T):
        for j, lag in enumerate(lags(K, taps)):
            if lag <= t % L:
                dx[t - lag] += k[:, j] * dy[t]
                dk[:, j] += dy[t] * x[t - lag]
    return dx, dk


def close(got, want, mag, n, dtype, what):
    tol = 8 * (n + 8) * U32 + (2 * U16 if dtype == "f16" else 0)
    tiny = TINY16 if dtype == "f16" else TINY32
    assert_within(np.asarray(got, np.float64), want, tol * (np.abs(want) + mag) + 2 * tiny, what)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@given(n_seq=st.integers(1, 4), L=st.integers(1, 24), C=st.integers(1, 40), K=st.integers(1, 6),
       taps=st.sampled_from(["lag", "torch"]), with_bias=st.booleans(), seed=st.integers(0, 2**31))
def test_conv1d_causal(device, dtype, n_seq, L, C, K, taps, with_bias, seed):
    rng = np.random.default_rng(seed)
    T = n_seq * L
    x = rng.standard_normal((T, C)).astype(NP[dtype])
    dy = rng.standard_normal((T, C)).astype(NP[dtype])
    k = rng.standard_normal((C, K)).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32) if with_bias else None
    X, DY, Kf = rounded(x, dtype), rounded(dy, dtype), k.astype(np.float64)
    B = None if b is None else b.astype(np.float64)
    xt, kt = ev.tensor(x), ev.tensor(k)
    y = ops.conv1d_causal(xt, kt, None if b is None else ev.tensor(b), seq_len=L, taps=taps)
    assert y.dtype == dtype and y.shape == (T, C)
    mag = ref_conv(np.abs(X), np.abs(Kf), None if B is None else np.abs(B), L, taps)
    close(y.numpy(), ref_conv(X, Kf, B, L, taps), mag, K + 1, dtype, "conv1d")
    dx, dk, db = ops.conv1d_causal_backward(xt, kt, ev.tensor(dy), seq_len=L, taps=taps, bias=with_bias)
    wdx, wdk = ref_conv_bwd(X, Kf, DY, L, taps)
    mdx, mdk = ref_conv_bwd(np.abs(X), np.abs(Kf), np.abs(DY), L, taps)
    close(dx.numpy(), wdx, mdx, K, dtype, "conv1d dx")
    assert dk.dtype == "f32" and dk.shape == (C, K)
    close(dk.numpy(), wdk, mdk, T, "f32", "conv1d dkernel")
    if with_bias:
        close(db.numpy(), DY.sum(0), np.abs(DY).sum(0), T, "f32", "conv1d dbias")
    else:
        assert db is None


def test_builderforce_convention(device):
    # EvermindLM: conv_t[c] = sum_{j<K, t-j>=0} k[c*K + j] n_{t-j}[c]; identity init k[c*K] = 1 gives y = x.
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    k = np.array([[1, 0.5, 0.25], [2, 0, 1]], np.float32)
    y = ops.conv1d_causal(ev.tensor(x), ev.tensor(k), seq_len=3).numpy()
    assert np.array_equal(y[:, 0], [0, 2, 5, 6, 11, 15.5])  # 4 + .5*2 + .25*0 = 5; t=3 starts a sequence
    assert np.array_equal(y[:, 1], [2, 6, 11, 14, 18, 29])
    ident = np.zeros((2, 3), np.float32)
    ident[:, 0] = 1
    assert np.array_equal(ops.conv1d_causal(ev.tensor(x), ev.tensor(ident)).numpy(), x)
    # torch order is the same filter reversed.
    yt = ops.conv1d_causal(ev.tensor(x), ev.tensor(np.ascontiguousarray(k[:, ::-1])), seq_len=3, taps="torch")
    assert np.array_equal(yt.numpy(), y)


def test_dkernel_past_the_loop_cap(device):
    # 70,000 tokens in one sequence: a per-invocation loop over T would be cut at 65,535 by lavapipe.
    rng = np.random.default_rng(3)
    T, C, K = 70_000, 2, 3
    x = rng.standard_normal((T, C)).astype(np.float32)
    dy = rng.standard_normal((T, C)).astype(np.float32)
    k = rng.standard_normal((C, K)).astype(np.float32)
    dx, dk, db = ops.conv1d_causal_backward(ev.tensor(x), ev.tensor(k), ev.tensor(dy), bias=True)
    X, DY = x.astype(np.float64), dy.astype(np.float64)
    want = np.stack([(DY[j:] * X[:T - j]).sum(0) for j in range(K)], 1)
    mag = np.stack([(np.abs(DY[j:]) * np.abs(X[:T - j])).sum(0) for j in range(K)], 1)
    # two-stage: 256-term chunks, then 274 chunk sums
    close(dk.numpy(), want, mag, 256 + 274, "f32", "dkernel T=70000")
    close(db.numpy(), DY.sum(0), np.abs(DY).sum(0), T, "f32", "dbias T=70000")


def test_chunking_rule():
    from evermind_vk.ops.conv import CHUNK, MAX_CHUNKS, _chunk
    assert _chunk(1) == CHUNK and _chunk(CHUNK * MAX_CHUNKS) == CHUNK
    big = CHUNK * MAX_CHUNKS * 3 + 1
    assert -(-big // _chunk(big)) <= MAX_CHUNKS and _chunk(big) <= 4 * CHUNK


@pytest.mark.parametrize("taps", ["lag", "torch"])
def test_fd_conv1d(device, taps):
    def T_(a):
        return ev.tensor(np.asarray(a, np.float32))

    def fwd(x, k, b):
        return ops.conv1d_causal(T_(x), T_(k), T_(b), seq_len=4, taps=taps).numpy()

    def bwd(x, k, b, g):
        return [a.numpy() for a in ops.conv1d_causal_backward(T_(x), T_(k), T_(g), seq_len=4, taps=taps, bias=True)]
    rng = np.random.default_rng(5)
    check(fwd, bwd, [rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((3, 3)).astype(np.float32),
                     rng.standard_normal(3).astype(np.float32)])


def test_autodiff_rule(device):
    rng = np.random.default_rng(7)
    x = ev.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    k = ev.tensor(rng.standard_normal((4, 2)).astype(np.float32))
    b = ev.tensor(rng.standard_normal(4).astype(np.float32))
    g = rng.standard_normal((6, 4)).astype(np.float32)
    for bias in (None, b):
        with Tape() as tape:
            y = F.conv1d_causal(x, k, bias, seq_len=3)
        grads = tape.backward({y: ev.tensor(g)})
        dx, dk, db = ops.conv1d_causal_backward(x, k, ev.tensor(g), seq_len=3, bias=bias is not None)
        assert np.array_equal(grads[x].numpy(), dx.numpy()) and np.array_equal(grads[k].numpy(), dk.numpy())
        if bias is not None:
            assert np.array_equal(grads[b].numpy(), db.numpy())


def test_errors(device):
    x = ev.tensor(np.zeros((6, 4), np.float32))
    with pytest.raises(ShapeError, match="whole sequences"):
        ops.conv1d_causal(x, ev.tensor(np.zeros((4, 2), np.float32)), seq_len=4)
    with pytest.raises(ShapeError, match=r"\[C, K\]"):
        ops.conv1d_causal(x, ev.tensor(np.zeros((3, 2), np.float32)))
    with pytest.raises(UnsupportedError, match="taps"):
        ops.conv1d_causal(x, ev.tensor(np.zeros((4, 2), np.float32)), taps="flipped")
    with pytest.raises(UnsupportedError, match="kernel"):
        ops.conv1d_causal(x, ev.tensor(np.zeros((4, 2), np.float16)))
    with pytest.raises(ShapeError, match="bias"):
        ops.conv1d_causal(x, ev.tensor(np.zeros((4, 2), np.float32)), ev.tensor(np.zeros(3, np.float32)))
