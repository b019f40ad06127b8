"""ops.evermind_layer, a whole EvermindLM block for the newest token of each sequence in one dispatch
(templates/decode_evermind.comp.j2): against a float64 numpy block on the same f32 inputs (hypothesis over
shapes, conv taps, experts and top-k, windows' slots, layer 0's embedding lookup and the last block's head),
the router's tie-breaking, against the per-op step (EvermindLM._step_ids), its refusals, and the EvermindLM
decode step's path rule (runtime.select.decode.plan with a ConvLaunch)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import ShapeError, UnsupportedError
from evermind_vk.ops.decode import HEADER, ITEM, hyper_words
from evermind_vk.runtime.select import decode as select_decode
from oracle import U32, assert_within, cpu_like, embedded_rows, gpu_like, rms


def make(rng, d, h, E, K, scale=0.4):
    """A block's parameters (f32): conv [d, K], norm gains, router, stacked experts (0: the shared one)."""
    n = lambda *s: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    g = lambda: (1 + 0.2 * rng.standard_normal(d)).astype(np.float32)  # noqa: E731
    Z = E + 1
    return dict(conv=n(d, K) * 2, n_conv=g(), n_moe=g(), wr=n(E, d) * 3, w1=n(Z * h, d), b1=n(Z * h),
                w2=n(Z * d, h), b2=n(Z * d))


def oracle(x, P, win, items, k, eps):
    """float64 block for each item (x [R, d]); win [slots * (K - 1), d] float64, shifted in place. Returns x out."""
    W = {n: v.astype(np.float64) for n, v in P.items()}
    d, K = W["conv"].shape
    E = W["wr"].shape[0]
    h = W["w1"].shape[0] // (E + 1)
    out = np.zeros_like(x)
    for r, (_, slot, _, _) in enumerate(items):
        n = rms(x[r], W["n_conv"], eps)
        rows = np.vstack([win[slot * (K - 1):(slot + 1) * (K - 1)], n[None]])  # oldest first, newest last
        a = x[r] + sum(W["conv"][:, j] * rows[K - 1 - j] for j in range(K))
        win[slot * (K - 1):(slot + 1) * (K - 1)] = rows[1:]
        m = rms(a, W["n_moe"], eps)
        lg = W["wr"] @ m
        sel = sorted(range(E), key=lambda e: (-lg[e], e))[:k]  # the largest first, ties to the lower index
        g = np.exp(lg[sel] - lg[sel[0]])
        g /= g.sum()
        ffn = lambda z: (W["w2"][z * d:(z + 1) * d] @ np.maximum(W["w1"][z * h:(z + 1) * h] @ m  # noqa: E731
                                                                  + W["b1"][z * h:(z + 1) * h], 0) + W["b2"][z * d:(z + 1) * d])
        out[r] = a + ffn(0) + sum(ge * ffn(e + 1) for e, ge in zip(sel, g))
    return out


def run(x, P, win, items, k, eps, ids=None, table=None, head=None):
    """evermind_layer on the device: (x out, window, logits or None) as numpy."""
    R = x.shape[0]
    words = hyper_words(items)
    at = words.size + 2  # the ids after two other words
    if ids is not None:
        words = np.concatenate([words, [7, 7], ids]).astype(np.uint32)
    xt = ev.tensor(x)
    wt = None if win is None else ev.tensor(win)
    logits = None if head is None else ev.empty((R, head.shape[0]), "f32")
    ops.evermind_layer(xt, ev.tensor(words), wt, ev.tensor(P["conv"]), ev.tensor(P["n_conv"]), ev.tensor(P["n_moe"]),
                       [ev.tensor(P[n]) for n in ("wr", "w1", "b1", "w2", "b2")], top_k=k, eps=eps,
                       table=None if table is None else ev.tensor(table), ids_offset=at if ids is not None else 0,
                       head=None if head is None else ev.tensor(head), logits=logits)
    return xt.numpy(), None if wt is None else wt.numpy(), None if logits is None else logits.numpy()


# R > 2: several sequences a workgroup on CPU devices (the q4 variant), R >= 16: eight (q8; select.decode.plan)
@given(R=st.one_of(st.integers(1, 9), st.integers(16, 23)), d=st.sampled_from([4, 8, 20, 64]),
       h=st.sampled_from([4, 12, 32]), ek=st.sampled_from([(1, 1), (2, 1), (3, 2), (4, 2), (6, 3), (5, 5)]),
       K=st.integers(1, 4), embed=st.booleans(), head=st.booleans(), seed=st.integers(0, 2**31))
def test_evermind_layer_matches_oracle(device, R, d, h, ek, K, embed, head, seed):
    check_oracle(R, d, h, ek, K, embed, head, seed)


@pytest.mark.parametrize("R", range(16, 24))
def test_evermind_layer_q8_matches_oracle(device, R):
    """The q8 variant with each count of sequences 1..8 in the last workgroup (R = 16 + n: workgroups of 8, 8, n),
    experts that some of a workgroup's sequences use and others not."""
    flags = select_decode.plan(select_decode.ConvLaunch(20, 12, 6, 3, 3, 5, items=R), device,
                              select_decode.Knobs("1")).variant.flags
    assert flags == ("q8",) or device.info.type != "cpu"  # GPUs: one sequence a workgroup
    check_oracle(R, 20, 12, (6, 3), 3, R % 2 == 0, R % 3 == 0, R)


def check_oracle(R, d, h, ek, K, embed, head, seed):
    E, k = ek
    rng = np.random.default_rng(seed)
    slots, eps = 25, 1e-5
    P = make(rng, d, h, E, K)
    x = rng.standard_normal((R, d)).astype(np.float32)
    win0 = rng.standard_normal((slots * (K - 1), d)).astype(np.float32) if K > 1 else None
    items = [(0, int(s), 0, 0) for s in rng.permutation(slots)[:R]]
    table = None
    V = 5  # the vocabulary of the embedding and the head: not a multiple of 4
    wh = rng.standard_normal((V, d)).astype(np.float32) if head else None
    if embed:
        table = wh if head else rng.standard_normal((V, d)).astype(np.float32)
    x, x_in, ids = embedded_rows(rng, x, table, embed)
    win = np.zeros((0, d)) if win0 is None else win0.astype(np.float64)
    want_x = oracle(x_in, P, win, items, k, eps)
    got_x, got_w, got_l = run(x, P, win0, items, k, eps, ids, table, wh)
    tol = 64 * (2 * d + 2 * h + K) * U32  # the longest chain of reductions a value passes through, roughly
    scale = np.abs(want_x).max()
    assert_within(got_x, want_x, tol * (np.abs(want_x) + scale) + 1e-30, "x")
    if win0 is not None:
        assert_within(got_w, win, tol * (np.abs(win) + 1), "window")
        untouched = np.ones(slots, bool)
        untouched[[s for _, s, _, _ in items]] = False
        rows = np.repeat(untouched, K - 1)
        assert np.array_equal(got_w[rows], win0[rows])  # other slots' windows are left as they are
    if head:
        want_l = want_x @ wh.T.astype(np.float64)
        assert_within(got_l, want_l, tol * d * (np.abs(want_l) + np.abs(want_l).max()) + 1e-30, "logits")


def test_router_ties_go_to_the_lower_expert(device):
    """Experts 1 and 3 of 4 have the same router row (exactly tied logits, the largest): top 1 picks expert 1,
    top 2 both; experts 1 and 3 have different weights, so the choice shows in x."""
    rng = np.random.default_rng(3)
    d, h, E, K = 8, 4, 4, 2
    P = make(rng, d, h, E, K)
    P["wr"][:] = 0
    P["wr"][1] = P["wr"][3] = 1.0
    x = np.abs(rng.standard_normal((1, d))).astype(np.float32) + 0.5
    for k in (1, 2, 3):
        win = np.zeros((K - 1, d), np.float32)
        want = oracle(x.astype(np.float64), P, win.astype(np.float64), [(0, 0, 0, 0)], k, 1e-5)
        got, _, _ = run(x, P, win, [(0, 0, 0, 0)], k, 1e-5)
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max()), k


def test_evermind_layer_equals_the_per_op_step(device):
    """The bench's default model (d 64, hidden 128, 4 experts, top 2, 3 taps, 256 tokens) with random weights:
    logits of the fused step equal the per-op step's (EvermindLM._step_ids) over several tokens of 3 sequences
    (the windows carry)."""
    from evermind_vk.models import EvermindLM, EvermindLMConfig
    m = EvermindLM(EvermindLMConfig(256, seed=9))
    rng = np.random.default_rng(1)
    m.load_state_dict({n: (rng.standard_normal(v.shape) * (0.3 if v.ndim == 2 else 0.1) + (v if v.ndim == 1 else 0))
                       .astype(np.float32) for n, v in m.state_dict().items()})
    c, R = m.config, 3
    st_ref, st_fused = m.init_state(R), m.init_state(R)
    for step in range(4):
        toks = rng.integers(0, 256, R).astype(np.uint32)
        want = m._step_ids(ev.tensor(toks), st_ref).numpy()
        words = np.concatenate([hyper_words([(0, r, r, 0) for r in range(R)]), toks]).astype(np.uint32)
        hyper, x, logits = ev.tensor(words), ev.empty((R, c.d_model), "f32"), ev.empty((R, 256), "f32")
        for i in range(c.num_layers):
            t = m.moe[i].t
            last = i + 1 == c.num_layers
            ops.evermind_layer(x, hyper, st_fused[i], m.plain[f"layer{i}.conv"], m.plain[f"layer{i}.nConv"],
                               m.plain[f"layer{i}.nMoe"], [t[n] for n in ("wr", "w1", "b1", "w2", "b2")],
                               top_k=c.top_k, table=m.plain["emb"] if i == 0 else None, ids_offset=HEADER + ITEM * R,
                               head=m.plain["emb"] if last else None, logits=logits if last else None)
        got = logits.numpy()
        assert np.allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max()), step
        assert (got.argmax(1) == want.argmax(1)).all()
        for a, b in zip(st_ref, st_fused):
            assert np.allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_evermind_layer_refusals(device):
    rng = np.random.default_rng(0)
    P = make(rng, 6, 4, 2, 2)  # d 6: not whole vec4s
    moe = lambda P: [ev.tensor(P[n]) for n in ("wr", "w1", "b1", "w2", "b2")]  # noqa: E731
    hyper = ev.tensor(hyper_words([(0, 0, 0, 0)]))
    args = lambda P, win: (ev.tensor(np.ones((1, P["conv"].shape[0]), np.float32)), hyper, win,  # noqa: E731
                           ev.tensor(P["conv"]), ev.tensor(P["n_conv"]), ev.tensor(P["n_moe"]), moe(P))
    with pytest.raises(UnsupportedError, match="multiples of 4"):
        ops.evermind_layer(*args(P, ev.zeros((1, 6))), top_k=1)
    P = make(rng, 8, 4, 2, 2)
    with pytest.raises(ShapeError, match="window"):  # 2 taps need a window
        ops.evermind_layer(*args(P, None), top_k=1)
    with pytest.raises(ShapeError, match="together"):
        ops.evermind_layer(*args(P, ev.zeros((1, 8))), top_k=1, head=ev.zeros((5, 8)))
    with pytest.raises(ShapeError, match="for width 8"):  # a head of another width
        ops.evermind_layer(*args(P, ev.zeros((1, 8))), top_k=1, head=ev.zeros((5, 4)), logits=ev.zeros((1, 5)))
    with pytest.raises(UnsupportedError, match="loop cap"):  # a head too long for one workgroup's loops
        ops.evermind_layer(*args(P, ev.zeros((1, 8))), top_k=1, head=ev.zeros((600000, 8)),
                           logits=ev.zeros((1, 600000)))
    with pytest.raises(UnsupportedError, match="top_k"):
        ops.evermind_layer(*args(P, ev.zeros((1, 8))), top_k=3)



def test_evermind_decode_path_rule(device):
    dev, kn = cpu_like(ev.get_device()), select_decode.Knobs
    small = select_decode.ConvLaunch(64, 128, 4, 2, 3, 256)  # the bench's default model
    p = select_decode.plan(small, dev, kn())
    assert p.variant.op == "evermind_layer" and not p.why and p.head
    assert not select_decode.plan(dataclasses.replace(small, vocab=50000), dev, kn()).head  # head apart
    # sequences a workgroup: the batch over CPU_GROUPS workgroups, up to 4 (the q4 variant) or, where a workgroup
    # gets 8, 8 (q8); one on GPUs
    plans = [select_decode.plan(dataclasses.replace(small, items=b), dev, kn()) for b in (1, 2, 3, 8, 14, 16, 32)]
    assert [(p.seqs, p.variant.flags) for p in plans] == [(1, ()), (1, ()), (2, ("q4",)), (4, ("q4",)), (4, ("q4",)),
                                                          (8, ("q8",)), (8, ("q8",))]
    assert select_decode.plan(dataclasses.replace(small, items=8), gpu_like(dev), kn("1")).seqs == 1
    assert select_decode.plan(small, dev, kn("0")).variant is None  # the kill switch
    assert select_decode.plan(small, gpu_like(dev), kn()).variant is None  # CPU devices only, unforced
    assert select_decode.plan(small, gpu_like(dev), kn("1")).variant is not None
    # the shared-memory and loop-cap boundaries: hidden 16k is the most the 1024 vec4s hold at top 2 ...
    edge = select_decode.ConvLaunch(4, 1360, 2, 2, 3, 0)
    assert select_decode.conv_shared_vec4s(edge) == 1022 and select_decode.plan(edge, dev, kn()).variant
    assert "shared memory" in select_decode.plan(dataclasses.replace(edge, hidden=1368), dev, kn()).why[0]
    # ... and loop counts (the conv's taps): the most taps within MAX_LOOP run, one more is refused
    n = lambda L: select_decode.conv_layer_loop_count(select_decode.conv_layer_push(L, 1, 1), 64)  # noqa: E731
    fits = max(K for K in range(1, 5000) if n(dataclasses.replace(small, conv_kernel=K)) <= select_decode.MAX_LOOP)
    assert select_decode.plan(dataclasses.replace(small, conv_kernel=fits), dev, kn("1")).variant
    over = dataclasses.replace(small, conv_kernel=fits + 1)
    for launch, why in ((over, "MAX_LOOP"), (dataclasses.replace(small, d=66), "multiples of 4"),
                        (dataclasses.replace(small, experts=65, top_k=2), "experts"),
                        (dataclasses.replace(small, dtype="f16"), "f16")):
        p = select_decode.plan(launch, dev, kn())
        assert p.variant is None and any(why in w for w in p.why), (launch, p.why)
        with pytest.raises(UnsupportedError, match="EVERMIND_VK_DECODE_FUSED=1"):
            select_decode.plan(launch, dev, kn("1"))
    # a block too large for one core a sequence: the per-op step unless forced
    big = select_decode.ConvLaunch(512, 1024, 4, 2, 3, 256)
    assert big.layer_weights > select_decode.CPU_MAX_LAYER_WEIGHTS
    p = select_decode.plan(big, dev, kn())
    assert p.variant is None and "every core" in p.why[0]
    with pytest.raises(UnsupportedError, match="want 0 or 1"):
        select_decode.plan(small, dev, kn("yes"))
