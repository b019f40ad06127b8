"""What users see (issue 15): progress (tqdm bar on a terminal, clean lines otherwise, the epoch summary
on its own line), a readable loss plot (matplotlib; the plain PNG only as a logged fallback), losses.csv,
and `check` saying what it does as it goes."""
import io
import sys

import numpy as np
import pytest

from evermind_vk.train.plot import plot_losses, smooth, write_losses_csv
from evermind_vk.train.progress import Progress


class Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


def _drive(p, stream, epochs=2, n=5):
    for e in range(epochs):
        for i in range(1, n + 1):
            p.update(e, i, 3.0 - 0.1 * i, 100 * i, 0.01 * i)
        p.end_epoch()
        stream.write(f"epoch {e + 1}: mean loss 1.0\n")  # what the caller prints next


def test_progress_is_line_based_when_not_a_terminal():
    s = Stream(False)
    _drive(Progress(2, 5, stream=s), s)
    text = s.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert "epoch 1: mean loss 1.0" in lines and "epoch 2: mean loss 1.0" in lines  # own lines
    assert any(line.startswith("epoch 1/2 step 5/5 loss") for line in lines)


def test_progress_on_a_terminal_ends_the_bar_before_the_summary():
    pytest.importorskip("tqdm")
    s = Stream(True)
    _drive(Progress(2, 5, stream=s), s)
    text = s.getvalue()
    assert "epoch 1/2" in text and "5/5" in text  # tqdm's bar
    for e in (1, 2):  # the summary starts a line of its own, after the bar's newline
        assert f"\nepoch {e}: mean loss 1.0\n" in text


def test_progress_on_a_terminal_without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    s = Stream(True)
    _drive(Progress(1, 5, stream=s), s, epochs=1)
    text = s.getvalue()
    assert "\r" in text and "\nepoch 1: mean loss 1.0\n" in text


def _history(n=60, epochs=3):
    per = n // epochs
    return [{"step": i + 1, "epoch": i // per + 1, "loss": 5.0 * np.exp(-i / 20) + 0.1 * np.sin(i), "grad_norm": None,
             "tokens": 64} for i in range(n)]


def test_loss_plot_uses_matplotlib_with_labels(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.axes
    seen = {}
    for name in ("set_title", "set_xlabel", "set_ylabel", "axvline", "legend"):
        orig = getattr(matplotlib.axes.Axes, name)

        def spy(self, *a, _n=name, _o=orig, **k):
            seen.setdefault(_n, []).append(a)
            return _o(self, *a, **k)
        monkeypatch.setattr(matplotlib.axes.Axes, name, spy)
    path = tmp_path / "loss.png"
    assert plot_losses(_history(), str(path), title="t") == "matplotlib"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert seen["set_xlabel"] == [("step",)] and "loss" in seen["set_ylabel"][0][0]
    assert len(seen["axvline"]) == 2  # the two epoch boundaries of three epochs


def test_loss_plot_falls_back_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = tmp_path / "loss.png"
    assert plot_losses(_history(), str(path)) == "fallback"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_logs_the_fallback(tmp_path, monkeypatch, capsys):
    from evermind_vk.cli import main
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    (tmp_path / "t.txt").write_text("abcabcabc " * 10)
    code = main(["train", "--text", str(tmp_path / "t.txt"), "--out", str(tmp_path / "o"), "--time-limit", "0",
                 "--d-model", "8", "--layers", "1", "--heads", "2", "--kv-heads", "1", "--d-ff", "8", "--seq-len", "8",
                 "--sample-tokens", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "matplotlib is not installed" in err


def test_smooth_and_csv(tmp_path):
    y = np.array([1.0, 3.0, 5.0, 7.0])
    assert np.allclose(smooth(y, 2), [1.0, 2.0, 4.0, 6.0])
    write_losses_csv([{"step": 1, "epoch": 1, "loss": 2.5, "grad_norm": None, "tokens": 8},
                      {"step": 2, "epoch": 1, "loss": 2.25, "grad_norm": 0.5, "tokens": 8}], str(tmp_path / "l.csv"))
    assert (tmp_path / "l.csv").read_text().splitlines() == ["step,epoch,loss,grad_norm,tokens", "1,1,2.5,,8",
                                                            "2,1,2.25,0.5,8"]


def test_check_prints_progress(capsys):
    from evermind_vk.cli import main
    assert main(["check", "--size", "16"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("opening Vulkan device") and any("building the pipeline" in line for line in out)
    assert any("max rel. error" in line for line in out)
