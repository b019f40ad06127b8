"""builderforce's Mamba-3 (complex decay per head) by the chunked quadratic form (ops.complex_ssd) against a
complex128 sequential recurrence in PyTorch (autograd for the gradients), forward and backward; finite
differences; chunked == one chunk; causality; 70,000 steps; f16 storage."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from oracle import U32, assert_within
from test_cscan import ref_scan

torch = pytest.importorskip("torch")

NAMES = ("x", "dt", "A_log", "B", "C", "D")
GRADS = ("dx", "ddt", "dA_log", "dB", "dC", "dD", "dh0")


def make(rng, batch, L, heads, hd, Nc, groups, with_h0=False):
    M, Dc = batch * L, heads * hd
    f = lambda *s, sc=1.0: (rng.standard_normal(s) * sc).astype(np.float32)  # noqa: E731
    A = np.stack([rng.uniform(-1.0, 0.3, heads), rng.uniform(-3, 3, heads)], 1).astype(np.float32)
    return dict(x=f(M, Dc), dt=f(M, heads) - 1.0, A_log=A, B=f(M, groups * Nc * 2), C=f(M, groups * Nc * 2),
                D=f(Dc), h0=f(batch, Dc, Nc, 2) if with_h0 else None)


def T(a):
    return None if a is None else ev.tensor(np.ascontiguousarray(a))


def oracle(x, dy, batch, groups):
    """y, h_last and every gradient from the per-token recurrence (dt per head, repeated over its channels)."""
    hd = x["x"].shape[1] // x["A_log"].shape[0]
    P = {k: torch.tensor(x[k].astype(np.float64), requires_grad=True) for k in NAMES + ("h0",) if x[k] is not None}
    y, hl = ref_scan(P["x"], P["dt"].repeat_interleave(hd, 1), P["A_log"], P["B"], P["C"], P["D"], batch, groups,
                     h0=P.get("h0"))
    (y * torch.tensor(dy.astype(np.float64))).sum().backward()
    grads = [P[k].grad.numpy() for k in NAMES] + [P["h0"].grad.numpy() if "h0" in P else None]
    return y.detach().numpy(), hl.detach().numpy(), grads


def close(got, want, n, what):
    want = np.asarray(want, np.float64)
    mag = np.abs(want).max() if want.size else 0.0
    assert_within(np.asarray(got, np.float64), want, 64 * (n + 8) * U32 * (np.abs(want) + mag) + 1e-30, what)


def run(x, dy, batch, chunk, groups=1):
    y, hl, H0 = ops.complex_ssd(*(T(x[k]) for k in NAMES), batch=batch, chunk=chunk, groups=groups, h0=T(x["h0"]))
    g = ops.complex_ssd_backward(*(T(x[k]) for k in NAMES), T(dy), H0, batch=batch, chunk=chunk, groups=groups)
    return y, hl, g


@given(batch=st.integers(1, 2), L=st.integers(1, 30), heads=st.integers(1, 3), hd=st.integers(1, 3),
       Nc=st.integers(1, 4), chunk=st.integers(1, 64), with_h0=st.booleans(), data=st.data(),
       seed=st.integers(0, 2**31))
def test_complex_ssd_forward_backward(device, batch, L, heads, hd, Nc, chunk, with_h0, data, seed):
    groups = data.draw(st.sampled_from([g for g in range(1, heads + 1) if heads % g == 0]))
    rng = np.random.default_rng(seed)
    x = make(rng, batch, L, heads, hd, Nc, groups, with_h0)
    dy = rng.standard_normal((batch * L, heads * hd)).astype(np.float32)
    y, hl, got = run(x, dy, batch, chunk, groups)
    wy, whl, want = oracle(x, dy, batch, groups)
    close(y.numpy(), wy, L * Nc, "y")
    close(hl.numpy(), whl, L * Nc, "h_last")
    for name, g, w in zip(GRADS, got, want):
        if w is not None:
            close(g.numpy(), w, L * (Nc + hd) * heads * batch, name)


@given(L=st.integers(1, 64), chunks=st.lists(st.integers(1, 64), min_size=1, max_size=3), seed=st.integers(0, 2**31))
def test_chunked_equals_unchunked(device, L, chunks, seed):
    rng = np.random.default_rng(seed)
    x = make(rng, 2, L, 2, 2, 3, 1, with_h0=True)
    dy = rng.standard_normal((2 * L, 4)).astype(np.float32)
    y0, _, g0 = run(x, dy, 2, L)
    for ch in chunks:
        y1, _, g1 = run(x, dy, 2, ch)
        close(y1.numpy(), y0.numpy().astype(np.float64), 16 * L, f"y, chunks of {ch} vs one chunk")
        for name, a, b in zip(GRADS, g1, g0):
            close(a.numpy(), b.numpy().astype(np.float64), 128 * L, f"{name}, chunks of {ch} vs one chunk")


def test_causality(device, rng):
    L, t = 23, 11
    x = make(rng, 1, L, 2, 2, 3, 1)
    for chunk in (4, 11, 23):
        y = ops.complex_ssd(*(T(x[k]) for k in NAMES), chunk=chunk)[0].numpy()
        for k in ("x", "dt", "B", "C"):
            x2 = dict(x)
            x2[k] = x[k].copy()
            x2[k][t] += 3.0
            y2 = ops.complex_ssd(*(T(x2[k2]) for k2 in NAMES), chunk=chunk)[0].numpy()
            np.testing.assert_array_equal(y2[:t], y[:t], err_msg=f"{k}, chunks of {chunk}")
            assert not np.array_equal(y2[t:], y[t:]), k


def test_long_sequence_past_loop_limit(device):
    """70,000 steps (1,094 chunks): the forward against a complex128 numpy recurrence over all steps; the
    backward against the chunked recurrent kernel (ops.complex_scan_backward: another algorithm, itself
    checked against the recurrence in test_cscan.py) on the same f32 inputs."""
    rng = np.random.default_rng(5)
    L = 70_000
    x = make(rng, 1, L, 1, 2, 2, 1)
    x["dt"] = (rng.standard_normal(x["dt"].shape) * 0.3 - 3.0).astype(np.float32)
    x["A_log"][:, 0] = -0.5  # |ā| < 1: a decaying (stable) recurrence over 70,000 steps
    dy = rng.standard_normal(x["x"].shape).astype(np.float32)
    y, hl, got = run(x, dy, 1, 64)
    lam = complex(x["A_log"][0, 0], x["A_log"][0, 1])
    a = np.exp(np.log1p(np.exp(x["dt"][:, 0].astype(np.float64))) * lam)
    bb = (a - 1) * np.exp(-lam)
    Bc = x["B"][:, 0::2] + 1j * x["B"][:, 1::2]
    Cc = x["C"][:, 0::2] + 1j * x["C"][:, 1::2]
    st_ = np.zeros((2, 2), complex)
    want = np.empty((L, 2))
    for t in range(L):
        st_ = a[t] * st_ + (bb[t] * x["x"][t])[:, None] * Bc[t][None, :]
        want[t] = (np.conj(Cc[t])[None, :] * st_).real.sum(1) + x["D"] * x["x"][t]
    close(y.numpy(), want, 2000, "y over 70k steps")
    close(hl.numpy(), np.stack([st_.real, st_.imag], -1)[None], 2000, "h_last over 70k steps")
    dtc = np.repeat(x["dt"], 2, axis=1)
    args = [T(x["x"]), T(dtc)] + [T(x[k]) for k in ("A_log", "B", "C", "D")]
    H0 = ops.complex_scan(*args, chunk=64)[2]
    ref_g = ops.complex_scan_backward(*args, T(dy), H0, chunk=64)
    for name, g, w in zip(GRADS, got, ref_g):
        w = w.numpy().astype(np.float64)
        if name == "ddt":
            w = w.sum(1, keepdims=True)  # the head's channels share one Δ
        close(g.numpy(), w, 2000 if name not in ("dA_log", "dD") else 200_000, f"{name} over 70k steps")


def test_finite_differences(device):
    from test_finite_differences import check
    rng = np.random.default_rng(3)
    batch, L, H, hd, Nc = 2, 9, 2, 2, 2
    x = make(rng, batch, L, H, hd, Nc, 1, with_h0=True)
    keys = NAMES + ("h0",)

    def fwd(*a):
        return ops.complex_ssd(*map(T, a[:6]), batch=batch, chunk=4, h0=T(a[6]))[0].numpy()

    def bwd(*a):
        *args, g = a
        H0 = ops.complex_ssd(*map(T, args[:6]), batch=batch, chunk=4, h0=T(args[6]))[2]
        return [t.numpy() for t in ops.complex_ssd_backward(*map(T, args[:6]), T(g), H0, batch=batch, chunk=4)]

    check(fwd, bwd, [x[k] for k in keys], rtol=3e-2, atol=3e-3)


@given(L=st.integers(1, 24), heads=st.integers(1, 2), hd=st.integers(1, 3), Nc=st.integers(1, 3),
       chunk=st.integers(1, 30), seed=st.integers(0, 2**31))
def test_complex_ssd_f16_storage(device, L, heads, hd, Nc, chunk, seed):
    from oracle import TINY16, U16
    rng = np.random.default_rng(seed)
    x = make(rng, 1, L, heads, hd, Nc, 1)
    h = {k: (v.astype(np.float16) if k in ("x", "dt", "B", "C") else v) for k, v in x.items()}
    dy = rng.standard_normal(x["x"].shape).astype(np.float16)
    y, _, got = run(h, dy, 1, chunk)
    assert y.dtype == "f16"
    wy, _, want = oracle({k: (v.astype(np.float32) if v is not None else v) for k, v in h.items()}, dy, 1, 1)

    def close16(g, w, n, what):
        w = np.asarray(w, np.float64)
        mag = np.abs(w).max() if w.size else 0.0
        assert_within(np.asarray(g, np.float64), w,
                      64 * (n + 8) * U32 * (np.abs(w) + mag) + 2 * U16 * np.abs(w) + 2 * TINY16, what)
    close16(y.numpy(), wy, L * Nc, "y f16")
    for name, g, w in zip(GRADS, got, want):
        if w is not None:
            close16(g.numpy(), w, L * (Nc + hd) * heads, name + " f16")
