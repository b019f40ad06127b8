"""builderforce's Mamba-3 scan (complex states, chunked) against a float64/complex128 sequential
recurrence in PyTorch (autograd for the gradients); chunked == one chunk; 70,000 steps."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from oracle import U32, assert_within

torch = pytest.importorskip("torch")


def ref_scan(u, dt, A_log, B, C, D, batch, groups, h0=None):
    """Sequential: λ = A_log[h,0] + i A_log[h,1], ā = exp(Δλ), b̄ = (ā−1)e^{−λ}, h = ā h + b̄ B u,
    y = Σ Re(conj(C) h) + D u (torch tensors, differentiable)."""
    M, Dc = u.shape
    H = A_log.shape[0]
    hd = Dc // H
    L = M // batch
    Nc = B.shape[1] // (2 * groups)
    lam = torch.complex(A_log[:, 0], A_log[:, 1]).repeat_interleave(hd)  # [Dc]
    Bc = torch.complex(B[:, 0::2], B[:, 1::2]).reshape(M, groups, Nc).repeat_interleave(Dc // groups, 1)
    Cc = torch.complex(C[:, 0::2], C[:, 1::2]).reshape(M, groups, Nc).repeat_interleave(Dc // groups, 1)
    ys, hl = [], []
    for b in range(batch):
        h = torch.zeros(Dc, Nc, dtype=torch.complex128) if h0 is None else torch.complex(h0[b, ..., 0], h0[b, ..., 1])
        for t in range(L):
            r = b * L + t
            dl = torch.nn.functional.softplus(dt[r])
            a = torch.exp(dl * lam)
            bb = (a - 1) * torch.exp(-lam)
            h = a[:, None] * h + (bb * u[r])[:, None] * Bc[r]
            ys.append((torch.conj(Cc[r]) * h).real.sum(1) + D * u[r])
        hl.append(torch.stack([h.real, h.imag], -1))
    return torch.stack(ys), torch.stack(hl)


def close(got, want, n, what):
    want = np.asarray(want, np.float64)
    mag = np.abs(want).max() if want.size else 0.0
    assert_within(np.asarray(got, np.float64), want, 64 * (n + 8) * U32 * (np.abs(want) + mag) + 1e-30, what)


def make(rng, batch, L, heads, hd, Nc, groups):
    M, Dc = batch * L, heads * hd
    f = lambda *s, sc=1.0: (rng.standard_normal(s) * sc).astype(np.float32)  # noqa: E731
    A = np.stack([rng.uniform(-1.0, 0.3, heads), rng.uniform(-3, 3, heads)], 1).astype(np.float32)
    return dict(u=f(M, Dc), dt=f(M, Dc) - 1.0, A_log=A, B=f(M, groups * Nc * 2), C=f(M, groups * Nc * 2), D=f(Dc))


NAMES = ("u", "dt", "A_log", "B", "C", "D")


@given(batch=st.integers(1, 2), L=st.integers(1, 24), heads=st.integers(1, 3), hd=st.integers(1, 3),
       Nc=st.integers(1, 4), chunk=st.integers(1, 30), data=st.data(), seed=st.integers(0, 2**31))
def test_complex_scan_forward_backward(device, batch, L, heads, hd, Nc, chunk, data, seed):
    groups = data.draw(st.sampled_from([g for g in range(1, heads + 1) if heads % g == 0]))
    rng = np.random.default_rng(seed)
    x = make(rng, batch, L, heads, hd, Nc, groups)
    y, hl, H0 = ops.complex_scan(*(ev.tensor(x[k]) for k in NAMES), batch=batch, chunk=chunk, groups=groups)
    P = {k: torch.tensor(x[k].astype(np.float64), requires_grad=True) for k in NAMES}
    wy, whl = ref_scan(*(P[k] for k in NAMES), batch, groups)
    close(y.numpy(), wy.detach().numpy(), L * Nc, "y")
    close(hl.numpy(), whl.detach().numpy(), L, "h_last")
    dy = rng.standard_normal(y.shape).astype(np.float32)
    (wy * torch.tensor(dy.astype(np.float64))).sum().backward()
    got = ops.complex_scan_backward(*(ev.tensor(x[k]) for k in NAMES), ev.tensor(dy), H0, batch=batch, chunk=chunk,
                                    groups=groups)
    for k, g in zip(NAMES, got):
        close(g.numpy(), P[k].grad.numpy(), L * (Nc + heads * hd) * batch, "d" + k)


def test_complex_scan_initial_state_and_long_sequence(device):
    rng = np.random.default_rng(5)
    x = make(rng, 1, 70_000, 1, 2, 2, 1)
    x["dt"] = (rng.standard_normal(x["dt"].shape) * 0.3 - 3.0).astype(np.float32)
    x["A_log"][:, 0] = -0.5  # |ā| < 1: a decaying (stable) recurrence over 70,000 steps
    y, hl, _ = ops.complex_scan(*(ev.tensor(x[k]) for k in NAMES), chunk=64)
    # the same sequence in two halves, the second from the first's final state
    h = 35_000 * 2
    first = {k: (v[:35_000] if v.shape[0] == 70_000 else v) for k, v in x.items()}
    second = {k: (v[35_000:] if v.shape[0] == 70_000 else v) for k, v in x.items()}
    y1, hl1, _ = ops.complex_scan(*(ev.tensor(first[k]) for k in NAMES))
    y2, hl2, _ = ops.complex_scan(*(ev.tensor(second[k]) for k in NAMES), h0=hl1)
    close(np.concatenate([y1.numpy(), y2.numpy()]), y.numpy().astype(np.float64), h, "split at 35,000")
    # float64 numpy recurrence over all 70,000 steps
    lam = complex(x["A_log"][0, 0], x["A_log"][0, 1])
    dl = np.log1p(np.exp(x["dt"].astype(np.float64)))
    a = np.exp(dl * lam)
    bb = (a - 1) * np.exp(-lam)
    Bc = x["B"][:, 0::2] + 1j * x["B"][:, 1::2]
    Cc = x["C"][:, 0::2] + 1j * x["C"][:, 1::2]
    st_ = np.zeros((2, 2), complex)
    want = np.empty((70_000, 2))
    for t in range(70_000):
        st_ = a[t][:, None] * st_ + (bb[t] * x["u"][t])[:, None] * Bc[t][None, :]
        want[t] = (np.conj(Cc[t])[None, :] * st_).real.sum(1) + x["D"] * x["u"][t]
    close(y.numpy(), want, 2000, "70,000 steps")


@given(L=st.integers(1, 20), heads=st.integers(1, 2), hd=st.integers(1, 3), Nc=st.integers(1, 3),
       chunk=st.integers(1, 25), seed=st.integers(0, 2**31))
def test_complex_scan_f16_storage(device, L, heads, hd, Nc, chunk, seed):
    """f16 storage of x, dt, B, C, y and their gradients; f32 complex state and math."""
    from oracle import TINY16, U16
    rng = np.random.default_rng(seed)
    x = make(rng, 1, L, heads, hd, Nc, 1)
    h = {k: (v.astype(np.float16) if k in ("u", "dt", "B", "C") else v) for k, v in x.items()}
    y, _, H0 = ops.complex_scan(*(ev.tensor(h[k]) for k in NAMES), chunk=chunk)
    assert y.dtype == "f16"
    P = {k: torch.tensor(h[k].astype(np.float64), requires_grad=True) for k in NAMES}
    wy, _ = ref_scan(*(P[k] for k in NAMES), 1, 1)
    dy = rng.standard_normal(y.shape).astype(np.float16)
    (wy * torch.tensor(dy.astype(np.float64))).sum().backward()
    got = ops.complex_scan_backward(*(ev.tensor(h[k]) for k in NAMES), ev.tensor(dy), H0, chunk=chunk)

    def close16(g, w, n, what):
        w = np.asarray(w, np.float64)
        mag = np.abs(w).max() if w.size else 0.0
        assert_within(np.asarray(g, np.float64), w,
                      64 * (n + 8) * U32 * (np.abs(w) + mag) + 2 * U16 * np.abs(w) + 2 * TINY16, what)
    close16(y.numpy(), wy.detach().numpy(), L * Nc, "y f16")
    for k, g in zip(NAMES, got):
        close16(g.numpy(), P[k].grad.numpy(), L * (Nc + heads * hd), "d" + k + " f16")
