"""ConvAE end to end: its loss and every parameter's gradient against the same network in PyTorch
(float64), and training through ImageTrainer (recorded step, one submit per step, AdamW, clipping):
the loss falls and the reconstruction grid is a PNG."""
import json

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.autodiff import Tape
from evermind_vk.models import ConvAE, ConvAEConfig
from evermind_vk.train import ImageTrainer, image_grid_png, shapes_dataset


def torch_loss(torch, cfg, params, x):
    F = torch.nn.functional
    p = params

    def conv(h, n, **kw):
        return F.conv2d(h, p[n + ".weight"], p[n + ".bias"], **kw)

    def gn(h, n):
        return F.group_norm(h, cfg.groups, p[n + ".weight"], p[n + ".bias"], 1e-5)
    h = F.silu(gn(conv(x, "enc.0", padding=1), "enc.1"))
    h = F.silu(gn(conv(h, "enc.2", stride=2, padding=1), "enc.3"))
    h = F.silu(conv(h, "enc.4", stride=2, padding=1))
    z = conv(h, "enc.5")
    h = F.silu(conv(z, "dec.0", padding=1))
    h = F.interpolate(h, scale_factor=2, mode="nearest")
    h = F.silu(gn(conv(h, "dec.2", padding=1), "dec.3"))
    return F.mse_loss(F.pixel_shuffle(conv(h, "dec.4", padding=1), 2), x)


def test_conv_ae_gradients_match_torch(device):
    torch = pytest.importorskip("torch")
    cfg = ConvAEConfig(image_size=8, width=8, latent=4, groups=2, seed=3)
    model = ConvAE(cfg, device=device)
    x = shapes_dataset(4, 8, seed=1)
    with Tape() as tape:
        loss = model.loss(ev.tensor(x))
    grads = tape.backward(loss).by_name(model.parameters())
    tp = {k: torch.tensor(v.astype(np.float64), requires_grad=True) for k, v in model.state_dict().items()}
    tl = torch_loss(torch, cfg, tp, torch.tensor(x.astype(np.float64)))
    tl.backward()
    assert abs(float(loss.numpy()[0]) - tl.item()) <= 1e-5 * tl.item()
    assert set(grads) == set(tp)
    for k, t in tp.items():
        want = t.grad.numpy()
        np.testing.assert_allclose(grads[k].numpy(), want, atol=1e-4 * max(np.abs(want).max(), 1e-3), rtol=1e-3,
                                   err_msg=k)


def test_conv_ae_trains(device, tmp_path):
    cfg = ConvAEConfig(image_size=8, width=8, latent=4, groups=2)
    model = ConvAE(cfg, device=device)
    images = shapes_dataset(64, 8, seed=0)
    trainer = ImageTrainer(model, lr=1e-2, max_grad_norm=1.0)
    before = trainer.evaluate(images[:16], batch_size=16)
    trainer.train(images, epochs=1, batch_size=8)  # records the step (and creates the AdamW moments)
    submits = device.submits
    trainer.train(images, epochs=2, batch_size=8)
    assert device.submits - submits == 16  # the recorded step replayed: one submit per step
    steps = [h["loss"] for h in trainer.history]
    assert len(steps) == 24
    assert all(h["grad_norm"] > 0 for h in trainer.history)
    after = trainer.evaluate(images[:16], batch_size=16)
    assert after < 0.5 * before, (before, after)
    assert np.mean(steps[-4:]) < 0.5 * steps[0]
    path = tmp_path / "grid.png"
    image_grid_png([images[:4], trainer.reconstruct(images[:4])], str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_conv_ae_config_and_data():
    with pytest.raises(ValueError, match="multiple of 4"):
        ConvAEConfig(image_size=10)
    with pytest.raises(ValueError, match="groups"):
        ConvAEConfig(width=10, groups=4)
    a, b = shapes_dataset(5, 12, seed=2), shapes_dataset(5, 12, seed=2)
    assert a.shape == (5, 3, 12, 12) and a.dtype == np.float32 and np.array_equal(a, b)
    assert a.min() >= 0 and a.max() <= 1 and not np.array_equal(a, shapes_dataset(5, 12, seed=3))


def test_cli_train_conv_ae(device, tmp_path, capsys):
    from evermind_vk.cli import main
    out = tmp_path / "run"
    assert main(["train", "--model", "conv-ae", "--images", "32", "--image-size", "8", "--batch-size", "8",
                 "--epochs", "1", "--out", str(out)]) == 0
    assert "held-out MSE" in capsys.readouterr().out
    for f in ("model.npz", "loss.png", "reconstructions.png"):
        assert (out / f).read_bytes()[:4] in (b"PK\x03\x04", b"\x89PNG")
    assert json.loads((out / "config.json").read_text())["image_size"] == 8  # the config beside the weights
    with np.load(out / "model.npz") as z:
        assert "__config__" not in z.files and z["enc.0.weight"].shape == (16, 3, 3, 3)
