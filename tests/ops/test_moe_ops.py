"""The MoE kernels one by one, f32 and f16 storage, against float64 numpy on the same rounded inputs
(hypothesis over token counts, experts, widths); the whole op's gradients are checked in
tests/models/test_bf_models.py (references and finite differences)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from oracle import TINY16, TINY32, U16, U32, assert_within, rounded

NP = {"f32": np.float32, "f16": np.float16}


def close(got, want, mag, n, dtype, what):
    tol = 8 * (n + 8) * U32 + (2 * U16 if dtype == "f16" else 0)
    assert_within(np.asarray(got, np.float64), want, tol * (np.abs(want) + mag) + 2 * (TINY16 if dtype == "f16" else TINY32), what)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@given(N=st.integers(1, 20), E=st.integers(1, 7), kk=st.integers(1, 7), d=st.integers(1, 9), h=st.integers(1, 6),
       aux=st.sampled_from([0.0, 0.3]), seed=st.integers(0, 2**31))
def test_moe_kernels(device, dtype, N, E, kk, d, h, aux, seed):
    k = min(kk, E)
    Z = E + 1
    rng = np.random.default_rng(seed)
    # distinct logits (a permutation, scaled): the selection is unambiguous in f16 too
    logits = np.stack([rng.permutation(E) for _ in range(N)]).astype(np.float64) * 0.5 + rng.integers(-2, 3, (N, 1))
    lt = ev.tensor(logits.astype(NP[dtype]))
    probs, gates, sel, disp = ops.moe_route(lt, k)
    L = rounded(logits, dtype)
    P = np.exp(L - L.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    close(probs.numpy(), P, 0, E, "f32", "probs")
    order = np.argsort(-L, axis=1, kind="stable")[:, :k]
    assert np.array_equal(sel.numpy(), order)
    G = np.zeros((N, Z))
    G[:, 0] = 1
    for n in range(N):
        s = np.exp(L[n, order[n]] - L[n, order[n]].max())
        G[n, 1 + order[n]] = s / s.sum()
    close(gates.numpy(), G, 0, k, "f32", "gates")
    assert np.array_equal(disp.numpy(), (G[:, 1:] > 0).astype(np.float32)) or k == 0

    x = rng.standard_normal((N, Z * h)).astype(NP[dtype])
    b = rng.standard_normal(Z * h).astype(np.float32)
    hid = ops.moe_bias_relu(ev.tensor(x), ev.tensor(b))
    close(hid.numpy(), np.maximum(rounded(x, dtype) + b, 0), np.abs(b), 1, dtype, "bias_relu")
    dh = rng.standard_normal((N, Z * h)).astype(NP[dtype])
    H = hid.numpy().astype(np.float64)
    assert np.array_equal(ops.moe_relu_backward(hid, ev.tensor(dh)).numpy().astype(np.float64),
                          np.where(H > 0, rounded(dh, dtype), 0))

    y = rng.standard_normal((N, Z, d)).astype(NP[dtype])
    b2 = rng.standard_normal(Z * d).astype(np.float32)
    Y = rounded(y, dtype) + b2.reshape(Z, d)
    Gf = gates.numpy().astype(np.float64)
    close(ops.moe_combine(ev.tensor(y), ev.tensor(b2), gates).numpy(), np.einsum("nz,nzc->nc", Gf, Y),
          np.einsum("nz,nzc->nc", np.abs(Gf), np.abs(Y)), Z, dtype, "combine")
    dout = rng.standard_normal((N, d)).astype(NP[dtype])
    D = rounded(dout, dtype)
    close(ops.moe_combine_backward(ev.tensor(dout), gates).numpy(), Gf[:, :, None] * D[:, None, :], 0, 1, dtype,
          "combine bwd")
    dg = ops.moe_gate_grad(ev.tensor(dout), ev.tensor(y), ev.tensor(b2))
    close(dg.numpy(), np.einsum("nc,nzc->nz", D, Y), np.einsum("nc,nzc->nz", np.abs(D), np.abs(Y)), d, "f32", "gate grad")

    f = rng.random(E).astype(np.float32)
    f /= f.sum()
    DG = dg.numpy().astype(np.float64)
    Pf = probs.numpy().astype(np.float64)
    want = np.zeros((N, E))
    for n in range(N):
        g, s = Gf[n, 1:], DG[n, 1:]
        dot = (g * s).sum()
        want[n] = np.where(g != 0, g * (s - dot), 0) + aux * Pf[n] * (f - f @ Pf[n])
    got = ops.moe_router_backward(dg, gates, sel, probs, ev.tensor(f), aux, dtype=dtype)
    mag = np.abs(Gf[:, 1:]) * (np.abs(DG[:, 1:]) + (np.abs(Gf[:, 1:]) * np.abs(DG[:, 1:])).sum(1, keepdims=True)) + aux
    close(got.numpy(), want, mag, E, dtype, "router bwd")


def test_moe_aux(device):
    counts = ev.tensor(np.array([3, 1, 0, 2], np.float32))
    psum = ev.tensor(np.array([1.0, 2.0, 0.5, 0.5], np.float32))
    f, aux = ops.moe_aux(counts, psum, 4)
    np.testing.assert_allclose(f.numpy(), [0.5, 1 / 6, 0, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(aux.numpy()[0], 4 * (0.5 * 0.25 + 1 / 6 * 0.5 + 1 / 3 * 0.125), rtol=1e-6)
