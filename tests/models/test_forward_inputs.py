"""Every model's forward takes host data as well as a device Tensor: token ids as a Python list or a numpy
integer array (int32, int64, uint32, ...) checked against the vocabulary (models/inputs.py), float
inputs (SharedExpertMoE, ConvAE) as a list or a numpy array. The same ids give the same logits, bit for bit."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk.models import (ConvAE, ConvAEConfig, EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel, LMConfig,
                                MoEConfig, SharedExpertMoE, TransformerLM)

V = 11


@pytest.fixture(scope="module")
def lms(device):
    return {
        "lm": TransformerLM(LMConfig(vocab_size=V, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8,
                                     max_seq_len=8, seed=3)),
        "evermind-lm": EvermindLM(EvermindLMConfig(V, 4, 1, 3, 4, 2, 1, seed=3)),
        "mamba": HybridMambaModel(HybridMambaConfig(vocabSize=V, dModel=8, numLayers=1, layers=("mamba1",))),
    }


@given(ids=st.lists(st.integers(0, V - 1), min_size=1, max_size=6),
       form=st.sampled_from(["list", "int32", "int64", "uint32", "uint8"]))
def test_lm_forward_takes_lists_and_numpy_ids(lms, ids, form):
    host = ids if form == "list" else np.array(ids, dtype=form)
    for name, m in lms.items():
        want = m.forward(ev.tensor(np.array(ids, np.uint32))).numpy()
        got = m.forward(host).numpy()
        assert np.array_equal(got, want), name


@pytest.mark.parametrize("bad, match", [
    ([0, V], rf"id #1 is {V}, outside the vocabulary \[0, {V}\)"),
    (np.array([3, -1], np.int64), r"id #1 is -1, outside the vocabulary"),
    (np.array([2**40], np.int64), r"id #0 is 1099511627776, outside the vocabulary"),
    ([1, 2.5], r"id #1 is 2.5, not an integer"),
])
def test_lm_forward_refuses_bad_ids(lms, bad, match):
    for m in lms.values():
        with pytest.raises(ev.TokenError, match=match):
            m.forward(bad)


def test_lm_forward_refuses_2d_ids(lms):
    for m in lms.values():
        with pytest.raises(ev.ShapeError, match="one dimension"):
            m.forward(np.zeros((2, 3), np.int64))


def test_moe_forward_takes_lists_and_numpy(device):
    m = SharedExpertMoE(MoEConfig(4, 3, 3, 2, seed=5))
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    want = m(ev.tensor(x)).numpy()
    assert np.array_equal(m(x).numpy(), want)
    assert np.array_equal(m(x.tolist()).numpy(), want)
    assert np.array_equal(m.forward(x.astype(np.float64))[0].numpy(), want)  # rounds to f32 first
    with pytest.raises(ev.UnsupportedError):
        m([[1.0, 2.0], [3.0]])


def test_conv_ae_takes_numpy_images(device):
    m = ConvAE(ConvAEConfig(image_size=8, channels=1, width=4, latent=2, groups=2))
    x = np.random.default_rng(1).random((1, 1, 8, 8)).astype(np.float32)
    want = m.forward(ev.tensor(x)).numpy()
    assert np.array_equal(m.forward(x).numpy(), want)
    assert np.array_equal(m.decode(m.encode(x).numpy()).numpy(), want)
    assert np.array_equal(m.loss(x).numpy(), m.loss(ev.tensor(x)).numpy())
