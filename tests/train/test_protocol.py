"""The model protocol and the one Trainer: every model type (TransformerLM, EvermindLM, SharedExpertMoE,
HybridMambaModel, ConvAE) trains through Trainer(model) with the loop's features (accumulation equal to
one big batch, max_steps, on_step, evaluation, WSLA, bit-identical resume), the same history shape and
return value whatever stopped it; mixed precision is refused with a typed error where a model's ops lack
it; the presets (MambaTrainer here) sit on the same Trainer."""
import os
import signal

import numpy as np
import pytest

from evermind_vk.errors import CheckpointMismatchError, ConfigError, ShapeError, UnsupportedError
from evermind_vk.models import (ConvAE, ConvAEConfig, EvermindLM, EvermindLMConfig, HybridMambaConfig,
                                HybridMambaModel, LMConfig, MoEConfig, SharedExpertMoE, TrainableModel, TransformerLM,
                                build_model, model_type)
from evermind_vk.train import MambaTrainer, Trainer, shapes_dataset

IDS = (np.arange(40) * 7) % 11


def make(kind):
    if kind == "lm":
        return TransformerLM(LMConfig(vocab_size=11, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8,
                                      max_seq_len=8, seed=1))
    if kind == "evermind-lm":
        return EvermindLM(EvermindLMConfig(11, 8, 1, 3, 8, 4, 2, seed=1))
    if kind == "moe":
        return SharedExpertMoE(MoEConfig(4, 6, 4, 2, seed=1))
    if kind == "mamba":
        return HybridMambaModel(HybridMambaConfig(vocabSize=11, dModel=8, numLayers=1, dState=3, nHeads=2, seed=1))
    return ConvAE(ConvAEConfig(image_size=8, width=4, latent=2, groups=2, seed=1))


def data(kind):
    if kind == "moe":
        x = np.sin(np.arange(48, dtype=np.float32)).reshape(12, 4)
        return x, np.cos(x * 2)
    if kind == "conv-ae":
        return shapes_dataset(12, 8, seed=2)
    return IDS


KINDS = ["lm", "evermind-lm", "moe", "mamba", "conv-ae"]
KW = dict(seq_len=5, batch_size=2, lr=0.02, epochs=2, track_grad_norm=True)


def same(a, b):
    return set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_trains_through_the_one_trainer(device, kind):
    m = make(kind)
    assert isinstance(m, TrainableModel)
    assert build_model(model_type(m), m.config.to_dict()).config == m.config  # the registry rebuilds it
    before = m.state_dict()
    seen = []
    tr = Trainer(m, seed=3)
    losses = tr.train(data(kind), on_step=lambda s, e: seen.append(s), eval_data=data(kind), eval_every=2, **KW)
    assert len(losses) == 2 and all(np.isfinite(losses)) and tr.stopped_by == "epochs"
    assert seen == [h["step"] for h in tr.history] == list(range(1, len(tr.history) + 1))
    keys = {"epoch", "step", "loss", "grad_norm", "tokens", "effective_lr"}
    assert all(keys <= set(h) for h in tr.history)
    assert any(tr.eval_key in h for h in tr.history)
    assert not same(before, m.state_dict())
    assert np.isfinite(tr.evaluate(data(kind), seq_len=5, batch_size=2))
    if kind == "moe":
        assert all("aux_loss" in h for h in tr.history)  # the extra the MoE reports


@pytest.mark.parametrize("kind", KINDS)
def test_accumulation_equals_one_big_batch_for_every_model(device, kind):
    # the MoE's load-balance term depends on the batch's routing statistics, so it is left out here
    opts = {"loss_options": {"aux_weight": 0.0}} if kind == "moe" else {}
    one, acc = Trainer(make(kind), seed=2, **opts), Trainer(make(kind), seed=2, **opts)
    one.train(data(kind), **{**KW, "batch_size": 4})
    acc.train(data(kind), **{**KW, "batch_size": 2, "accum_steps": 2})
    a, b = one.model.state_dict(), acc.model.state_dict()
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-4, atol=2e-6, err_msg=k)
    np.testing.assert_allclose([h["loss"] for h in acc.history], [h["loss"] for h in one.history], rtol=1e-5)


@pytest.mark.parametrize("kind", ["evermind-lm", "moe", "conv-ae"])
def test_resume_is_bit_identical_for_every_model(device, tmp_path, kind):
    d = str(tmp_path)
    kw = dict(KW, epochs=3, accum_steps=1)
    full = Trainer(make(kind), seed=5)
    full_losses = full.train(data(kind), **kw)
    part = Trainer(make(kind), seed=5)
    part.train(data(kind), max_steps=4, save_key="run", save_dir=d, **kw)
    resumed = Trainer.from_checkpoint("run", directory=d)
    assert type(resumed.model) is type(full.model) and resumed.global_step == 4
    assert resumed.train(data(kind), **kw) == full_losses
    assert same(resumed.model.state_dict(), full.model.state_dict()) and resumed.history == full.history
    with pytest.raises(CheckpointMismatchError):  # other batching than the saved run's
        Trainer.from_checkpoint("run", directory=d).train(data(kind), **{**kw, "batch_size": 3})


def test_the_return_value_has_one_shape_whatever_stopped_the_run(device, tmp_path):
    """One entry per epoch run, the last over the steps it ran when cut short: by the epochs, max_steps,
    the time limit or a signal alike; stopped_by says which."""
    runs = {}
    for why, kw in (("epochs", {}), ("max_steps", {"max_steps": 5}), ("time_limit", {"time_limit": 0.0})):
        tr = Trainer(make("moe"), seed=1)
        runs[why] = (tr.train(data("moe"), **{**KW, **kw}), tr)
    tr = Trainer(make("moe"), seed=1)

    def on_step(step, _):
        if step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
    runs["signal"] = (tr.train(data("moe"), on_step=on_step, stop_on_signal=True, **KW), tr)
    for why, (losses, tr) in runs.items():
        assert tr.stopped_by == why
        epochs = sorted({h["epoch"] for h in tr.history})
        assert len(losses) == len(epochs)
        last = [h for h in tr.history if h["epoch"] == epochs[-1]]
        mean = sum(h["loss"] * h["tokens"] for h in last) / sum(h["tokens"] for h in last)
        assert losses[-1] == pytest.approx(mean, rel=1e-9), why
    assert runs["signal"][1].interrupted == signal.SIGTERM


@pytest.mark.parametrize("kind", ["evermind-lm", "moe", "mamba", "conv-ae"])
def test_mixed_precision_is_refused_where_the_ops_lack_it(device, kind):
    with pytest.raises(UnsupportedError, match="not implemented for"):
        Trainer(make(kind), precision="f16")


def test_protocol_misuse_is_typed(device):
    with pytest.raises(UnsupportedError, match="protocol"):
        Trainer(object())
    with pytest.raises(ConfigError, match="no loss option"):
        Trainer(make("lm"), loss_options={"aux_weight": 1.0}).train(IDS, seq_len=5, max_steps=1)
    with pytest.raises(ShapeError, match="rows of shape"):
        Trainer(make("moe")).train((np.zeros((4, 3)), np.zeros((4, 3))))
    with pytest.raises(ConfigError, match="unknown settings"):
        Trainer(make("lm")).train(IDS, seq_len=5, epoch=2)


def test_wsla_for_the_image_model_trains_only_its_set(device):
    m = make("conv-ae")
    before = m.state_dict()
    Trainer(m).train(data("conv-ae"), batch_size=4, lr=0.1, wsla=True)
    changed = {k for k in before if not np.array_equal(before[k], m.state_dict()[k])}
    assert changed == set(m.wsla_parameters()) and changed


def test_mamba_trainer_preset(device):
    m = make("mamba")
    tr = MambaTrainer(m, lr=1e-2, epochs=3, seq_len=5, batch_size=2, track_grad_norm=True)
    seen = []
    ppl0 = tr.evaluate(IDS)
    losses = tr.train(IDS, on_epoch_end=lambda e, loss, g: seen.append((e, g)))
    assert len(losses) == 3 and [e for e, _ in seen] == [1, 2, 3] and all(g > 0 for _, g in seen)
    assert tr.evaluate(IDS) < ppl0
    with pytest.raises(Exception, match="requires a tokenizer"):
        MambaTrainer(make("mamba")).train("some text")


@pytest.mark.parametrize("kind", ["evermind-lm", "moe", "mamba", "conv-ae"])
def test_lora_is_refused_where_it_does_not_apply(device, kind):
    from evermind_vk.models import LoRAConfig, add_lora
    with pytest.raises(UnsupportedError, match="LoRA applies"):
        add_lora(make(kind), LoRAConfig())


def test_an_accumulated_step_is_one_submit(device):
    tr = Trainer(make("evermind-lm"))
    tr.train(IDS, seq_len=5, batch_size=2, accum_steps=2)  # records the step's program
    before, steps = device.submits, len(tr.history)
    tr.train(IDS, seq_len=5, batch_size=2, accum_steps=2)
    assert device.submits - before == len(tr.history) - steps == 2  # 8 chunks: 2 steps of 2 x 2 rows
