"""ops.mamba1_decode, a whole mamba1 block of HybridMambaModel for one new token of each sequence in one dispatch
(templates/decode.comp.j2): against a float64 numpy block on the same f32 inputs (hypothesis over shapes, conv
widths, dt ranks, batch, state slots, both discretizations, layer 0's embedding lookup and the last block's final
norm and head), against the model's per-op step, its refusals, and the decode step's path rule for HybridMamba
launches (runtime.select.decode.plan)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import ShapeError, UnsupportedError
from evermind_vk.runtime.select import decode as select_decode
from oracle import U32, assert_final, assert_within, cpu_like, embedded_rows, gpu_like, rms

NAMES = ("wn", "win", "bin", "wconv", "bconv", "wx", "bx", "wdt", "bdt", "alog", "dv", "wout", "bout")


def make(rng, d, Di, N, K, DR, scale=0.3):
    """A block's weights (MAMBA1_WEIGHTS order), f32; A_log spread so that Δ A crosses the zero-order hold's
    series bound |Δ A| = 1 both ways."""
    n = lambda *s: (rng.standard_normal(s) * scale).astype(np.float32)  # noqa: E731
    return dict(wn=(1 + 0.2 * rng.standard_normal(d)).astype(np.float32), win=n(2 * Di, d), bin=n(2 * Di),
                wconv=n(Di, K), bconv=n(Di), wx=n(DR + 2 * N, Di), bx=n(DR + 2 * N), wdt=n(Di, DR), bdt=n(Di),
                alog=rng.uniform(-2, 2.5, (Di, N)).astype(np.float32), dv=n(Di) + 1, wout=n(d, Di), bout=n(d))


def silu(g):
    return g / (1 + np.exp(-np.clip(g, -15, 15)))


def softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def oracle(x, w, conv, h, first, eps, disc):
    """float64 block (models/mamba.py _mamba1_step) for each row of x [R, d]; conv [slots*(K-1), Di] and h
    [slots, Di, N] float64, updated in place. Returns x out."""
    W = {k: v.astype(np.float64) for k, v in w.items()}
    Di, K = W["wconv"].shape
    N = W["alog"].shape[1]
    DR = W["wx"].shape[0] - 2 * N
    xo = np.zeros_like(x)
    A = -np.exp(np.clip(W["alog"], -10, 5))
    for r in range(x.shape[0]):
        b = first + r
        hh = rms(x[r], W["wn"], eps)
        xz = W["win"] @ hh + W["bin"]
        xc, z = xz[:Di], xz[Di:]
        win = conv[b * (K - 1):(b + 1) * (K - 1)] if K > 1 else np.zeros((0, Di))
        full = np.concatenate([win, xc[None]])  # oldest first; tap j reads the row j back from the newest
        c = W["bconv"] + sum(W["wconv"][:, j] * full[K - 1 - j] for j in range(K))
        if K > 1:
            conv[b * (K - 1):(b + 1) * (K - 1)] = full[1:]
        u = silu(c)
        xp = W["wx"] @ u + W["bx"]
        dt = softplus(W["wdt"] @ xp[:DR] + W["bdt"])
        Bv, Cv = xp[DR:DR + N], xp[DR + N:]
        dA = dt[:, None] * A
        bterm = np.expm1(dA) / A if disc == "zoh" else np.broadcast_to(dt[:, None], dA.shape)
        h[b] = np.exp(dA) * h[b] + bterm * Bv[None] * u[:, None]
        y = (h[b] @ Cv + W["dv"] * u) * silu(z)
        xo[r] = x[r] + W["wout"] @ y + W["bout"]
    return xo


def run(x, w, conv, h, first, eps, disc, ids=None, table=None, final=None, head=None):
    """mamba1_decode on the device: (x out, conv, h, y or None, logits or None) as numpy."""
    xt, ct, ht = ev.tensor(x), None if conv is None else ev.tensor(conv), ev.tensor(h)
    logits = None if head is None else ev.empty((x.shape[0], head.shape[0]), "f32")
    y = ops.mamba1_decode(xt, [ev.tensor(w[k]) for k in NAMES], ct, ht, first=first, eps=eps, discretization=disc,
                          ids=None if ids is None else ev.tensor(np.concatenate([[3, 1], ids]).astype(np.uint32)),
                          table=None if table is None else ev.tensor(table), ids_offset=2,
                          final_norm=None if final is None else ev.tensor(final),
                          head=None if head is None else ev.tensor(head), logits=logits)  # ids after 2 other words
    return (xt.numpy(), None if ct is None else ct.numpy(), ht.numpy(), None if y is None else y.numpy(),
            None if logits is None else logits.numpy())


# R > 2: several sequences a workgroup on CPU devices (the q4 variant), R >= 16: eight (q8; select.decode.plan)
@given(R=st.one_of(st.integers(1, 9), st.integers(16, 23)), d=st.sampled_from([4, 8, 20]), expand=st.sampled_from([1, 2]),
       N=st.sampled_from([4, 8]), K=st.sampled_from([1, 2, 4]), DR=st.sampled_from([1, 3, 4, 6]),
       disc=st.sampled_from(["zoh", "euler"]), embed=st.booleans(), final=st.sampled_from(["no", "norm", "head"]),
       seed=st.integers(0, 2**31))
def test_mamba1_decode_matches_oracle(device, R, d, expand, N, K, DR, disc, embed, final, seed):
    check_oracle(R, d, expand, N, K, DR, disc, embed, final, seed)


@pytest.mark.parametrize("R", range(16, 24))
def test_mamba1_decode_q8_matches_oracle(device, R):
    """The q8 variant with each count of sequences 1..8 in the last workgroup (R = 16 + n: workgroups of 8, 8, n)."""
    flags = select_decode.plan(select_decode.MambaLaunch(8, 16, 4, 4, 3, items=R), device,
                              select_decode.Knobs("1")).variant.flags
    assert flags == ("q8",) or device.info.type != "cpu"  # GPUs: one sequence a workgroup
    check_oracle(R, 8, 2, 4, 4, 3, "zoh", R % 2 == 0, ("no", "norm", "head")[R % 3], R)


def check_oracle(R, d, expand, N, K, DR, disc, embed, final, seed):
    rng = np.random.default_rng(seed)
    Di, slots, eps = expand * d, 25, 1e-5
    first = int(rng.integers(0, slots - R + 1))
    w = make(rng, d, Di, N, K, DR)
    x = rng.standard_normal((R, d)).astype(np.float32)
    conv0 = rng.standard_normal((slots * (K - 1), Di)).astype(np.float32) if K > 1 else None
    h0 = rng.standard_normal((slots, Di, N)).astype(np.float32)
    V = 7  # the vocabulary of the embedding and the head: not a multiple of 4
    table = rng.standard_normal((V, d)).astype(np.float32)
    x, x_in, ids = embedded_rows(rng, x, table, embed)
    wf = (1 + 0.2 * rng.standard_normal(d)).astype(np.float32) if final != "no" else None
    conv = None if conv0 is None else conv0.astype(np.float64)
    h = h0.astype(np.float64)
    want_x = oracle(x_in, w, conv if conv is not None else np.zeros((0, Di)), h, first, eps, disc)
    got_x, got_c, got_h, got_y, got_l = run(x, w, conv0, h0, first, eps, disc, ids, table if embed else None, wf,
                                            table if final == "head" else None)
    n = d + Di + DR + N + K  # the longest chain of reductions a value passes through, roughly
    tol = 64 * n * U32
    assert_within(got_h, h, tol * (np.abs(h) + np.abs(h).max()) + 1e-30, "h")
    assert_within(got_x, want_x, tol * (np.abs(want_x) + np.abs(want_x).max()) + 1e-30, "x")
    if conv is not None:
        assert_within(got_c, conv, tol * (np.abs(conv) + np.abs(conv).max()), "conv window")
        rows = np.ones(slots * (K - 1), bool)
        rows[first * (K - 1):(first + R) * (K - 1)] = False  # the other slots' windows are left as they were
        assert np.array_equal(got_c[rows], conv0[rows])
    others = np.ones(slots, bool)
    others[first:first + R] = False
    assert np.array_equal(got_h[others], h0[others])
    assert_final(got_y, got_l, want_x, wf, table, final, eps, tol)


def test_mamba1_decode_equals_the_model_step(device):
    """The default HybridMamba block shape (d 64, dInner 128, dState 16, dConv 4, dt rank 4) against the model's
    per-op step (_mamba1_step) from the same state, 7 sequences from slot 1 of 9 (four, then three, a workgroup on
    CPU devices), twice in a row (the shifted windows and states feed the second token)."""
    from evermind_vk.models import HybridMambaConfig, HybridMambaModel
    from evermind_vk.ops.decode import MAMBA1_WEIGHTS
    m = HybridMambaModel(HybridMambaConfig(numLayers=1, seed=4))
    rng = np.random.default_rng(3)
    m.load_state_dict({k: (v + 0.05 * rng.standard_normal(v.shape)).astype(np.float32)
                       for k, v in m.state_dict().items()})  # nonzero biases
    st_ref, st = m.init_state(9), m.init_state(9)
    x0 = rng.standard_normal((7, 64)).astype(np.float32)
    conv0 = rng.standard_normal(st[0]["conv"].shape).astype(np.float32)
    h0 = rng.standard_normal(st[0]["h"].shape).astype(np.float32)
    for s in (st_ref, st):
        s[0]["conv"], s[0]["h"] = ev.tensor(conv0), ev.tensor(h0)
    P = m.params
    x_ref, x = ev.tensor(x0), ev.tensor(x0)
    for _ in range(2):
        x_ref = m._mamba1_step(x_ref, 0, st_ref[0], 1)
        ops.mamba1_decode(x, [P["layer0." + n] for n in MAMBA1_WEIGHTS], st[0]["conv"], st[0]["h"], first=1)
        for got, want, what in ((x, x_ref, "x"), (st[0]["conv"], st_ref[0]["conv"], "conv"),
                                (st[0]["h"], st_ref[0]["h"], "h")):
            g, e = got.numpy(), want.numpy()
            assert np.allclose(g, e, rtol=2e-5, atol=2e-5 * np.abs(e).max()), what


def test_mamba1_decode_refusals(device):
    rng = np.random.default_rng(0)
    w = make(rng, 8, 16, 6, 3, 1)  # dState 6: not whole vec4s
    args = (ev.tensor(rng.standard_normal((1, 8)).astype(np.float32)), [ev.tensor(w[k]) for k in NAMES],
            ev.zeros((2, 16)), ev.zeros((1, 16, 6)))
    with pytest.raises(UnsupportedError, match="dState"):
        ops.mamba1_decode(*args)
    w = make(rng, 8, 16, 4, 3, 1)
    x, ws = ev.tensor(rng.standard_normal((2, 8)).astype(np.float32)), [ev.tensor(w[k]) for k in NAMES]
    conv, h = ev.zeros((4, 16)), ev.zeros((2, 16, 4))
    with pytest.raises(ShapeError, match="slot"):  # two sequences from slot 1 of 2
        ops.mamba1_decode(x, ws, conv, h, first=1)
    with pytest.raises(ShapeError, match="together"):
        ops.mamba1_decode(x, ws, conv, h, ids=ev.tensor(np.zeros(2, np.uint32)))
    with pytest.raises(ShapeError, match="together"):  # a head without the final norm
        ops.mamba1_decode(x, ws, conv, h, head=ev.zeros((5, 8)), logits=ev.zeros((2, 5)))
    with pytest.raises(ShapeError, match="dConv"):
        ops.mamba1_decode(x, ws, None, h)
    with pytest.raises(UnsupportedError, match="loop cap"):  # a head too long for one workgroup's loops
        ops.mamba1_decode(x, ws, conv, h, final_norm=ev.tensor(w["wn"]), head=ev.zeros((600000, 8)),
                          logits=ev.zeros((2, 600000)))
    with pytest.raises(ValueError, match="discretization"):
        ops.mamba1_decode(x, ws, conv, h, discretization="none?")



def test_mamba_decode_path_rule(device):
    dev, K = cpu_like(ev.get_device()), select_decode.Knobs
    small = select_decode.MambaLaunch(64, 128, 16, 4, 4)  # the default HybridMamba block
    p = select_decode.plan(small, dev, K())
    assert p.variant.op == "mamba1_decode" and not p.why and not p.head  # no vocabulary: no head to fold
    assert select_decode.plan(dataclasses.replace(small, vocab=256), dev, K()).head
    assert not select_decode.plan(dataclasses.replace(small, vocab=50000), dev, K()).head
    # sequences a workgroup: the batch over CPU_GROUPS workgroups, up to 4 (the q4 variant) or, where a workgroup
    # gets 8, 8 (q8); one on GPUs
    assert [(lambda q: (q.seqs, q.variant.flags))(select_decode.plan(dataclasses.replace(small, items=b), dev, K()))
            for b in (1, 2, 3, 8, 14, 16, 32)] == [(1, ()), (1, ()), (2, ("q4",)), (4, ("q4",)), (4, ("q4",)),
                                                   (8, ("q8",)), (8, ("q8",))]
    assert select_decode.plan(dataclasses.replace(small, items=8), gpu_like(dev), K("1")).seqs == 1
    assert select_decode.plan(small, dev, K("0")).variant is None  # the kill switch
    gpu = gpu_like(dev)
    assert select_decode.plan(small, gpu, K()).variant is None  # CPU devices only, unforced
    assert select_decode.plan(small, gpu, K("1")).variant.op == "mamba1_decode"
    for launch, why in ((dataclasses.replace(small, layers=("mamba2", "mamba3")), "no mamba1 or attention layers"),
                        (dataclasses.replace(small, layers=("mamba2", "attention")), "whole heads (0)"),  # no heads
                        (dataclasses.replace(small, dtype="f16"), "f16"),
                        (dataclasses.replace(small, d_state=6), "dState"),
                        (select_decode.MambaLaunch(1024, 2048, 16, 4, 64), "MAX_LOOP"),
                        (select_decode.MambaLaunch(512, 4096, 16, 4, 32), "shared memory")):
        p = select_decode.plan(launch, dev, K())
        assert p.variant is None and any(why in w for w in p.why), (launch, p.why)
        with pytest.raises(UnsupportedError, match="EVERMIND_VK_DECODE_FUSED=1"):
            select_decode.plan(launch, dev, K("1"))
    # either side of the weight bound (both within the loop cap): a block of at most CPU_MAX_LAYER_WEIGHTS weights
    # is fused, a larger one is the per-op step's unless forced
    big, bigger = select_decode.MambaLaunch(256, 512, 16, 4, 16), select_decode.MambaLaunch(640, 320, 16, 4, 40)
    assert big.layer_weights <= select_decode.CPU_MAX_LAYER_WEIGHTS < bigger.layer_weights
    assert select_decode.plan(big, dev, K()).variant is not None
    p = select_decode.plan(bigger, dev, K())
    assert p.variant is None and "every core" in p.why[0]
    assert select_decode.plan(bigger, dev, K("1")).variant is not None
    # every plan keeps the loop count of its launch within MAX_LOOP (lavapipe's cap is 16x above it)
    for launch in (small, big, dataclasses.replace(small, vocab=256, items=8)):
        q = select_decode.plan(launch, dev, K())
        push = select_decode.mamba_push(launch, launch.items, 1, 1, int(q.head), q.seqs)
        assert select_decode.mamba_loop_count(push, q.variant.spec["WG"]) <= select_decode.MAX_LOOP
