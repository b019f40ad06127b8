"""F.cross_entropy(overwrite_logits=True): the backward writes the logits' gradient over the logits, so no
second logits-sized buffer is allocated; the gradients are bit-identical to the out-of-place backward's; every
language model's loss() uses it (its logits are its own)."""
import gc

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.autodiff import Tape, functional as F
from evermind_vk.models import (EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel, LMConfig,
                                TransformerLM)


def _grads(overwrite: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    T, d, V = 37, 24, 300  # rows wider than a workgroup's registered elements at 8 threads: re-read then written
    h = ev.tensor(rng.standard_normal((T, d)).astype(np.float32))
    w = ev.tensor(rng.standard_normal((V, d)).astype(np.float32))
    tg = ev.tensor(rng.integers(0, V + 5, T).astype(np.uint32))  # some ignored
    dev = ev.get_device()
    gc.collect()
    with Tape() as tape:
        logits = F.matmul(h, w, transpose_b=True)
        loss = F.cross_entropy(logits, tg, overwrite_logits=overwrite)
    before = logits.numpy()
    dev.reset_peak_memory_stats()
    base = dev.memory_allocated()
    g = tape.backward(loss)
    rise = dev.max_memory_allocated() - base
    return before, logits.numpy(), g[h].numpy(), g[w].numpy(), float(loss.numpy()[0]), rise


def test_overwrite_logits_same_gradients_less_memory(device):
    b0, l0, gh0, gw0, loss0, rise0 = _grads(False)
    b1, l1, gh1, gw1, loss1, rise1 = _grads(True)
    assert loss0 == loss1 and np.array_equal(b0, b1)
    assert np.array_equal(gh0, gh1) and np.array_equal(gw0, gw1)
    assert np.array_equal(l0, b0) and not np.array_equal(l1, b1)  # out of place the logits stay, in place not
    assert rise0 - rise1 >= 37 * 300 * 4, (rise0, rise1)  # one logits-sized buffer fewer


@pytest.mark.parametrize("make,call", [
    (lambda: TransformerLM(LMConfig(vocab_size=40, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=24,
                                    max_seq_len=8)), lambda m, ids, tg: m.loss(ids, tg, batch=2)),
    (lambda: EvermindLM(EvermindLMConfig(vocab_size=40, d_model=16, num_layers=1, conv_kernel=3, hidden_dim=24,
                                         num_experts=2, top_k=1)), lambda m, ids, tg: m.loss(ids, tg, seq_len=8)),
    (lambda: HybridMambaModel(HybridMambaConfig(vocabSize=40, dModel=16, numLayers=1, dState=4, dConv=3)),
     lambda m, ids, tg: m.loss(ids, tg, batch=2)),
], ids=["transformer", "evermind", "mamba"])
def test_every_language_model_loss_overwrites_its_logits(device, monkeypatch, make, call):
    seen = []
    real = F.ops.cross_entropy_backward

    def spy(logits, targets, count, dloss, out=None):
        seen.append(out is logits)
        return real(logits, targets, count, dloss, out=out)
    monkeypatch.setattr(F.ops, "cross_entropy_backward", spy)
    m = make()
    ids = ev.tensor(np.arange(16, dtype=np.uint32) % 40)
    with Tape() as tape:
        loss = call(m, ids, ids)
    tape.backward(loss)
    assert seen == [True]
