"""F.matmul_master: f16 activations times an f32 master weight (mixed precision). The forward and dX are
the bits of matmul(x, cast(w, "f16")); dW comes back in f32 from the product itself (never rounded to f16),
against a float64 oracle on the same rounded inputs with a tolerance that grows with the reduction length."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk.autodiff import Tape
from evermind_vk.autodiff import functional as F
from evermind_vk.errors import UnsupportedError


def _dw_oracle(x16, dy16, transpose_b):
    x, dy = x16.astype(np.float64), dy16.astype(np.float64)
    return (dy.T @ x, np.abs(dy).T @ np.abs(x)) if transpose_b else (x.T @ dy, np.abs(x).T @ np.abs(dy))


@given(M=st.integers(1, 700), K=st.integers(1, 80), N=st.integers(1, 80), transpose_b=st.booleans(),
       seed=st.integers(0, 2**31))
def test_matmul_master_matches_the_cast_path_and_the_oracle(device, M, K, N, transpose_b, seed):
    rng = np.random.default_rng(seed)
    x16 = rng.standard_normal((M, K)).astype(np.float16)
    w32 = rng.standard_normal((N, K) if transpose_b else (K, N)).astype(np.float32)
    dy16 = rng.standard_normal((M, N)).astype(np.float16)
    out = {}
    for master in (False, True):
        xt, wt, dyt = ev.tensor(x16), ev.tensor(w32), ev.tensor(dy16)
        with Tape() as tape:
            y = F.matmul_master(xt, wt, transpose_b) if master else F.matmul(xt, F.cast(wt, "f16"), transpose_b)
        g = tape.backward({y: dyt})
        out[master] = (y.numpy(), g[xt].numpy(), g[wt])
    assert out[True][0].tobytes() == out[False][0].tobytes()  # the same forward product
    assert out[True][1].tobytes() == out[False][1].tobytes()  # the same dX
    dw = out[True][2]
    assert dw.dtype == "f32" and dw.shape == w32.shape
    want, mag = _dw_oracle(x16, dy16, transpose_b)
    # f16 x f16 products are exact in f32; M additions in f32 (any order) err by at most M eps32 sum|terms|
    tol = M * 2.0 ** -23 * mag + 1e-30
    err = np.abs(dw.numpy().astype(np.float64) - want)
    assert (err <= tol).all(), float((err / (mag + 1e-30)).max())


def test_matmul_master_is_more_precise_than_rounding_to_f16(device):
    """A dW whose entries are not f16 numbers: the cast path rounds them (to 11 significant bits), this
    path keeps f32's 24; the test fails if dW goes through f16."""
    rng = np.random.default_rng(3)
    x16 = rng.standard_normal((300, 16)).astype(np.float16)
    dy16 = rng.standard_normal((300, 8)).astype(np.float16)
    w32 = rng.standard_normal((8, 16)).astype(np.float32)
    xt, wt, dyt = ev.tensor(x16), ev.tensor(w32), ev.tensor(dy16)
    with Tape() as tape:
        y = F.matmul_master(xt, wt, transpose_b=True)
    dw = tape.backward({y: dyt})[wt].numpy().astype(np.float64)
    want, mag = _dw_oracle(x16, dy16, True)
    rel = np.abs(dw - want) / np.abs(want)
    assert np.median(rel) < 2.0 ** -16, np.median(rel)  # f16 rounding alone gives a median near 2^-13


def test_matmul_master_projections_share_dx_in_place_and_tied_weights_accumulate(device):
    """q, k and v projections of one f16 input: dX of the second and third go into the first's buffer (no
    add); one master weight used twice (tied) gets the f32 sum of both products' dW."""
    rng = np.random.default_rng(5)
    h = rng.standard_normal((6, 8)).astype(np.float16)
    ws = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(3)]
    dys = [rng.standard_normal((6, 4)).astype(np.float16) for _ in range(3)]
    ht, wts, dyts = ev.tensor(h), [ev.tensor(w) for w in ws], [ev.tensor(d) for d in dys]
    wts[2] = wts[0]  # tied: the third product uses the first weight again
    with ev.record(run=False) as prog:
        with Tape() as tape:
            outs = [F.matmul_master(ht, wt, transpose_b=True) for wt in wts]
        g = tape.backward(dict(zip(outs, dyts)))
    assert not [n for n in prog.labels if n.startswith("add_f16")], prog.labels
    prog.run()
    f = lambda a: a.astype(np.float64)
    w16 = [f(w.astype(np.float16)) for w in (ws[0], ws[1], ws[0])]
    np.testing.assert_allclose(g[ht].numpy().astype(np.float64), sum(f(d) @ w for d, w in zip(dys, w16)),
                               rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(g[wts[0]].numpy(), f(dys[0]).T @ f(h) + f(dys[2]).T @ f(h), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g[wts[1]].numpy(), f(dys[1]).T @ f(h), rtol=1e-5, atol=1e-5)


def test_matmul_master_same_dtype_and_refusals(device):
    x, w = ev.tensor(np.ones((2, 3), np.float32)), ev.tensor(np.ones((3, 4), np.float32))
    np.testing.assert_array_equal(F.matmul_master(x, w).numpy(), np.full((2, 4), 3, np.float32))
    with pytest.raises(UnsupportedError):
        F.matmul_master(x, ev.tensor(np.ones((3, 4), np.float16)))
