""".evermind packages of builderforce's model types: from_model -> blob -> load round trips (weights
and forward identical), EVL0 / MoE0 bytes, invalid packages refused with their problems listed, and,
with node and the npm package (BUILDERFORCE_MEMORY_ENGINE), byte identity with builderforce's
fromLM / fromModel and builderforce loading what we write."""
import base64
import json

import numpy as np
import pytest

import evermind_vk as ev
from evermind_vk.errors import FormatError
from evermind_vk.io.package import EvermindPackage
from evermind_vk.models import EvermindLM, EvermindLMConfig, MoEConfig, SharedExpertMoE
from test_bf_models import bf_missing, perturbed, run_node

CARD = {"description": "a test model", "license": "MIT", "tags": ["x", "y"]}


def lm():
    m = EvermindLM(EvermindLMConfig(13, 6, 2, 3, 5, 4, 2, seed=3))
    m.load_state_dict(perturbed(m.state_dict(), np.random.default_rng(0)))
    return m


def moe():
    m = SharedExpertMoE(MoEConfig(6, 5, 4, 2, seed=9))
    m.load_state_dict(perturbed(m.state_dict(), np.random.default_rng(1)))
    return m


@pytest.mark.parametrize("make", [lm, moe])
@pytest.mark.parametrize("fp16", [False, True])
def test_round_trip(device, tmp_path, make, fp16):
    m = make()
    pkg = EvermindPackage.from_model(m, name="t", version="1.2.3", card=CARD, fp16=fp16, created_at="2026-12-02")
    assert pkg.manifest["modelType"] == ("evermind-lm" if isinstance(m, EvermindLM) else "shared-expert-moe")
    assert pkg.manifest["checkpointFormat"] == ("EVL0" if isinstance(m, EvermindLM) else "MoE0")
    assert pkg.manifest["paramCount"] == sum(v.size for v in m.state_dict().values())
    path = str(tmp_path / "m.evermind")
    pkg.to_file(path)
    back = ev.load(path)
    assert type(back) is type(m)
    a, b = m.state_dict(), back.state_dict()
    assert list(a) == list(b)
    for k in a:
        want = a[k].astype(np.float16).astype(np.float32) if fp16 else a[k]
        assert np.array_equal(b[k], want), k
    if not fp16:
        assert EvermindPackage.from_model(back, name="t", version="1.2.3", card=CARD,
                                          created_at="2026-12-02").to_blob() == pkg.to_blob()
        if isinstance(m, EvermindLM):
            ids = ev.tensor(np.array([1, 2, 3, 12], np.uint32))
            assert np.array_equal(m.forward(ids).numpy(), back.forward(ids).numpy())


def test_invalid_package_refused(device, tmp_path):
    pkg = EvermindPackage.from_model(moe(), name="t", version="1", card=CARD)
    cp = bytearray(pkg.checkpoint)
    cp[40] ^= 0xFF
    bad = EvermindPackage(dict(pkg.manifest, config=dict(pkg.manifest["config"], topK=9)), bytes(cp))
    path = str(tmp_path / "bad.evermind")
    bad.to_file(path)
    with pytest.raises(FormatError, match="checksum mismatch.*; invalid config|invalid config.*checksum mismatch"):
        ev.load(path)


def test_manifest_json(device):
    pkg = EvermindPackage.from_model(lm(), name="n", version="v", card={"description": "d"})
    blob = pkg.to_blob()
    mlen = int.from_bytes(blob[8:12], "little")
    text = blob[12:12 + mlen].decode()
    assert text.startswith('{"schema":"evermind.model/1","name":"n","version":"v","modelType":"evermind-lm",'
                           '"config":{"vocabSize":13,"dModel":6,"numLayers":2,"convKernel":3,"hiddenDim":5,'
                           '"numExperts":4,"topK":2},"paramCount":')
    assert json.loads(text)["checkpointFp16"] is False


@pytest.mark.skipif(bf_missing, reason="node or the builderforce npm package (BUILDERFORCE_MEMORY_ENGINE=dir) absent")
@pytest.mark.parametrize("kind", ["lm", "moe"])
def test_bytes_equal_builderforce(device, kind):
    m = lm() if kind == "lm" else moe()
    ours = EvermindPackage.from_model(m, name="pkg", version="0.1.0", card=CARD, created_at="2026-12-02T00:00:00Z")
    sd = m.state_dict()
    flat = np.concatenate([v.ravel() for v in sd.values()]).tolist()
    if kind == "lm":
        make = f"new bf.EvermindLM({json.dumps(dict(m.config.to_builderforce(), seed=m.config.seed))})"
        pack, load, names = "fromLM", "loadLM", "lm.parameters()"
    else:
        make = f"new bf.SharedExpertMoE({json.dumps(m.config.to_builderforce())})"
        pack, load, names = "fromModel", "loadModel", "lm.parameters()"
    got = run_node(f"""
        const lm = {make};
        const flat = {json.dumps(flat)}; let o = 0;
        for (const p of {names}) {{ p.data.set(flat.slice(o, o + p.data.length)); o += p.data.length; }}
        const pkg = bf.EvermindModelPackage.{pack}(lm, {{name: "pkg", version: "0.1.0", card: {json.dumps(CARD)},
                                                    createdAt: "2026-12-02T00:00:00Z"}});
        const theirs = Buffer.from(pkg.toBlob()).toString("base64");
        const ours = Buffer.from("{base64.b64encode(ours.to_blob()).decode()}", "base64");
        const back = bf.EvermindModelPackage.fromBlob(ours.buffer.slice(ours.byteOffset, ours.byteOffset + ours.length));
        const v = back.validate();
        const loaded = back.{load}();
        const same = loaded.parameters().every((p, i) => p.data.every((x, j) => x === lm.parameters()[i].data[j]));
        console.log(JSON.stringify({{theirs, ok: v.ok, errors: v.errors, same}}));
    """)
    assert base64.b64decode(got["theirs"]) == ours.to_blob()
    assert got["ok"] and got["same"], got["errors"]
