"""Activation checkpointing per layer (issue 47 item 2's memory bar): TransformerLM (f32 and f16 mixed
precision, every layer or every k-th) and HybridMambaModel recompute checkpointed layers in the backward of
the recorded training step. The recompute runs the same kernels on the same inputs in the same order, so
gradients, losses and weights are bit-identical with and without it; the step's peak device memory is
lower; a model without it refuses the option with a typed error."""
import gc
import subprocess
import sys

import numpy as np
import pytest

from evermind_vk import tensor
from evermind_vk.autodiff import Tape
from evermind_vk.errors import ConfigError, UnsupportedError
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.models.conv_ae import ConvAE
from evermind_vk.models.evermind_lm import EvermindLM, EvermindLMConfig
from evermind_vk.models.lora import LoRAConfig, add_lora
from evermind_vk.models.mamba import HybridMambaConfig, HybridMambaModel
from evermind_vk.models.moe import SharedExpertMoE
from evermind_vk.train import Trainer

CFG = LMConfig(vocab_size=64, d_model=32, n_layers=3, n_heads=2, n_kv_heads=1, d_ff=48, max_seq_len=16, seed=5)
MAMBA = dict(vocabSize=64, dModel=32, numLayers=3, layers=("mamba1", "mamba2", "attention"), nHeads=2, dState=4, seed=2)
B, S = 2, 16
IDS = np.random.default_rng(0).integers(0, 64, 400)


def grads_of(model, checkpoint, dtype="f32"):
    """Host gradients of every parameter for one batch, with `checkpoint` (eager, outside a recording)."""
    rng = np.random.default_rng(1)
    ids = tensor(rng.integers(0, 64, B * S).astype(np.uint32), device=model.device)
    tg = tensor(rng.integers(0, 64, B * S).astype(np.uint32), device=model.device)
    kw = {"dtype": dtype} if dtype != "f32" else {}
    with Tape() as tape:
        loss = model.loss(ids, tg, B, checkpoint=checkpoint, **kw)
    g = tape.backward(loss).by_name(model.parameters())
    return loss.numpy().copy(), {n: t.numpy().copy() for n, t in g.items()}


def assert_same_grads(a, b):
    (la, ga), (lb, gb) = a, b
    assert np.array_equal(la, lb), (la, lb)
    assert sorted(ga) == sorted(gb)
    for n in ga:
        assert np.array_equal(ga[n], gb[n]), n


def trained(model_fn, checkpoint, precision="f32", steps=3):
    """(losses, grad norms, weights) after `steps` recorded training steps."""
    tr = Trainer(model_fn(), precision=precision, checkpoint_layers=checkpoint)
    tr.train(IDS, seq_len=S, batch_size=B, lr=3e-3, max_steps=steps, track_grad_norm=True, shuffle=False)
    return ([h["loss"] for h in tr.history], [h["grad_norm"] for h in tr.history], tr.model.state_dict())


def assert_same_training(a, b):
    assert a[0] == b[0] and a[1] == b[1], (a[:2], b[:2])
    for n in a[2]:
        assert np.array_equal(a[2][n], b[2][n]), n


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("checkpoint", [True, 2])
def test_lm_gradients_identical(device, dtype, checkpoint):
    if dtype == "f16" and not device.info.f16:
        pytest.skip("no 16-bit storage")
    model = TransformerLM(CFG, device=device)
    plain = grads_of(model, False, dtype)
    assert len(plain[1]) == len(model.parameters())
    assert_same_grads(plain, grads_of(model, checkpoint, dtype))


def test_lm_lora_gradients_identical(device):
    # a checkpointed layer's inputs include its LoRA adapters: their gradients must come back too
    model = TransformerLM(CFG, device=device)
    add_lora(model, LoRAConfig(rank=2, alpha=4.0, targets=("*.attn.wq", "*.mlp.w_down"), seed=1))
    model.params["layers.0.attn.wq.lora_B"].copy_(np.full((32, 2), 0.01, np.float32))
    plain = grads_of(model, False)
    assert "layers.1.attn.wq.lora_A" in plain[1]
    assert_same_grads(plain, grads_of(model, True))


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_lm_recorded_training_identical(device, precision):
    if precision == "f16" and not device.info.f16:
        pytest.skip("no 16-bit storage")

    def make():
        return TransformerLM(CFG, device=device)
    plain = trained(make, False, precision)
    assert plain[0][-1] < plain[0][0]  # it learns
    assert_same_training(plain, trained(make, True, precision))
    assert_same_training(plain, trained(make, 2, precision))


def test_mamba_identical(device):
    def make():
        return HybridMambaModel(HybridMambaConfig(**MAMBA), device=device)
    model = make()
    assert_same_grads(grads_of(model, False), grads_of(model, True))
    assert_same_training(trained(make, False), trained(make, True))


def step_peak(model, checkpoint, precision="f32"):
    """Peak Device.max_memory_allocated of recording and running one training step, over
    what the device held before (other tests' tensors still alive on a shared device are not this step's)."""
    dev = model.device
    tr = Trainer(model, precision=precision, checkpoint_layers=checkpoint)
    gc.collect()
    dev.reset_peak_memory_stats()
    base = dev.memory_allocated()
    tr.train(IDS[:4 * 64 + 1], seq_len=64, batch_size=4, lr=1e-3, max_steps=1)
    peak = dev.max_memory_allocated() - base
    del tr
    gc.collect()
    return peak


@pytest.mark.parametrize("precision", ["f32", "f16"])
def test_lm_peak_memory_lower(device, precision):
    # narrow (d 32), deep (6 layers), long rows (4 x 64) and a small vocabulary: the activations the backward
    # needs (a dozen [256, 32..96] tensors per layer) dominate the weights and the logits; checkpointing keeps one
    # [256, 32] tensor per layer instead. Measured on lavapipe (f32): 2.74 MiB -> 1.49 MiB.
    if precision == "f16" and not device.info.f16:
        pytest.skip("no 16-bit storage")
    cfg = LMConfig(vocab_size=64, d_model=32, n_layers=6, n_heads=2, n_kv_heads=1, d_ff=96, max_seq_len=64, seed=1)
    plain = step_peak(TransformerLM(cfg, device=device), False, precision)
    ckpt = step_peak(TransformerLM(cfg, device=device), True, precision)
    assert ckpt < 0.8 * plain, (ckpt, plain)


def test_refused_for_models_without_it(device):
    with pytest.raises(UnsupportedError, match="ConvAE has no activation checkpointing"):
        Trainer(ConvAE(device=device), checkpoint_layers=True)
    with pytest.raises(UnsupportedError, match="SharedExpertMoE has no activation checkpointing"):
        Trainer(SharedExpertMoE(device=device), checkpoint_layers=1)
    Trainer(ConvAE(device=device), checkpoint_layers=0)  # off is fine for every model
    lm = TransformerLM(CFG, device=device)
    for bad in (-1, 1.5, "2"):
        with pytest.raises(ConfigError):
            Trainer(lm, checkpoint_layers=bad)
    with pytest.raises(ConfigError, match="given twice"):
        Trainer(lm, checkpoint_layers=True, loss_options={"checkpoint": True})


def test_cli_flag_refused_for_moe(tmp_path):
    r = subprocess.run([sys.executable, "-m", "evermind_vk.cli", "train", "--model", "moe", "--checkpoint-layers",
                        "--out", str(tmp_path / "o"), "--max-steps", "1"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "--checkpoint-layers" in r.stderr and "moe" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_cli_profile_with_checkpointing():
    r = subprocess.run([sys.executable, "-m", "evermind_vk.cli", "profile", "--model", "mamba", "--checkpoint-layers",
                        "2", "--seq-len", "16", "--batch-size", "2", "--repeats", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "activation checkpointing every 2 layer(s)" in r.stdout, r.stdout


def test_evermind_lm_every_kth_layer_identical(device):
    # EvermindLM had checkpoint=True; through the Trainer it now takes every k-th layer as well
    def make():
        return EvermindLM(EvermindLMConfig(64, 16, 3, 3, 24, seed=4), device=device)
    model = make()
    ids = tensor(IDS[:32].astype(np.uint32), device=device)
    tg = tensor(IDS[1:33].astype(np.uint32), device=device)
    runs = []
    for ck in (False, 2, True):
        with Tape() as tape:
            loss = model.loss(ids, tg, 16, checkpoint=ck)
        g = tape.backward(loss).by_name(model.parameters())
        runs.append((loss.numpy().copy(), {n: t.numpy().copy() for n, t in g.items()}))
    assert_same_grads(runs[0], runs[1])
    assert_same_grads(runs[0], runs[2])
    assert_same_training(trained(make, False), trained(make, 2))


def test_resume_may_change_checkpointing(device, tmp_path):
    # a memory setting, not part of the run: a run saved without it continues with it, bit-identically
    kw = dict(seq_len=S, batch_size=B, lr=3e-3, shuffle=False)
    full = Trainer(TransformerLM(CFG, device=device), seed=3)
    full.train(IDS, max_steps=4, **kw)
    part = Trainer(TransformerLM(CFG, device=device), seed=3)
    part.train(IDS, max_steps=2, save_key="run", save_dir=str(tmp_path), **kw)
    resumed = Trainer.from_checkpoint("run", directory=str(tmp_path), device=device, checkpoint_layers=1)
    assert resumed.checkpoint_layers == 1
    resumed.train(IDS, max_steps=4, **kw)
    assert resumed.history == full.history
    assert_same_training(([], [], resumed.model.state_dict()), ([], [], full.model.state_dict()))
