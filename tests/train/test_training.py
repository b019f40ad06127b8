"""Tape rules, whole-model gradients, the trainer (overfit, loss falls, determinism, WSLA, replay),
chunking and generation."""
import math

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.train import build_chunks, default_corpus
from evermind_vk.files import load_model, save_model
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import Trainer, generate


TINY = LMConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)


def T(a):
    return ev.tensor(np.asarray(a, np.float32))




def test_chunks_cover_every_pair():
    ch = build_chunks(np.arange(10), 4)
    assert len(ch) == 3 and ch[-1][0].tolist() == [8] and ch[-1][1].tolist() == [9]
    ch = build_chunks(np.arange(8), 4)
    assert sum(len(y) for _, y in ch) == 7 and all((y == x + 1).all() for x, y in ch)
    for n in (0, 1):
        with pytest.raises(ValueError):
            build_chunks(np.arange(n), 4)


def test_overfit_and_greedy_continuation(device):
    m = TransformerLM(LMConfig(vocab_size=8, d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=64,
                               max_seq_len=8, seed=1))
    tr = Trainer(m)
    first = tr.train([1, 2, 3, 4, 5], epochs=50, seq_len=4, batch_size=1, lr=0.03, max_grad_norm=1.0)
    before = device.submits
    losses = tr.train([1, 2, 3, 4, 5], epochs=100, seq_len=4, batch_size=1, lr=0.03, max_grad_norm=1.0)
    assert device.submits - before == 100  # the recorded step is replayed: one submit per step
    assert losses[-1] < 0.05 < first[0]
    assert generate(m, [1], max_new_tokens=4) == [2, 3, 4, 5]
    assert generate(m, [1], 4, temperature=1.0, top_k=3, seed=7) == generate(m, [1], 4, temperature=1.0, top_k=3, seed=7)


def test_loss_falls_on_default_corpus_and_is_deterministic(device):
    text = default_corpus()[:6000]
    runs = []
    for _ in range(2):
        m = TransformerLM(LMConfig(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=64, max_seq_len=32, seed=5))
        tr = Trainer(m, seed=5)
        tr.train(text, epochs=1, seq_len=32, batch_size=4, lr=5e-3)
        runs.append([h["loss"] for h in tr.history])
    steps = runs[0]
    assert len(steps) >= 40
    assert np.mean(steps[-5:]) < np.mean(steps[:5]) - 1.0
    assert runs[0] == runs[1]  # same seed, same device: bit-identical losses


def test_batches_and_evaluate(device):
    m = TransformerLM(LMConfig(vocab_size=16, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2, d_ff=16,
                               max_seq_len=8, seed=2))
    tr = Trainer(m)
    ids = np.random.default_rng(0).integers(0, 16, 45)
    ppl = tr.evaluate(ids, seq_len=8, batch_size=3)
    # the same number by hand: every pair once, token-weighted mean loss
    total, n = 0.0, 0
    for x, y in build_chunks(ids, 8):
        loss = m.loss(ev.tensor(x.astype(np.uint32)), ev.tensor(y.astype(np.uint32)))
        total += float(loss.numpy()[0]) * len(y)
        n += len(y)
    assert ppl == pytest.approx(math.exp(total / n), rel=1e-5)
    assert 1.0 < ppl < 16 * 2


def test_wsla_touches_only_its_subset_and_keeps_moments(device):
    m = TransformerLM(LMConfig(vocab_size=16, d_model=16, n_layers=2, n_heads=2, n_kv_heads=1, d_ff=16,
                               max_seq_len=8, seed=4))
    tr = Trainer(m)
    ids = np.random.default_rng(1).integers(0, 16, 40)
    before = m.state_dict()
    subset = set(m.wsla_parameters())
    seen = []
    tr.train(ids, epochs=2, seq_len=8, batch_size=2, lr=0.5, wsla=True, track_grad_norm=True, weight_decay=0.0,
             on_epoch_end=lambda e, l, g: seen.append((e, l, g)))
    after = m.state_dict()
    for k in m.params:
        changed = not np.array_equal(before[k], after[k])
        assert changed == (k in subset), k
    steps = len(tr.history)
    for k in subset:  # trust region: |dp| <= max_delta per step (weight decay 0)
        assert np.abs(after[k] - before[k]).max() <= 0.05 * steps * (1 + 1e-5)
    assert set(tr.optimizer.state) == subset
    assert [e for e, _, _ in seen] == [1, 2] and all(g is not None and g > 0 for _, _, g in seen)
    kept = {k: tr.optimizer.state[k] for k in subset}
    tr.train(ids, epochs=1, seq_len=8, batch_size=2, lr=1e-3)  # full training: moments for the rest
    assert set(tr.optimizer.state) == set(m.params)
    tr.train(ids, epochs=1, seq_len=8, batch_size=2, lr=1e-3, wsla=True)
    assert all(tr.optimizer.state[k] is kept[k] for k in subset)  # reused by name, not recreated


def test_save_and_load_model(device, tmp_path):
    m = TransformerLM(TINY)
    path = str(tmp_path / "m.npz")
    save_model(m, path)
    m2 = load_model(path)
    assert m2.config == m.config
    for k in m.params:
        assert m2.params[k].numpy().tobytes() == m.params[k].numpy().tobytes()
