"""The PyTorch twins that bench/generate_bench.py measures against (bench/torch_decode.py) compute the same
logits as our models from the same weights: a benchmark ratio compares the same work."""
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from torch_decode import TorchEvermind, TorchMamba, TorchTransformer  # noqa: E402

from evermind_vk.models import (EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel, LMConfig,  # noqa: E402
                                TransformerLM)

IDS = np.array([[3, 1, 4, 1, 5, 9, 2], [6, 5, 3, 5, 8, 9, 7]], np.int64)


def test_transformer_twin(device):
    m = TransformerLM(LMConfig(vocab_size=19, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=24,
                               max_seq_len=16, seed=1))
    tm = TorchTransformer(m.state_dict(), m.config, "cpu", 2, 16)
    with torch.no_grad():
        got = tm.forward(torch.tensor(IDS), 0).numpy()  # logits of the last token of each sequence
    want = np.stack([m.forward(ids.astype(np.uint32)).numpy()[-1] for ids in IDS])
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def test_evermind_twin(device):
    m = EvermindLM(EvermindLMConfig(19, d_model=16, num_layers=2, conv_kernel=3, hidden_dim=24, num_experts=3,
                                    top_k=2, seed=5))
    rng = np.random.default_rng(1)
    m.load_state_dict({k: (rng.standard_normal(v.shape).astype(np.float32) if k.endswith(".conv") else v)
                       for k, v in m.state_dict().items()})
    tm = TorchEvermind(m.state_dict(), m.config, "cpu")
    with torch.no_grad():
        got = tm.forward(torch.tensor(IDS)).numpy()
    want = np.stack([m.forward(ids.astype(np.uint32)).numpy()[-1] for ids in IDS])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layers,disc", [(("mamba1", "mamba1"), "zoh"), (("mamba1", "attention"), "zoh"),
                                        (("attention", "mamba1"), "euler")])
def test_mamba_twin(device, layers, disc):
    m = HybridMambaModel(HybridMambaConfig(vocabSize=19, dModel=16, numLayers=2, layers=layers, dState=4, dConv=3,
                                           nHeads=2, discretization=disc, seed=3))
    # large products, A = -e^-1 and steps softplus(2) ~ 2.1: the scan's term is not lost beside D u and the
    # residual, and the zero-order hold and Euler input terms differ
    big = ("InProj", "XProj", "OutProj", "wQKV", "wO")
    m.load_state_dict({k: v * 30 if k.endswith(big) else np.full_like(v, -1) if k.endswith("A_log") else
                       v + 2 if k.endswith("bDtProj") else v for k, v in m.state_dict().items()})
    tm = TorchMamba(m.state_dict(), m.config, "cpu", 2)
    with torch.no_grad():
        for t in range(IDS.shape[1]):
            got = tm.step(torch.tensor(IDS[:, t])).numpy()
    want = np.stack([m.forward(ids.astype(np.uint32)).numpy()[-1] for ids in IDS])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
