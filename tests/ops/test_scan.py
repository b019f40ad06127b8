"""The Mamba-1 selective scan (chunked) against a float64 sequential recurrence on the same f32 inputs,
forward and backward, for each input term (zero-order hold, Euler, none), A -> 0 included; finite
differences; chunked == unchunked; causality; a sequence past lavapipe's 65,535-iteration loop cut."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import ShapeError, UnsupportedError
import ref
from oracle import U32, assert_within


def inputs(rng, batch, L, Dc, N, with_z=True, with_h0=False, groups=1, heads=None):
    """heads: the Mamba-2 form (one A_log per head, B/C in `groups` groups)."""
    M = batch * L
    f = lambda *s, sc=1.0: (rng.standard_normal(s) * sc).astype(np.float32)  # noqa: E731
    A_log = rng.uniform(-1, 2.5, (Dc, N) if heads is None else (heads,)).astype(np.float32)
    d = dict(u=f(M, Dc), dt=f(M, Dc, sc=1.5) - 1.0, A_log=A_log,
             B=f(M, groups * N), C=f(M, groups * N), D=f(Dc), z=f(M, Dc) if with_z else None,
             h0=f(batch, Dc, N) if with_h0 else None)
    return d


def T(a):
    return None if a is None else ev.tensor(np.ascontiguousarray(a, np.float32))


def f64(a):
    return None if a is None else a.astype(np.float64)


def run_fwd(x, batch, chunk, **kw):
    y, hl, H0 = ops.selective_scan(T(x["u"]), T(x["dt"]), T(x["A_log"]), T(x["B"]), T(x["C"]), T(x["D"]),
                                   T(x["z"]), batch=batch, chunk=chunk, h0=T(x["h0"]), **kw)
    return y, hl, H0


def close(got, want, n, what, terms=None):
    """Errors of f32 recurrences grow with the number of steps each output depends on (n). terms: the size of
    what a sum cancels (ref.selective_scan_bwd's mags), where it exceeds the result's."""
    want = np.asarray(want, np.float64)
    mag = np.abs(want).max() if want.size else 0.0
    if terms is not None:
        mag = np.maximum(mag, terms)
    tol = 32 * (n + 8) * U32
    assert_within(np.asarray(got, np.float64), want, tol * (np.abs(want) + mag) + 1e-30, what)


@given(batch=st.integers(1, 3), L=st.integers(1, 40), Dc=st.integers(1, 6), N=st.integers(1, 9),
       chunk=st.integers(1, 50), with_z=st.booleans(), with_h0=st.booleans(), seed=st.integers(0, 2**31),
       disc=st.sampled_from(["zoh", "euler"]))
def test_scan_forward_backward(device, batch, L, Dc, N, chunk, with_z, with_h0, seed, disc):
    rng = np.random.default_rng(seed)
    x = inputs(rng, batch, L, Dc, N, with_z, with_h0)
    check_against_ref(x, rng, batch, L, chunk, discretization=disc)


def check_against_ref(x, rng, batch, L, chunk, **kw):
    """Forward (y, h_last) and every gradient of the op against ref's float64 recurrence."""
    Dc, N = x["u"].shape[1], x["B"].shape[1] // kw.get("groups", 1)
    y, hl, H0 = run_fwd(x, batch, chunk, **kw)
    args = [f64(x[k]) for k in ("u", "dt", "A_log", "B", "C", "D", "z")]
    wy, whl = ref.selective_scan(*args, batch=batch, h0=f64(x["h0"]), **kw)
    close(y.numpy(), wy, L * N, "y")
    close(hl.numpy(), whl, L, "h_last")
    dy = rng.standard_normal((batch * L, Dc)).astype(np.float32)
    got = ops.selective_scan_backward(*(T(x[k]) for k in ("u", "dt", "A_log", "B", "C", "D", "z")), T(dy), H0,
                                      batch=batch, chunk=chunk, **kw)
    mags = {}
    want = ref.selective_scan_bwd(*args, f64(dy), batch=batch, h0=f64(x["h0"]), mags=mags, **kw)
    for name, g, w in zip(("du", "ddt", "dA_log", "dB", "dC", "dD", "dz", "dh0"), got, want):
        if w is None:
            assert g is None
            continue
        close(g.numpy(), w, L * (N + Dc) * batch, name, mags.get(name))


@given(L=st.integers(1, 12), Dc=st.integers(1, 4), N=st.integers(1, 5), chunk=st.integers(1, 8),
       lo=st.floats(-14, -4), dt_shift=st.floats(-30, 2), seed=st.integers(0, 2**31))
def test_zoh_as_A_vanishes(device, L, Dc, N, chunk, lo, dt_shift, seed):
    """The zero-order hold where ΔA -> 0 (A_log at and below the clamp's -10: A = -4.5e-5; Δ down to
    softplus(-30) ~ 1e-13): (exp(ΔA) - 1)/A computed directly loses every digit there (exp rounds to 1),
    the expm1-style series keeps the f32 recurrence within the oracle's bound, gradients included."""
    rng = np.random.default_rng(seed)
    x = inputs(rng, 1, L, Dc, N, with_z=False)
    x["A_log"] = rng.uniform(lo, lo + 3, (Dc, N)).astype(np.float32)
    x["dt"] = (x["dt"] + dt_shift).astype(np.float32)
    check_against_ref(x, rng, 1, L, chunk, discretization="zoh")


def test_discretizations_differ_and_unknown_refused(device, rng):
    """The three input terms are three different recurrences; an unknown name is a ValueError."""
    x = inputs(rng, 1, 6, 3, 4)
    ys = {d: run_fwd(x, 1, 4, discretization=d)[0].numpy() for d in ("zoh", "euler", "none")}
    assert not np.allclose(ys["zoh"], ys["euler"]) and not np.allclose(ys["zoh"], ys["none"])
    np.testing.assert_array_equal(run_fwd(x, 1, 4)[0].numpy(), ys["zoh"])  # the default
    with pytest.raises(ValueError, match="discretization"):
        run_fwd(x, 1, 4, discretization="bilinear")


@given(L=st.integers(1, 70), chunk=st.integers(1, 80), seed=st.integers(0, 2**31))
def test_chunked_equals_unchunked(device, L, chunk, seed):
    """Any chunk length gives the one-chunk result (up to f32 reassociation of the carry)."""
    rng = np.random.default_rng(seed)
    x = inputs(rng, 2, L, 3, 4)
    y1 = run_fwd(x, 2, chunk)[0].numpy()
    y0 = run_fwd(x, 2, L)[0].numpy()
    close(y1, y0.astype(np.float64), 4 * L, "chunked vs one chunk")


def test_causality(device, rng):
    """Changing token t's inputs never changes outputs before t."""
    L, t = 23, 11
    x = inputs(rng, 1, L, 4, 5)
    y = run_fwd(x, 1, 4)[0].numpy()
    for k in ("u", "dt", "B", "C", "z"):
        x2 = {kk: (v.copy() if v is not None else None) for kk, v in x.items()}
        x2[k][t] += 3.0
        y2 = run_fwd(x2, 1, 4)[0].numpy()
        np.testing.assert_array_equal(y2[:t], y[:t], err_msg=k)
        assert not np.array_equal(y2[t:], y[t:]), k


def test_long_sequence_past_loop_limit(device):
    """70,000 steps (past lavapipe's 65,535-iteration loop cut): still the sequential recurrence."""
    rng = np.random.default_rng(7)
    L, Dc, N = 70_000, 2, 2
    x = inputs(rng, 1, L, Dc, N, with_z=False)
    x["dt"] = (rng.standard_normal((L, Dc)) * 0.5 - 4.0).astype(np.float32)  # slow decay: long memory
    y, hl, _ = run_fwd(x, 1, 64)
    wy, whl = ref_fast(x)
    close(y.numpy(), wy, 2000, "y over 70k steps")
    close(hl.numpy(), whl, 2000, "h_last over 70k steps")


def ref_fast(x):
    """The same sequential recurrence, vectorised over channels and states only (float64)."""
    u, dt, A_log, B, C, D = (x[k].astype(np.float64) for k in ("u", "dt", "A_log", "B", "C", "D"))
    A = ref.scan_A(A_log)
    dl = ref.softplus(dt)
    x = dl[:, :, None] * A[None]
    a = np.exp(x)
    bu = np.expm1(x) / A[None] * u[:, :, None] * B[:, None, :]  # the zero-order hold
    h = np.zeros(A.shape)
    y = np.empty(u.shape)
    for t in range(u.shape[0]):
        h = a[t] * h + bu[t]
        y[t] = h @ C[t]
    return y + D * u, h[None]


def test_errors(device, rng):
    x = inputs(rng, 1, 5, 2, 3)
    with pytest.raises(ShapeError):
        ops.selective_scan(T(x["u"]), T(x["dt"][:4]), T(x["A_log"]), T(x["B"]), T(x["C"]), T(x["D"]))
    with pytest.raises(ShapeError):
        ops.selective_scan(T(x["u"]), T(x["dt"]), T(x["A_log"]), T(x["B"]), T(x["C"]), T(x["D"]), batch=2)
    big = np.zeros((2, 65), np.float32)
    with pytest.raises(UnsupportedError):
        ops.selective_scan(T(x["u"]), T(x["dt"]), T(big), T(np.zeros((5, 65))), T(np.zeros((5, 65))), T(x["D"]))


@pytest.mark.parametrize("disc", ["zoh", "euler"])
def test_finite_differences(device, disc):
    """Every gradient of the scan against central differences of the device's own f32 forward."""
    from test_finite_differences import check
    rng = np.random.default_rng(3)
    batch, L, Dc, N = 2, 7, 3, 4
    x = inputs(rng, batch, L, Dc, N, with_z=True, with_h0=True)
    x["dt"] *= 0.5
    names = ("u", "dt", "A_log", "B", "C", "D", "z", "h0")

    def fwd(*a):
        y, hl, _ = ops.selective_scan(*map(T, a[:7]), batch=batch, chunk=3, h0=T(a[7]), discretization=disc)
        return y.numpy()

    def bwd(*a):
        *args, g = a
        _, _, H0 = ops.selective_scan(*map(T, args[:7]), batch=batch, chunk=3, h0=T(args[7]), discretization=disc)
        grads = ops.selective_scan_backward(*map(T, args[:7]), T(g), H0, batch=batch, chunk=3, discretization=disc)
        return [t.numpy() for t in grads]

    check(fwd, bwd, [x[k] for k in names], rtol=3e-2, atol=3e-3)


@given(R=st.integers(1, 9), C=st.integers(1, 12), data=st.data())
def test_col_slice(device, R, C, data):
    """The per-token split of a projection: columns of every row, and its backward (zeros elsewhere)."""
    start = data.draw(st.integers(0, C - 1))
    width = data.draw(st.integers(1, C - start))
    x = np.random.default_rng(R * 100 + C).standard_normal((R, C)).astype(np.float32)
    y = ops.col_slice(T(x), start, width).numpy()
    np.testing.assert_array_equal(y, x[:, start:start + width])
    dx = ops.col_slice_backward(T(y), C, start).numpy()
    want = np.zeros_like(x)
    want[:, start:start + width] = y
    np.testing.assert_array_equal(dx, want)
    with pytest.raises(ShapeError):
        ops.col_slice(T(x), start, C - start + 1)


@given(batch=st.integers(1, 2), L=st.integers(1, 30), heads=st.integers(1, 3), hd=st.integers(1, 3),
       N=st.integers(1, 5), chunk=st.integers(1, 40), with_z=st.booleans(),
       disc=st.sampled_from(["none", "euler", "zoh"]), data=st.data(), seed=st.integers(0, 2**31))
def test_scan_mamba2_form(device, batch, L, heads, hd, N, chunk, with_z, disc, data, seed):
    """One A = -softplus(A_log[h]) per head, B/C shared by groups of heads, any input term ("none": no Δ)."""
    groups = data.draw(st.sampled_from([g for g in range(1, heads + 1) if heads % g == 0]))
    Dc = heads * hd
    rng = np.random.default_rng(seed)
    x = inputs(rng, batch, L, Dc, N, with_z, True, groups=groups, heads=heads)
    check_against_ref(x, rng, batch, L, chunk, groups=groups, discretization=disc)


def test_chunk_rule_bounds_every_loop():
    """The chunk length keeps every scan loop short: tokens per chunk <= 4096 and chunks over the whole
    batch (the carry's loop, the rows the A_log/D gradient sums walk) <= 4096."""
    from evermind_vk.runtime.variants import SCAN_MAX_CHUNK, SCAN_MAX_CHUNKS, scan_chunk_len
    for L, req, b in [(70_000, 64, 1), (70_000, 1, 3), (5_000, 1, 7), (100, 64, 200), (4096 * 4096, 1, 1), (1, 1, 4096)]:
        ch = scan_chunk_len(L, req, b)
        assert req <= ch <= SCAN_MAX_CHUNK and (b * -(-L // ch) <= SCAN_MAX_CHUNKS or ch >= L), (L, req, b, ch)
    with pytest.raises(UnsupportedError):
        scan_chunk_len(4096 * 4096 + 1, 1)


@given(batch=st.integers(1, 2), L=st.integers(1, 30), Dc=st.integers(1, 5), N=st.integers(1, 6),
       chunk=st.integers(1, 40), with_z=st.booleans(), seed=st.integers(0, 2**31))
def test_scan_f16_storage(device, batch, L, Dc, N, chunk, with_z, seed):
    """f16 storage of the per-token tensors (f32 state and math): the oracle runs on the f16-rounded
    inputs; outputs and input gradients are rounded to f16 once."""
    from oracle import TINY16, U16
    rng = np.random.default_rng(seed)
    x = inputs(rng, batch, L, Dc, N, with_z)
    half = ("u", "dt", "B", "C", "z")
    h = {k: (v.astype(np.float16) if k in half and v is not None else v) for k, v in x.items()}
    args = [None if h[k] is None else ev.tensor(h[k]) for k in ("u", "dt", "A_log", "B", "C", "D", "z")]
    y, hl, H0 = ops.selective_scan(*args, batch=batch, chunk=chunk)
    assert y.dtype == "f16"
    ref_in = [f64(h[k]) for k in ("u", "dt", "A_log", "B", "C", "D", "z")]
    wy, _ = ref.selective_scan(*ref_in, batch=batch)

    def close16(got, want, n, what):
        want = np.asarray(want, np.float64)
        mag = np.abs(want).max() if want.size else 0.0
        bound = 32 * (n + 8) * U32 * (np.abs(want) + mag) + 2 * U16 * np.abs(want) + 2 * TINY16
        assert_within(np.asarray(got, np.float64), want, bound, what)
    close16(y.numpy(), wy, L * N, "y f16")
    dy = rng.standard_normal((batch * L, Dc)).astype(np.float16)
    got = ops.selective_scan_backward(*args, ev.tensor(dy), H0, batch=batch, chunk=chunk)
    want = ref.selective_scan_bwd(*ref_in, f64(dy), batch=batch)
    for name, g, w in zip(("du", "ddt", "dA_log", "dB", "dC", "dD", "dz"), got, want):
        if w is not None:
            close16(g.numpy(), w, L * (N + Dc) * batch, name + " f16")
