"""The Trainer (MambaTrainer semantics: chunking, epochs, batches, on_epoch_end, evaluate -> perplexity,
WSLA, trust region, one submit per step) with HybridMambaModel, real backpropagation."""
import numpy as np
import pytest

from evermind_vk.models import HybridMambaConfig, HybridMambaModel
from evermind_vk.train import Trainer


def test_mamba_overfits_and_reports(device):
    m = HybridMambaModel(HybridMambaConfig(vocabSize=12, dModel=16, numLayers=2, layers=("mamba1", "attention"),
                                           dState=4, nHeads=2, seed=1))
    ids = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] * 3, np.uint32)
    tr = Trainer(m, seed=0)
    seen = []
    ppl0 = tr.evaluate(ids, seq_len=8)
    losses = tr.train(ids, epochs=30, seq_len=8, batch_size=2, lr=1e-2, track_grad_norm=True,
                      on_epoch_end=lambda e, l, g: seen.append((e, l, g)))
    assert [e for e, _, _ in seen] == list(range(1, 31)) and all(g is not None and g > 0 for _, _, g in seen)
    assert losses[-1] < 0.3 * losses[0]
    assert tr.evaluate(ids, seq_len=8) < 0.3 * ppl0


def test_mamba_wsla_trains_only_the_x_projection(device):
    m = HybridMambaModel(HybridMambaConfig(vocabSize=12, dModel=16, numLayers=1, dState=4, seed=2))
    before = m.state_dict()
    tr = Trainer(m)
    tr.train(np.arange(12, dtype=np.uint32), epochs=2, seq_len=5, lr=1e-2, wsla=True)
    after = m.state_dict()
    changed = {k for k in before if not np.array_equal(before[k], after[k])}
    assert changed == {"layer0.wXProj", "layer0.bXProj"}
    step = np.abs(after["layer0.wXProj"] - before["layer0.wXProj"]).max()
    assert step <= len(tr.history) * 0.05 + 1e-6  # the trust region: at most 0.05 per step under WSLA


@pytest.mark.parametrize("kind", ["mamba2", "mamba3"])
def test_mamba2_mamba3_wsla_trains_only_the_BC_rows(device, kind):
    """WSLA on mamba2/mamba3 steps the B/C rows of wInProj (not builderforce's first rows, which are x rows),
    with their own moments; every other weight, and the rest of wInProj, stays bit-identical."""
    cfg = HybridMambaConfig(vocabSize=12, dModel=8, numLayers=1, layers=(kind,), dState=3, nHeads=2, seed=2)
    m = HybridMambaModel(cfg)
    before = m.state_dict()
    tr = Trainer(m)
    tr.train(np.arange(12, dtype=np.uint32), epochs=3, seq_len=5, lr=1e-2, wsla=True)
    after = m.state_dict()
    assert {k for k in before if not np.array_equal(before[k], after[k])} == {"layer0.wInProj"}
    D, w = cfg.d_inner, (2 if kind == "mamba2" else 4) * cfg.dState
    rows = np.flatnonzero((before["layer0.wInProj"] != after["layer0.wInProj"]).any(1))
    assert rows.min() >= D and rows.max() < D + w and len(rows) > 0
    assert "layer0.wInProj_BC" in tr.optimizer.state and "layer0.wInProj" not in tr.optimizer.state
    # then a full step: the whole tensor trains, with its own moments
    tr.train(np.arange(12, dtype=np.uint32), epochs=1, seq_len=5, lr=1e-2)
    assert "layer0.wInProj" in tr.optimizer.state


@pytest.mark.parametrize("kind", ["mamba2", "mamba3"])
def test_wsla_row_ranges_accumulate_like_one_big_batch(device, kind):
    """Gradient accumulation with the B/C row ranges: two micro-batches of one row equal one batch of two."""
    cfg = HybridMambaConfig(vocabSize=12, dModel=8, numLayers=1, layers=(kind,), dState=3, nHeads=2, seed=2)
    ids = (np.arange(40, dtype=np.uint32) * 7) % 12
    one, acc = Trainer(HybridMambaModel(cfg)), Trainer(HybridMambaModel(cfg))
    before = one.model.state_dict()
    one.train(ids, epochs=2, seq_len=5, batch_size=2, lr=1e-2, wsla=True)
    acc.train(ids, epochs=2, seq_len=5, batch_size=1, accum_steps=2, lr=1e-2, wsla=True)
    a, b = one.model.state_dict(), acc.model.state_dict()
    assert {k for k in before if not np.array_equal(before[k], b[k])} == {"layer0.wInProj"}
    assert np.abs(b["layer0.wInProj"] - before["layer0.wInProj"]).max() > 1e-3  # trained
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-4, atol=1e-6, err_msg=k)
    np.testing.assert_allclose([h["loss"] for h in acc.history], [h["loss"] for h in one.history], rtol=1e-5)
