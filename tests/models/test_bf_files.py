"""builderforce's files end to end through `ev.load`: real builderforce fixtures
(tests/fixtures/builderforce, written by its npm package: make.mjs there) and files written by our own
layout writers: bare EVL0 / MoE0 / MBJS weights and VRQ0 codecs, with the config they need given or
found beside them, refused clearly when it is missing or disagrees; builderforce's recorded generations
reproduced from its packages."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.errors import ConfigError, FormatError, IntegrityError, ShapeError, TruncatedError
from evermind_vk.files import export_mbjs, serialize_codec
from evermind_vk.io.layouts import build_evl0, build_moe0
from evermind_vk.io.package import EvermindPackage
from evermind_vk.models import (EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel, MoEConfig,
                                SharedExpertMoE)
from evermind_vk.models.video_rvq import VideoRVQCodec
from test_bf_models import bf_missing

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "builderforce")
RECORDED = json.load(open(os.path.join(FIX, "recorded.json")))


def fixture(name):
    return os.path.join(FIX, name)


def copy(tmp_path, name):
    dst = str(tmp_path / name)
    shutil.copyfile(fixture(name), dst)
    return dst


# -- the real builderforce fixtures ------------------------------------------------------------------
def test_fixture_packages_and_bare_files_agree(device):
    """builderforce's lm32.evermind and its bare lm32.evl0 load to the same EvermindLM (vocabulary 32);
    moe.evermind and moe.moe0 to the same SharedExpertMoE; codec.vrq0 to the codec inside media.evermind."""
    a, b = ev.load(fixture("lm32.evermind")), ev.load(fixture("lm32.evl0"))
    assert isinstance(a, EvermindLM) and isinstance(b, EvermindLM) and a.config.vocab_size == 32
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(v, b.state_dict()[k], err_msg=k)
    m, n = ev.load(fixture("moe.evermind")), ev.load(fixture("moe.moe0"))
    assert isinstance(m, SharedExpertMoE) and isinstance(n, SharedExpertMoE)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v, n.state_dict()[k], err_msg=k)
    codec = ev.load(fixture("codec.vrq0"))
    lm, inner = ev.load(fixture("media.evermind"))
    assert isinstance(codec, VideoRVQCodec) and serialize_codec(codec) == serialize_codec(inner)
    assert lm.config.vocab_size == codec.vocab_size


def test_fixture_generation_is_builderforce_recorded(device):
    """Greedy and seeded sampling from builderforce's packages reproduce what builderforce generated, and the
    media package's tokens decode to builderforce's frames."""
    lm = ev.load(fixture("lm32.evermind"))
    r = RECORDED["lm32"]
    assert lm.generate(r["prompt"], len(r["greedy"])) == r["greedy"]
    assert lm.generate(r["prompt"], len(r["sampled"]), temperature=1.0, seed=5) == r["sampled"]
    mlm, codec = ev.load(fixture("media.evermind"))
    r = RECORDED["media"]
    assert mlm.generate(r["prompt"], len(r["greedy"])) == r["greedy"]
    frames = codec.decode(r["prompt"] + r["greedy"])
    assert len(frames) == len(r["frames"])
    for f, want in zip(frames, r["frames"]):
        np.testing.assert_allclose(f.ravel(), np.array(want, np.float32), rtol=0, atol=1e-6)


def test_bare_config_must_agree(device, tmp_path):
    """A config given with an EVL0 / MoE0 file is checked against its header (builderforce's 'config mismatch
    with checkpoint'); its seed is kept; a VRQ0 codec takes none; a package refuses config= too."""
    cfg = {"vocabSize": 32, "dModel": 8, "numLayers": 1, "convKernel": 3, "hiddenDim": 8, "numExperts": 2, "topK": 1}
    assert ev.load(fixture("lm32.evl0"), config=dict(cfg, seed=7)).config.seed == 7
    path = str(tmp_path / "c.json")
    with open(path, "w") as f:
        json.dump(dict(cfg, numLayers=2), f)
    with pytest.raises(FormatError, match="config mismatch.*numLayers 2 .file 1."):
        ev.load(fixture("lm32.evl0"), config=path)
    with pytest.raises(FormatError, match=r"config mismatch.*topK 1 \(file 2\)"):
        ev.load(fixture("moe.moe0"), config={"modelDim": 6, "hiddenDim": 5, "numExperts": 3, "topK": 1})
    with pytest.raises(ConfigError, match="no config"):
        ev.load(fixture("codec.vrq0"), config=cfg)
    with pytest.raises(ConfigError, match="carries its own"):
        ev.load(fixture("lm32.evermind"), config=cfg)


# -- bare files written by our layout writers ---------------------------------------------------------------
def mamba_model():
    cfg = HybridMambaConfig.from_dict({"vocabSize": 32, "dModel": 8, "numLayers": 2, "dState": 3,
                                       "layers": [{"type": "mamba1"}, {"type": "attention"}], "nHeads": 2, "seed": 4})
    return HybridMambaModel(cfg)


def test_mbjs_with_config_given_or_beside(device, tmp_path):
    """An MBJS file loads with builderforce's config dict given (dict or JSON file) or as config.json beside it;
    without either it is refused with what to do; a config of other sizes is refused before any model is built."""
    m = mamba_model()
    path = str(tmp_path / "w.mbjs")
    with open(path, "wb") as f:
        f.write(export_mbjs(m))
    bf_cfg = {"vocabSize": 32, "dModel": 8, "numLayers": 2, "dState": 3, "nHeads": 2,
              "layers": [{"type": "mamba1"}, {"type": "attention"}], "defaultMamba1": {}, "mimoGroup": 1}
    with pytest.raises(ConfigError, match="--config"):
        ev.load(path)
    ids = ev.tensor(np.array([3, 1, 4, 1, 5], np.uint32))
    want = m.forward(ids).numpy()
    got = ev.load(path, config=bf_cfg)
    assert isinstance(got, HybridMambaModel) and got.config.discretization == "zoh"
    np.testing.assert_array_equal(got.forward(ids).numpy(), want)
    with open(tmp_path / "config.json", "w") as f:
        json.dump(bf_cfg, f)
    np.testing.assert_array_equal(ev.load(path).forward(ids).numpy(), want)
    with pytest.raises(ShapeError, match="layer1.wQKV|parameter"):
        ev.load(path, config=dict(bf_cfg, dModel=16, nHeads=4))
    with pytest.raises(ShapeError, match="layer types"):
        ev.load(path, config=dict(bf_cfg, layers=[{"type": "mamba1"}] * 2))
    with pytest.raises(ConfigError, match="invalid HybridMambaModel config"):
        ev.load(path, config=dict(bf_cfg, numLayers=3))


def test_bare_files_are_hostile_input(device, tmp_path):
    """Truncated, corrupted or padded bare files are typed errors naming the file; EVL0 without its CRC
    trailer (builderforce's legacy files) loads; NaN weights are refused unless allowed."""
    lm = EvermindLM(EvermindLMConfig(32, 8, 1, 3, 8, 2, 1, seed=2))
    cfg = lm.config.to_builderforce()
    blob = build_evl0(cfg, lm.state_dict())
    cases = {"trunc.evl0": blob[:-20], "long.evl0": blob + b"\0" * 4}
    flip = bytearray(blob)
    flip[40] ^= 0xFF
    cases["flip.evl0"] = bytes(flip)
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(TruncatedError, match="trunc.evl0"):
        ev.load(str(tmp_path / "trunc.evl0"))
    with pytest.raises(FormatError, match="long.evl0"):
        ev.load(str(tmp_path / "long.evl0"))
    with pytest.raises(IntegrityError, match="CRC"):
        ev.load(str(tmp_path / "flip.evl0"))
    (tmp_path / "legacy.evl0").write_bytes(blob[:-8])
    assert isinstance(ev.load(str(tmp_path / "legacy.evl0")), EvermindLM)
    moe = SharedExpertMoE(MoEConfig(6, 5, 3, 2, seed=1))
    sd = moe.state_dict()
    sd["wr"] = sd["wr"].copy()
    sd["wr"][0, 0] = np.nan
    (tmp_path / "nan.moe0").write_bytes(build_moe0(moe.config.to_builderforce(), sd))
    with pytest.raises(FormatError, match="NaN"):
        ev.load(str(tmp_path / "nan.moe0"))
    assert isinstance(ev.load(str(tmp_path / "nan.moe0"), allow_nonfinite=True), SharedExpertMoE)
    (tmp_path / "short.vrq0").write_bytes(open(fixture("codec.vrq0"), "rb").read()[:100])
    with pytest.raises(TruncatedError, match="VRQ0"):
        ev.load(str(tmp_path / "short.vrq0"))


def test_ours_and_builderforce_packages_generate_the_same(device, tmp_path):
    """Packing the fixture's model again gives builderforce's bytes back (the package is the same file)."""
    lm = ev.load(fixture("lm32.evermind"))
    pkg = EvermindPackage.from_file(fixture("lm32.evermind"))
    again = EvermindPackage.from_model(lm, name="lm32", version="1.0.0", card=pkg.manifest["card"],
                                       created_at=pkg.manifest["createdAt"])
    assert again.to_blob() == open(fixture("lm32.evermind"), "rb").read()


@pytest.mark.skipif(bf_missing, reason="node or the builderforce npm package (BUILDERFORCE_MEMORY_ENGINE=dir) absent")
def test_fixtures_are_what_builderforce_writes(tmp_path):
    """make.mjs run again with the real library writes the committed fixtures byte for byte."""
    env = dict(os.environ, OUT_DIR=str(tmp_path))
    subprocess.run(["node", fixture("make.mjs")], env=env, check=True, capture_output=True, timeout=300)
    for name in sorted(os.listdir(FIX)):
        if name != "make.mjs":
            assert (tmp_path / name).read_bytes() == open(fixture(name), "rb").read(), name
