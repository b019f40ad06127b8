"""A ConvAE as a file: model.npz (its weights, PyTorch names) + config.json beside it ("model_type":
"conv-ae"), and .evermind packages (modelType evermind-conv-ae, modality "image", EVT0, no codec). Both
round-trip through `ev.load`; hostile files (configs out of bounds or of the wrong types, tensors that
do not match the config, NaN/Inf weights, zip bombs, FIFOs) are refused with typed errors before any
model is built."""
import io
import json
import os
import zipfile

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.errors import (ConfigError, FormatError, LimitError, NonFiniteError, NotRegularFileError, ShapeError,
                                 UnsupportedError)
from evermind_vk.files import (CONV_AE, CONV_AE_LIMITS, LMConfig, TransformerLM, load_conv_ae, load_media_lm,
                               save_conv_ae, save_model)
from evermind_vk.io.package import EvermindPackage, fnv1a32
from evermind_vk.models import ConvAE, ConvAEConfig
from evermind_vk.models.conv_ae import init_params, param_shapes
from evermind_vk.train import shapes_dataset

CFG = ConvAEConfig(image_size=8, channels=3, width=4, latent=2, groups=2, seed=5)


@pytest.fixture
def model(device):
    m = ConvAE(CFG, device=device)
    rng = np.random.default_rng(7)  # weights unlike a fresh model's, so a load that ignores them fails
    m.load_state_dict({k: (v + rng.standard_normal(v.shape) * 0.1).astype(np.float32)
                       for k, v in m.state_dict().items()})
    return m


def saved(model, d):
    d.mkdir(exist_ok=True)
    save_conv_ae(model, str(d / "model.npz"))
    return d / "model.npz"


def same_model(a, b, exact=True):
    assert isinstance(b, ConvAE) and b.config == a.config
    sa, sb = a.state_dict(), b.state_dict()
    assert set(sa) == set(sb)
    for k in sa:
        if exact:
            np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)
        else:
            np.testing.assert_allclose(sa[k], sb[k], rtol=1e-3, atol=1e-3, err_msg=k)
    x = ev.tensor(shapes_dataset(2, 8, seed=3))
    np.testing.assert_allclose(a.forward(x).numpy(), b.forward(x).numpy(), rtol=1e-3 if not exact else 0,
                               atol=1e-2 if not exact else 0)


def test_param_shapes_are_what_init_builds():
    for cfg in (CFG, ConvAEConfig(), ConvAEConfig(image_size=4, channels=1, width=6, latent=3, groups=3)):
        assert param_shapes(cfg) == {k: v.shape for k, v in init_params(cfg).items()}


def test_npz_and_config_json_round_trip(device, model, tmp_path):
    path = saved(model, tmp_path / "run")
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg == {"model_type": "conv-ae", **CFG.to_dict()}
    with np.load(path) as z:  # the natural format: named arrays, no pickle, no config inside
        assert set(z.files) == set(param_shapes(CFG))
    same_model(model, ev.load(str(path), device=device))
    os.remove(tmp_path / "run" / "config.json")  # the config given instead
    same_model(model, load_conv_ae(str(path), device=device, config=cfg))
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    same_model(model, load_conv_ae(str(path), device=device, config=str(tmp_path / "c.json")))


def test_npz_with_its_own_config_is_still_a_transformer_lm(device, tmp_path):
    lm = TransformerLM(LMConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8,
                                max_seq_len=8), device=device)
    save_model(lm, str(tmp_path / "lm.npz"))
    assert isinstance(ev.load(str(tmp_path / "lm.npz"), device=device), TransformerLM)


@pytest.mark.parametrize("fp16", [False, True])
def test_package_round_trip(device, model, tmp_path, fp16):
    pkg = EvermindPackage.from_model(model, "cae", fp16=fp16)
    m = pkg.manifest
    assert (m["modelType"], m["modality"], m["checkpointFormat"], m["config"]) == (CONV_AE, "image", "EVT0",
                                                                                     CFG.to_dict())
    assert pkg.codec is None and pkg.validate() == {"ok": True, "errors": []}
    pkg.to_file(str(tmp_path / "m.evermind"))
    same_model(model, ev.load(str(tmp_path / "m.evermind"), device=device), exact=not fp16)


def test_package_that_is_not_a_conv_ae_package_is_refused(device, model):
    pkg = EvermindPackage.from_model(model, "cae")
    with pytest.raises(FormatError, match="not a media EvermindLM"):
        load_media_lm(pkg)
    cases = {
        "modality": ({**pkg.manifest, "modality": "text"}, pkg.codec, "packages have modality 'image'"),
        "codec": (pkg.manifest, b"VRQ0", "unexpected codec section"),
        "huge": ({**pkg.manifest, "config": {**CFG.to_dict(), "image_size": 1 << 30}}, None, "exceeds"),
        "float": ({**pkg.manifest, "config": {**CFG.to_dict(), "width": 4.0}}, None, "not a non-negative integer"),
        "unknown": ({**pkg.manifest, "config": {**CFG.to_dict(), "depth": 3}}, None, "unknown fields"),
        "shape": ({**pkg.manifest, "config": {**CFG.to_dict(), "width": 8}}, None, "the config implies"),
    }
    for name, (manifest, codec, needle) in cases.items():
        bad = EvermindPackage(manifest, pkg.checkpoint, codec)
        errors = bad.validate()["errors"]
        assert any(needle in e for e in errors), (name, errors)
        with pytest.raises(FormatError, match="invalid package"):
            bad.load_model(device)


def test_nonfinite_package_weights_refused_unless_allowed(device, model):
    sd = model.state_dict()
    sd["dec.4.bias"][1] = np.inf
    model.load_state_dict(sd)
    pkg = EvermindPackage.from_blob(EvermindPackage.from_model(model, "cae", allow_nonfinite=True).to_blob())
    with pytest.raises(FormatError, match="NaN/Inf"):
        pkg.load_model(device)
    assert np.isinf(pkg.load_model(device, allow_nonfinite=True).state_dict()["dec.4.bias"][1])


# -- hostile model.npz / config.json ------------------------------------------------------------------
def write_config(d, **change):
    cfg = {"model_type": "conv-ae", **CFG.to_dict(), **change}
    (d / "config.json").write_text(json.dumps({k: v for k, v in cfg.items() if v is not None}))


CONFIGS = [  # (change to config.json, error, message)
    ({"model_type": "lm"}, UnsupportedError, "model_type is 'lm'"),
    ({"model_type": None}, UnsupportedError, "model_type is None"),
    ({"image_size": 1 << 40}, LimitError, "image_size = 1099511627776 exceeds"),
    ({"channels": CONV_AE_LIMITS["channels"] + 1}, LimitError, "channels"),
    ({"width": 4.0}, ConfigError, "width = 4.0 is not"),
    ({"latent": True}, ConfigError, "latent = True is not"),
    ({"seed": -1}, ConfigError, "seed = -1 is not"),
    ({"groups": 3}, ConfigError, "multiple of groups"),
    ({"depth": 2}, ConfigError, "unknown fields"),
    ({"width": 8}, ShapeError, "'enc.0.weight' has shape (4, 3, 3, 3), the config implies (8, 3, 3, 3)"),
]


@pytest.mark.parametrize("change,error,needle", CONFIGS, ids=[next(iter(c)) + str(i) for i, (c, _, _) in
                                                               enumerate(CONFIGS)])
def test_bad_config_json_refused(device, model, tmp_path, change, error, needle):
    path = saved(model, tmp_path / "run")
    write_config(tmp_path / "run", **change)
    with pytest.raises(error) as e:
        ev.load(str(path), device=device)
    assert needle in str(e.value)


def test_missing_unreadable_or_huge_config_json_refused(device, model, tmp_path):
    path = saved(model, tmp_path / "run")
    cfg = tmp_path / "run" / "config.json"
    cfg.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        ev.load(str(path))
    cfg.write_text(json.dumps({"model_type": "conv-ae", **CFG.to_dict(), "pad": " " * (1 << 20)}))
    with pytest.raises(LimitError, match="exceeds the 1048576 allowed"):
        ev.load(str(path))
    os.remove(cfg)
    with pytest.raises(UnsupportedError, match="needs its config.json"):
        ev.load(str(path))
    os.mkfifo(cfg)  # refused, not waited on
    with pytest.raises(NotRegularFileError, match="not a regular file"):
        ev.load(str(path))


def npz_of(arrays: dict, compressed=False) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def test_tensors_that_do_not_match_the_config_refused(device, model, tmp_path):
    (tmp_path / "run").mkdir()
    write_config(tmp_path / "run")
    path = tmp_path / "run" / "model.npz"
    sd = model.state_dict()
    cases = {
        "missing": ({k: v for k, v in sd.items() if k != "enc.1.bias"}, ShapeError, "missing tensor 'enc.1.bias'"),
        "extra": ({**sd, "enc.9.weight": np.zeros(2, np.float32)}, ShapeError, "unexpected tensor 'enc.9.weight'"),
        "dtype": ({**sd, "enc.0.bias": sd["enc.0.bias"].astype(np.float64)}, ShapeError, "is float64"),
        "shape": ({**sd, "enc.0.bias": sd["enc.0.bias"][:2]}, ShapeError, "has shape (2,)"),
        "config": ({**sd, "__config__": np.zeros(2, np.uint8)}, FormatError, "holds a __config__"),
    }
    for name, (arrays, error, needle) in cases.items():
        path.write_bytes(npz_of(arrays))
        with pytest.raises(error, match=None) as e:
            load_conv_ae(str(path), device=device)
        assert needle in str(e.value), (name, str(e.value))
    path.write_bytes(b"PK\x03\x04 not a zip at all")
    with pytest.raises(FormatError, match="not an .npz"):
        ev.load(str(path))


def test_nonfinite_weights_refused_unless_allowed(device, model, tmp_path):
    path = saved(model, tmp_path / "run")
    sd = model.state_dict()
    sd["enc.5.weight"][0, 0, 0, 0] = np.nan
    path.write_bytes(npz_of(sd))
    with pytest.raises(FormatError, match=r"non-finite values in enc.5.weight \(1 NaN/Inf\)"):
        ev.load(str(path), device=device)
    assert np.isnan(ev.load(str(path), device=device, allow_nonfinite=True).state_dict()["enc.5.weight"][0, 0, 0, 0])
    model.load_state_dict(sd)
    before = path.read_bytes()  # saving refuses too, and leaves the file that is there
    with pytest.raises(NonFiniteError, match="refusing to save"):
        save_conv_ae(model, str(path))
    assert path.read_bytes() == before


def write_members(path, sd, replace):
    with zipfile.ZipFile(path, "w") as z:
        for k, v in sd.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, v)
            z.writestr(k + ".npy", replace.get(k, b.getvalue()))


def test_headers_claiming_more_than_their_member_and_zip_bombs_refused(device, model, tmp_path):
    path = saved(model, tmp_path / "run")
    sd = model.state_dict()
    huge = io.BytesIO()  # a header declaring 2**40 floats, 8 bytes of them present: refused before allocating
    np.lib.format.write_array_header_1_0(huge, {"descr": "<f4", "fortran_order": False, "shape": (1 << 40,)})
    write_members(path, sd, {"enc.0.weight": huge.getvalue() + bytes(8)})
    with pytest.raises(FormatError, match=r"declares \(1099511627776,\) float32 in"):
        ev.load(str(path), device=device)
    arr = io.BytesIO()
    np.lib.format.write_array(arr, sd["enc.0.weight"])
    write_members(path, sd, {"enc.0.weight": arr.getvalue()[:-40]})  # truncated data
    with pytest.raises(FormatError, match="unreadable"):
        ev.load(str(path), device=device)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:  # 17 MiB of zeros from a few KiB
        z.writestr("enc.0.weight.npy", bytes(17 << 20))
    with pytest.raises(LimitError, match="zip bomb"):
        ev.load(str(path), device=device)


def test_a_fifo_is_refused_without_blocking(device, tmp_path):
    (tmp_path / "run").mkdir()
    write_config(tmp_path / "run")
    os.mkfifo(tmp_path / "run" / "model.npz")
    with pytest.raises(NotRegularFileError, match="not a regular file"):
        ev.load(str(tmp_path / "run" / "model.npz"))
