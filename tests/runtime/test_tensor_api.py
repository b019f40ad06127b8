"""Tensor's .T, .sum(), basic indexing and integer input of other widths, against numpy (float64 on the
same rounded inputs). The methods are installed by evermind_vk.ops (ops/methods.py) and run the
gather_strided kernel (transpose, indexing) and the colsum / two-stage sum kernels (sum); their
differentiable forms (autodiff.functional.transpose, sum_dim, index) against finite differences."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.autodiff import Tape, functional as F
from oracle import U16, U32, assert_within, rounded

DTYPES = st.sampled_from(["f32", "f16", "i32", "u32"])
NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32}


def _host(rng, shape, dtype):
    if dtype in ("i32", "u32"):
        lo = -1000 if dtype == "i32" else 0
        return rng.integers(lo, 1000, size=shape).astype(NP[dtype])
    return rng.standard_normal(shape).astype(NP[dtype])


def _skip_f16(device, dtype):
    if dtype == "f16" and not device.info.f16:
        pytest.skip("no 16-bit storage")


@given(rows=st.integers(1, 40), cols=st.integers(1, 40), dtype=DTYPES, seed=st.integers(0, 2**31))
def test_transpose_matches_numpy(device, rows, cols, dtype, seed):
    _skip_f16(device, dtype)
    a = _host(np.random.default_rng(seed), (rows, cols), dtype)
    got = ev.tensor(a).T
    assert got.shape == (cols, rows) and got.dtype == dtype
    assert np.array_equal(got.numpy(), a.T)  # a copy: bit-exact


def test_transpose_of_low_rank_is_the_tensor_itself(device):
    v = ev.tensor(np.arange(3, dtype=np.float32))
    assert v.T is v
    with pytest.raises(ev.ShapeError, match="2-D"):
        ev.tensor(np.zeros((2, 2, 2), np.float32)).T


def _slice(draw, n):
    step = draw(st.integers(-4, 4).filter(bool))
    start = draw(st.none() | st.integers(-n - 2, n + 2))
    stop = draw(st.none() | st.integers(-n - 2, n + 2))
    return slice(start, stop, step)


@st.composite
def _indexing(draw):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    key = []
    for n in shape[: draw(st.integers(1, len(shape)))]:
        key.append(draw(st.integers(-n, n - 1)) if draw(st.booleans()) else _slice(draw, n))
    if len(key) < len(shape) and draw(st.booleans()):
        key = [*key, Ellipsis]
    return shape, (key[0] if len(key) == 1 and draw(st.booleans()) else tuple(key))


@given(case=_indexing(), dtype=DTYPES, seed=st.integers(0, 2**31))
def test_basic_indexing_matches_numpy(device, case, dtype, seed):
    _skip_f16(device, dtype)
    shape, key = case
    a = _host(np.random.default_rng(seed), shape, dtype)
    want = a[key]
    got = ev.tensor(a)[key]
    assert isinstance(got, ev.Tensor) and got.shape == want.shape and got.dtype == dtype, (key, got.shape)
    assert np.array_equal(got.numpy(), want), key


def test_indexing_errors_are_index_errors(device):
    t = ev.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(ev.errors.IndexOutOfRangeError, match="out of range"):
        t[0, -4]
    with pytest.raises(ev.UnsupportedError, match="basic indexing"):
        t[np.array([0, 1])]
    with pytest.raises(ev.UnsupportedError, match="basic indexing"):
        t[None]
    rows = list(t)  # iteration over the first dimension
    assert len(t) == 2 and [r.numpy().tolist() for r in rows] == [[0, 1, 2], [3, 4, 5]]
    scalar = t.sum()
    with pytest.raises(TypeError):
        len(scalar)
    with pytest.raises(TypeError):
        list(scalar)


@given(shape=st.lists(st.integers(0, 9), min_size=1, max_size=4), dtype=st.sampled_from(["f32", "f16"]),
       keepdim=st.booleans(), seed=st.integers(0, 2**31), data=st.data())
def test_sum_matches_numpy(device, shape, dtype, keepdim, seed, data):
    _skip_f16(device, dtype)
    a = _host(np.random.default_rng(seed), tuple(shape), dtype)
    dim = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    got = ev.tensor(a).sum(dim, keepdim=keepdim)
    A = rounded(a, dtype)
    want = A.sum(axis=dim, keepdims=keepdim)
    want_abs = np.abs(A).sum(axis=dim, keepdims=keepdim)
    n = a.size if dim is None else a.shape[dim]
    assert got.shape == np.shape(want) and got.dtype == dtype
    bound = 2 * (n + 2) * U32 * want_abs + (U16 * np.abs(want) + 2.0 ** -24 if dtype == "f16" else 0) + 1e-30
    assert_within(np.asarray(got.numpy(), np.float64), np.asarray(want), bound, f"sum dim={dim}")


def test_sum_refuses_integers(device):
    with pytest.raises(ev.UnsupportedError, match="f32 and f16"):
        ev.tensor(np.ones(3, np.int32)).sum()


@given(bits=st.sampled_from([8, 16, 64]), signed=st.booleans(), seed=st.integers(0, 2**31))
def test_integer_input_of_other_widths(device, bits, signed, seed):
    np_dtype = np.dtype(f"{'int' if signed else 'uint'}{bits}")
    info = np.iinfo(np_dtype)
    target = np.iinfo(np.int32 if signed else np.uint32)
    lo, hi = max(info.min, target.min), min(info.max, target.max)
    a = np.random.default_rng(seed).integers(lo, hi, size=7, endpoint=True, dtype=np_dtype)
    t = ev.tensor(a)
    assert t.dtype == ("i32" if signed else "u32")
    assert np.array_equal(t.numpy().astype(np.int64), a.astype(np.int64))


@pytest.mark.parametrize("values, dtype, shown", [
    ([0, 2**31], np.int64, "[-2147483648, 2147483647]"),
    ([-2**31 - 1, 5], np.int64, "[-2147483648, 2147483647]"),
    ([2**32], np.uint64, "[0, 4294967295]"),
])
def test_integer_input_out_of_range_is_refused(device, values, dtype, shown):
    with pytest.raises(ev.UnsupportedError) as info:
        ev.tensor(np.array(values, dtype))
    assert shown in str(info.value) and str(values[0] if abs(values[0]) > 2**30 else values[-1]) in str(info.value)


# -- scatter_strided (the gather's backward), expand, and the differentiable forms ------------------------
@given(case=_indexing(), dtype=DTYPES, seed=st.integers(0, 2**31))
def test_index_backward_scatters_into_zeros(device, case, dtype, seed):
    _skip_f16(device, dtype)
    shape, key = case
    want = np.zeros(shape, NP[dtype])
    dy = np.asarray(_host(np.random.default_rng(seed), np.shape(want[key]), dtype))
    want[key] = dy
    got = ops.index_backward(ev.tensor(dy).reshape(dy.shape), shape, key)  # ev.tensor makes 0-D data 1-D
    assert got.shape == shape and got.dtype == dtype
    assert np.array_equal(got.numpy(), want), key


@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), lead=st.integers(0, 1), dtype=DTYPES,
       seed=st.integers(0, 2**31), data=st.data())
def test_expand_matches_numpy_broadcast(device, shape, lead, dtype, seed, data):
    _skip_f16(device, dtype)
    src = tuple(data.draw(st.sampled_from([1, n])) for n in shape)
    a = _host(np.random.default_rng(seed), src, dtype)
    target = (2,) * (lead if len(shape) < 4 else 0) + tuple(shape)  # at most 4 strided dimensions
    got = ops.expand(ev.tensor(a), target)
    assert np.array_equal(got.numpy(), np.broadcast_to(a, target))


def test_strided_ops_refuse_what_they_cannot_do(device):
    x = ev.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ev.ShapeError, match="broadcast"):
        ops.expand(x, (2, 4))
    with pytest.raises(ev.ShapeError, match="zero stride"):
        ops.scatter_strided(x, ev.zeros((6,)), (0, 1))
    with pytest.raises(ev.ShapeError, match="spans elements"):
        ops.gather_strided(x, (3, 3), (3, 1))
    with pytest.raises(ev.UnsupportedError, match="non-contiguous"):
        ops.gather_strided(ev.tensor(np.ones(64, np.float32)), (2,) * 5, (32, 8, 4, 2, 1)[::-1])


@given(n=st.integers(0, 40), extra=st.integers(0, 5), offset=st.integers(0, 9), seed=st.integers(0, 2**31))
def test_copy_prefix_moves_words_exactly(device, n, extra, offset, seed):
    """copy_prefix: y[offset + i] = x[i] for i < n, the rest of y untouched; u32 words move bit for bit (ids
    whose bits read as float denormals and NaNs included)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, n + extra, dtype=np.uint64).astype(np.uint32)
    x[: min(n, 3)] = np.array([1, 0x7FC00001, 0xFF800000], np.uint32)[: min(n, 3)]
    y = rng.integers(0, 2**32, offset + n + extra, dtype=np.uint64).astype(np.uint32)
    want = y.copy()
    want[offset:offset + n] = x[:n]
    got = ops.copy_prefix(ev.tensor(x, "u32"), ev.tensor(y, "u32"), n, offset).numpy()
    assert np.array_equal(got, want)


def test_copy_prefix_refusals(device):
    x = ev.tensor(np.arange(4, dtype=np.uint32), "u32")
    with pytest.raises(ev.ShapeError, match="spans elements"):
        ops.copy_prefix(x, ev.tensor(np.zeros(5, np.uint32), "u32"), 4, 2)
    with pytest.raises(ev.ShapeError, match="elements of a tensor"):
        ops.copy_prefix(x, ev.tensor(np.zeros(9, np.uint32), "u32"), 5)
    with pytest.raises(ev.UnsupportedError, match="u32 into f32"):
        ops.copy_prefix(x, ev.zeros((4,)), 2)


H = 1e-2


def _fd_check(fn, x: np.ndarray, seed: int):
    """The tape's gradient of L = sum(fn(x) * G) against central differences of the f32 forward."""
    xt = ev.tensor(x)
    with Tape() as tape:
        y = fn(xt)
    G = np.random.default_rng(seed).standard_normal(y.shape).astype(np.float32)
    got = tape.backward({y: ev.tensor(G).reshape(G.shape)})[xt].numpy().astype(np.float64)

    def loss(v):
        return float((np.asarray(fn(ev.tensor(v.astype(np.float32))).numpy(), np.float64) * G).sum())
    want = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        xp, xm = x.astype(np.float64), x.astype(np.float64)
        xp[i] += H
        xm[i] -= H
        want[i] = (loss(xp) - loss(xm)) / (2 * H)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-3)


@given(rows=st.integers(1, 4), cols=st.integers(1, 4), seed=st.integers(0, 2**31), data=st.data())
def test_differentiable_transpose_sum_index_against_finite_differences(device, rows, cols, seed, data):
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    dim = data.draw(st.none() | st.integers(-2, 1))
    keepdim = data.draw(st.booleans())
    key = (slice(None, None, data.draw(st.sampled_from([1, -1, 2]))), data.draw(st.integers(-cols, cols - 1)))
    _fd_check(F.transpose, x, seed)
    _fd_check(lambda t: F.sum_dim(t, dim, keepdim), x, seed)
    _fd_check(lambda t: F.index(t, key), x, seed)
