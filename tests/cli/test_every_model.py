"""`evermind-vk train --model {lm,evermind-lm,moe,mamba,conv-ae}`: one path for every model type. Each
writes its weights (natural format) + config.json, loss.png, losses.csv, reports the held-out metric
before and after, saves a resumable checkpoint and continues it with --resume; --resume of another run
(a mismatched flag, config or data) writes nothing; --resume on an empty directory says so; a flag that
cannot apply to a model is refused; Ctrl-C saves for every model; `profile --model` works for each."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import evermind_vk as ev
from evermind_vk.cli import main
from evermind_vk.io.checkpoint import load_checkpoint

SHAPE = {
    "lm": ["--d-model", "8", "--layers", "1", "--heads", "2", "--kv-heads", "1", "--d-ff", "8", "--seq-len", "8"],
    "evermind-lm": ["--d-model", "8", "--layers", "1", "--d-ff", "8", "--seq-len", "8"],
    "moe": ["--d-model", "8", "--d-ff", "8", "--seq-len", "4"],
    "mamba": ["--d-model", "8", "--layers", "1", "--heads", "2", "--seq-len", "8"],
    "conv-ae": ["--images", "16", "--image-size", "8"],
}
WEIGHTS = {"lm": "model.safetensors", "evermind-lm": "model.evermind", "moe": "model.evermind",
           "mamba": "model.evermind", "conv-ae": "model.npz"}
METRIC = {"lm": "perplexity", "evermind-lm": "perplexity", "moe": "loss", "mamba": "perplexity", "conv-ae": "MSE"}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    p = tmp_path_factory.mktemp("text") / "t.txt"
    p.write_text("the quick brown fox jumps over the lazy dog. " * 6)
    return p


def argv(kind, text, out, *more):
    data = [] if kind == "conv-ae" else ["--text", str(text)]
    return ["train", "--model", kind, *data, *SHAPE[kind], "--batch-size", "4", "--time-limit", "0",
            "--out", str(out), *more]


def files_of(d):
    return {p: (d / p).read_bytes() for p in sorted(os.listdir(d))}


@pytest.mark.parametrize("kind", list(SHAPE))
def test_every_model_writes_the_same_outputs_and_resumes(device, capsys, tmp_path, text, kind):
    out = tmp_path / kind
    assert main(argv(kind, text, out, "--max-steps", "2", "--save-every", "1")) == 0
    stdout, err = capsys.readouterr()
    for name in (WEIGHTS[kind], "config.json", "loss.png", "losses.csv", "trainer-checkpoint"):
        assert (out / name).is_file(), name
    assert f"held-out {METRIC[kind]} (never trained on)" in stdout and "before training ->" in stdout
    assert "training stopped by --max-steps 2 after 2 of" in stdout and "wrote " in stdout
    assert "epoch 1: mean loss over the 2 of" in err
    cfg = json.loads((out / "config.json").read_text())
    if kind != "conv-ae":
        loaded = ev.load(str(out / WEIGHTS[kind])).config.to_dict()
        assert {k: v for k, v in loaded.items() if k != "seed"} == {k: v for k, v in cfg.items() if k != "seed"}
    assert load_checkpoint(str(out / "trainer-checkpoint"))["global_step"] == 2
    assert main(argv(kind, text, out, "--max-steps", "3", "--resume")) == 0
    stdout, _ = capsys.readouterr()
    assert f"resuming {out / 'trainer-checkpoint'} at step 2" in stdout
    assert load_checkpoint(str(out / "trainer-checkpoint"))["global_step"] == 3


MISMATCH = [["--lr", "0.01"], ["--d-ff", "16"], ["--seq-len", "8"], ["--seed", "1"], ["--model", "evermind-lm"]]


def test_resume_of_another_run_writes_nothing(device, capsys, tmp_path, text):
    out = tmp_path / "moe"
    assert main(argv("moe", text, out, "--max-steps", "2", "--package")) == 0
    before = files_of(out)
    assert {"model.evermind", "config.json", "loss.png", "losses.csv", "trainer-checkpoint"} <= set(before)
    capsys.readouterr()
    for extra in MISMATCH:
        a = argv("moe", text, out, "--max-steps", "4", "--resume")
        i = a.index(extra[0]) if extra[0] in a else None
        if i is not None:
            a[i + 1] = extra[1]
        else:
            a += extra
        if extra[0] == "--model":  # evermind-lm takes --layers, not the moe's shape only
            a = argv("evermind-lm", text, out, "--max-steps", "4", "--resume")
        assert main(a) == 2, extra
        err = capsys.readouterr().err
        assert "--resume" in err and "nothing was written" in err, (extra, err)
        assert files_of(out) == before, extra  # every file byte-identical


def test_resume_on_an_empty_directory_says_so(device, capsys, tmp_path, text):
    assert main(argv("mamba", text, tmp_path / "empty", "--resume")) == 2
    err = capsys.readouterr().err
    assert "no checkpoint at" in err and "nothing to continue" in err
    assert not (tmp_path / "empty").exists()  # nothing created either


REFUSED = [("conv-ae", ["--text", "{t}"], "--text does not apply to --model conv-ae"),
           ("moe", ["--layers", "3"], "--layers does not apply to --model moe"),
           ("evermind-lm", ["--kv-heads", "2"], "--kv-heads does not apply"),
           ("lm", ["--images", "4"], "--images does not apply"),
           ("mamba", ["--precision", "f16"], "only --model lm"),
           ("moe", ["--prompt", "x"], "--prompt does not apply"),
           ("moe", ["--checkpoint-layers"], "--checkpoint-layers does not apply to --model moe"),
           ("conv-ae", ["--checkpoint-layers", "2"], "--checkpoint-layers does not apply to --model conv-ae")]


@pytest.mark.parametrize("kind,extra,needle", REFUSED, ids=[f"{k} {e[0]}" for k, e, _ in REFUSED])
def test_flags_that_cannot_apply_are_refused(capsys, tmp_path, text, kind, extra, needle):
    extra = [e.format(t=text) for e in extra]
    assert main(["train", "--model", kind, *extra, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err


def test_ctrl_c_saves_for_a_builderforce_model(device, tmp_path, text):
    out = tmp_path / "run"
    key = out / "trainer-checkpoint"
    cmd = [sys.executable, "-m", "evermind_vk", *argv("evermind-lm", text, out, "--epochs", "100000",
                                                         "--save-every", "1")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not key.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert key.exists(), proc.stderr.read() if proc.poll() is not None else "no checkpoint in 120 s"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted by signal 2" in stdout and "Traceback" not in stderr, stderr
    assert load_checkpoint(str(key))["global_step"] >= 1


@pytest.mark.parametrize("kind", ["moe", "conv-ae"])
def test_profile_every_model(device, capsys, text, kind):
    extra = [] if kind == "conv-ae" else ["--text", str(text)]
    assert main(["profile", "--model", kind, *extra, *SHAPE[kind], "--batch-size", "4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert f"one training step of --model {kind}" in out and "throughput:" in out


def test_nproc_for_a_model_of_images(device, tmp_path, two_ranks_env):
    pytest.importorskip("torch")  # the `dist` extra
    out = tmp_path / "dp"
    r = subprocess.run([sys.executable, "-m", "evermind_vk", *argv("conv-ae", None, out, "--max-steps", "2",
                                                                  "--nproc", "2")],
                       capture_output=True, text=True, timeout=300, env=two_ranks_env)
    assert r.returncode == 0, r.stderr
    assert "data-parallel: 2 ranks x batch 4" in r.stdout and "held-out MSE" in r.stdout
    assert all((out / n).is_file() for n in ("model.npz", "config.json", "loss.png", "losses.csv"))
    assert load_checkpoint(str(out / "trainer-checkpoint"))["global_step"] == 2
