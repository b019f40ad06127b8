"""`evermind-vk train`: Ctrl-C (SIGINT) saves at the next step boundary and exits cleanly; --resume
continues the saved run."""
import os
import signal
import subprocess
import sys
import time

from evermind_vk.io.checkpoint import load_checkpoint
from evermind_vk.train import history

TINY = ["--seq-len", "8", "--batch-size", "2", "--d-model", "8", "--layers", "1", "--heads", "2", "--kv-heads", "1",
        "--d-ff", "8", "--time-limit", "0", "--sample-tokens", "2"]


def test_sigint_saves_and_resume_continues(device, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 4)
    out = tmp_path / "run"
    key = str(out / "trainer-checkpoint")
    cmd = [sys.executable, "-m", "evermind_vk", "train", "--text", str(text), "--out", str(out), *TINY]
    proc = subprocess.Popen(cmd + ["--epochs", "100000", "--save-every", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not os.path.exists(key) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert os.path.exists(key), proc.stderr.read() if proc.poll() is not None else "no checkpoint in 120 s"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted by signal 2" in stdout
    rec = load_checkpoint(key)
    step = rec["global_step"]
    assert step >= 1 and len(history.unpack(rec["history"])) == step and rec["position"]["epoch"] >= 0
    res = subprocess.run(cmd + ["--epochs", "100000", "--resume", "--max-steps", str(step + 2)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"resuming {key} at step {step}" in res.stdout
    assert load_checkpoint(key)["global_step"] == step + 2
    gen = subprocess.run([sys.executable, "-m", "evermind_vk", "generate", "--model", str(out),
                          "--prompt", "the ", "--tokens", "5", "--top-p", "0.9", "--repetition-penalty", "1.2"],
                         capture_output=True, text=True, timeout=300)
    assert gen.returncode == 0, gen.stderr
    assert gen.stdout.startswith("the ") and "tokens/s" in gen.stderr  # a string prompt, streamed
