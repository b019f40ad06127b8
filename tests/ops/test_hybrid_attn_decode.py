"""ops.hybrid_attn_decode, a whole attention layer of HybridMambaModel for the newest token of each sequence in one
dispatch (templates/decode.comp.j2, decode_layer's section without RoPE and MLP, with biases): against a float64
numpy layer on the same f32 inputs (hypothesis over heads, head dims, cache lengths, positions, slots, batch,
layer 0's embedding lookup and the last layer's final norm and head), against the model's per-op step, the whole
fused step of a mixed stack against its per-op step, its refusals, and the decode step's path rule for
HybridMamba launches with attention layers (runtime.select.decode.plan)."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import ShapeError, UnsupportedError
from evermind_vk.ops.decode import hyper_words
from evermind_vk.runtime.select import decode as select_decode
from oracle import U32, assert_final, assert_kv_caches, assert_within, cpu_like, embedded_rows, gpu_like, rms

NAMES = ("wn", "wqkv", "bqkv", "wo", "bo")


def make(rng, d, scale=0.3):
    """A layer's weights (HATTN_WEIGHTS order), f32."""
    n = lambda *s: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    return dict(wn=(1 + 0.2 * rng.standard_normal(d)).astype(np.float32), wqkv=n(3 * d, d), bqkv=n(3 * d),
                wo=n(d, d), bo=n(d))


def oracle(x, w, kc, vc, items, eps):
    """float64 layer (models/mamba.py _attention_step, one token) for each item (x [R, d]); kc, vc [slots, L, H, D]
    float64, updated in place. Returns x out."""
    W = {k: v.astype(np.float64) for k, v in w.items()}
    H, D = kc.shape[2], kc.shape[3]
    d = x.shape[1]
    xo = np.zeros_like(x)
    for r, (pos, slot, _, _) in enumerate(items):
        qkv = W["wqkv"] @ rms(x[r], W["wn"], eps) + W["bqkv"]
        q = qkv[:d].reshape(H, D)
        kc[slot, pos] = qkv[d:2 * d].reshape(H, D)
        vc[slot, pos] = qkv[2 * d:].reshape(H, D)
        a = np.zeros((H, D))
        for hh in range(H):
            s = kc[slot, :pos + 1, hh] @ q[hh] / math.sqrt(D)
            p = np.exp(s - s.max())
            a[hh] = (p / p.sum()) @ vc[slot, :pos + 1, hh]
        xo[r] = x[r] + W["wo"] @ a.reshape(-1) + W["bo"]
    return xo


def run(x, w, kc, vc, items, eps, ids=None, table=None, final=None, head=None):
    """hybrid_attn_decode on the device: (x out, k cache, v cache, y or None, logits or None) as numpy."""
    xt, kct, vct = ev.tensor(x), ev.tensor(kc), ev.tensor(vc)
    logits = None if head is None else ev.empty((x.shape[0], head.shape[0]), "f32")
    y = ops.hybrid_attn_decode(xt, ev.tensor(hyper_words(items)), kct, vct, [ev.tensor(w[k]) for k in NAMES], eps=eps,
                               ids=None if ids is None else ev.tensor(np.concatenate([[3, 1, 4], ids]).astype(np.uint32)),
                               table=None if table is None else ev.tensor(table), ids_offset=3,
                               final_norm=None if final is None else ev.tensor(final),
                               head=None if head is None else ev.tensor(head), logits=logits)  # ids after 3 words
    return (xt.numpy(), kct.numpy(), vct.numpy(), None if y is None else y.numpy(),
            None if logits is None else logits.numpy())


@given(R=st.integers(1, 9), H=st.integers(1, 3), D=st.sampled_from([4, 8, 12]), L=st.integers(1, 19),
       embed=st.booleans(), final=st.sampled_from(["no", "norm", "head"]), seed=st.integers(0, 2**31))
def test_hybrid_attn_decode_matches_oracle(device, R, H, D, L, embed, final, seed):
    rng = np.random.default_rng(seed)
    d, slots, eps = H * D, 9, 1e-5  # R > 2: several sequences a workgroup on CPU devices
    w = make(rng, d)
    x = rng.standard_normal((R, d)).astype(np.float32)
    kc0, vc0 = (rng.standard_normal((slots, L, H, D)).astype(np.float32) for _ in range(2))
    items = [(int(rng.integers(0, L)), int(s), 0, 0) for s in rng.permutation(slots)[:R]]
    for pos, slot, _, _ in items:  # rows past the position hold garbage the kernel must not read
        kc0[slot, pos + 1:] = vc0[slot, pos + 1:] = 1e4
    V = 7  # the vocabulary of the embedding and the head: not a multiple of 4
    table = rng.standard_normal((V, d)).astype(np.float32)
    x, x_in, ids = embedded_rows(rng, x, table, embed)
    wf = (1 + 0.2 * rng.standard_normal(d)).astype(np.float32) if final != "no" else None
    kc, vc = kc0.astype(np.float64), vc0.astype(np.float64)
    want_x = oracle(x_in, w, kc, vc, items, eps)
    got_x, got_k, got_v, got_y, got_l = run(x, w, kc0, vc0, items, eps, ids, table if embed else None, wf,
                                            table if final == "head" else None)
    n = 2 * d + L  # the longest chain of reductions a value passes through, roughly
    tol = 64 * n * U32
    assert_within(got_x, want_x, tol * (np.abs(want_x) + np.abs(want_x).max()) + 1e-30, "x")
    assert_kv_caches(got_k, got_v, kc, vc, kc0, vc0, items, tol)
    assert_final(got_y, got_l, want_x, wf, table, final, eps, tol)


def _model(layers, **kw):
    from evermind_vk.models import HybridMambaConfig, HybridMambaModel
    m = HybridMambaModel(HybridMambaConfig(numLayers=len(layers), layers=layers, seed=4, **kw))
    rng = np.random.default_rng(3)
    m.load_state_dict({k: (v + 0.05 * rng.standard_normal(v.shape)).astype(np.float32)
                       for k, v in m.state_dict().items()})  # nonzero biases
    return m


def test_hybrid_attn_decode_equals_the_model_step(device):
    """The default HybridMamba attention layer (d 64, 4 heads of 16) against the model's per-op step
    (_attention_step) from the same caches, 7 sequences at several positions and slots of 9 (four, then three, a
    workgroup on CPU devices), twice in a row (the second token attends over the first's key and value)."""
    m = _model(("attention",))
    rng = np.random.default_rng(5)
    L = 40
    st_ref, st = m.init_state(9, L), m.init_state(9, L)
    k0, v0 = (rng.standard_normal(st[0]["k"].shape).astype(np.float32) for _ in range(2))
    for s in (st_ref, st):
        s[0]["k"], s[0]["v"] = ev.tensor(k0), ev.tensor(v0)
    x0 = rng.standard_normal((7, 64)).astype(np.float32)
    x_ref, x = ev.tensor(x0), ev.tensor(x0)
    W = [m.params["layer0." + n] for n in ops.HATTN_WEIGHTS]
    items = [(0, 2), (17, 0), (38, 1), (5, 8), (30, 3), (1, 4), (22, 6)]
    for step in range(2):
        hyper = ev.tensor(hyper_words([(p + step, s, 0, 0) for p, s in items]))
        x_ref = m._attention_step(x_ref, 0, st_ref[0], hyper)
        assert ops.hybrid_attn_decode(x, hyper, st[0]["k"], st[0]["v"], W) is None
        for got, want, what in ((x, x_ref, "x"), (st[0]["k"], st_ref[0]["k"], "k"), (st[0]["v"], st_ref[0]["v"], "v")):
            g, e = got.numpy(), want.numpy()
            assert np.allclose(g, e, rtol=2e-5, atol=2e-5 * np.abs(e).max()), what


@pytest.mark.parametrize("layers", [("attention", "mamba1", "attention"), ("mamba2", "attention")])
def test_fused_stack_step_equals_the_per_op_step(device, layers):
    """A mixed stack's fused step (HybridMambaModel._fused_step_ids: attention layers on hybrid_attn_decode, the
    first also looking up the embedding rows, the last also computing the final norm and the tied head's logits;
    mamba1 layers on mamba1_decode, others per-op) against its per-op step (_step_ids), 3 sequences in slots 1..3
    of 4, five tokens in a row: the same logits and the same caches."""
    m = _model(layers, vocabSize=40, dModel=16, nHeads=2, dState=4, dConv=3)
    fused = tuple(k for k in ("mamba1", "attention") if k in layers)
    st_ref, st = m.init_state(4, 8), m.init_state(4, 8)
    rng = np.random.default_rng(1)
    for t in range(5):
        ids = ev.tensor(rng.integers(0, 40, 3).astype(np.uint32))
        hyper = ev.tensor(hyper_words([(t, 1 + r, r, 0) for r in range(3)]))
        want = m._step_ids(ids, st_ref, 1, hyper).numpy()
        got = m._fused_step_ids(ids, st, 3, 1, 0, head=True, hyper=hyper, fused=fused).numpy()
        assert np.allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max()), t
    for i, kind in enumerate(layers):
        if kind == "attention":
            for key in ("k", "v"):
                g, e = st[i][key].numpy(), st_ref[i][key].numpy()
                assert np.allclose(g, e, rtol=1e-4, atol=1e-4 * np.abs(e).max()), (i, key)


def test_hybrid_attn_decode_refusals(device):
    rng = np.random.default_rng(0)
    hyper = ev.tensor(hyper_words([(0, 0, 0, 0)]))
    w = make(rng, 12)  # 2 heads of 6: not whole vec4s
    cache = ev.zeros((1, 4, 2, 6))
    with pytest.raises(UnsupportedError, match="shapes"):
        ops.hybrid_attn_decode(ev.tensor(rng.standard_normal((1, 12)).astype(np.float32)), hyper, cache, cache,
                               [ev.tensor(w[k]) for k in NAMES])
    w = make(rng, 8)
    x, ws = ev.tensor(rng.standard_normal((1, 8)).astype(np.float32)), [ev.tensor(w[k]) for k in NAMES]
    cache = ev.zeros((1, 4, 2, 4))
    with pytest.raises(ShapeError, match="together"):
        ops.hybrid_attn_decode(x, hyper, cache, cache, ws, ids=ev.tensor(np.zeros(1, np.uint32)))
    with pytest.raises(ShapeError, match="together"):  # a head without the final norm
        ops.hybrid_attn_decode(x, hyper, cache, cache, ws, head=ev.zeros((5, 8)), logits=ev.zeros((1, 5)))
    with pytest.raises(UnsupportedError, match="loop cap"):  # a head too long for one workgroup's loops
        ops.hybrid_attn_decode(x, hyper, cache, cache, ws, final_norm=ev.tensor(w["wn"]), head=ev.zeros((600000, 8)),
                               logits=ev.zeros((1, 600000)))
    with pytest.raises(ShapeError, match="caches"):  # heads * head dim != d
        ops.hybrid_attn_decode(x, hyper, ev.zeros((1, 4, 2, 8)), ev.zeros((1, 4, 2, 8)), ws)
    with pytest.raises(ShapeError):  # wQKV not [3d, d]
        ops.hybrid_attn_decode(x, hyper, cache, cache, [ws[0], ws[3], ws[2], ws[3], ws[4]])
    with pytest.raises(ShapeError):  # hyper words for fewer items than rows
        ops.hybrid_attn_decode(x, ev.tensor(hyper_words([])), cache, cache, ws)


def test_hybrid_attention_path_rule(device):
    dev, K = cpu_like(ev.get_device()), select_decode.Knobs
    # the default HybridMamba mixed stack (mamba-attn): each kind on its fused kernel, the head folded into the last
    mixed = select_decode.MambaLaunch(64, 128, 16, 4, 4, layers=("mamba1", "attention"), heads=4, max_len=64)
    p = select_decode.plan(mixed, dev, K())
    assert p.layers == ("mamba1", "attention") and p.variant.op == "mamba1_decode" and not p.why and not p.head
    assert select_decode.plan(dataclasses.replace(mixed, vocab=256), dev, K()).head
    attn = dataclasses.replace(mixed, layers=("attention",))
    assert select_decode.plan(attn, dev, K()).variant.op == "hybrid_attn_decode"
    assert [(lambda q: (q.seqs, q.variant.flags))(select_decode.plan(dataclasses.replace(attn, items=b), dev, K()))
            for b in (1, 2, 3, 8, 32)] == [(1, ()), (1, ()), (2, ("q4",)), (4, ("q4",)), (4, ("q4",))]
    # a longer context: fewer sequences fit a workgroup's shared memory (4 heads' scores of 1024 positions)
    assert select_decode.plan(dataclasses.replace(attn, items=8, max_len=1024), dev, K()).seqs == 1
    assert select_decode.plan(mixed, dev, K("0")).variant is None  # the kill switch
    gpu = gpu_like(dev)
    assert select_decode.plan(mixed, gpu, K()).variant is None  # CPU devices only, unforced
    assert select_decode.plan(mixed, gpu, K("1")).layers == ("mamba1", "attention")
    # an attention layer the kernel cannot run: the mixed stack's mamba1 layers stay fused unforced (the head then
    # apart: the last layer is per-op); forced, an error naming why
    for launch, why in ((dataclasses.replace(mixed, d=24, d_inner=48, heads=4), "head"),  # head dim 6
                        (dataclasses.replace(mixed, max_len=8192), "context"),  # the scores' shared memory
                        (dataclasses.replace(mixed, dtype="f16"), "f16")):
        p = select_decode.plan(dataclasses.replace(launch, vocab=256), dev, K())
        if launch.dtype == "f32":
            assert p.layers == ("mamba1",) and p.variant.op == "mamba1_decode" and not p.head, (launch, p)
        assert any("hybrid_attn_decode" in w and why in w for w in p.why), (launch, p.why)
        with pytest.raises(UnsupportedError, match="EVERMIND_VK_DECODE_FUSED=1"):
            select_decode.plan(launch, dev, K("1"))
    p = select_decode.plan(dataclasses.replace(mixed, layers=("mamba2", "mamba3")), dev, K())
    assert p.variant is None and "no mamba1 or attention layers" in p.why[0]
    with pytest.raises(UnsupportedError, match="EVERMIND_VK_DECODE_FUSED=1.*no mamba1 or attention"):
        select_decode.plan(dataclasses.replace(mixed, layers=("mamba2", "mamba3")), dev, K("1"))
    # either side of the weight bound (4 d^2 an attention layer): the per-op step for the larger unless forced
    big, bigger = (dataclasses.replace(attn, d=352, heads=4), dataclasses.replace(attn, d=368, heads=4))
    assert big.attention_weights <= select_decode.CPU_MAX_LAYER_WEIGHTS < bigger.attention_weights
    assert select_decode.plan(big, dev, K()).variant is not None
    p = select_decode.plan(bigger, dev, K())
    assert p.variant is None and "every core" in p.why[0]
    assert select_decode.plan(bigger, dev, K("1")).variant is not None
    # every plan keeps the loop count of its launch within MAX_LOOP (lavapipe's cap is 16x above it)
    for launch in (attn, big, dataclasses.replace(attn, vocab=256, items=8), dataclasses.replace(attn, max_len=512)):
        q = select_decode.plan(launch, dev, K())
        push = select_decode.hattn_push(launch, launch.items, 1, 1, int(q.head), q.seqs)
        assert select_decode.hattn_loop_count(push, q.variant.spec["WG"]) <= select_decode.MAX_LOOP
