"""ops.cast (f32 <-> f16) against numpy's astype (round to nearest even, overflow to inf, subnormals), and
the backward rule of autodiff's cast (the gradient comes back in the input's dtype)."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.autodiff import Tape
from evermind_vk.autodiff import functional as F
from evermind_vk.errors import UnsupportedError

floats = st.floats(allow_nan=True, width=32)


@given(vals=st.lists(floats, min_size=1, max_size=600))
def test_cast_f16_is_numpy(device, vals):
    x = np.array(vals, np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    got = ops.cast(ev.tensor(x), "f16").numpy()
    assert got.dtype == np.float16
    assert np.array_equal(got.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()


@given(bits=st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=600))
def test_cast_f32_is_exact(device, bits):
    h = np.array(bits, np.uint16).view(np.float16)
    got = ops.cast(ev.tensor(h), "f32").numpy()
    want = h.astype(np.float32)
    assert np.array_equal(got, want, equal_nan=True)


def test_cast_edges(device):
    x = np.array([65519, 65520, -65520, 2.0 ** -25, 1.5 * 2.0 ** -24, 2.0 ** -14 * (1 - 2 ** -12), 1 + 2 ** -11,
                  1 + 3 * 2 ** -11, -0.0, np.inf], np.float32)
    got = ops.cast(ev.tensor(x), "f16").numpy().astype(np.float32).tolist()
    assert got == [65504, np.inf, -np.inf, 0, 2 * 2.0 ** -24, 2.0 ** -14, 1, 1 + 4 * 2 ** -11, 0, np.inf]


def test_cast_same_dtype_and_refusals(device):
    t = ev.tensor(np.ones(3, np.float32))
    assert ops.cast(t, "f32") is t
    with pytest.raises(UnsupportedError):
        ops.cast(ev.tensor(np.ones(3, np.uint32)), "f16")


def test_cast_backward(device):
    x = ev.tensor(np.array([1.5, -2.0, 3.0], np.float32))
    w = ev.tensor(np.array([0.5, 0.25, 4.0], np.float16))
    with Tape() as tape:
        y = ops.mul(F.cast(x, "f16"), w)  # not tracked through mul: seed the cast's output directly
        h = F.cast(x, "f16")
    g = tape.backward({h: w}).by_name({"x": x})
    assert g["x"].dtype == "f32"
    assert g["x"].numpy().tolist() == [0.5, 0.25, 4.0]
    assert y.numpy().astype(np.float32).tolist() == [0.75, -0.5, 12.0]
