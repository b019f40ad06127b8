"""builderforce's SharedExpertMoE and EvermindLM on the device against float64 numpy references written
from the spec (bf_ref.py): seeded init value for value, forward, routing, aux loss, every gradient; the
routing kernel's tie rule; finite differences of the MoE op; and, where node and the builderforce npm
package are present (BUILDERFORCE_MEMORY_ENGINE = the package directory), the real library's numbers."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.autodiff import Tape
from evermind_vk.models import EvermindLM, EvermindLMConfig, MoEConfig, SharedExpertMoE
import bf_ref

LM_KEYS = ("vocabSize", "dModel", "numLayers", "convKernel", "hiddenDim", "numExperts", "topK")


def perturbed(sd, rng, s=0.3):
    """Move conv taps, gains and biases off their init so that their gradients are exercised."""
    out = {}
    for k, v in sd.items():
        if k.endswith(("conv", "nConv", "nMoe", "b1", "b2")):
            v = (v + s * rng.standard_normal(v.shape)).astype(np.float32)
        out[k] = v
    return out


def assert_close(got, want, tol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.abs(got - want).max() if want.size else 0.0
    assert err <= tol * max(1.0, np.abs(want).max()), f"{what}: max error {err}"


# -- init ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [None, 0, 7, 0xFFFFFFFF])
def test_moe_init_is_builderforce(device, seed):
    m = SharedExpertMoE(MoEConfig(5, 3, 3, 2, seed=seed))
    want = bf_ref.moe_init(5, 3, 3, bf_ref.MOE_SEED if seed is None else seed)
    sd = m.state_dict()
    assert list(sd) == list(want)
    for k in want:
        assert np.array_equal(sd[k], want[k]), k


@pytest.mark.parametrize("seed", [None, 0, 0xFFFFFFFF])  # 2^32 - 1: layer seeds seed + 1 + l wrap
def test_lm_init_is_builderforce(device, seed):
    m = EvermindLM(EvermindLMConfig(7, 4, 2, 3, 3, 3, 2, seed=seed))
    want = bf_ref.lm_init(7, 4, 2, 3, 3, 3, bf_ref.LM_SEED if seed is None else seed)
    sd = m.state_dict()
    assert list(sd) == list(want)
    for k in want:
        assert np.array_equal(sd[k], want[k]), k
    assert m.config.hidden_dim == 3 and EvermindLMConfig(5, d_model=8).hidden_dim == 16


# -- MoE -------------------------------------------------------------------------------------------
@given(d=st.integers(1, 9), h=st.integers(1, 7), E=st.integers(1, 6), kk=st.integers(1, 6), N=st.integers(1, 12),
       aux=st.sampled_from([0.0, 0.01, 0.7]), seed=st.integers(0, 2**31))
def test_moe_forward_backward(device, d, h, E, kk, N, aux, seed):
    k = min(kk, E)
    rng = np.random.default_rng(seed)
    m = SharedExpertMoE(MoEConfig(d, h, E, k, seed=seed))
    sd = perturbed(m.state_dict(), rng)
    sd["wr"] = (sd["wr"] * 50).astype(np.float32)  # well-separated router logits
    m.load_state_dict(sd)
    X = rng.standard_normal((N, d)).astype(np.float32)
    Tg = rng.standard_normal((N, d)).astype(np.float32)
    loss, g, want_aux, want_out, want_ex = bf_ref.moe_batch(bf_ref.f64(sd), X.astype(np.float64),
                                                             Tg.astype(np.float64), k, E, aux)
    with Tape() as tape:
        out, ctx, a = m.forward(ev.tensor(X), aux_scale=aux * E / N)
    o = out.numpy()
    assert_close(o, want_out, 1e-5, "MoE out")
    assert ctx.sel.numpy().tolist() == want_ex
    if aux:
        assert_close(a.numpy()[0], want_aux, 1e-5, "aux loss")
    grads = m.named_grads(tape.backward({out: ev.tensor((o - Tg).astype(np.float32))}))
    for name, want in g.items():
        assert_close(grads[name], want, 1e-4, f"d {name}")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_route_ties_and_gates(device, dtype):
    # token 0: all equal -> experts 0, 1 (lower index first); token 1: tie between 1 and 3 at the top.
    logits = np.array([[0.5, 0.5, 0.5, 0.5], [0.0, 2.0, -1.0, 2.0], [3.0, -2.0, 1.0, 0.25]], np.float32)
    probs, gates, sel, disp = ops.moe_route(ev.tensor(logits.astype(np.float16 if dtype == "f16" else np.float32)), 2)
    assert sel.numpy().tolist() == [[0, 1], [1, 3], [0, 2]]
    g = gates.numpy()
    assert np.all(g[:, 0] == 1)
    np.testing.assert_allclose(g[2, 1:], [1 / (1 + np.exp(-2)), 0, np.exp(-2) / (1 + np.exp(-2)), 0], rtol=1e-6)
    np.testing.assert_allclose(probs.numpy(), np.exp(logits) / np.exp(logits).sum(1, keepdims=True), rtol=1e-6)
    assert disp.numpy().sum(1).tolist() == [2, 2, 2]


def test_fd_moe(device):
    """d(sum(out * G))/d x, w1, wr by the backward vs central differences of the device forward (routing fixed)."""
    rng = np.random.default_rng(4)
    d, h, E, k, N = 3, 4, 3, 2, 4
    m = SharedExpertMoE(MoEConfig(d, h, E, k, seed=3))
    sd = perturbed(m.state_dict(), rng)
    sd["wr"] = (sd["wr"] * 40).astype(np.float32)
    m.load_state_dict(sd)
    X = rng.standard_normal((N, d)).astype(np.float32)
    G = rng.standard_normal((N, d))
    P = m.parameters()

    def f(x):
        out, ctx, _ = m.forward(ev.tensor(x))
        return float((out.numpy().astype(np.float64) * G).sum()), ctx.sel.numpy()

    with Tape() as tape:
        out, ctx, _ = m.forward(ev.tensor(X))
    grads = tape.backward({out: ev.tensor(G.astype(np.float32))})
    xt = tape  # noqa: F841
    sel0 = ctx.sel.numpy()
    # x: perturb the input
    gx = np.zeros_like(X, dtype=np.float64)
    H = 1e-2
    for i in np.ndindex(X.shape):
        xp, xm = X.copy(), X.copy()
        xp[i] += H
        xm[i] -= H
        (lp, sp), (lm, sm) = f(xp), f(xm)
        assert np.array_equal(sp, sel0) and np.array_equal(sm, sel0)
        gx[i] = (lp - lm) / (2 * H)
    with Tape() as tape:
        xin = ev.tensor(X)
        out, _, _ = m.forward(xin)
    np.testing.assert_allclose(tape.backward({out: ev.tensor(G.astype(np.float32))})[xin].numpy(), gx, rtol=2e-2, atol=2e-3)
    # w1 (stacked) and wr: perturb parameters
    for name in ("w1", "wr", "b2"):
        base = P[name].numpy()
        want = np.zeros(base.shape)
        for i in np.ndindex(base.shape):
            vals = []
            for s in (1, -1):
                b = base.copy()
                b[i] += s * H
                P[name].copy_(b)
                vals.append(f(X)[0])
            P[name].copy_(base)
            want[i] = (vals[0] - vals[1]) / (2 * H)
        np.testing.assert_allclose(grads[P[name]].numpy(), want, rtol=2e-2, atol=2e-3, err_msg=name)


# -- EvermindLM ------------------------------------------------------------------------------------
@given(V=st.integers(2, 20), d=st.integers(1, 8), L=st.integers(1, 2), K=st.integers(1, 4), h=st.integers(1, 6),
       E=st.integers(1, 4), kk=st.integers(1, 4), T=st.integers(2, 10), seed=st.integers(0, 2**31))
def test_lm_forward_loss_backward(device, V, d, L, K, h, E, kk, T, seed):
    cfg = dict(zip(LM_KEYS, (V, d, L, K, h, E, min(kk, E))))
    rng = np.random.default_rng(seed)
    m = EvermindLM(EvermindLMConfig.from_builderforce(dict(cfg, seed=seed)))
    sd = perturbed(m.state_dict(), rng)
    sd["emb"] = (sd["emb"] * 50).astype(np.float32)
    for i in range(L):
        sd[f"layer{i}.moe.wr"] = (sd[f"layer{i}.moe.wr"] * 50).astype(np.float32)
    m.load_state_dict(sd)
    toks = rng.integers(0, V, T).tolist()
    want_loss, want_g, want_logits = bf_ref.lm_loss_and_grads(bf_ref.f64(sd), toks, cfg)
    logits = m.forward(ev.tensor(np.array(toks, np.uint32))).numpy()
    assert_close(logits, want_logits, 1e-5, "logits")
    loss, g = m.loss_and_grads(toks)
    assert abs(loss - want_loss) <= 1e-4 * max(1, abs(want_loss))
    assert list(g) == list(want_g)
    for name, want in want_g.items():
        assert_close(g[name], want, 1e-4, f"d {name}")


def test_lm_packed_sequences(device):
    m = EvermindLM(EvermindLMConfig(13, 6, 2, 3, 5, 4, 2, seed=9))
    sd = perturbed(m.state_dict(), np.random.default_rng(2))
    m.load_state_dict(sd)
    a, b = [1, 5, 7, 2, 2], [12, 0, 3, 3, 8]
    packed = m.forward(ev.tensor(np.array(a + b, np.uint32)), seq_len=5).numpy()
    sep = np.concatenate([m.forward(ev.tensor(np.array(s, np.uint32))).numpy() for s in (a, b)])
    np.testing.assert_allclose(packed, sep, rtol=1e-6, atol=1e-6)
    assert m.next_token_targets(a + b, 5).tolist() == [5, 7, 2, 2, 13, 0, 3, 3, 8, 13]


# -- the real library -------------------------------------------------------------------------------
BF = os.environ.get("BUILDERFORCE_MEMORY_ENGINE")
NODE = shutil.which("node")
bf_missing = NODE is None or not BF or not os.path.exists(os.path.join(BF or "", "dist", "index.js"))


def run_node(script: str) -> dict:
    js = f'import * as bf from "{os.path.join(BF, "dist", "index.js")}";\n' + script
    out = subprocess.run([NODE, "--input-type=module", "-e", js], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(bf_missing, reason="node or the builderforce npm package (BUILDERFORCE_MEMORY_ENGINE=dir) absent")
def test_lm_equals_builderforce(device):
    cfg = dict(vocabSize=17, dModel=8, numLayers=2, convKernel=3, hiddenDim=6, numExperts=4, topK=2)
    toks = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    m = EvermindLM(EvermindLMConfig.from_builderforce(dict(cfg, seed=11)))
    sd = perturbed(m.state_dict(), np.random.default_rng(0))
    m.load_state_dict(sd)
    flat = np.concatenate([v.ravel() for v in sd.values()]).tolist()
    got = run_node(f"""
        const lm = new bf.EvermindLM({json.dumps(dict(cfg, seed=11))});
        const init = lm.parameters().map(p => Array.from(p.data));
        const flat = {json.dumps(flat)}; let o = 0;
        for (const p of lm.parameters()) {{ p.data.set(flat.slice(o, o + p.data.length)); o += p.data.length; }}
        const logits = lm.forward({toks}).logits.map(r => Array.from(r));
        lm.zeroGrad();
        const loss = lm.lossAndBackward({toks});
        console.log(JSON.stringify({{init, logits, loss, grads: lm.gradients().map(g => Array.from(g.data))}}));
    """)
    init = EvermindLM(EvermindLMConfig.from_builderforce(dict(cfg, seed=11))).state_dict()
    for (k, v), js in zip(init.items(), got["init"]):
        assert np.array_equal(v.ravel(), np.array(js, np.float32)), k
    logits = m.forward(ev.tensor(np.array(toks, np.uint32))).numpy()
    want = np.array(got["logits"])
    assert np.abs(logits - want).max() <= 1e-5 * np.abs(want).max()
    loss, g = m.loss_and_grads(toks)
    assert abs(loss - got["loss"]) <= 1e-4
    for (k, v), js in zip(g.items(), got["grads"]):
        assert np.abs(v.ravel() - np.array(js)).max() <= 1e-4, k


@pytest.mark.skipif(bf_missing, reason="node or the builderforce npm package (BUILDERFORCE_MEMORY_ENGINE=dir) absent")
def test_moe_equals_builderforce(device):
    d, h, E, k, N = 6, 5, 5, 2, 7
    m = SharedExpertMoE(MoEConfig(d, h, E, k, seed=21))
    sd = perturbed(m.state_dict(), np.random.default_rng(1))
    m.load_state_dict(sd)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((N, d)).astype(np.float32)
    Tg = rng.standard_normal((N, d)).astype(np.float32)
    flat = np.concatenate([v.ravel() for v in sd.values()]).tolist()
    got = run_node(f"""
        const m = new bf.SharedExpertMoE({{modelDim: {d}, hiddenDim: {h}, numExperts: {E}, topK: {k}, seed: 21}});
        const flat = {json.dumps(flat)}; let o = 0;
        for (const p of m.parameters()) {{ p.data.set(flat.slice(o, o + p.numel)); o += p.numel; }}
        const X = {json.dumps(X.tolist())}, T = {json.dumps(Tg.tolist())};
        m.zeroGrad();
        const outs = [], experts = [], gates = [], xs = [], probs = [];
        const counts = new Float32Array({E});
        for (let i = 0; i < X.length; i++) {{
          const f = m.forward(X[i]);
          outs.push(Array.from(f.output)); experts.push(f.route.experts); gates.push(f.route.gates);
          m.backward(f.output.map((v, j) => v - T[i][j]), f.cache);
          xs.push(f.cache.x); probs.push(f.route.probs);
          for (const e of f.route.experts) counts[e] += 1;
        }}
        const disp = counts.reduce((a, b) => a + b, 0) || 1;
        const fv = Float32Array.from(counts, c => c / disp);
        for (let i = 0; i < xs.length; i++) m.auxGradStep(xs[i], probs[i], fv, 0.3 * {E} / X.length);
        console.log(JSON.stringify({{outs, experts, gates, grads: m.gradients().map(g => Array.from(g.data))}}));
    """)
    with Tape() as tape:
        out, ctx, aux = m.forward(ev.tensor(X), aux_scale=0.3 * E / N)
    o = out.numpy()
    assert np.abs(o - np.array(got["outs"])).max() <= 1e-5 * max(1, np.abs(o).max())
    assert ctx.sel.numpy().tolist() == got["experts"]
    sel, gates, _ = m.route(ev.tensor(X))
    np.testing.assert_allclose(gates, np.array(got["gates"]), rtol=1e-5, atol=1e-7)
    g = m.named_grads(tape.backward({out: ev.tensor((o - Tg).astype(np.float32))}))
    for (k_, v), js in zip(g.items(), got["grads"]):
        assert np.abs(v.ravel() - np.array(js)).max() <= 1e-4, k_


def test_checkpointed_backward_is_identical(device):
    m = EvermindLM(EvermindLMConfig(11, 6, 3, 3, 5, 4, 2, seed=8))
    m.load_state_dict(perturbed(m.state_dict(), np.random.default_rng(3)))
    toks = [3, 1, 4, 1, 5, 9, 2, 6]
    la, ga = m.loss_and_grads(toks)
    lb, gb = m.loss_and_grads(toks, checkpoint=True)
    assert la == lb
    for k in ga:
        assert np.array_equal(ga[k], gb[k]), k


def test_generate_greedy_sampled_topk(device):
    m = EvermindLM(EvermindLMConfig(12, 6, 1, 3, 5, 3, 2, seed=2))
    m.load_state_dict(perturbed(m.state_dict(), np.random.default_rng(5), s=2.0))
    logits = m.forward(ev.tensor(np.array([3, 4], np.uint32))).numpy()[-1]
    assert m.generate([3, 4], 1) == [int(np.argmax(logits))]
    a = m.generate([3, 4], 6, temperature=1.5, seed=7)
    assert a == m.generate([3, 4], 6, temperature=1.5, seed=7) and all(0 <= t < 12 for t in a)
    assert m.generate([3, 4], 1, temperature=5.0, seed=3, top_k=1) == [int(np.argmax(logits))]
    assert m.generate([3, 4], 3, stop_token=m.generate([3, 4], 1)[0]) == m.generate([3, 4], 1)


@pytest.mark.skipif(bf_missing, reason="node or the builderforce npm package (BUILDERFORCE_MEMORY_ENGINE=dir) absent")
def test_generate_equals_builderforce(device):
    cfg = dict(vocabSize=12, dModel=6, numLayers=1, convKernel=3, hiddenDim=5, numExperts=3, topK=2)
    m = EvermindLM(EvermindLMConfig.from_builderforce(dict(cfg, seed=2)))
    sd = perturbed(m.state_dict(), np.random.default_rng(5), s=2.0)
    m.load_state_dict(sd)
    flat = np.concatenate([v.ravel() for v in sd.values()]).tolist()
    got = run_node(f"""
        const lm = new bf.EvermindLM({json.dumps(dict(cfg, seed=2))});
        const flat = {json.dumps(flat)}; let o = 0;
        for (const p of lm.parameters()) {{ p.data.set(flat.slice(o, o + p.data.length)); o += p.data.length; }}
        console.log(JSON.stringify({{g: lm.generate([3, 4], {{maxNewTokens: 6}}),
                                    s: lm.generate([3, 4], {{maxNewTokens: 6, temperature: 1.5, seed: 7}})}}));
    """)
    assert m.generate([3, 4], 6) == got["g"]
    assert m.generate([3, 4], 6, temperature=1.5, seed=7) == got["s"]


def test_load_state_dict_checks_without_downloading(device, monkeypatch):
    from evermind_vk.errors import ShapeError
    from evermind_vk.runtime.tensor import Tensor
    lm = EvermindLM(EvermindLMConfig(11, 6, 2, 3, 5, 3, 2, seed=4))
    moe = SharedExpertMoE(MoEConfig(model_dim=6, hidden_dim=5, num_experts=3, top_k=2, seed=4))
    for m in (lm, moe):
        sd = m.state_dict()
        key = next(k for k in sd if k.endswith("w1"))
        monkeypatch.setattr(Tensor, "numpy", lambda self: pytest.fail("load_state_dict downloaded a tensor"))
        with pytest.raises(ShapeError, match="shape"):
            m.load_state_dict(dict(sd, **{key: np.zeros(sd[key].shape[0] + 1, np.float32)}))
        with pytest.raises(ShapeError, match="missing"):
            m.load_state_dict({k: v for k, v in sd.items() if k != key})
        m.load_state_dict(sd)
        monkeypatch.undo()
        assert all(np.array_equal(v, sd[k]) for k, v in m.state_dict().items())
