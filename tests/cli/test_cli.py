"""The command line (issue 15): every misuse is one line `evermind-vk: error: ...` on stderr with exit
code 2 (1 for a failed `verify`) and no traceback; outputs are checked before training; --help shows
every default; generate/inspect read .safetensors, .npz and .evermind; train writes model.safetensors,
config.json, loss.png, losses.csv (and model.evermind with --package)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from evermind_vk.cli import build_parser, main
from evermind_vk.files import export_safetensors, save_model
from evermind_vk.io.package import EvermindPackage
from evermind_vk.models import LMConfig, TransformerLM

TINY = LMConfig(vocab_size=256, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=16, seed=3)
SMALL = ["--d-model", "8", "--layers", "1", "--heads", "2", "--kv-heads", "1", "--d-ff", "8", "--seq-len", "8",
         "--sample-tokens", "2"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    m = TransformerLM(TINY)
    save_model(m, str(d / "m.npz"))
    export_safetensors(m, str(d / "m.safetensors"))
    EvermindPackage.from_model(m, "tiny").to_file(str(d / "m.evermind"))
    (d / "junk.npz").write_bytes(b"\x80\x04junk pickle-ish bytes" * 10)
    (d / "junk.safetensors").write_bytes(b"\xff" * 100)
    (d / "junk.evermind").write_bytes(b"not a package at all")
    (d / "latin1.txt").write_bytes("caf\xe9 na\xefve ".encode("latin-1") * 10)
    (d / "one.txt").write_bytes(b"a")
    (d / "empty.txt").write_bytes(b"")
    (d / "ok.txt").write_text("hello world, hello vulkan. " * 8)
    (d / "afile").write_text("I am a file, not a directory")
    (d / "adir").mkdir()
    return d


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("evermind-vk: error: "), err
    return lines[0]


MISUSE = [  # (argv with {d} for the fixture directory, text the one line must contain)
    (["inspect", "{d}/missing.evermind"], "No such file"),
    (["inspect", "{d}/adir"], "directory"),
    (["inspect", "{d}/junk.npz"], "junk.npz"),
    (["inspect", "{d}/junk.evermind"], ""),
    (["train", "--text", "{d}/missing.txt"], "No such file"),
    (["train", "--text", "{d}/adir"], "directory"),
    (["train", "--text", "{d}/latin1.txt"], "UTF-8"),
    (["train", "--text", "{d}/one.txt"], "at least 2"),
    (["train", "--text", "{d}/empty.txt"], "at least 2"),
    (["train", "--batch-size", "0"], "--batch-size"),
    (["train", "--epochs", "0"], "--epochs"),
    (["train", "--time-limit", "-5"], "--time-limit"),
    (["train", "--time-limit", "nan"], "--time-limit"),
    (["train", "--lr", "inf"], "--lr"),
    (["train", "--lr", "-1"], "--lr"),
    (["train", "--seq-len", "0"], "--seq-len"),
    (["train", "--d-model", "6", "--heads", "4"], "multiple"),
    (["train", "--epochs", "two"], "--epochs"),
    (["train", "--text", "{d}/ok.txt", "--out", "{d}/afile"], "not a directory"),
    (["generate", "--model", "{d}/missing.npz"], "No such file"),
    (["generate", "--model", "{d}/adir"], "directory"),
    (["generate", "--model", "{d}/junk.npz"], "junk.npz"),
    (["generate", "--model", "{d}/junk.safetensors"], ""),
    (["generate", "--model", "{d}/junk.evermind"], ""),
    (["generate", "--model", "{d}/m.npz", "--temperature", "nan"], "--temperature"),
    (["generate", "--model", "{d}/m.npz", "--tokens", "-1"], "--tokens"),
    (["pack", "--model", "{d}/missing.npz", "--out", "{d}/x.evermind"], "No such file"),
    (["pack", "--model", "{d}/junk.npz", "--out", "{d}/x.evermind"], "junk.npz"),
    (["pack", "--model", "{d}/m.npz", "--out", "{d}/adir"], "adir"),
    (["check", "--size", "0"], "--size"),
    (["check", "--device", "99"], "no Vulkan device 99"),
    (["nosuchcommand"], "invalid choice"),
    ([], "required"),
]


@pytest.mark.parametrize("argv,needle", MISUSE, ids=[" ".join(a) or "(none)" for a, _ in MISUSE])
def test_misuse_is_one_line_exit_2(capsys, files, argv, needle):
    code, out, err = run(capsys, *[a.format(d=files) for a in argv])
    line = one_error_line(err)
    assert code == 2, (code, err)
    assert needle in line, line


@pytest.mark.parametrize("name", ["missing.evermind", "junk.evermind", "adir"])
def test_failed_verify_is_one_line_exit_1(capsys, files, name):
    code, out, err = run(capsys, "verify", files / name)
    one_error_line(err)
    assert code == 1


def test_out_pointing_at_a_file_fails_before_training(capsys, files):
    before = (files / "afile").read_bytes()
    code, out, err = run(capsys, "train", "--text", files / "ok.txt", "--out", files / "afile", "--time-limit", "0",
                         *SMALL)
    assert code == 2 and "not a directory" in one_error_line(err)
    assert "device:" not in out and "trained" not in out  # nothing was built or trained
    assert (files / "afile").read_bytes() == before


def test_output_inside_out_that_is_a_directory_fails_before_training(capsys, files, tmp_path):
    (tmp_path / "model.safetensors").mkdir()
    code, out, err = run(capsys, "train", "--text", files / "ok.txt", "--out", tmp_path, *SMALL)
    assert code == 2 and "model.safetensors" in one_error_line(err) and "trained" not in out


@pytest.mark.parametrize("name", ["m.npz", "m.safetensors", "m.evermind"])
def test_generate_and_inspect_read_every_model_format(capsys, files, name):
    code, out, err = run(capsys, "generate", "--model", files / name, "--tokens", "3", "--prompt", "ab")
    assert code == 0, err
    assert out.startswith("ab")
    code, out, err = run(capsys, "inspect", files / name)
    assert code == 0, err
    assert "d_model" in out


def test_train_writes_hf_files_and_package(capsys, files, tmp_path):
    out_dir = tmp_path / "run"
    code, out, err = run(capsys, "train", "--text", files / "ok.txt", "--out", out_dir, "--time-limit", "0",
                         "--package", *SMALL)
    assert code == 0, err
    for name in ("model.safetensors", "config.json", "loss.png", "losses.csv", "model.evermind"):
        assert (out_dir / name).is_file(), name
    assert json.loads((out_dir / "config.json").read_text()) == TransformerLM(
        LMConfig(**json.loads((out_dir / "config.json").read_text()))).config.to_dict()
    rows = (out_dir / "losses.csv").read_text().splitlines()
    assert rows[0] == "step,epoch,loss,grad_norm,tokens" and len(rows) >= 2
    assert "held-out perplexity" in out and "before training" in out and "sample: " in out
    assert "trained all" in out
    assert "\r" not in err  # stderr is not a terminal here: line-based progress
    assert any(line.startswith("epoch 1: mean loss") for line in err.splitlines())
    code, gen, err2 = run(capsys, "generate", "--model", out_dir, "--tokens", "2")  # a run directory works
    assert code == 0, err2


def test_time_limited_summary_is_honest(capsys, files, tmp_path):
    code, out, err = run(capsys, "train", "--text", files / "ok.txt", "--out", tmp_path, "--time-limit", "0.001",
                         "--epochs", "3", *SMALL)
    assert code == 0, err
    assert "stopped by --time-limit after 1 of" in out
    assert "mean loss over the 1 of" in err


def test_max_steps_and_accumulation_summaries_are_honest(capsys, files, tmp_path):
    # --max-steps names itself; with --accum-steps a complete run counts optimizer steps, not batches
    code, out, err = run(capsys, "train", "--text", files / "ok.txt", "--out", tmp_path, "--max-steps", "1",
                         "--epochs", "2", *SMALL)
    assert code == 0, err
    assert "stopped by --max-steps 1 after 1 of" in out
    code, out, err = run(capsys, "train", "--text", files / "ok.txt", "--out", tmp_path / "acc", "--accum-steps", "2",
                         *SMALL)
    assert code == 0, err
    assert "trained all" in out


def test_help_shows_every_default():
    ap = build_parser()
    subs = next(a for a in ap._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name, p in subs.items():
        for act in p._actions:
            if not act.option_strings or act.dest == "help":
                continue
            assert act.help, f"{name} {act.option_strings[0]}: no help text"
        text = p.format_help()
        n_opts = sum(1 for act in p._actions if act.option_strings and act.dest != "help")
        assert text.count("(default:") >= n_opts, (name, text)


def test_no_traceback_through_the_real_entry_point(files):
    # The installed console script path: python -m evermind_vk (a missing file, a junk model, a bad flag).
    for argv in (["inspect", str(files / "missing.evermind")], ["generate", "--model", str(files / "junk.npz")],
                 ["train", "--batch-size", "0"]):
        r = subprocess.run([sys.executable, "-m", "evermind_vk", *argv], capture_output=True, text=True, timeout=300,
                           cwd=str(files))
        assert r.returncode == 2, (argv, r.stderr)
        one_error_line(r.stderr)


def test_help_and_version_exit_0(capsys):
    assert main(["--help"]) == 0
    assert main(["train", "--help"]) == 0
    assert main(["--version"]) == 0
