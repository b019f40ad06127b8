"""LoRA adapters on TransformerLM: the math and its gradients against numpy, adapters-only training,
merge/unmerge, adapters alone to safetensors and back, with the KV cache, and resume."""
import numpy as np
import pytest

from evermind_vk.autodiff import Tape
from evermind_vk.errors import EvermindError
from evermind_vk.models import (LMConfig, LoRAConfig, TransformerLM, add_lora, lora_frozen, lora_parameters,
                                merge_lora, unmerge_lora)
from evermind_vk.models.lora import lora_linear
from evermind_vk.runtime import tensor
from evermind_vk.train import Trainer
from evermind_vk.train.adapters import load_lora, save_lora

CFG = LMConfig(vocab_size=13, d_model=8, n_layers=2, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)
IDS = np.random.default_rng(0).integers(0, 13, 16)
LORA = LoRAConfig(rank=2, alpha=4.0, targets=("layers.*.attn.wq", "layers.1.mlp.*"), seed=1)


def logits(m, ids=IDS[:8]):
    return m.forward(tensor(np.asarray(ids, np.uint32))).numpy()


def test_lora_math_and_gradients(device):
    m = TransformerLM(CFG)
    add_lora(m, LORA)
    rng = np.random.default_rng(2)
    n = "layers.0.attn.wq"
    B = rng.standard_normal(m.params[n + ".lora_B"].shape).astype(np.float32)
    m.params[n + ".lora_B"].copy_(B)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    dy = rng.standard_normal((5, 8)).astype(np.float32)
    W, A = m.params[n].numpy().astype(np.float64), m.params[n + ".lora_A"].numpy().astype(np.float64)
    X, DY, B = x.astype(np.float64), dy.astype(np.float64), B.astype(np.float64)
    xt = tensor(x)
    with Tape() as tape:
        y = lora_linear(m, xt, n)
    g = tape.backward({y: tensor(dy)})
    s = 4.0 / 2
    assert np.allclose(y.numpy(), X @ W.T + s * (X @ A.T) @ B.T, rtol=1e-5, atol=1e-5)
    assert np.allclose(g[m.params[n + ".lora_B"]].numpy(), s * DY.T @ (X @ A.T), rtol=1e-4, atol=1e-5)
    assert np.allclose(g[m.params[n + ".lora_A"]].numpy(), s * (DY @ B).T @ X, rtol=1e-4, atol=1e-5)
    assert np.allclose(g[xt].numpy(), DY @ W + s * (DY @ B) @ A, rtol=1e-4, atol=1e-5)


def test_adapters_only_training_merge_save_load(device, tmp_path):
    m = TransformerLM(CFG)
    base_logits, base = logits(m), m.state_dict()
    names = add_lora(m, LORA)
    assert sorted(names) == sorted(lora_parameters(m)) and len(names) == 2 * (2 + 2)
    assert np.array_equal(logits(m), base_logits)  # B = 0: the adapted model starts as the base model
    tr = Trainer(m)
    losses = tr.train(IDS, epochs=15, seq_len=4, lr=0.05, freeze=lora_frozen(m))
    assert losses[-1] < losses[0]
    assert all(np.array_equal(v, base[k]) for k, v in m.state_dict().items())  # base weights untouched
    assert set(tr.optimizer.state) == set(names)
    tuned = logits(m)
    assert not np.allclose(tuned, base_logits)
    merge_lora(m)
    assert np.allclose(logits(m), tuned, rtol=1e-4, atol=1e-5)
    with pytest.raises(EvermindError):
        merge_lora(m)
    unmerge_lora(m)
    assert all(np.allclose(v, base[k], rtol=0, atol=1e-6) for k, v in m.state_dict().items())
    assert np.allclose(logits(m), tuned, rtol=1e-4, atol=1e-5)
    path = str(tmp_path / "adapters.safetensors")
    save_lora(m, path)
    fresh = TransformerLM(CFG)
    load_lora(fresh, path)  # attaches adapters from the file's config, then loads them
    assert fresh.lora == m.lora and np.array_equal(logits(fresh), tuned)  # fresh base + saved adapters
    cache = fresh.kv_cache()
    cached = np.concatenate([fresh.forward_cached(IDS[:5], cache).numpy(), fresh.forward_cached(IDS[5:8], cache).numpy()])
    assert np.allclose(cached, logits(fresh), rtol=1e-5, atol=1e-6)  # the KV-cache path uses the adapters


def test_lora_resume_is_bit_identical(device, tmp_path):
    kw = dict(epochs=2, seq_len=4, lr=0.05)
    runs = []
    for cut in (None, 3):
        m = TransformerLM(CFG)
        add_lora(m, LORA)
        tr = Trainer(m)
        if cut:
            tr.train(IDS, max_steps=cut, save_key="k", save_dir=str(tmp_path), freeze=lora_frozen(m), **kw)
            tr = Trainer(TransformerLM(CFG)).resume("k", directory=str(tmp_path))  # adapters come back too
            m = tr.model
        tr.train(IDS, freeze=lora_frozen(m), **kw)
        runs.append({n: m.params[n].numpy() for n in m.params})
    assert set(runs[0]) == set(runs[1]) and all(np.array_equal(runs[0][k], runs[1][k]) for k in runs[0])
