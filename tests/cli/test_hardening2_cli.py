"""The command line on hostile input and misuse (issue 42): a model trained by `train` with a tensor of
more than 2^20 elements reloads through every command and format; special files, bad token lists and
impossible models are one error line (never "internal error"), refused before training, fast; the
--nproc launcher is bounded and reports a failed run once."""
import os
import time

import numpy as np
import pytest

from evermind_vk.cli import main
from evermind_vk.files import load, save_model
from evermind_vk.io.layouts import nonfinite_count


def run(capfd, *argv):
    code = main([str(a) for a in argv])
    out, err = capfd.readouterr()
    return code, out, err


def one_error_line(err: str, code: int, want_code: int = 2) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("evermind-vk: error:")]
    assert code == want_code and "Traceback" not in err and "internal error" not in err, err
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, device):
    """One CLI training step of a model whose MLP weight mlp.w_gate_up is 16,386 x 64 = 1,048,704 > 2^20."""
    d = tmp_path_factory.mktemp("big-tensor")
    (d / "t.txt").write_text("hello world, hello vulkan. " * 20)
    code = main(["train", "--text", str(d / "t.txt"), "--out", str(d / "run"), "--d-model", "64", "--layers", "1",
                 "--heads", "2", "--kv-heads", "2", "--d-ff", "8193", "--seq-len", "8", "--batch-size", "1",
                 "--max-steps", "1", "--sample-tokens", "2", "--package"])
    assert code == 0
    m = load(str(d / "run" / "model.safetensors"))
    assert max(p.numpy().size for p in m.params.values()) > 1 << 20
    save_model(m, str(d / "run" / "model.npz"))
    return d / "run"


@pytest.mark.parametrize("name", ["model.safetensors", "model.npz", "model.evermind"])
def test_a_trained_model_with_a_big_tensor_reloads_everywhere(trained, capfd, name, tmp_path):
    path = trained / name
    m = load(str(path))
    assert all(nonfinite_count(p.numpy()) == 0 for p in m.params.values())
    code, out, err = run(capfd, "generate", "--model", path, "--tokens", "2", "--seed", "1")
    assert code == 0, err
    code, out, err = run(capfd, "pack", "--model", path, "--out", tmp_path / "p.evermind")
    assert code == 0, err
    code, out, err = run(capfd, "verify", tmp_path / "p.evermind")
    assert code == 0 and "ok" in out, err
    code, out, err = run(capfd, "inspect", path)
    assert code == 0 and "NO:" not in out, out + err
    if name == "model.evermind":
        code, out, err = run(capfd, "verify", path)
        assert code == 0, err
        code, out, err = run(capfd, "verify", trained / "trainer-checkpoint")
        assert code == 0, err


@pytest.fixture
def specials(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "model.safetensors"
    link.symlink_to("/dev/zero")
    (tmp_path / "adir").mkdir()
    return {"zero": "/dev/zero", "urandom": "/dev/urandom", "fifo": str(fifo), "link": str(link)}


@pytest.mark.parametrize("argv", [["generate", "--model", "{p}"], ["inspect", "{p}"], ["pack", "--model", "{p}"],
                                  ["train", "--text", "{p}", "--out", "{d}/o", "--max-steps", "1"],
                                  ["train", "--resume", "--checkpoint", "{p}", "--out", "{d}/o"],
                                  ["video", "decode", "{p}", "--codec", "{p}", "--out", "{d}/f"],
                                  ["verify", "{p}"]])
def test_special_files_are_one_error_line_naming_the_path(specials, tmp_path, capfd, argv):
    for name, p in specials.items():
        t0 = time.perf_counter()
        code, out, err = run(capfd, *[a.format(p=p, d=tmp_path) for a in argv])
        line = one_error_line(err, code, 1 if argv[0] == "verify" else 2)
        assert p in line and "not a regular file" in line, (name, line)
        assert time.perf_counter() - t0 < 1.0, (name, argv)


@pytest.mark.parametrize("content", ["null", "5", "[[1]]", "[" * 200 + "]" * 200, '["a"]', "[NaN]", "{", ""])
def test_bad_token_lists_are_one_error_line(tmp_path, capfd, content):
    from evermind_vk.files import serialize_codec
    from evermind_vk.io.atomic import atomic_write
    from evermind_vk.models.video_rvq import VideoRVQCodec
    atomic_write(str(tmp_path / "c.vrq0"), serialize_codec(VideoRVQCodec(8, 8, 3)))
    (tmp_path / "t.json").write_text(content)
    code, out, err = run(capfd, "video", "decode", tmp_path / "t.json", "--codec", tmp_path / "c.vrq0",
                         "--out", tmp_path / "f")
    assert str(tmp_path / "t.json") in one_error_line(err, code)


def test_a_token_list_decoding_to_too_many_frames_is_refused(tmp_path, capfd):
    from evermind_vk.files import serialize_codec
    from evermind_vk.io.atomic import atomic_write
    from evermind_vk.models.video_rvq import VideoRVQCodec
    c = VideoRVQCodec(512, 512, 3)
    atomic_write(str(tmp_path / "c.vrq0"), serialize_codec(c))
    (tmp_path / "t.json").write_text(str([c.frame_key] * 400_000))
    t0 = time.perf_counter()
    code, out, err = run(capfd, "video", "decode", tmp_path / "t.json", "--codec", tmp_path / "c.vrq0",
                         "--out", tmp_path / "f")
    assert "would decode to more than" in one_error_line(err, code) and time.perf_counter() - t0 < 2.0


def test_early_validation_refuses_before_training_in_under_a_second(tmp_path, capfd, device):
    common = ["train", "--out", tmp_path / "o", "--max-steps", "1"]
    cases = [(["--prompt", "\udcff"], "--prompt"),
             (["--d-model", "65536", "--layers", "64", "--heads", "1", "--kv-heads", "1"], "host memory"),
             (["--model", "mamba", "--d-model", "65536", "--layers", "mamba1,attention", "--heads", "1"], "host memory"),
             (["--model", "evermind-lm", "--d-model", "65536", "--layers", "64"], "host memory")]
    limit = device.info.max_storage_buffer_range  # a --d-ff whose MLP weight is one f32 beyond it
    d_ff = limit // (4 * 2 * 8) + 1
    if d_ff * 8 * 3 * 32 < 8 << 30:  # its training state must fit the host, so the device limit is what says no
        cases.append((["--d-model", "8", "--heads", "2", "--kv-heads", "2", "--d-ff", str(d_ff)],
                      "maxStorageBufferRange"))
    for extra, said in cases:
        t0 = time.perf_counter()
        code, out, err = run(capfd, *common, *extra)
        assert said in one_error_line(err, code), err
        assert time.perf_counter() - t0 < 1.0, extra
        assert not os.path.exists(tmp_path / "o" / "trainer-checkpoint")


def test_nproc_is_bounded_and_the_dist_extra_checked_before_spawning(tmp_path, capfd, monkeypatch):
    import subprocess
    from evermind_vk.errors import UnsupportedError
    from evermind_vk.train import distributed

    def no_spawn(*a, **k):
        raise AssertionError("a rank was spawned")
    monkeypatch.setattr(subprocess, "Popen", no_spawn)
    t0 = time.perf_counter()
    code, out, err = run(capfd, "train", "--nproc", "1000", "--out", tmp_path / "o")
    line = one_error_line(err, code)
    assert "--nproc 1000" in line and ("CPU cores" in line or "GPU" in line), line
    assert time.perf_counter() - t0 < 2.0

    def no_torch():
        raise UnsupportedError("data-parallel training needs torch (the `dist` extra: pip install 'evermind-vk[dist]')")
    monkeypatch.setattr(distributed, "_dist", no_torch)
    monkeypatch.setattr(distributed, "check_nproc", lambda n, shared_device=False: None)
    code, out, err = run(capfd, "train", "--nproc", "2", "--out", tmp_path / "o")
    assert "dist" in one_error_line(err, code)


def test_a_failed_data_parallel_run_is_one_error_line(tmp_path, capfd, two_ranks_env):
    pytest.importorskip("torch")
    code, out, err = run(capfd, "train", "--nproc", "2", "--text", tmp_path / "missing.txt", "--out", tmp_path / "o")
    line = one_error_line(err, code)
    assert "rank" in line and "missing.txt" in line, err


def test_the_collective_timeout_defaults_to_a_minute():
    from evermind_vk.train.distributed import DEFAULT_TIMEOUT, World
    assert DEFAULT_TIMEOUT == 60.0 and World(0, 1).timeout == 60.0
    env = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    assert World.from_env(env).timeout == 60.0
