"""Tensor's numpy protocol, repr and operators (installed by evermind_vk.ops), against numpy."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from oracle import U32


def test_array_protocol_and_repr(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ev.tensor(a)
    got = np.asarray(t)
    assert got.dtype == np.float32 and got.shape == (2, 3) and np.array_equal(got, a)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert np.array_equal(np.asarray(ev.tensor(np.array([1, 2], np.uint32))), [1, 2])
    r = repr(t)
    assert "shape=(2, 3)" in r and "dtype=f32" in r and device.info.name in r
    assert "f16" in repr(ev.tensor(a.astype(np.float16)))


@given(rows=st.integers(1, 20), cols=st.integers(1, 20), k=st.integers(1, 20), seed=st.integers(0, 2**31),
       dtype=st.sampled_from(["f32", "f16"]))
def test_operators_match_numpy(device, rows, cols, k, seed, dtype):
    if dtype == "f16" and not device.info.f16:
        pytest.skip("no 16-bit storage")
    npdt = np.float16 if dtype == "f16" else np.float32
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((rows, cols)).astype(npdt) for _ in range(2))
    c = rng.standard_normal((cols, k)).astype(npdt)
    ta, tb, tc = ev.tensor(a), ev.tensor(b), ev.tensor(c)
    A, B, C = (x.astype(np.float64) for x in (a, b, c))
    u = 2.0 ** -11 if dtype == "f16" else U32
    for got, want in (((ta + tb), A + B), ((ta - tb), A - B), ((ta * tb), A * B), ((ta * 2.5), 2.5 * A),
                      ((0.5 * ta), 0.5 * A), ((-ta), -A)):
        assert got.dtype == dtype and got.shape == a.shape
        assert np.all(np.abs(np.asarray(got).astype(np.float64) - want) <= 2 * u * np.abs(want) + 4 * u * (np.abs(A) + np.abs(B)))
    got = np.asarray(ta @ tc).astype(np.float64)
    want = A @ C
    assert got.shape == (rows, k)
    assert np.all(np.abs(got - want) <= 2 * (cols + 2) * u * (np.abs(A) @ np.abs(C)) + 1e-6)


def test_operators_refuse_what_they_cannot_do(device):
    t = ev.tensor(np.ones(3, np.float32))
    with pytest.raises(TypeError):
        t + 1.0
    with pytest.raises(TypeError):
        t @ 2.0
    with pytest.raises(TypeError):
        t * "x"
    with pytest.raises(ev.ShapeError):
        t + ev.tensor(np.ones(4, np.float32))
