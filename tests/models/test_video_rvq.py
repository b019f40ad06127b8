"""builderforce's VideoRVQ codec (host numpy) and media packages: vocabulary, encode/decode rules, VRQ0
round trips with length checks, seeded fit; with node and the npm package, token ids, decoded frames,
fitted codebooks and media-package bytes equal builderforce's."""
import base64
import json

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.errors import FormatError, TruncatedError
from evermind_vk.files import deserialize_codec, from_media_lm, serialize_codec
from evermind_vk.io.package import EvermindPackage
from evermind_vk.models import EvermindLM, EvermindLMConfig
from evermind_vk.models.video_rvq import VideoRVQCodec
from test_bf_models import bf_missing, run_node

H = W = 8
C = 3


def videos():
    return [[(0.5 + 0.4 * np.sin(0.3 * np.arange(H * W * C) + t * 0.7 + v)).astype(np.float32) for t in range(5)]
            for v in range(2)]


def codec():
    return VideoRVQCodec(H, W, C, patch=4, levels=2, codebook_size=4, keyframe_interval=3, text_vocab_size=10)


def test_vocabulary_and_stream(device):
    c = codec()
    assert (c.bos_video, c.eos_video, c.frame_key, c.frame_delta, c.vocab_size) == (10, 11, 12, 13, 10 + 4 + 16)
    assert c.code_token(1, 1, 3) == 14 + 8 + 4 + 3 == c.vocab_size - 1
    toks = c.encode(videos()[0])
    assert toks[0] == 10 and toks[-1] == 11 and len(toks) == 2 + 5 * (1 + c.tokens_per_frame)
    markers = [toks[1 + t * (1 + c.tokens_per_frame)] for t in range(5)]
    assert markers == [12, 13, 13, 12, 13]  # key frames at t = 0 and t % 3 == 0
    assert all(c.code_base <= t < c.vocab_size for t in toks if t not in (10, 11, 12, 13))


def test_decode_rules(device):
    c = codec()
    toks = c.encode(videos()[0])
    frames = c.decode([3, 7, 99] + toks[1:])  # junk before the first marker is skipped
    assert len(frames) == 5 and all(f.shape == (H, W, C) and f.min() >= 0 and f.max() <= 1 for f in frames)
    assert c.decode([1, 2, 11] + toks) == []  # </vid> before any frame: nothing
    cut = c.decode(toks[:1 + 1 + 3])  # a key frame with 3 of its 8 codes: the rest count as zero
    assert len(cut) == 1
    full = c.decode(toks[:1 + 1 + c.tokens_per_frame])[0]
    assert not np.array_equal(cut[0], full)


def test_vrq0_round_trip_and_checks(device):
    c = codec()
    c.fit(videos(), iterations=2)
    blob = serialize_codec(c)
    back = deserialize_codec(blob)
    assert serialize_codec(back) == blob and back.encode(videos()[1]) == c.encode(videos()[1])
    with pytest.raises(TruncatedError):
        deserialize_codec(blob[:-4])
    with pytest.raises(FormatError):
        deserialize_codec(blob + b"\0\0\0\0")
    with pytest.raises(FormatError, match="magic"):
        deserialize_codec(b"\0" * 40)


def test_fit_is_seeded(device):
    a, b = codec(), codec()
    assert a.fit(videos(), iterations=3) == b.fit(videos(), iterations=3)
    assert serialize_codec(a) == serialize_codec(b)
    assert serialize_codec(a) != serialize_codec(codec())


def test_media_package(device, tmp_path):
    c = codec()
    lm = EvermindLM(EvermindLMConfig(c.vocab_size, 6, 1, 3, 5, 3, 2, seed=1))
    pkg = from_media_lm(lm, c, name="vid", version="1", card={"description": "d"})
    assert pkg.manifest["checkpointBytes"] == len(pkg.checkpoint) and pkg.manifest["codecFormat"] == "VRQ0"
    path = str(tmp_path / "v.evermind")
    pkg.to_file(path)
    lm2, c2 = ev.load(path)
    assert isinstance(lm2, EvermindLM) and serialize_codec(c2) == serialize_codec(c)
    with pytest.raises(FormatError, match=r"LM vocabSize \(31\) must equal codec.vocabSize \(30\)"):
        from_media_lm(EvermindLM(EvermindLMConfig(31, 6, 1, 3, 5, 3, 2)), c, name="x")
    broken = EvermindPackage(pkg.manifest, pkg.checkpoint, None)
    assert any("missing its codec section" in e for e in broken.validate()["errors"])
    # a media LM generates tokens that the codec decodes to frames
    gen = lm2.generate([c.bos_video, c.frame_key], 6)
    frames = c2.decode([c.frame_key] + gen)
    assert all(f.shape == (H, W, C) for f in frames)


@pytest.mark.skipif(bf_missing, reason="node or the builderforce npm package (BUILDERFORCE_MEMORY_ENGINE=dir) absent")
def test_codec_equals_builderforce(device):
    c = codec()
    lm = EvermindLM(EvermindLMConfig(c.vocab_size, 6, 1, 3, 5, 3, 2, seed=1))
    got = run_node(f"""
        const H = {H}, W = {W}, C = {C};
        const vids = [];
        for (let v = 0; v < 2; v++) {{ const vid = [];
          for (let t = 0; t < 5; t++) {{ const f = new Float32Array(H * W * C);
            for (let i = 0; i < f.length; i++) f[i] = 0.5 + 0.4 * Math.sin(0.3 * i + t * 0.7 + v); vid.push(f); }}
          vids.push(vid); }}
        const codec = new bf.VideoRVQCodec({{height: H, width: W, channels: C, patch: 4, levels: 2, codebookSize: 4,
                                            keyframeInterval: 3, textVocabSize: 10}});
        const init = Buffer.from(codec.serialize()).toString("base64");
        const mse = codec.fit(vids, {{iterations: 4}});
        const toks = codec.encode(vids[0]);
        const dec = codec.decode(toks.slice(0, toks.length - 7)).map(f => Array.from(f));
        const lm = new bf.EvermindLM({json.dumps(dict(lm.config.to_builderforce(), seed=1))});
        const pkg = bf.EvermindModelPackage.fromMediaLM(lm, codec, {{name: "vid", version: "1", modality: "video",
                                                         card: {{description: "d"}}}});
        console.log(JSON.stringify({{init, mse, toks, dec, blob: Buffer.from(codec.serialize()).toString("base64"),
                                    pkg: Buffer.from(pkg.toBlob()).toString("base64")}}));
    """)
    assert serialize_codec(c) == base64.b64decode(got["init"])
    assert abs(c.fit(videos(), iterations=4) - got["mse"]) < 1e-12
    toks = c.encode(videos()[0])
    assert toks == got["toks"]
    dec = c.decode(toks[:-7])
    assert len(dec) == len(got["dec"]) and all(np.array_equal(a.ravel(), np.array(b, np.float32))
                                               for a, b in zip(dec, got["dec"]))
    assert serialize_codec(c) == base64.b64decode(got["blob"])
    pkg = from_media_lm(lm, c, name="vid", version="1", modality="video", card={"description": "d"})
    assert pkg.to_blob() == base64.b64decode(got["pkg"])
