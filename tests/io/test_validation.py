"""Silent garbage and speed: validate()/load refuse tensors that do not match the config and NaN/Inf
weights (unless allowed); the layouts check counts before building shape lists; FNV-1a at >= 500 MB/s."""
import json
import os
import struct
import time

import numpy as np
import pytest

from evermind_vk.errors import FormatError, LimitError, ShapeError, TruncatedError
from evermind_vk.files import (_lm_config, export_safetensors, import_safetensors, lm_param_shapes, load, load_model,
                               save_model)
from evermind_vk.io.layouts import EVL0, build_evt0, parse_evl0, parse_moe0, parse_vrq0
from evermind_vk.io.package import FNV_BACKEND, EvermindPackage, fnv1a32
from evermind_vk.models import LMConfig, TransformerLM, init_params

CFG = LMConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=8, max_seq_len=8)


def test_lm_param_shapes_equal_what_init_params_builds():
    for cfg in (CFG, LMConfig(vocab_size=7, d_model=12, n_layers=3, n_heads=3, n_kv_heads=1, d_ff=5,
                              tie_embeddings=False)):
        assert lm_param_shapes(cfg) == {k: v.shape for k, v in init_params(cfg).items()}


def _package_with(state: dict, config=None) -> EvermindPackage:
    m = TransformerLM(CFG)
    pkg = EvermindPackage.from_model(m, "t")
    cp = build_evt0(state)
    pkg.checkpoint = cp
    pkg.manifest["checksum"] = fnv1a32(cp)
    if config is not None:
        pkg.manifest["config"] = config
    return pkg


def test_validate_reports_tensors_that_do_not_match_the_config(device):
    good = TransformerLM(CFG).state_dict()
    assert _package_with(good).validate() == {"ok": True, "errors": []}
    renamed = dict(good)
    renamed["embed.weights"] = renamed.pop("embed.weight")
    errs = _package_with(renamed).validate()["errors"]
    assert any("missing tensor 'embed.weight'" in e for e in errs) and any("unexpected tensor" in e for e in errs)
    reshaped = dict(good, **{"norm.weight": np.ones(9, np.float32)})
    errs = _package_with(reshaped).validate()["errors"]
    assert any("'norm.weight' has shape (9,)" in e for e in errs)
    dropped = {k: v for k, v in good.items() if k != "layers.0.mlp.w_down"}
    assert any("implies 10 tensors" in e for e in _package_with(dropped).validate()["errors"])
    with pytest.raises(FormatError, match="invalid package"):
        _package_with(reshaped).load_model()


def test_nonfinite_weights_reported_and_refused_unless_allowed(device, tmp_path):
    sd = TransformerLM(CFG).state_dict()
    sd["layers.0.attn.wq"][0, :3] = [np.nan, np.inf, -np.inf]
    pkg = _package_with(sd)
    v = pkg.validate()
    assert not v["ok"] and any("'layers.0.attn.wq' has 3 NaN/Inf" in e for e in v["errors"])
    with pytest.raises(FormatError, match="NaN/Inf"):
        pkg.load_model()
    m = pkg.load_model(allow_nonfinite=True)
    assert np.isnan(m.params["layers.0.attn.wq"].numpy()[0, 0])
    bad = TransformerLM(CFG)
    bad.params["norm.weight"].copy_(np.full(8, np.inf, np.float32))
    for ext, saver in ((".npz", save_model), (".safetensors", export_safetensors)):
        path = str(tmp_path / ("m" + ext))
        saver(bad, path, allow_nonfinite=True)  # saving refuses NaN/Inf unless allowed (issue 42)
        with pytest.raises(FormatError, match="NaN/Inf"):
            load(path)
        assert np.isinf(load(path, allow_nonfinite=True).params["norm.weight"].numpy()).all()


def test_npz_and_safetensors_checked_against_the_config_before_building(device, tmp_path, monkeypatch):
    import evermind_vk.files as files
    built = []
    monkeypatch.setattr(files, "TransformerLM", lambda *a, **k: built.append(a) or TransformerLM(*a, **k))
    big = dict(CFG.to_dict(), n_layers=400)
    m = TransformerLM(CFG)
    arrays = m.state_dict()
    arrays["__config__"] = np.frombuffer(json.dumps(big).encode(), np.uint8)
    np.savez(tmp_path / "a.npz", **arrays)
    with pytest.raises(ShapeError, match="config implies 3202 tensors"):
        load_model(str(tmp_path / "a.npz"))
    from evermind_vk.io.safetensors import save_safetensors
    save_safetensors(str(tmp_path / "a.safetensors"), m.state_dict(), {"evermind_config": json.dumps(big)})
    with pytest.raises(ShapeError, match="config implies"):
        import_safetensors(str(tmp_path / "a.safetensors"))
    assert built == []
    wrong = dict(CFG.to_dict(), d_ff=16)
    arrays["__config__"] = np.frombuffer(json.dumps(wrong).encode(), np.uint8)
    np.savez(tmp_path / "b.npz", **arrays)
    with pytest.raises(ShapeError, match="w_gate_up' has shape"):
        load_model(str(tmp_path / "b.npz"))
    assert built == []
    with open(tmp_path / "junk.npz", "wb") as f:
        f.write(b"PK\x03\x04 not really")
    with pytest.raises(FormatError):
        load_model(str(tmp_path / "junk.npz"))
    strs = dict(CFG.to_dict(), d_model="8")
    assert "not an integer" in _config_errors_of(strs)


def _config_errors_of(cfg):
    try:
        _lm_config(cfg)
    except ValueError as e:
        return str(e)
    return ""


def test_layouts_check_counts_before_building_shape_lists():
    t = time.perf_counter()
    with pytest.raises(TruncatedError):
        parse_moe0(struct.pack("<6I", 0x4D6F4530, 1, 1, 1, 1 << 24, 1) + bytes(206))
    with pytest.raises(TruncatedError):
        parse_evl0(struct.pack("<9I", EVL0, 1, 1, 1, 1 << 24, 1, 1, 1 << 24, 1) + bytes(200))
    with pytest.raises(TruncatedError):
        parse_vrq0(struct.pack("<9I", 0x56525130, 1, 1, 1 << 24, 1 << 12, 1 << 24, 1 << 24, 1, 1) + bytes(8))
    assert time.perf_counter() - t < 0.5  # the old MoE0 parser built a list of 2^24 experts' shapes first


def test_fnv1a32_vectors_and_speed():
    assert FNV_BACKEND == "c", "fnv-hash-fast's C extension is missing: fnv1a32 runs in pure Python"
    assert fnv1a32(b"") == 0x811C9DC5 and fnv1a32(b"a") == 0xE40C292C and fnv1a32(b"foobar") == 0xBF9CF968
    assert fnv1a32(bytearray(b"foobar")) == fnv1a32(memoryview(b"xfoobar")[1:]) == 0xBF9CF968

    def ref(data):
        h = 0x811C9DC5
        for b in data:
            h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
        return h
    rnd = os.urandom(4097)
    assert fnv1a32(rnd) == ref(rnd)
    data = os.urandom(64 << 20)
    best = min(_timed(fnv1a32, data) for _ in range(3))
    mbps = len(data) / best / 1e6
    print(f"fnv1a32: {mbps:.0f} MB/s of CPU time")
    assert mbps >= 500


def _timed(f, data):
    """CPU seconds (the machine is shared: wall time would measure the other processes)."""
    t = time.process_time()
    f(data)
    return time.process_time() - t


def test_open_blob_decodes_any_file_once(device, tmp_path, monkeypatch):
    from evermind_vk.io import framing, open_blob
    from evermind_vk.io.checkpoint import save_checkpoint
    calls = []
    real = framing._unframe
    monkeypatch.setattr(framing, "_unframe", lambda *a: calls.append(1) or real(*a))
    pkg_path = str(tmp_path / "m.evermind")
    EvermindPackage.from_model(TransformerLM(CFG), "t").to_file(pkg_path)
    got = open_blob(pkg_path)
    assert got.kind == "package" and got.package.validate()["ok"] and len(calls) == 1
    ck = save_checkpoint("c", {"w": np.ones(3, np.float32)}, directory=str(tmp_path))["path"]
    got = open_blob(ck)
    assert got.kind == "checkpoint" and np.array_equal(got.record["w"], np.ones(3)) and len(calls) == 2
    assert got.stored["w"]["__ndarray__"]["shape"] == [3]
    (tmp_path / "junk").write_bytes(b"junk")
    with pytest.raises(FormatError, match="neither"):
        open_blob(str(tmp_path / "junk"))
