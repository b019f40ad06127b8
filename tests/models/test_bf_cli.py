"""`evermind-vk train --model evermind-lm|moe` writes a loadable .evermind; `generate --model x.evermind`
samples from a text package and refuses the MoE (not a text model)."""
import numpy as np

import evermind_vk as ev
from evermind_vk.cli import main
from evermind_vk.models import EvermindLM, SharedExpertMoE


def test_train_and_generate(device, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 8)
    for kind, cls in (("evermind-lm", EvermindLM), ("moe", SharedExpertMoE)):
        out = tmp_path / kind
        sample = ["--sample-tokens", "5"] if kind == "evermind-lm" else []  # moe does not generate: refused there
        assert main(["train", "--model", kind, "--text", str(text), "--d-model", "8", "--d-ff", "8", "--seq-len", "16",
                     "--batch-size", "2", "--time-limit", "3", "--out", str(out), *sample]) == 0
        assert isinstance(ev.load(str(out / "model.evermind")), cls)
    capsys.readouterr()
    assert main(["generate", "--model", str(tmp_path / "evermind-lm" / "model.evermind"), "--tokens", "5",
                 "--prompt", "the "]) == 0
    assert capsys.readouterr().out.startswith("the ")
    assert main(["generate", "--model", str(tmp_path / "moe" / "model.evermind")]) == 2


def test_video_encode_decode(device, tmp_path, capsys):
    import matplotlib.image as mpimg
    frames = [np.clip(0.5 + 0.4 * np.sin(np.arange(8 * 8 * 3).reshape(8, 8, 3) * 0.3 + t), 0, 1) for t in range(4)]
    strip = tmp_path / "in.png"
    mpimg.imsave(str(strip), np.concatenate(frames, axis=1))
    toks = tmp_path / "t.json"
    assert main(["video", "encode", str(strip), "--frames", "4", "--out", str(toks), "--codebook", "4",
                 "--keyframe-interval", "2", "--iterations", "3"]) == 0
    codec = str(tmp_path / "t.vrq0")
    out_dir = tmp_path / "frames"
    assert main(["video", "decode", str(toks), "--codec", codec, "--out", str(out_dir)]) == 0
    back = [np.asarray(mpimg.imread(str(out_dir / f"frame{i:04d}.png")), np.float32)[..., :3] for i in range(4)]
    assert len(back) == 4 and all(b.shape == (8, 8, 3) for b in back)
    assert np.mean([np.abs(a - b).mean() for a, b in zip(frames, back)]) < 0.2
    assert main(["video", "decode", str(toks), "--codec", codec, "--out", str(tmp_path / "o.png")]) == 0
    assert np.asarray(mpimg.imread(str(tmp_path / "o.png"))).shape[:2] == (8, 32)
