"""builderforce's files through the command line: `generate --prompt-ids` for every text
model (the real vocabulary-32 fixtures included, reproducing builderforce's recorded generations), `--prompt`
refused with a pointer where the vocabulary is not bytes, media packages writing decoded frames, `video decode
--codec media.evermind`, and `inspect` / `verify` of bare EVL0, MoE0, MBJS and VRQ0 files."""
import json
import os
import shutil

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.cli import main
from evermind_vk.files import export_mbjs
from evermind_vk.io.package import EvermindPackage
from evermind_vk.models import HybridMambaConfig, HybridMambaModel, LMConfig, TransformerLM
from evermind_vk.train import generate

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "builderforce")
RECORDED = json.load(open(os.path.join(FIX, "recorded.json")))
MAMBA_CFG = {"vocabSize": 32, "dModel": 8, "numLayers": 2, "dState": 3, "nHeads": 2, "seed": 4,
             "layers": [{"type": "mamba1"}, {"type": "attention"}], "defaultMamba1": {}, "mimoGroup": 1}


def fx(name):
    return os.path.join(FIX, name)


def run(capsys, *argv):
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def ids_line(out):
    return [int(t) for t in out.strip().splitlines()[0].split(",")]


def test_generate_prompt_ids_reproduces_builderforce(device, capsys):
    """The vocabulary-32 package and its bare EVL0: greedy and seeded sampling give builderforce's tokens."""
    r = RECORDED["lm32"]
    p = ",".join(map(str, r["prompt"]))
    for model in (fx("lm32.evermind"), fx("lm32.evl0")):
        rc, out, err = run(capsys, "generate", "--model", model, "--prompt-ids", p, "--tokens", "8", "--temperature", "0")
        assert rc == 0, err
        assert ids_line(out) == r["prompt"] + r["greedy"]
    rc, out, err = run(capsys, "generate", "--model", fx("lm32.evermind"), "--prompt-ids", p, "--tokens", "8",
                       "--temperature", "1", "--seed", "5", "--top-k", "0")
    assert rc == 0 and ids_line(out) == r["prompt"] + r["sampled"], err


def test_generate_refusals(device, capsys):
    """Text on a 32-token vocabulary points at --prompt-ids; out-of-vocabulary ids, bad lists, a model that
    does not generate text, and a media package without --out are one-line errors (exit 2)."""
    for argv, what in (([fx("lm32.evermind")], "--prompt-ids"),
                       ([fx("lm32.evermind"), "--prompt", "hello"], "--prompt-ids"),
                       ([fx("lm32.evermind"), "--prompt-ids", "1,40"], "outside the vocabulary of 32"),
                       ([fx("lm32.evermind"), "--prompt-ids", "1,x"], "comma-separated"),
                       ([fx("moe.evermind"), "--prompt-ids", "1"], "does not generate text"),
                       ([fx("moe.moe0"), "--prompt-ids", "1"], "does not generate text"),
                       ([fx("media.evermind")], "--out"),
                       ([fx("media.evermind"), "--out", "o", "--top-p", "0.5"], "--top-p"),
                       ([fx("media.evermind"), "--out", "o", "--stop-ids", "1"], "--stop-ids"),
                       ([fx("media.evermind"), "--prompt", "x", "--out", "o"], "token ids")):
        rc, out, err = run(capsys, "generate", "--model", *argv)
        assert rc == 2 and what in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, err


def test_generate_every_text_model_type(device, tmp_path, capsys):
    """--prompt-ids on a TransformerLM package, a HybridMambaModel package and a bare MBJS (with --config, and
    with config.json beside it) prints the prompt and the model's own greedy continuation."""
    tlm = TransformerLM(LMConfig(vocab_size=256, d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, d_ff=16,
                                 max_seq_len=32))
    mam = HybridMambaModel(HybridMambaConfig.from_dict(MAMBA_CFG))
    paths = {"t": str(tmp_path / "t.evermind"), "m": str(tmp_path / "m.evermind")}
    EvermindPackage.from_model(tlm, "t").to_file(paths["t"])
    EvermindPackage.from_model(mam, "m").to_file(paths["m"])
    (tmp_path / "w").mkdir()
    mbjs = str(tmp_path / "w" / "w.mbjs")
    with open(mbjs, "wb") as f:
        f.write(export_mbjs(mam))
    cfg = str(tmp_path / "cfg.json")
    with open(cfg, "w") as f:
        json.dump(MAMBA_CFG, f)
    want_m = [3, 1, 4] + mam.generate([3, 1, 4], max_new_tokens=5)
    cases = [(paths["m"], [], want_m), (mbjs, ["--config", cfg], want_m),
             (paths["t"], [], [3, 1, 4] + generate(tlm, [3, 1, 4], max_new_tokens=5, temperature=0))]
    for model, extra, want in cases:
        rc, out, err = run(capsys, "generate", "--model", model, "--prompt-ids", "3,1,4", "--tokens", "5",
                           "--temperature", "0", *extra)
        assert rc == 0 and ids_line(out) == want, (model, err)
    rc, out, err = run(capsys, "generate", "--model", mbjs, "--prompt-ids", "3")
    assert rc == 2 and "--config" in err
    packed = str(tmp_path / "packed.evermind")  # a bare MBJS (+ its config) packed into an .evermind
    rc, out, err = run(capsys, "pack", "--model", mbjs, "--config", cfg, "--out", packed)
    assert rc == 0, err
    rc, out, err = run(capsys, "generate", "--model", packed, "--prompt-ids", "3,1,4", "--tokens", "5", "--temperature", "0")
    assert rc == 0 and ids_line(out) == want_m, err
    shutil.copyfile(cfg, str(tmp_path / "w" / "config.json"))
    rc, out, err = run(capsys, "generate", "--model", mbjs, "--prompt-ids", "3,1,4", "--tokens", "5", "--temperature", "0")
    assert rc == 0 and ids_line(out) == want_m, err


def read_png(path):
    import matplotlib.image as mpimg
    return np.asarray(mpimg.imread(path), np.float32)[..., :3]


def test_media_generate_writes_builderforce_frames(device, tmp_path, capsys):
    """A media package generates builderforce's recorded tokens after <vid> <key> (up to </vid>) and writes the
    frames its codec decodes them to (8-bit PNGs: within one step of builderforce's floats)."""
    r = RECORDED["media"]
    out_dir = str(tmp_path / "frames")
    rc, out, err = run(capsys, "generate", "--model", fx("media.evermind"), "--tokens", str(len(r["greedy"])),
                       "--temperature", "0", "--out", out_dir)
    assert rc == 0, err
    eos = r["prompt"][0] + 1  # </vid>: we stop there; builderforce's recording ran on past it
    assert ids_line(out) == r["prompt"] + r["greedy"][:r["greedy"].index(eos) + 1]
    files = sorted(os.listdir(out_dir))
    assert len(files) == len(r["frames"])
    for name, want in zip(files, r["frames"]):
        np.testing.assert_allclose(read_png(os.path.join(out_dir, name)).ravel(), np.array(want), atol=1 / 255 + 1e-6)


def test_video_decode_with_the_package_codec(device, tmp_path, capsys):
    """`video decode --codec media.evermind` uses the package's codec: the same frames as its bare VRQ0; a text
    package is refused as carrying no codec."""
    toks = str(tmp_path / "t.json")
    with open(toks, "w") as f:
        json.dump(RECORDED["media"]["prompt"] + RECORDED["media"]["greedy"], f)
    for codec, out in ((fx("media.evermind"), "a"), (fx("codec.vrq0"), "b")):
        rc, _, err = run(capsys, "video", "decode", toks, "--codec", codec, "--out", str(tmp_path / out))
        assert rc == 0, err
    a, b = sorted(os.listdir(tmp_path / "a")), sorted(os.listdir(tmp_path / "b"))
    assert a == b and a
    for n in a:
        np.testing.assert_array_equal(read_png(str(tmp_path / "a" / n)), read_png(str(tmp_path / "b" / n)))
    rc, _, err = run(capsys, "video", "decode", toks, "--codec", fx("lm32.evermind"), "--out", str(tmp_path / "c"))
    assert rc == 2 and "carries no codec" in err


def test_inspect_and_verify_bare_files(device, tmp_path, capsys):
    """inspect shows a bare file's layout and header; verify passes the fixtures and fails (exit 1, one line) a
    flipped byte, an MBJS whose config disagrees, and NaN weights."""
    for name, layout in (("lm32.evl0", "EVL0"), ("moe.moe0", "MoE0"), ("codec.vrq0", "VRQ0")):
        rc, out, err = run(capsys, "inspect", fx(name))
        assert rc == 0 and f"builderforce {layout}" in out, err
        rc, out, err = run(capsys, "verify", fx(name))
        assert rc == 0 and f"ok ({layout})" in out, err
    rc, out, _ = run(capsys, "inspect", fx("lm32.evl0"))
    assert "config.vocabSize" in out and "32" in out and "crc trailer" in out
    bad = bytearray(open(fx("lm32.evl0"), "rb").read())
    bad[40] ^= 0xFF
    (tmp_path / "bad.evl0").write_bytes(bytes(bad))
    rc, out, err = run(capsys, "verify", str(tmp_path / "bad.evl0"))
    assert rc == 1 and "CRC" in err and len(err.strip().splitlines()) == 1
    mam = HybridMambaModel(HybridMambaConfig.from_dict(MAMBA_CFG))
    mbjs = tmp_path / "w.mbjs"
    mbjs.write_bytes(export_mbjs(mam))
    cfg, wrong = tmp_path / "cfg.json", tmp_path / "wrong.json"
    cfg.write_text(json.dumps(MAMBA_CFG))
    wrong.write_text(json.dumps(dict(MAMBA_CFG, dState=4)))
    rc, out, _ = run(capsys, "inspect", str(mbjs))
    assert rc == 0 and "builderforce MBJS" in out and "give --config" in out
    rc, out, _ = run(capsys, "verify", str(mbjs), "--config", str(cfg))
    assert rc == 0 and "ok (MBJS)" in out
    rc, out, err = run(capsys, "verify", str(mbjs), "--config", str(wrong))
    assert rc == 1 and "config implies" in err
    nan = mam.state_dict()
    nan["layer0.D_vec"][0] = np.nan
    mam.load_state_dict(nan)
    mbjs.write_bytes(export_mbjs(mam))
    rc, out, err = run(capsys, "verify", str(mbjs))
    assert rc == 1 and "NaN" in err
