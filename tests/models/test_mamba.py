"""HybridMambaModel against a float64 PyTorch reference with a plain sequential recurrence (forward
and every parameter's gradient), causality, seeded initialisation against builderforce's draw."""
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk.autodiff import Tape
from evermind_vk.errors import UnsupportedError
from evermind_vk.models import HybridMambaConfig, HybridMambaModel
from evermind_vk.models.mamba import SeededGaussian

torch = pytest.importorskip("torch")
import mamba_ref  # noqa: E402


def model(layers, seed=1, scale=0.3, **kw):
    cfg = HybridMambaConfig(**{**dict(vocabSize=13, dModel=8, numLayers=len(layers), layers=tuple(layers),
                                      dState=3, dConv=3, expand=2, nHeads=4, nGroups=2, seed=seed), **kw})
    m = HybridMambaModel(cfg)
    rng = np.random.default_rng(seed)
    for k, t in m.params.items():  # larger weights than the init so every path matters
        if "A_log" in k or "orm" in k or k.endswith("D_vec"):
            continue
        t.copy_((t.numpy() + rng.standard_normal(t.shape) * scale).astype(np.float32))
    return m


@given(layers=st.lists(st.sampled_from(["mamba1", "mamba2", "mamba3", "attention"]), min_size=1, max_size=2),
       batch=st.integers(1, 2), S=st.integers(1, 9), chunk=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_forward_backward_vs_reference(device, layers, batch, S, chunk, seed):
    check_vs_reference(layers, batch, S, chunk, seed)


@pytest.mark.parametrize("layers", [("mamba2",), ("mamba2", "mamba1", "attention"), ("mamba3",),
                                    ("mamba3", "mamba2", "attention", "mamba1")])
def test_mamba2_mamba3_vs_reference(device, layers):
    check_vs_reference(layers, 2, 6, 4, 11)


def check_vs_reference(layers, batch, S, chunk, seed):
    m = model(layers, seed)
    m.scan_chunk = m.ssd_chunk = chunk
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 13, batch * S).astype(np.uint32)
    tg = rng.integers(0, 13, batch * S).astype(np.uint32)
    with Tape() as tape:
        lg = m.forward(ev.tensor(ids), batch=batch)
        from evermind_vk.autodiff import functional as F
        loss = F.cross_entropy(lg, ev.tensor(tg))
    grads = tape.backward(loss).by_name(m.params)
    P = mamba_ref.params(m.state_dict())
    want = mamba_ref.logits(P, m.config, ids, batch)
    np.testing.assert_allclose(lg.numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-4)
    wl = torch.nn.functional.cross_entropy(want, torch.as_tensor(tg.astype(np.int64)))
    wl.backward()
    np.testing.assert_allclose(loss.numpy()[0], wl.item(), rtol=1e-5)
    assert set(grads) == set(m.params)
    for k, g in grads.items():
        w = P[k].grad.numpy()
        np.testing.assert_allclose(g.numpy(), w, rtol=2e-3, atol=2e-5 + 2e-3 * np.abs(w).max(), err_msg=k)


def test_causality(device):
    """Changing token t never changes logits before t (and does change them from t on)."""
    m = model(["mamba1", "attention", "mamba2"], 5)
    ids = np.array([1, 5, 2, 8, 3, 9, 4, 7, 6, 0, 11], np.uint32)
    base = m.forward(ev.tensor(ids)).numpy()
    for t in (0, 4, 10):
        ids2 = ids.copy()
        ids2[t] = (ids2[t] + 3) % 13
        got = m.forward(ev.tensor(ids2)).numpy()
        np.testing.assert_array_equal(got[:t], base[:t])
        assert not np.allclose(got[t:], base[t:])


def test_per_token_split_no_leak(device):
    """Batch packing: each sequence's logits equal its logits run alone (no cross-sequence leak)."""
    m = model(["mamba1", "attention", "mamba2"], 2)
    a = np.array([1, 2, 3, 4, 5], np.uint32)
    b = np.array([6, 7, 8, 9, 10], np.uint32)
    both = m.forward(ev.tensor(np.concatenate([a, b])), batch=2).numpy()
    np.testing.assert_allclose(both[:5], m.forward(ev.tensor(a)).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(both[5:], m.forward(ev.tensor(b)).numpy(), rtol=1e-5, atol=1e-6)


JS_DRAW = """
let s = (%d >>> 0) || 1;
const next = () => { s = (Math.imul(1664525, s) + 1013904223) >>> 0; return s / 4294967296; };
const out = [];
for (const [n, std] of %s) for (let i = 0; i < n; i++) {
  const u1 = Math.max(next(), 1e-12), u2 = next();
  out.push(Math.fround(std * Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2)));
}
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the JS draw")
def test_seeded_init_matches_js_draw():
    """The LCG + Box–Muller values, in builderforce's order, equal a JS run of the same draw (f32)."""
    cfg = HybridMambaConfig(vocabSize=7, dModel=5, numLayers=1, dState=2, dConv=2, seed=1234)
    from evermind_vk.models.mamba import init_params
    p = init_params(cfg)
    D, R, N = cfg.d_inner, cfg.dt_rank, cfg.dState
    plan = [(7 * 5, 1 / 5 ** 0.5), (2 * D * 5, 0.02), (D * 2, 0.01), ((R + 2 * N) * D, 0.01), (D * R, 0.02), (5 * D, 0.02)]
    js = JS_DRAW % (1234, "[" + ",".join(f"[{n},{s!r}]" for n, s in plan) + "]")
    out = subprocess.run(["node", "-e", js], capture_output=True, text=True, check=True).stdout
    want = np.array(eval(out), np.float32)
    got = np.concatenate([p[k].ravel() for k in ("embedding", "layer0.wInProj", "layer0.wConv", "layer0.wXProj",
                                                  "layer0.wDtProj", "layer0.wOutProj")])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(p["layer0.A_log"][3], np.log(np.arange(1, N + 1)).astype(np.float32))
    np.testing.assert_array_equal(p["layer0.D_vec"], 1)
    assert SeededGaussian(0).s == 1  # builderforce: seed 0 becomes 1


def test_param_names_and_errors(device):
    m = HybridMambaModel(HybridMambaConfig(vocabSize=10, dModel=16, numLayers=2, layers=("mamba1", "attention")))
    assert list(m.params)[:3] == ["embedding", "layer0.wInProj", "layer0.bInProj"]
    assert list(m.params)[-1] == "final_norm"
    assert m.params["layer0.wXProj"].shape == (1 + 32, 32)
    with pytest.raises(ValueError):
        HybridMambaConfig(numLayers=2, layers=("mamba1",))
    with pytest.raises(ValueError):
        HybridMambaConfig(numLayers=1, layers=("mamba9",))


@pytest.mark.parametrize("layers", [("mamba1",), ("mamba2", "attention", "mamba1", "mamba3"), ("mamba3", "mamba2")])
def test_recurrent_step_equals_forward(device, layers):
    """Token-by-token generation with the carried state gives the full forward's logits at every position."""
    m = model(layers, 4, dConv=3)
    ids = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.uint32)
    full = m.forward(ev.tensor(ids)).numpy()
    state = m.init_state()
    rows = [m.step(int(t), state).numpy()[0] for t in ids]
    np.testing.assert_allclose(np.array(rows), full, rtol=1e-4, atol=1e-5)
    g = m.generate([3, 1, 4], max_new_tokens=5)
    seq = [3, 1, 4]
    for t in g:  # greedy: each generated token is the argmax of the full forward over what came before
        assert t == int(np.argmax(m.forward(ev.tensor(np.array(seq, np.uint32))).numpy()[-1]))
        seq.append(t)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the JS draw")
def test_seeded_init_all_layer_types_match_js_draw():
    """mamba2, attention and mamba3 blocks draw in builderforce's order too (zeros, ones, A_log: no draws)."""
    from evermind_vk.models.mamba import init_params
    cfg = HybridMambaConfig(vocabSize=5, dModel=4, numLayers=3, layers=("mamba2", "attention", "mamba3"),
                            dState=2, dConv=2, nHeads=2, seed=77)
    p = init_params(cfg)
    d, D, N, H = 4, 8, 2, 2
    plan = [(5 * d, 1 / d ** 0.5),
            ((D + 2 * N + H) * d, 0.02), ((D + 2 * N) * 2, 0.01), (d * D, 0.02),      # mamba2
            (3 * d * d, 0.02), (d * d, 0.02),                                            # attention
            ((D + 4 * N + H) * d, 0.02), ((D + 4 * N) * 2, 0.01), (d * D, 0.02)]         # mamba3
    js = JS_DRAW % (77, "[" + ",".join(f"[{n},{s!r}]" for n, s in plan) + "]")
    want = np.array(eval(subprocess.run(["node", "-e", js], capture_output=True, text=True, check=True).stdout), np.float32)
    keys = ["embedding", "layer0.wInProj", "layer0.wConv", "layer0.wOutProj", "layer1.wQKV", "layer1.wO",
            "layer2.wInProj", "layer2.wConv", "layer2.wOutProj"]
    np.testing.assert_array_equal(np.concatenate([p[k].ravel() for k in keys]), want)
    np.testing.assert_array_equal(p["layer2.A_log"], np.array([[0, 0], [0, np.pi]], np.float32))


def test_recorded_generation_step_is_the_eager_step(device):
    """Without attention layers generate() replays one recorded step per token: bit-identical logits."""
    m = model(("mamba3", "mamba1", "mamba2"), 6, dConv=3)
    ids = [3, 1, 4, 1, 5, 9]
    s1, s2 = m.init_state(), m.init_state()
    feed = m._recorded_step(s2)
    for t in ids:
        np.testing.assert_array_equal(feed(t), m.step(t, s1).numpy()[0])


@pytest.mark.parametrize("layers", [("mamba1", "mamba1"), ("mamba2", "mamba3")])
def test_batched_step_is_each_sequence_alone(device, layers):
    """A step of n sequences on a state of n slots (and a step of one slot of it) gives each sequence's
    logits bit for bit as stepping it alone; the other slots' states are left as they are."""
    m = model(layers, 7, dConv=3)
    seqs = [[3, 1, 4, 1], [9, 2, 6, 5], [5, 8, 9, 7]]
    alone = []
    for q in seqs:
        s = m.init_state()
        alone.append([m.step(t, s).numpy()[0] for t in q])
    both, one = m.init_state(3), m.init_state(3)
    for k in range(4):
        rows = m._step_ids(ev.tensor(np.array([q[k] for q in seqs], np.uint32)), both).numpy()
        for b in range(3):
            np.testing.assert_array_equal(rows[b], alone[b][k])
            got = m._step_ids(ev.tensor(np.array([seqs[b][k]], np.uint32)), one, first=b).numpy()[0]
            np.testing.assert_array_equal(got, alone[b][k])


def test_config_accepts_builderforce_layer_specs():
    cfg = HybridMambaConfig(numLayers=2, layers=({"type": "mamba2"}, "attention"))
    assert cfg.layers == ("mamba2", "attention")
    assert HybridMambaConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError):
        HybridMambaConfig(numLayers=1, layers=({"type": "mamba1", "config": {"dState": 8}},))


def test_max_seq_len_follows_the_ssd_bound(device):
    """mamba2/mamba3 layers run the SSD, whose sequences stop at 64-token chunks x 4096 chunks; the config
    says so, and the op refuses a longer sequence with a clear error."""
    from evermind_vk.errors import UnsupportedError
    assert HybridMambaConfig(numLayers=1, layers=("mamba1",)).max_seq_len == 4096 * 4096
    for kind in ("mamba2", "mamba3"):
        assert HybridMambaConfig(numLayers=2, layers=("mamba1", kind)).max_seq_len == 64 * 4096
    from evermind_vk.runtime.variants import ssd_chunk_len
    with pytest.raises(UnsupportedError):
        ssd_chunk_len(64 * 4096 + 1, 64, 64)


@pytest.mark.parametrize("fused", ["", "1", "0"])
def test_generate_on_the_fused_step(device, fused, monkeypatch):
    """model.generate (the CLI's generate) records its step through the decode path rule: a mamba1 stack runs
    ops.mamba1_decode (unset or forced) or the per-op step (0), and each greedy token is the argmax of the full
    forward over what came before either way; forced where mamba1_decode cannot run (dState 3: not whole vec4s)
    is an error, not a silent per-op step."""
    from evermind_vk.errors import UnsupportedError
    monkeypatch.setenv("EVERMIND_VK_DECODE_FUSED", fused)
    m = model(("mamba1", "mamba1"), 5, dConv=3, dState=4)
    g = m.generate([3, 1, 4], max_new_tokens=5)
    seq = [3, 1, 4]
    for t in g:
        assert t == int(np.argmax(m.forward(ev.tensor(np.array(seq, np.uint32))).numpy()[-1]))
        seq.append(t)
    if fused == "1":
        with pytest.raises(UnsupportedError, match="dState"):
            model(("mamba1",), 5, dConv=3).generate([3], max_new_tokens=2)
