"""ops.decode_layer, a whole TransformerLM block for the newest token of each sequence in one dispatch
(templates/decode.comp.j2): against a float64 numpy block on the same f32 inputs (hypothesis over shapes,
positions, slots, GQA, the SwiGLU limit and layer 0's embedding lookup), against the unfused decode ops, its
refusals, and the decode step's path rule (runtime.select.decode.plan)."""
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
from oracle import U32, assert_kv_caches, assert_within, cpu_like, embedded_rows, gpu_like, rms

NAMES = ("wn1", "wq", "wk", "wv", "wo", "wn2", "wgu", "wd")


def make(rng, d, H, KVH, D, F, scale=0.3):
    """A block's weights (LAYER_WEIGHTS order) and the next norm, f32."""
    n = lambda *s: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    g = lambda: (1 + 0.2 * rng.standard_normal(d)).astype(np.float32)  # noqa: E731
    return dict(wn1=g(), wq=n(H * D, d), wk=n(KVH * D, d), wv=n(KVH * D, d), wo=n(d, H * D), wn2=g(),
                wgu=n(2 * F, d), wd=n(d, F), wn3=g())


def rope(x, pos, theta):
    """Half-split RoPE of each head (rows of x [heads, D]) at position pos (rope.comp.j2)."""
    D = x.shape[1]
    half = D // 2
    ang = pos * theta ** (-2.0 * np.arange(half) / D)
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[:, :half], x[:, half:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=1)


def silu(g):
    return g / (1 + np.exp(-np.clip(g, -15, 15)))


def oracle(x, w, kc, vc, items, eps, theta, limit):
    """float64 block for each item (x [R, d]); kc, vc [slots, L, KVH, D] float64, updated in place.
    Returns (x out, y = rms_norm(x out, wn3))."""
    W = {k: v.astype(np.float64) for k, v in w.items()}
    KVH, D = kc.shape[2], kc.shape[3]
    H = W["wq"].shape[0] // D
    G = H // KVH
    xo, yo = np.zeros_like(x), np.zeros_like(x)
    for r, (pos, slot, _, _) in enumerate(items):
        h = rms(x[r], W["wn1"], eps)
        q = rope((W["wq"] @ h).reshape(H, D), pos, theta)
        kc[slot, pos] = rope((W["wk"] @ h).reshape(KVH, D), pos, theta)
        vc[slot, pos] = (W["wv"] @ h).reshape(KVH, D)
        a = np.zeros((H, D))
        for hh in range(H):
            s = kc[slot, :pos + 1, hh // G] @ q[hh] / math.sqrt(D)
            p = np.exp(s - s.max())
            a[hh] = (p / p.sum()) @ vc[slot, :pos + 1, hh // G]
        x2 = x[r] + W["wo"] @ a.reshape(-1)
        gu = W["wgu"] @ rms(x2, W["wn2"], eps)
        F = gu.size // 2
        g = silu(gu[:F]) * gu[F:]
        if limit > 0:
            g = np.clip(g, -limit, limit)
        xo[r] = x2 + W["wd"] @ g
        yo[r] = rms(xo[r], W["wn3"], eps)
    return xo, yo


def run(x, w, kc, vc, items, eps, theta, limit, ids=None, table=None, head=None):
    """decode_layer on the device: (x out, y, k cache, v cache, logits or None) as numpy."""
    xt, kct, vct = ev.tensor(x), ev.tensor(kc), ev.tensor(vc)
    logits = None if head is None else ev.empty((x.shape[0], head.shape[0]), "f32")
    y = ops.decode_layer(xt, ev.tensor(hyper_words(items)), kct, vct, [ev.tensor(w[k]) for k in NAMES],
                         ev.tensor(w["wn3"]), eps=eps, theta=theta, limit=limit,
                         ids=None if ids is None else ev.tensor(np.concatenate([[3, 1, 4], ids]).astype(np.uint32)),
                         table=None if table is None else ev.tensor(table), ids_offset=0 if ids is None else 3,
                         head=None if head is None else ev.tensor(head), logits=logits)  # ids after 3 other words
    return xt.numpy(), y.numpy(), kct.numpy(), vct.numpy(), None if logits is None else logits.numpy()


@given(R=st.integers(1, 9), heads=st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3)]), D=st.sampled_from([8, 16]),
       d=st.sampled_from([4, 8, 32, 36]), F=st.sampled_from([4, 12, 20]), L=st.integers(1, 19),
       limit=st.sampled_from([0.0, 0.05]), embed=st.booleans(), head=st.booleans(), seed=st.integers(0, 2**31))
def test_decode_layer_matches_oracle(device, R, heads, D, d, F, L, limit, embed, head, seed):
    H, KVH = heads
    rng = np.random.default_rng(seed)
    slots, eps, theta = 9, 1e-5, 500.0  # R > 2: several sequences a workgroup on CPU devices (select.decode.layer_seqs)
    w = make(rng, d, H, KVH, D, F)
    x = rng.standard_normal((R, d)).astype(np.float32)
    kc0, vc0 = (rng.standard_normal((slots, L, KVH, D)).astype(np.float32) for _ in range(2))
    items = [(int(rng.integers(0, L)), int(s), 0, 0) for s in rng.permutation(slots)[:R]]
    for pos, slot, _, _ in items:  # rows past the position hold garbage the kernel must not read
        kc0[slot, pos + 1:] = vc0[slot, pos + 1:] = 1e4
    table = None
    V = 5  # the vocabulary of the embedding and the head: not a multiple of 4
    wh = rng.standard_normal((V, d)).astype(np.float32) if head else None
    if embed:
        table = wh if head else rng.standard_normal((V, d)).astype(np.float32)
    x, x_in, ids = embedded_rows(rng, x, table, embed)
    kc, vc = kc0.astype(np.float64), vc0.astype(np.float64)
    want_x, want_y = oracle(x_in, w, kc, vc, items, eps, theta, limit)
    got_x, got_y, got_k, got_v, got_l = run(x, w, kc0, vc0, items, eps, theta, limit, ids, table, wh)
    n = d + F + H * D + L  # the longest chain of reductions a value passes through, roughly
    tol = 64 * n * U32
    assert_within(got_x, want_x, tol * (np.abs(want_x) + np.abs(want_x).max()) + 1e-30, "x")
    assert_within(got_y, want_y, tol * (np.abs(want_y) + np.abs(want_y).max()) + 1e-30, "y")
    if head:
        want_l = want_y @ wh.T.astype(np.float64)
        assert_within(got_l, want_l, tol * (np.abs(want_l) + np.abs(want_l).max()) + 1e-30, "logits")
    assert_kv_caches(got_k, got_v, kc, vc, kc0, vc0, items, tol)


def unfused(x, w, kc, vc, items, eps, theta, limit):
    """The same block through the unfused decode step's ops (train/decode.py before decode_layer)."""
    H = w["wq"].shape[0] // kc.shape[3]
    KVH, D = kc.shape[2], kc.shape[3]
    R, L = x.shape[0], kc.shape[1]
    t = {k: ev.tensor(v) for k, v in w.items()}
    hyper, xt, kct, vct = ev.tensor(hyper_words(items)), ev.tensor(x), ev.tensor(kc), ev.tensor(vc)
    h, _ = ops.rms_norm(xt, t["wn1"], eps)
    lin = lambda a, name: ops.matmul(a, t[name], transpose_b=True)  # noqa: E731
    q = ops.rope_kv_at(lin(h, "wq").reshape(R, H, D), lin(h, "wk").reshape(R, KVH, D), lin(h, "wv").reshape(R, KVH, D),
                       hyper, kct, vct, 1, theta)
    a = ops.attention_decode(q, kct, vct, hyper, ev.empty((R * H * L,), "f32"))
    xt, h, _ = ops.add_rms_norm(xt, lin(a.reshape(R, H * D), "wo"), t["wn2"], eps)
    g = ops.glu(lin(h, "wgu"), "silu", limit)
    xt, y, _ = ops.add_rms_norm(xt, lin(g, "wd"), t["wn3"], eps)
    return xt.numpy(), y.numpy(), kct.numpy(), vct.numpy()


@pytest.mark.parametrize("limit", [0.0, 0.02])
def test_decode_layer_equals_the_unfused_ops(device, limit):
    """The default model's block shape (d 64, 4/2 heads of 16, ff 128) at several positions and slots, 7
    sequences (four, then three, a workgroup on CPU devices)."""
    rng = np.random.default_rng(7)
    d, H, KVH, D, F, L, slots = 64, 4, 2, 16, 128, 40, 8
    w = make(rng, d, H, KVH, D, F, scale=0.1)
    x = rng.standard_normal((7, d)).astype(np.float32)
    kc, vc = (rng.standard_normal((slots, L, KVH, D)).astype(np.float32) for _ in range(2))
    items = [(0, 2, 0, 0), (17, 0, 0, 0), (39, 1, 0, 0), (5, 7, 0, 0), (38, 3, 0, 0), (1, 4, 0, 0), (22, 6, 0, 0)]
    table = rng.standard_normal((256, d)).astype(np.float32)
    got = run(x, w, kc, vc, items, 1e-6, 10000.0, limit, head=table)
    want = unfused(x, w, kc, vc, items, 1e-6, 10000.0, limit)
    want = want + (ops.matmul(ev.tensor(want[1]), ev.tensor(table), transpose_b=True).numpy(),)
    for g, e, what in zip(got, want, ("x", "y", "k cache", "v cache", "logits")):
        assert np.allclose(g, e, rtol=2e-5, atol=2e-5 * np.abs(e).max()), what


def test_decode_layer_refusals(device):
    rng = np.random.default_rng(0)
    w = make(rng, 16, 4, 2, 4, 8)  # head dim 4: not whole vec4 pairs
    args = (ev.tensor(rng.standard_normal((1, 16)).astype(np.float32)), ev.tensor(hyper_words([(0, 0, 0, 0)])),
            ev.zeros((1, 4, 2, 4)), ev.zeros((1, 4, 2, 4)), [ev.tensor(w[k]) for k in NAMES], ev.tensor(w["wn3"]))
    with pytest.raises(UnsupportedError, match="head dim"):
        ops.decode_layer(*args)
    w = make(rng, 16, 2, 1, 8, 8)
    x = ev.tensor(rng.standard_normal((1, 16)).astype(np.float32))
    ws = [ev.tensor(w[k]) for k in NAMES]
    cache = ev.zeros((1, 4, 1, 8))
    hyper = ev.tensor(hyper_words([(0, 0, 0, 0)]))
    with pytest.raises(ShapeError, match="together"):
        ops.decode_layer(x, hyper, cache, cache, ws, ev.tensor(w["wn3"]), ids=ev.tensor(np.zeros(1, np.uint32)))
    with pytest.raises(ShapeError, match="together"):
        ops.decode_layer(x, hyper, cache, cache, ws, ev.tensor(w["wn3"]), head=ev.zeros((5, 16)))
    with pytest.raises(UnsupportedError, match="loop cap"):  # a head too long for one workgroup's loops
        ops.decode_layer(x, hyper, cache, cache, ws, ev.tensor(w["wn3"]), head=ev.zeros((300000, 16)),
                         logits=ev.zeros((1, 300000)))
    with pytest.raises(ShapeError):
        ops.decode_layer(x, hyper, ev.zeros((1, 4, 2, 8)), ev.zeros((1, 4, 2, 8)), ws, ev.tensor(w["wn3"]))
    with pytest.raises(ShapeError):
        ops.decode_layer(x, ev.tensor(hyper_words([])), cache, cache, ws, ev.tensor(w["wn3"]))



def test_decode_path_rule(device):
    dev = cpu_like(ev.get_device())
    small = select_decode.Launch(64, 4, 2, 16, 128, 256)
    p = select_decode.plan(small, dev, select_decode.Knobs())
    assert p.variant.op == "decode_layer" and not p.why and not p.head  # no vocabulary: no head to fold
    assert select_decode.plan(dataclasses.replace(small, vocab=256), dev, select_decode.Knobs()).head
    # sequences a workgroup: the batch over CPU_GROUPS workgroups, at most SEQS_MAX; one on GPUs
    assert [select_decode.plan(dataclasses.replace(small, items=b), dev, select_decode.Knobs()).seqs
            for b in (1, 2, 3, 8, 32)] == [1, 1, 2, 4, 4]
    assert select_decode.plan(dataclasses.replace(small, items=8), gpu_like(dev), select_decode.Knobs("1")).seqs == 1
    # the q4 variant (a loop over the workgroup's sequences) only where a workgroup runs several
    assert [select_decode.plan(dataclasses.replace(small, items=b), dev, select_decode.Knobs()).variant.flags
            for b in (1, 2, 3)] == [(), (), ("q4",)]
    assert not select_decode.plan(dataclasses.replace(small, vocab=50000), dev, select_decode.Knobs()).head
    assert select_decode.plan(small, dev, select_decode.Knobs("0")).variant is None  # the kill switch
    gpu = gpu_like(dev)
    assert select_decode.plan(small, gpu, select_decode.Knobs()).variant is None  # CPU devices only, unforced
    assert select_decode.plan(small, gpu, select_decode.Knobs("1")).variant is not None
    for launch, why in ((dataclasses.replace(small, adapters=True), "LoRA"),
                        (dataclasses.replace(small, quantized=True), "quantized"),
                        (dataclasses.replace(small, dtype="f16"), "f16"),
                        (dataclasses.replace(small, head_dim=4), "head dim"),
                        (select_decode.Launch(2048, 16, 8, 128, 5632, 256), "MAX_LOOP"),
                        (dataclasses.replace(small, max_len=8192), "shared memory")):
        p = select_decode.plan(launch, dev, select_decode.Knobs())
        assert p.variant is None and any(why in w for w in p.why), (launch, p.why)
        with pytest.raises(UnsupportedError, match="EVERMIND_VK_DECODE_FUSED=1"):
            select_decode.plan(launch, dev, select_decode.Knobs("1"))
    # a block too large for one core a sequence (the 23.7M model's): the per-op step unless forced
    big = select_decode.Launch(512, 8, 4, 64, 1408, 256)
    p = select_decode.plan(big, dev, select_decode.Knobs())
    assert p.variant is None and "every core" in p.why[0]
    assert select_decode.plan(big, dev, select_decode.Knobs("1")).variant is not None
    with pytest.raises(UnsupportedError, match="want 0 or 1"):
        select_decode.plan(small, dev, select_decode.Knobs("yes"))
