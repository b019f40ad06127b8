"""mamba1 as builderforce computes it: the zero-order-hold input term by default,
checked against bf_mamba_ref (builderforce's forward, written from its 2026.7.14 sources, float64):
one token per sequence bit-for-bit in builderforce's own buffer layout, longer sequences in its
recurrence; Euler (`discretization="euler"`) as an option; configs with and without the field."""
import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk.io.package import EvermindPackage
from evermind_vk.models import HybridMambaConfig, HybridMambaModel
import bf_mamba_ref

# builderforce's HybridMambaModel config as JSON.stringify(model.config) writes it (defaults filled in)
BF_CONFIG = {"dState": 3, "dConv": 3, "expand": 2, "nHeads": 4, "nGroups": 1, "chunkLen": 256, "mimoGroup": 1,
             "eosId": -1, "defaultMamba1": {}, "defaultMamba2": {}, "defaultMamba3": {}, "defaultAttention": {},
             "vocabSize": 11, "dModel": 8, "numLayers": 2, "layers": [{"type": "mamba1"}, {"type": "mamba1"}],
             "seed": 5}


def bf_model(seed=5, **kw):
    """A builderforce-config model with weights moved off the init so that Δ·A reaches O(1) (where the
    zero-order hold and Euler differ) and every term matters."""
    m = HybridMambaModel(HybridMambaConfig.from_dict({**BF_CONFIG, "seed": seed, **kw}))
    rng = np.random.default_rng(seed)
    for k, t in m.params.items():
        a = t.numpy()
        if k.endswith("A_log"):
            a = a + rng.uniform(-1.5, 1.5, a.shape)
        elif k.endswith("bDtProj"):
            a = a + 1.0 + rng.standard_normal(a.shape)
        elif not k.endswith(("normWeight", "final_norm", "D_vec")):
            a = a + 0.4 * rng.standard_normal(a.shape)
        t.copy_(a.astype(np.float32))
    return m


def rel_err(got, want):
    return np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()


def test_one_token_is_builderforce(device):
    """One token per sequence: builderforce's flat buffer splits equal per-token splits and its tile scan
    composes nothing, so its forward is exactly bf_mamba_ref(split='flat'); ZOH matches it, Euler doesn't."""
    m, e = bf_model(), bf_model(discretization="euler")
    assert m.config.discretization == "zoh" and e.config.discretization == "euler"
    P = m.state_dict()
    for tok in range(11):
        want = bf_mamba_ref.logits(P, m.config, [tok], split="flat")
        assert rel_err(m.forward(ev.tensor(np.array([tok], np.uint32))).numpy(), want) < 2e-6, tok
        assert rel_err(e.forward(ev.tensor(np.array([tok], np.uint32))).numpy(), want) > 1e-3, tok


@given(batch=st.integers(1, 2), S=st.integers(2, 9), chunk=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_sequences_follow_builderforce_recurrence(device, batch, S, chunk, seed):
    """Longer sequences: builderforce's stated recurrence with ZOH (per-token splits, see bf_mamba_ref)."""
    m = bf_model(seed)
    m.scan_chunk = chunk
    ids = np.random.default_rng(seed).integers(0, 11, batch * S)
    want = bf_mamba_ref.logits(m.state_dict(), m.config, ids, batch)
    assert rel_err(m.forward(ev.tensor(ids.astype(np.uint32)), batch=batch).numpy(), want) < 1e-5


def test_recurrent_generation_uses_the_same_term(device):
    """step()/generate() carry the state with the configured input term too (ZOH and Euler)."""
    for disc in ("zoh", "euler"):
        m = bf_model(7, discretization=disc)
        ids = [3, 1, 4, 1, 5, 9, 2]
        full = m.forward(ev.tensor(np.array(ids, np.uint32))).numpy()
        state = m.init_state()
        rows = np.array([m.step(t, state).numpy()[0] for t in ids])
        np.testing.assert_allclose(rows, full, rtol=1e-4, atol=1e-5, err_msg=disc)


def test_config_field_and_old_configs(device, tmp_path):
    """discretization: default "zoh", saved in to_dict and packages; builderforce dicts (which never carry it)
    get ZOH; evermind-hybrid-mamba packages written before the field existed were trained with Euler and
    load as Euler; anything else is refused."""
    assert HybridMambaConfig().discretization == "zoh"
    assert HybridMambaConfig.from_dict(BF_CONFIG).discretization == "zoh"
    cfg = HybridMambaConfig(vocabSize=11, dModel=8, numLayers=1, dState=3, discretization="euler")
    assert cfg.to_dict()["discretization"] == "euler" and HybridMambaConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="discretization"):
        HybridMambaConfig(discretization="bilinear")
    m = bf_model(3, discretization="euler")
    path = str(tmp_path / "m.evermind")
    EvermindPackage.from_model(m, "t").to_file(path)
    assert ev.load(path).config.discretization == "euler"
    pkg = EvermindPackage.from_file(path)
    old = {k: v for k, v in pkg.manifest["config"].items() if k not in ("discretization", "mimoGroup")}
    EvermindPackage(dict(pkg.manifest, config=old), pkg.checkpoint).to_file(path)
    back = ev.load(path)
    assert back.config.discretization == "euler"
    ids = ev.tensor(np.array([1, 2, 3], np.uint32))
    np.testing.assert_array_equal(back.forward(ids).numpy(), m.forward(ids).numpy())


def test_builderforce_config_dict_as_written():
    """from_dict takes builderforce's dict as JSON.stringify(model.config) writes it: optional fields
    defaulted as builderforce defaults them, layer specs {type, config}, empty per-type defaults; per-layer
    sizes other than the model-wide ones and unknown keys are refused by name."""
    cfg = HybridMambaConfig.from_dict(json.loads(json.dumps(BF_CONFIG)))
    assert cfg.layers == ("mamba1", "mamba1") and cfg.dState == 3 and cfg.mimoGroup == 1
    bare = HybridMambaConfig.from_dict({"vocabSize": 32, "dModel": 16, "numLayers": 3})
    assert (bare.layers, bare.dState, bare.dConv, bare.expand, bare.nHeads, bare.nGroups, bare.chunkLen,
            bare.eosId) == (("mamba1",) * 3, 16, 4, 2, 4, 1, 256, -1)
    mixed = HybridMambaConfig.from_dict({"vocabSize": 32, "dModel": 16, "numLayers": 2, "nHeads": 2,
                                         "layers": [{"type": "mamba2", "config": {"nHeads": 2}}, {"type": "attention"}],
                                         "defaultMamba1": {"dState": 99}})  # no mamba1 layer: never applied
    assert mixed.layers == ("mamba2", "attention")
    for bad, what in ((dict(BF_CONFIG, defaultMamba1={"dState": 8}), "dState"),
                      (dict(BF_CONFIG, layers=[{"type": "mamba1", "config": {"expand": 4}}, {"type": "mamba1"}]), "expand"),
                      (dict(BF_CONFIG, frobnicate=1), "frobnicate"),
                      ({"dModel": 8, "numLayers": 1}, "vocabSize"),
                      ({"vocabSize": 8, "dModel": 8, "numLayers": 10 ** 12}, "numLayers"),
                      (dict(BF_CONFIG, dState=2.5), "dState")):
        with pytest.raises(ValueError, match=what):
            HybridMambaConfig.from_dict(bad)
