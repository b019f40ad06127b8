"""Kernels on GGUF's quantized blocks (Q4_0, Q4_1, Q8_0) against gguf's numpy dequantization and a float64
product on the dequantized weights: qmatmul (both tiles), its input gradient, the quantized embedding."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import ShapeError, UnsupportedError
from oracle import U32, assert_within

gguf = pytest.importorskip("gguf", reason="gguf is not installed (pip install 'evermind-vk[pretrained]')")
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import quants  # noqa: E402

TYPES = {"q4_0": QT.Q4_0, "q4_1": QT.Q4_1, "q8_0": QT.Q8_0}


def quantized(rng, rows, cols, qtype):
    """(raw blocks, their float64 dequantization by gguf) of a random [rows, cols] weight."""
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    blocks = quants.quantize(w, TYPES[qtype])
    return blocks, quants.dequantize(blocks, TYPES[qtype]).astype(np.float64).reshape(rows, cols)


def bound(a, b, k):
    """f32 accumulation over k terms of |a| |b| (x8 margin), plus a floor for flushed subnormals."""
    return 8 * (k + 8) * U32 * (np.abs(a) @ np.abs(b)) + 1e-30


@pytest.mark.parametrize("qtype", list(TYPES))
@given(M=st.integers(1, 9), N=st.integers(1, 40), kb=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_qmatmul_forward_and_input_gradient(device, qtype, M, N, kb, seed):
    rng = np.random.default_rng(seed)
    K = 32 * kb
    blocks, W = quantized(rng, N, K, qtype)
    x = rng.standard_normal((M, K)).astype(np.float32)
    dy = rng.standard_normal((M, N)).astype(np.float32)
    qw = ops.QuantWeight.from_blocks(blocks, qtype, (N, K), device)
    X, DY = x.astype(np.float64), dy.astype(np.float64)
    assert_within(ops.qmatmul(ev.tensor(x), qw).numpy(), X @ W.T, bound(X, W.T, K), f"{qtype} qmatmul")
    assert_within(ops.qmatmul_backward(ev.tensor(dy), qw).numpy(), DY @ W, bound(DY, W, N), f"{qtype} dX")


@pytest.mark.parametrize("qtype", list(TYPES))
@given(T=st.integers(1, 12), V=st.integers(1, 30), kb=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_qembedding(device, qtype, T, V, kb, seed):
    rng = np.random.default_rng(seed)
    blocks, W = quantized(rng, V, 32 * kb, qtype)
    ids = rng.integers(0, V, T).astype(np.uint32)
    qw = ops.QuantWeight.from_blocks(blocks, qtype, (V, 32 * kb), device)
    got = ops.qembedding(ev.tensor(ids), qw).numpy()
    np.testing.assert_array_equal(got.astype(np.float64), W[ids].astype(np.float32).astype(np.float64))


def test_dx_chunks_add_up(device, monkeypatch):
    """W's rows in several launches (lavapipe's loop cap) add up to the one-launch product."""
    import evermind_vk.runtime.select.quant as q
    rng = np.random.default_rng(0)
    blocks, W = quantized(rng, 50, 64, "q8_0")
    qw = ops.QuantWeight.from_blocks(blocks, "q8_0", (50, 64), device)
    dy = rng.standard_normal((3, 50)).astype(np.float32)
    monkeypatch.setattr(q, "DX_ROWS_PER_LAUNCH", 16)
    D = dy.astype(np.float64)
    assert_within(ops.qmatmul_backward(ev.tensor(dy), qw).numpy(), D @ W, bound(D, W, 50), "chunked dX")


def test_refusals(device):
    with pytest.raises(UnsupportedError):
        ops.QuantWeight(ev.tensor(np.zeros(16, np.uint32)), "q6_k", (2, 32))
    with pytest.raises(ShapeError):  # fewer bytes than the shape needs
        ops.QuantWeight(ev.tensor(np.zeros(4, np.uint32)), "q8_0", (2, 32))
    with pytest.raises(ShapeError):  # columns not whole blocks
        ops.QuantWeight(ev.tensor(np.zeros(64, np.uint32)), "q8_0", (2, 48))
    qw = ops.QuantWeight(ev.tensor(np.zeros(18, np.uint32)), "q8_0", (2, 32))
    with pytest.raises(ShapeError):
        ops.qmatmul(ev.tensor(np.zeros((1, 64), np.float32)), qw)


@pytest.mark.parametrize("qtype", list(TYPES))
@given(M=st.integers(1, 9), N=st.integers(1, 80), kb=st.integers(1, 5), seed=st.integers(0, 2**31))
def test_every_product_variant_gives_the_same_bits(device, qtype, M, N, kb, seed):
    """qgemv (decode steps on CPU devices) and qmatmul's tiles compute each output alike: a decode step and a
    forward of the whole context agree bit for bit (odd block counts: blocks 2 bytes into a word for Q4_0
    and Q8_0); each also against the float64 product."""
    from evermind_vk.runtime import kernels
    rng = np.random.default_rng(seed)
    K = 32 * kb
    blocks, W = quantized(rng, N, K, qtype)
    x = rng.standard_normal((M, K)).astype(np.float32)
    qw = ops.QuantWeight.from_blocks(blocks, qtype, (N, K), device)
    X = ev.tensor(x)
    variants = [v for op in ("qmatmul", "qgemv") for v in kernels.usable(op, "f32", device) if qtype in v.flags]
    assert {v.op for v in variants} == {"qmatmul", "qgemv"}
    outs = {v.name: ops.qmatmul(X, qw, variant=v).numpy() for v in variants}
    first = next(iter(outs.values()))
    for name, y in outs.items():
        np.testing.assert_array_equal(y, first, err_msg=f"{name} differs from {next(iter(outs))}")
        X64 = x.astype(np.float64)
        assert_within(y, X64 @ W.T, bound(X64, W.T, K), f"{name}")


def test_cpu_devices_pick_qgemv():
    from types import SimpleNamespace

    from evermind_vk.runtime.select.quant import pick_qmatmul

    def v(op, flags, **spec):
        return SimpleNamespace(op=op, flags=flags, spec=spec)
    mm = [v("qmatmul", ("q4_1",), WG=64, TM=1), v("qmatmul", ("q4_1",), WG=64, TM=4)]
    gv = [v("qgemv", ("q4_1",), WG=8, TN=8, TM=1), v("qgemv", ("q4_1",), WG=8, TN=8, TM=4)]
    assert pick_qmatmul(mm, "q4_1", 1, "cpu", gv).spec == {"WG": 8, "TN": 8, "TM": 1}
    assert pick_qmatmul(mm, "q4_1", 3, "cpu", gv).spec == {"WG": 8, "TN": 8, "TM": 1}
    assert pick_qmatmul(mm, "q4_1", 64, "cpu", gv).spec == {"WG": 8, "TN": 8, "TM": 4}
    assert pick_qmatmul(mm, "q4_1", 1, "discrete_gpu", gv).spec == {"WG": 64, "TM": 1}
    assert pick_qmatmul(mm, "q4_1", 9, "discrete_gpu", gv).spec == {"WG": 64, "TM": 4}
    with pytest.raises(UnsupportedError):
        pick_qmatmul(mm, "q8_0", 16, "cpu", gv)
