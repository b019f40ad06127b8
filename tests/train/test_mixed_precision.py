"""Mixed-precision training (issue 13 item 5): Trainer(precision="f16") tracks f32, dynamic loss scaling with
doppler's semantics (an overflowing step changes no weight and no moment, is counted and halves the scale;
growth after clean steps; clamps), save/resume with the scaler, the CLI flag."""
import subprocess
import sys

import numpy as np
import pytest

from evermind_vk.errors import CheckpointMismatchError, ConfigError, UnsupportedError
from evermind_vk.models import LMConfig, TransformerLM
from evermind_vk.train import GradScaler, Trainer

SMALL = LMConfig(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=128, max_seq_len=64, seed=1)
TINY = LMConfig(vocab_size=13, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8, seed=3)
IDS = np.random.default_rng(0).integers(0, 13, 16)
TEXT = ("The quick brown fox jumps over the lazy dog; mixed precision keeps f32 master weights. " * 40)


def snapshot(tr):
    w = tr.model.state_dict()
    m = {n: (a.numpy().copy(), b.numpy().copy()) for n, (a, b) in tr.optimizer.state.items()}
    return w, m


def same(a, b):
    wa, ma = a
    wb, mb = b
    return (all(np.array_equal(wa[k], wb[k]) for k in wa)
            and all(np.array_equal(ma[k][0], mb[k][0]) and np.array_equal(ma[k][1], mb[k][1]) for k in ma))


def test_f16_loss_curve_tracks_f32(device):
    # 30 steps of a 2-layer LM on 4 x 32 bytes. The f16 run rounds every activation and matmul input to f16
    # (unit roundoff 2^-11 ~ 4.9e-4) but keeps f32 masters, moments and loss: its per-step losses differ from
    # f32's by ~1e-4 relative (8.4e-5 measured on lavapipe), and the difference does not grow over 30 AdamW
    # steps. 5e-3 (10 unit roundoffs) leaves margin for other devices' kernels while failing on a scaler
    # that is not undone (the update would be 1024x larger: loss gaps of O(1)) or a wrong cast.
    curves, programs, norms = {}, {}, {}
    for prec in ("f32", "f16"):
        tr = Trainer(TransformerLM(SMALL), precision=prec)
        tr.train(TEXT, epochs=2, seq_len=32, batch_size=4, lr=3e-3, max_steps=30, track_grad_norm=True)
        curves[prec] = np.array([h["loss"] for h in tr.history])
        norms[prec] = np.array([h["grad_norm"] for h in tr.history])
        programs[prec] = tr.step_program(32, 4, track_grad_norm=True)
    a, b = curves["f32"], curves["f16"]
    assert len(a) == len(b) == 30
    assert a[-1] < a[0] - 1.0  # it learns
    gap = np.max(np.abs(a - b) / a)
    assert gap < 5e-3, gap
    assert not np.array_equal(a, b)  # f16 really ran in f16 ...
    # AdamW is nearly blind to a uniform gradient scale, so the loss alone would not see a missing unscale:
    # the pre-clip gradient norms (of the unscaled f32 gradients) must agree too: 4.7e-4 relative over the first
    # 5 steps on lavapipe, up to 4.5e-2 later (the norm is more sensitive than the loss to the drifting weights).
    rel = np.abs(norms["f16"] - norms["f32"]) / norms["f32"]
    assert np.max(rel[:5]) < 5e-3 and np.max(rel) < 0.2, rel
    f16_matmuls = [lb for lb in programs["f16"].labels if lb.startswith("matmul_f16")]
    assert f16_matmuls and not [lb for lb in programs["f16"].labels if lb.startswith("matmul_f32")]
    assert not [lb for lb in programs["f32"].labels if "f16" in lb]


def test_overflow_skips_the_step_counts_it_and_halves_the_scale(device):
    tr = Trainer(TransformerLM(TINY), precision="f16")
    seen = {}

    def on_step(step, m):
        if step == 2:  # inject (a test hook, beyond max_scale): a scale at which SOME scaled gradients overflow f16
            seen["before"] = snapshot(tr)  # (2^18: 369 of 512 elements on lavapipe; 2^24 overflows them all)
            seen["adam_t"] = tr.optimizer.step_count
            tr.scaler.scale = 2.0 ** 18
        if step == 3:
            seen["after"] = snapshot(tr)
            seen["adam_t3"] = tr.optimizer.step_count
            seen["nonfinite"] = tr.optimizer.nonfinite
            seen["scale3"] = tr.scaler.scale
            tr.scaler.scale = 1024.0  # back to a scale that fits
    tr.train(IDS, seq_len=4, batch_size=1, lr=0.05, max_steps=4, on_step=on_step)
    assert same(seen["before"], seen["after"])  # no weight, no moment changed
    assert seen["adam_t3"] == seen["adam_t"]  # nor AdamW's bias-correction step
    # every element skipped (the finite ones too: one overflow poisons the whole step)
    assert seen["nonfinite"] == sum(p.numel for p in tr.model.parameters().values())
    h = tr.history
    assert [x["overflow"] for x in h] == [False, False, True, False]
    assert h[2]["loss_scale"] == 2.0 ** 18 and seen["scale3"] == 2.0 ** 17  # halved
    assert tr.scaler.overflows == 1 and tr.scaler.clean_steps == 1
    assert np.isfinite(h[2]["loss"])  # the loss is still reported (doppler logs the skipped step)
    assert not same(seen["after"], snapshot(tr))  # the next (clean) step updated again
    assert tr.optimizer.step_count == 3


def test_growth_after_clean_steps_and_accumulation(device):
    tr = Trainer(TransformerLM(TINY), precision="f16", scaler=GradScaler(init_scale=8, growth_interval=3))
    tr.train(IDS, seq_len=4, batch_size=1, lr=0.05, epochs=2)  # 8 steps
    assert [x["loss_scale"] for x in tr.history] == [8, 8, 8, 16, 16, 16, 32, 32]
    assert tr.scaler.clean_steps == 2 and tr.scaler.overflows == 0
    acc = Trainer(TransformerLM(TINY), precision="f16", scaler=GradScaler(init_scale=4, growth_interval=1))
    acc.train(IDS, seq_len=4, batch_size=1, accum_steps=2, lr=0.05, max_steps=2, track_grad_norm=True)  # micro/apply
    assert [x["loss_scale"] for x in acc.history] == [4, 8] and not any(x["overflow"] for x in acc.history)
    ref = Trainer(TransformerLM(TINY), precision="f32")
    ref.train(IDS, seq_len=4, batch_size=1, accum_steps=2, lr=0.05, max_steps=2, track_grad_norm=True)
    got, want = [h["grad_norm"] for h in acc.history], [h["grad_norm"] for h in ref.history]
    assert np.allclose(got, want, rtol=1e-2), (got, want)  # the accumulated gradients were unscaled


def test_scaler_rules_and_clamps():
    s = GradScaler()
    assert (s.scale, s.growth_interval, s.min_scale, s.max_scale) == (1024, 2000, 1, 65536)  # doppler's
    for _ in range(1999):
        s.update(False)
    assert s.scale == 1024
    s.update(False)
    assert s.scale == 2048 and s.clean_steps == 0
    top = GradScaler(init_scale=32768, growth_interval=1)
    top.update(False)
    top.update(False)
    assert top.scale == 65536  # capped
    low = GradScaler(init_scale=2)
    assert [low.update(True) for _ in range(3)] == [False] * 3
    assert low.scale == 1 and low.overflows == 3  # floored
    assert GradScaler(init_scale=1e9).scale == 65536
    for bad in (dict(init_scale=float("nan")), dict(growth_interval=0), dict(backoff_factor=2.0),
                dict(min_scale=4, max_scale=2)):
        with pytest.raises(ConfigError):
            GradScaler(**bad)


def test_save_resume_keeps_the_scaler_bit_identically(device, tmp_path):
    d = str(tmp_path)
    kw = dict(epochs=3, seq_len=4, batch_size=1, lr=0.05, track_grad_norm=True)

    def inject(tr):
        def on_step(step, m):
            if step in (1, 5):
                tr.scaler.scale = 2.0 ** 60  # overflows at steps 2 and 6, before and after the cut
            if step in (2, 6):
                tr.scaler.scale = 16.0
        return on_step
    full = Trainer(TransformerLM(TINY), seed=7, precision="f16", scaler=GradScaler(init_scale=16, growth_interval=2))
    full.train(IDS, on_step=inject(full), **kw)
    part = Trainer(TransformerLM(TINY), seed=7, precision="f16", scaler=GradScaler(init_scale=16, growth_interval=2))
    part.train(IDS, max_steps=3, save_key="run", save_dir=d, on_step=inject(part), **kw)
    resumed = Trainer.from_checkpoint("run", directory=d)
    assert resumed.precision == "f16"
    assert resumed.scaler.state_dict() == part.scaler.state_dict()
    assert resumed.scaler.clean_steps == 1 and resumed.scaler.overflows == 1
    resumed.train(IDS, on_step=inject(resumed), **kw)
    assert all(np.array_equal(a, b) for a, b in zip(resumed.model.state_dict().values(), full.model.state_dict().values()))
    assert resumed.history == full.history and sum(h["overflow"] for h in full.history) == 2
    assert [h["grad_norm"] is None for h in full.history] == [h["overflow"] for h in full.history]
    assert resumed.scaler.state_dict() == full.scaler.state_dict()
    assert resumed.optimizer.step_count == full.optimizer.step_count == 10
    with pytest.raises(CheckpointMismatchError, match="precision"):
        Trainer(TransformerLM(TINY), precision="f32").resume("run", directory=d)


def test_precision_errors(device):
    m = TransformerLM(TINY)
    with pytest.raises(UnsupportedError, match="bf16.*glslang"):
        Trainer(m, precision="bf16")
    with pytest.raises(ConfigError):
        Trainer(m, precision="f64")
    with pytest.raises(ConfigError):
        Trainer(m, scaler=GradScaler())  # a scaler without f16
    with pytest.raises(ConfigError):
        m.forward(None, dtype="bf16")


def test_disable_f16_switches_the_precision_off():
    code = ("import evermind_vk as ev\nfrom evermind_vk.models import LMConfig, TransformerLM\n"
            "from evermind_vk.train import Trainer\n"
            "try:\n    Trainer(TransformerLM(LMConfig(d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8)), precision='f16')\n"
            "except ev.errors.UnsupportedError as e:\n    print('refused:', e)\n")
    import os
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "EVERMIND_VK_DISABLE_F16": "1"})
    assert "refused:" in r.stdout and "EVERMIND_VK_DISABLE_F16" in r.stdout, r.stdout + r.stderr


def test_cli_precision(device, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 4)
    base = [sys.executable, "-m", "evermind_vk", "train", "--text", str(text), "--seq-len", "8", "--batch-size", "2",
            "--d-model", "8", "--layers", "1", "--heads", "2", "--kv-heads", "1", "--d-ff", "8", "--time-limit", "0",
            "--sample-tokens", "2", "--max-steps", "3"]
    r = subprocess.run(base + ["--out", str(tmp_path / "a"), "--precision", "f16"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    from evermind_vk.io.checkpoint import load_checkpoint
    rec = load_checkpoint(str(tmp_path / "a" / "trainer-checkpoint"))
    assert rec["precision"] == "f16" and rec["loss_scaler"]["scale"] == 1024 and rec["global_step"] == 3
    r = subprocess.run(base + ["--out", str(tmp_path / "b"), "--precision", "bf16"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and "glslang" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(base + ["--out", str(tmp_path / "c"), "--precision", "f16", "--model", "conv-ae"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "only --model lm" in r.stderr


def test_lora_adapters_train_in_f16(device):
    from evermind_vk.models.lora import LoRAConfig, add_lora, lora_frozen
    runs = {}
    for prec in ("f32", "f16"):
        m = TransformerLM(TINY)
        add_lora(m, LoRAConfig(rank=2, alpha=4, targets=("layers.*.attn.wq", "layers.*.mlp.w_down")))
        tr = Trainer(m, precision=prec)
        tr.train(IDS, seq_len=4, batch_size=1, lr=0.05, freeze=lora_frozen(m), max_steps=3, track_grad_norm=True)
        runs[prec] = ([h["loss"] for h in tr.history], [h["grad_norm"] for h in tr.history])
    assert np.allclose(runs["f16"][0], runs["f32"][0], rtol=5e-3)
    assert np.allclose(runs["f16"][1][0], runs["f32"][1][0], rtol=5e-3)  # the same adapter gradients at step 1
