"""add / mul / scale against a float64 oracle on the same rounded inputs, every variant."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk.runtime import kernels, variants
from evermind_vk.runtime.select import elementwise as select_elementwise
from oracle import TINY16, TINY32, U16, U32, assert_within, rounded

VECS = sorted({v.spec["VEC"] for v in kernels.variants_of("add", "f32")})


_ORIG = variants.elementwise_vec


def force_vec(monkeypatch, vec):
    # Only for ops that have this VEC (the copy kernel used for readback has VEC=4 alone).
    monkeypatch.setattr(select_elementwise, "elementwise_vec", lambda n, vecs, wg=256: vec if vec in vecs else _ORIG(n, vecs, wg))


@pytest.mark.parametrize("vec", VECS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("op", ["add", "mul"])
@given(n=st.integers(1, 3000), seed=st.integers(0, 2**31))
def test_binary(device, monkeypatch, op, dtype, vec, n, seed):
    force_vec(monkeypatch, vec)
    rng = np.random.default_rng(seed)
    np_dt = np.float16 if dtype == "f16" else np.float32
    a = (rng.standard_normal(n) * 8).astype(np_dt)
    b = (rng.standard_normal(n) * 8).astype(np_dt)
    got = getattr(ev, op)(ev.tensor(a), ev.tensor(b)).numpy()
    want = rounded(a, dtype) + rounded(b, dtype) if op == "add" else rounded(a, dtype) * rounded(b, dtype)
    u = U16 if dtype == "f16" else U32
    assert_within(got, want, u * np.abs(want) + (TINY16 if dtype == "f16" else TINY32), f"{op} {dtype} vec={vec}")


@pytest.mark.parametrize("vec", VECS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@given(n=st.integers(1, 3000), alpha=st.floats(-100, 100, allow_nan=False), seed=st.integers(0, 2**31))
def test_scale(device, monkeypatch, dtype, vec, n, alpha, seed):
    force_vec(monkeypatch, vec)
    np_dt = np.float16 if dtype == "f16" else np.float32
    x = np.random.default_rng(seed).standard_normal(n).astype(np_dt)
    got = ev.scale(ev.tensor(x), alpha).numpy()
    want = float(np.float32(alpha)) * rounded(x, dtype)
    # f32 product, then rounding to the storage dtype; f16 may overflow to inf exactly as numpy does.
    if dtype == "f16":
        want16 = want.astype(np.float16)
        fin = np.isfinite(want16)
        assert np.array_equal(np.isinf(got), ~fin)
        assert_within(got[fin], want[fin], U16 * np.abs(want[fin]) + TINY16 + U32 * np.abs(want[fin]), "scale f16")
    else:
        assert_within(got, want, U32 * np.abs(want) + 2 * TINY32, "scale f32")


def test_large_needs_2d_grid(device):
    # More than 65535 workgroups of 256 at VEC=1: the dispatch goes 2-D.
    n = 65535 * 256 + 1000
    x = ev.tensor(np.ones(n, np.float32))
    y = ev.scale(x, 3.0).numpy()
    assert y.shape == (n,) and (y == 3.0).all()


def test_mismatches_are_clear_errors(device):
    a = ev.tensor(np.zeros(4, np.float32))
    with pytest.raises(ev.ShapeError, match="differ"):
        ev.add(a, ev.tensor(np.zeros(5, np.float32)))
    with pytest.raises(ev.UnsupportedError, match="dtypes"):
        ev.add(a, ev.tensor(np.zeros(4, np.float16)))
    with pytest.raises(ev.UnsupportedError, match="no add kernel for dtype i32"):
        ev.add(ev.tensor(np.zeros(4, np.int32)), ev.tensor(np.zeros(4, np.int32)))


def test_tests_can_fail():
    # The oracle check itself must reject a wrong answer.
    with pytest.raises(AssertionError):
        assert_within(np.array([1.0 + 1e-5]), np.array([1.0]), U32, "deliberately wrong")
