"""The conv-ae from the command line, end to end: `train --model conv-ae --package` writes model.npz +
config.json and model.evermind, which `ev.load`, `inspect`, `verify` and `pack` read, and `reconstruct`
encodes and decodes procedural shapes or PNG images with (a PNG grid, per-image errors, the MSE);
wrong inputs are refused in one line."""
import json
import math
import re

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.cli import main
from evermind_vk.cli.common import png_bytes
from evermind_vk.files import export_safetensors, save_conv_ae
from evermind_vk.models import ConvAE, ConvAEConfig, LMConfig, TransformerLM
from evermind_vk.train import shapes_dataset


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cae") / "run"
    assert main(["train", "--model", "conv-ae", "--images", "16", "--image-size", "8", "--batch-size", "4",
                 "--max-steps", "2", "--time-limit", "0", "--package", "--out", str(out)]) == 0
    return out


def mse_of(model, images):
    rec = model.forward(ev.tensor(images)).numpy().astype(np.float64)
    return ((rec - images) ** 2).reshape(len(images), -1).mean(axis=1)


def test_train_output_loads_inspects_verifies_and_packs(device, capsys, run, tmp_path):
    capsys.readouterr()
    cfg = json.loads((run / "config.json").read_text())
    assert cfg.pop("model_type") == "conv-ae"
    model = ev.load(str(run / "model.npz"))
    assert isinstance(model, ConvAE) and model.config == ConvAEConfig(**cfg)
    packaged = ev.load(str(run / "model.evermind"))  # --package: the same weights
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(packaged.state_dict()[k], v, err_msg=k)
    assert main(["inspect", str(run / "model.npz")]) == 0
    assert f"model (ConvAE, {model.num_parameters():,} parameters)" in capsys.readouterr().out
    assert main(["verify", str(run / "model.npz")]) == 0
    assert "ok (model ConvAE" in capsys.readouterr().out
    pkg = tmp_path / "p.evermind"
    assert main(["pack", "--model", str(run), "--name", "cae", "--out", str(pkg)]) == 0
    assert main(["inspect", str(pkg)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"modelType +evermind-conv-ae", out) and re.search(r"modality +image", out)
    assert re.search(r"valid +yes", out)
    assert main(["verify", str(pkg)]) == 0
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(ev.load(str(pkg)).state_dict()[k], v, err_msg=k)


def test_reconstruct_shapes_from_a_package(device, capsys, run, tmp_path):
    capsys.readouterr()
    out = tmp_path / "rec"
    assert main(["reconstruct", "--model", str(run / "model.evermind"), "--shapes", "10", "--seed", "3",
                 "--batch-size", "4", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    want = mse_of(ev.load(str(run / "model.npz")), shapes_dataset(10, 8, 3, seed=3))
    printed = float(re.search(r"reconstruction MSE ([0-9.e-]+) \(PSNR ([0-9.]+) dB", stdout).group(1))
    assert printed == pytest.approx(want.mean(), rel=1e-4)
    assert f"PSNR {10 * math.log10(1 / want.mean()):.2f} dB" in stdout
    rows = (out / "reconstruction.csv").read_text().splitlines()
    assert rows[0] == "image,mse" and len(rows) == 11
    np.testing.assert_allclose([float(r.split(",")[1]) for r in rows[1:]], want, rtol=1e-4)
    # 10 images, 8 a row: two rows of inputs, each above its reconstructions; 8x8 pixels shown 4x, 2 apart
    assert png_bytes(str(out / "reconstructions.png"))[1:] == (8 * 34 + 2, 4 * 34 + 2)


def test_reconstruct_png_images(device, capsys, tmp_path):
    mpimg = pytest.importorskip("matplotlib.image")
    model = ConvAE(ConvAEConfig(image_size=8, channels=1, width=4, latent=2, groups=2, seed=2))
    (tmp_path / "m").mkdir()
    save_conv_ae(model, str(tmp_path / "m" / "model.npz"))
    imgs = shapes_dataset(3, 8, 3, seed=4)
    (tmp_path / "in").mkdir()
    for i, im in enumerate(imgs):
        mpimg.imsave(tmp_path / "in" / f"img{i}.png", im.transpose(1, 2, 0))
    (tmp_path / "in" / "notes.txt").write_text("not an image")
    capsys.readouterr()
    assert main(["reconstruct", "--model", str(tmp_path / "m"), "--images", str(tmp_path / "in"),
                 "--limit", "2", "--out", str(tmp_path / "rec")]) == 0
    stdout = capsys.readouterr().out
    assert "3 PNGs; reconstructing the first 2" in stdout and "2 PNG images from" in stdout
    rows = (tmp_path / "rec" / "reconstruction.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["img0.png", "img1.png"]
    grey = np.stack([np.asarray(mpimg.imread(tmp_path / "in" / f"img{i}.png"))[..., :3].mean(-1)[None]
                     for i in range(2)]).astype(np.float32)  # an RGB PNG for a grey model: its mean
    np.testing.assert_allclose([float(r.split(",")[1]) for r in rows[1:]], mse_of(model, grey), rtol=1e-4)


def one_line_error(capsys, argv, code=2):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_reconstruct_and_verify_refuse_what_cannot_work(device, capsys, run, tmp_path):
    out = ["--out", str(tmp_path / "o")]
    (tmp_path / "big").mkdir()
    pytest.importorskip("matplotlib.image").imsave(tmp_path / "big" / "a.png", np.zeros((12, 12, 3)))
    assert "12x12 pixels; the model takes 8x8" in one_line_error(
        capsys, ["reconstruct", "--model", str(run), "--images", str(tmp_path / "big" / "a.png"), *out])
    (tmp_path / "fake.png").write_text("hello")
    assert "not a PNG file" in one_line_error(
        capsys, ["reconstruct", "--model", str(run), "--images", str(tmp_path / "fake.png"), *out])
    (tmp_path / "empty").mkdir()
    assert "no .png files" in one_line_error(
        capsys, ["reconstruct", "--model", str(run), "--images", str(tmp_path / "empty"), *out])
    assert "not allowed with argument" in one_line_error(
        capsys, ["reconstruct", "--model", str(run), "--images", "x", "--shapes", "2", *out])
    assert "at most 1024 images" in one_line_error(
        capsys, ["reconstruct", "--model", str(run), "--shapes", "2000", *out])
    lm = TransformerLM(LMConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8,
                                max_seq_len=8))
    export_safetensors(lm, str(tmp_path / "lm.safetensors"))
    assert "a TransformerLM; reconstruct runs image autoencoders" in one_line_error(
        capsys, ["reconstruct", "--model", str(tmp_path / "lm.safetensors"), *out])
    # verify: a NaN weight, a missing config.json (exit 1, one line each)
    bad = tmp_path / "bad"
    bad.mkdir()
    model = ev.load(str(run / "model.npz"))
    sd = model.state_dict()
    sd["dec.0.bias"][0] = np.nan
    model.load_state_dict(sd)
    save_conv_ae(model, str(bad / "model.npz"), allow_nonfinite=True)
    assert "non-finite values in dec.0.bias (1 NaN/Inf)" in one_line_error(capsys, ["verify", str(bad / "model.npz")], 1)
    (bad / "config.json").unlink()
    assert "needs its config.json" in one_line_error(capsys, ["verify", str(bad / "model.npz")], 1)
