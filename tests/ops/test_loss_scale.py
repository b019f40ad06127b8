"""Loss-scaling kernels: scale and round to the nearest f16 (numpy's float16 cast is the oracle: round to
nearest even, overflow to inf, subnormals), and the unscale that poisons every gradient on overflow."""
import numpy as np
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops

floats = st.floats(allow_nan=False, width=32)


@given(vals=st.lists(floats, min_size=1, max_size=300), scale=st.sampled_from([1.0, 2.0 ** -10, 1024.0, 16384.0]))
def test_scale_round_is_numpy_f16(device, vals, scale):
    x = np.array(vals, np.float32)
    g = ev.tensor(x)
    ops.loss_scale_round(g, ev.tensor(np.array([scale, 1.0], np.float32)))
    with np.errstate(over="ignore"):
        want = (x * np.float32(scale)).astype(np.float16).astype(np.float32)
    assert np.array_equal(g.numpy(), want, equal_nan=True)


def test_edges(device):
    x = np.array([65519, 65520, 2.0 ** -25, 1.5 * 2.0 ** -24, 2.0 ** -14 * (1 - 2 ** -12), 1 + 2 ** -11, -0.0],
                 np.float32)
    g = ev.tensor(x)
    ops.loss_scale_round(g, ev.tensor(np.array([1, 1], np.float32)))
    assert g.numpy().tolist() == [65504, np.inf, 0, 2 * 2.0 ** -24, 2.0 ** -14, 1, 0]


def test_unscale(device):
    s = ev.tensor(np.array([1, 0.25], np.float32))
    g = ev.tensor(np.array([4, -8], np.float32))
    ops.loss_unscale(g, s, ev.tensor(np.array([80], np.float32)))
    assert g.numpy().tolist() == [1, -2]
    ops.loss_unscale(g, s, ev.tensor(np.array([np.inf], np.float32)))
    assert np.isnan(g.numpy()).all()
