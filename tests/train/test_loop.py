"""The training loop (issue 14): LR schedules on the device, gradient accumulation, max_steps, on_step,
held-out evaluation, epoch grad norms, freezing and parameter groups, AdamW state loading into a
recorded step, and bit-identical resume through the checkpoint store."""
import numpy as np
import pytest

from evermind_vk.autodiff import Tape
from evermind_vk.errors import CheckpointMismatchError
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.runtime import tensor
from evermind_vk.train import AdamW, LRSchedule, Trainer, lr_at
from evermind_vk.train.data import batches, build_chunks

TINY = LMConfig(vocab_size=13, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)
IDS = np.random.default_rng(0).integers(0, 13, 16)  # 15 pairs: chunks of 4, 4, 4, 3 tokens at seq_len 4


def weights(m):
    return m.state_dict()


def same(a, b):
    return set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_weight_decay_default_is_one_value():
    from evermind_vk.train import TrainConfig
    from evermind_vk.train.trainer import DEFAULT_WEIGHT_DECAY
    import inspect
    assert inspect.signature(AdamW).parameters["weight_decay"].default == DEFAULT_WEIGHT_DECAY
    assert TrainConfig().weight_decay == DEFAULT_WEIGHT_DECAY


def test_schedule_reaches_the_device_without_rerecording(device):
    sched = LRSchedule(type="step_decay", step_size=1, gamma=0.0)  # lr at step 1, then 0
    a = Trainer(TransformerLM(TINY))
    a.train(IDS, seq_len=4, batch_size=1, lr=0.05, schedule=sched, weight_decay=0.0, max_steps=1)
    b = Trainer(TransformerLM(TINY))
    b.train(IDS, seq_len=4, batch_size=1, lr=0.05, schedule=sched, weight_decay=0.0)
    assert same(weights(a.model), weights(b.model))  # steps 2..4 ran with lr 0
    assert [h["effective_lr"] for h in b.history] == [0.05, 0.0, 0.0, 0.0]
    before = device.submits
    b.train(IDS, seq_len=4, batch_size=1, lr=0.05, schedule=sched, weight_decay=0.0)
    assert device.submits - before == 4 and len(b._steps) == 1  # the recorded step, replayed
    cos = LRSchedule(type="cosine", warmup_steps=2, total_steps=3, min_lr=0.01)
    c = Trainer(TransformerLM(TINY))
    c.train(IDS, epochs=2, seq_len=4, batch_size=1, lr=0.1, schedule=cos)
    assert [h["effective_lr"] for h in c.history] == pytest.approx([lr_at(s, 0.1, cos) for s in range(1, 9)], rel=1e-12)


def test_accumulation_equals_one_big_batch(device):
    """Micro-batches of 8 and 7 target tokens: weighting each by its token share gives the gradient of
    the big batch's mean loss (an unweighted mean of the micro-batch gradients would not)."""
    chunks = build_chunks(IDS, 4)
    order = np.array([0, 3, 1, 2])
    (i1, t1, n1), (i2, t2, n2) = batches(chunks, 2, 4, order=order)
    assert (n1, n2) == (7, 8)
    big = Trainer(TransformerLM(TINY))
    names = tuple(big.model.parameters())
    with Tape() as tape:
        loss = big.model.loss(tensor(np.concatenate([i1, i2])), tensor(np.concatenate([t1, t2])), 4)
    want = {k: g.numpy() for k, g in tape.backward(loss).by_name(big.model.parameters()).items()}
    acc = Trainer(TransformerLM(TINY))
    from evermind_vk.runtime import zeros
    acc._acc = {n: zeros(p.shape, "f32") for n, p in acc.model.parameters().items()}
    micro = acc._step(2, 4, names, 0.0, False, "micro")
    l1, _, _ = micro.run({"ids": i1, "targets": t1}, weight=n1 / 15)
    l2, _, _ = micro.run({"ids": i2, "targets": t2}, weight=n2 / 15)
    assert (l1 * n1 + l2 * n2) / 15 == pytest.approx(float(loss.numpy()[0]), rel=1e-6)
    for k in names:
        got = acc._acc[k].numpy()
        assert np.allclose(got, want[k], rtol=1e-5, atol=1e-6 * np.abs(want[k]).max()), k
    # end to end: the same losses and pre-clip norms as one batch of 4
    runs = []
    for bs, accum in ((4, 1), (2, 2)):
        tr = Trainer(TransformerLM(TINY), seed=1)
        tr.train(IDS, epochs=3, seq_len=4, batch_size=bs, accum_steps=accum, lr=0.01, track_grad_norm=True)
        runs.append(tr)
    for h1, h2 in zip(runs[0].history, runs[1].history):
        assert h1["loss"] == pytest.approx(h2["loss"], rel=1e-5)
        assert h1["grad_norm"] == pytest.approx(h2["grad_norm"], rel=1e-4)
        assert h1["tokens"] == h2["tokens"] == 15
    assert len(runs[1].history) == 3


def test_max_steps_on_step_eval_and_epoch_norm(device):
    tr = Trainer(TransformerLM(TINY))
    seen, epochs = [], []
    held_out = np.random.default_rng(9).integers(0, 13, 12)
    tr.train(IDS, epochs=5, seq_len=4, batch_size=1, max_steps=6, on_step=lambda s, m: seen.append((s, m)),
             eval_data=held_out, eval_every=2, track_grad_norm=True,
             on_epoch_end=lambda e, l, g: epochs.append((e, l, g)))
    assert [s for s, _ in seen] == [1, 2, 3, 4, 5, 6] == [h["step"] for h in tr.history]
    assert [("eval_ppl" in m) for _, m in seen] == [False, True] * 3
    assert seen[-1][1]["eval_ppl"] == pytest.approx(tr.evaluate(held_out, seq_len=4), rel=1e-6)
    # epoch 2 stopped after 2 of its 4 steps: reported over those 2, as any stop reports a cut-short epoch
    assert [e for e, _, _ in epochs] == [1, 2] and tr.stopped_by == "max_steps"
    assert epochs[1][1] == pytest.approx(np.mean([h["loss"] for h in tr.history[4:]]), rel=1e-6)
    e1 = [h["grad_norm"] for h in tr.history if h["epoch"] == 1]
    assert epochs[0][2] == pytest.approx(np.mean(e1), rel=1e-12) and len(set(e1)) == 4  # the mean, not the last


def test_freeze_and_param_groups(device):
    m = TransformerLM(TINY)
    before = weights(m)
    tr = Trainer(m)
    tr.train(IDS, seq_len=4, lr=0.05, freeze=["layers.*.attn.*"],
             param_groups=[{"params": "embed.*", "lr": 0.0, "weight_decay": 0.0},
                           {"params": ["layers.0.mlp.*"], "lr": 0.2}])
    after = weights(m)
    for k in m.params:
        frozen = k.startswith("layers.0.attn.") or k == "embed.weight"
        assert np.array_equal(before[k], after[k]) == frozen, k
    assert "layers.0.attn.wq" not in tr.optimizer.state
    opt = tr.optimizer
    assert [opt.group_of(n) for n in ("embed.weight", "layers.0.mlp.w_down", "norm.weight")] == [1, 2, 0]
    # WSLA is one such configuration: freeze everything but its subset
    runs = []
    for kw in ({"wsla": True}, {"freeze": [n for n in m.params if n not in m.wsla_parameters()], "max_delta": 0.05}):
        t = Trainer(TransformerLM(TINY))
        t.train(IDS, seq_len=4, lr=0.5, **kw)
        runs.append(weights(t.model))
    assert same(*runs)


def test_adamw_load_state_dict_reaches_a_recorded_step(device):
    """Loading optimizer state into a trainer whose step is already recorded must change what the
    replay uses (it used to replace the moment tensors, which the recording does not see)."""
    other = np.random.default_rng(5).integers(0, 13, 16)
    tr = Trainer(TransformerLM(TINY))
    tr.train(IDS, seq_len=4, lr=0.05)
    w1, s1 = weights(tr.model), tr.optimizer.state_dict()
    tr.train(other, seq_len=4, lr=0.05)
    w2, s2 = weights(tr.model), tr.optimizer.state_dict()
    tr.model.load_state_dict(w1)
    tr.optimizer.load_state_dict(s1)
    tr.train(other, seq_len=4, lr=0.05)  # replays the recorded step
    assert same(weights(tr.model), w2)
    assert all(np.array_equal(tr.optimizer.state_dict()["state"][k]["exp_avg"], s2["state"][k]["exp_avg"])
               for k in s2["state"])


@pytest.mark.parametrize("at_epoch_end", [False, True])
@pytest.mark.parametrize("accum", [1, 2])
def test_resume_is_bit_identical(device, tmp_path, accum, at_epoch_end):
    d = str(tmp_path)
    kw = dict(epochs=3, seq_len=4, batch_size=1, accum_steps=accum, lr=0.05, track_grad_norm=True,
              schedule=LRSchedule(type="cosine", warmup_steps=2, total_steps=9),
              param_groups=[{"params": "layers.*", "weight_decay": 0.1}])
    full = Trainer(TransformerLM(TINY), seed=7)
    full_losses = full.train(IDS, **kw)
    # mid-epoch either way (4 or 2 steps an epoch), or just after the first epoch ended (the saved position
    # then starts the next epoch, whose order is not stored)
    cut = 4 // accum if at_epoch_end else 3
    part = Trainer(TransformerLM(TINY), seed=7)
    part.train(IDS, max_steps=cut, save_key="run", save_dir=d, **kw)
    assert not same(weights(part.model), weights(full.model))
    resumed = Trainer.from_checkpoint("run", directory=d)
    assert resumed.global_step == cut and resumed.seed == 7
    losses = resumed.train(IDS, **kw)
    assert same(weights(resumed.model), weights(full.model))
    assert resumed.history == full.history
    assert losses == full_losses  # the epoch means, including the epochs before the cut
    assert resumed.optimizer.step_count == full.optimizer.step_count
    with pytest.raises(CheckpointMismatchError):  # other batching than the saved run's
        Trainer.from_checkpoint("run", directory=d).train(IDS, **{**kw, "batch_size": 2})
    with pytest.raises(CheckpointMismatchError):  # another model config
        Trainer(TransformerLM(LMConfig(**{**TINY.to_dict(), "d_ff": 16}))).resume("run", directory=d)


def test_eval_split_holds_out_the_tail(device):
    ids = np.random.default_rng(4).integers(0, 13, 40)
    tr = Trainer(TransformerLM(TINY))
    tr.train(ids, seq_len=4, eval_split=0.25, eval_every=1, max_steps=2)
    assert tr.history[-1]["eval_ppl"] == pytest.approx(tr.evaluate(ids[30:], seq_len=4), rel=1e-6)
    assert sum(h["tokens"] for h in tr.history) == 8  # two steps of the 29 training pairs
    with pytest.raises(Exception, match="eval_split"):
        tr.train(ids, seq_len=4, eval_split=1.5)


def test_sigterm_stops_at_the_step_boundary_and_saves(device, tmp_path):
    import os
    import signal
    from evermind_vk.io.checkpoint import load_checkpoint
    before = signal.getsignal(signal.SIGTERM)
    tr = Trainer(TransformerLM(TINY))

    def on_step(step, metrics):
        if step == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    tr.train(IDS, epochs=3, seq_len=4, on_step=on_step, stop_on_signal=True, save_key="k", save_dir=str(tmp_path))
    assert tr.interrupted == signal.SIGTERM and tr.global_step == 2 and len(tr.history) == 2
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
    rec = load_checkpoint("k", directory=str(tmp_path))
    assert rec["global_step"] == 2 and rec["position"]["batch"] == 2 and rec["position"]["epoch"] == 0
