"""Fused (flash-style) attention against the float64 numpy oracle on the same rounded inputs, against
the matmul path, and the selection rule. Every configuration family the table has is forced at least
once where it fits lavapipe's shared memory: the CPU rows of flag uR (R rows a workgroup of 8 lanes that
split the streamed rows: lavapipe's default where D % 4 == 0), one thread per row (TPR 1, the CPU fallback),
rows split over 2 and over 4 threads of a subgroup (the GPU layouts)."""
import importlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import evermind_vk as ev
from evermind_vk.runtime.select import attention as select_attention
from evermind_vk import ops
from evermind_vk.runtime import variants
from evermind_vk.runtime.select import matmul as select_matmul
import ref
from oracle import U16, U32, TINY16, TINY32, assert_within, rounded

attention_module = importlib.import_module("evermind_vk.ops.attention")
NP = {"f32": np.float32, "f16": np.float16}
GQA = st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3), (3, 1)])
# "" = the rule's pick (on lavapipe uR where D % 4 == 0, else TPR 1); d64_p1_r32x32 forces the TPR 1 shared-tile
# layout, d64_p1_u8_r8x32 the uR layout with R 8 (a forced variant that cannot run a launch leaves it to the
# rule); the others force the GPU layouts (tiles that fit lavapipe's 32 KiB).
CONFIGS = ["", "d64_p1_r32x32", "d64_p1_u8_r8x32", "d64_p1_u8_sa_r8x32", "d32_p2_r64x64", "d32_p4_r16x32",
           "d64_p2_r32x32", "d128_p4_r16x16"]


def _close(got, want, n, dtype, what, mag=None):
    """|got - want| <= tol (|want| + mag): mag defaults to max|want|, or is the size of the terms that cancel."""
    tol = 8 * (n + 8) * U32 + (2 * U16 if dtype == "f16" else 0)
    if mag is None:
        mag = np.abs(want).max() if want.size else 0.0
    tiny = TINY16 if dtype == "f16" else TINY32
    assert_within(np.asarray(got, np.float64), want, tol * (np.abs(want) + mag) + 2 * tiny, what)


def _backward_ref(Q, K, V, DO, O, causal, scale):
    """float64 gradients with D = rowsum(dO * O) from the output O the device stored (as the fused
    backward reads it: in f16 its rounding moves D, and dP - D cancels), and the magnitudes of the
    terms each gradient sums (for the tolerance: dP - D cancels)."""
    S, H, D = Q.shape
    G = H // K.shape[1]
    _, P = ref.attention(Q, K, V, causal, scale)
    grads = [np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)]
    mags = [np.zeros_like(Q), np.zeros_like(K), np.zeros_like(V)]
    for h in range(H):
        kv = h // G
        dp, Dh = DO[:, h] @ V[:, kv].T, (DO[:, h] * O[:, h]).sum(-1, keepdims=True)
        ds = P[h] * (dp - Dh)
        ads = P[h] * (np.abs(DO[:, h]) @ np.abs(V[:, kv]).T + (np.abs(DO[:, h]) * np.abs(O[:, h])).sum(-1, keepdims=True))
        grads[0][:, h] = scale * ds @ K[:, kv]
        mags[0][:, h] = scale * ads @ np.abs(K[:, kv])
        grads[1][:, kv] += scale * ds.T @ Q[:, h]
        mags[1][:, kv] += scale * ads.T @ np.abs(Q[:, h])
        grads[2][:, kv] += P[h].T @ DO[:, h]
        mags[2][:, kv] += P[h].T @ np.abs(DO[:, h])
    return grads, mags


def _data(rng, shape, dtype):
    return rng.standard_normal(shape).astype(NP[dtype])


def _check(dtype, B, S, H, KVH, D, causal, seed, scale=None):
    rng = np.random.default_rng(seed)
    q, k, v = _data(rng, (B * S, H, D), dtype), _data(rng, (B * S, KVH, D), dtype), _data(rng, (B * S, KVH, D), dtype)
    do = _data(rng, (B * S, H, D), dtype)
    qt, kt, vt = ev.tensor(q), ev.tensor(k), ev.tensor(v)
    out, lse = ops.attention(qt, kt, vt, causal=causal, scale=scale, batch=B)
    assert lse.shape == (B * H, S) and lse.dtype == "f32"  # the fused path: no S x S matrix
    dq, dk, dv = ops.attention_backward(qt, kt, vt, ev.tensor(do), lse, causal=causal, scale=scale, batch=B, out=out)
    sc = 1 / np.sqrt(D) if scale is None else scale
    G = H // KVH
    n = 4 * (S + D) * G
    for b in range(B):
        sl = slice(b * S, (b + 1) * S)
        Q, K, V, DO = (rounded(a[sl], dtype) for a in (q, k, v, do))
        wout, P = ref.attention(Q, K, V, causal, sc)
        _close(out.numpy()[sl], wout, n, dtype, f"out (seq {b})")
        # the saved logsumexp, base 2, of the scaled scores
        s = np.stack([sc * Q[:, h] @ K[:, h // G].T for h in range(H)])
        if causal:
            s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
        mx = s.max(-1, keepdims=True)
        want_lse = (mx[..., 0] + np.log(np.exp(s - mx).sum(-1))) * np.log2(np.e)
        _close(lse.numpy()[b * H:(b + 1) * H], want_lse, n, "f32", f"lse (seq {b})")
        O = out.numpy()[sl].astype(np.float64)
        grads, mags = _backward_ref(Q, K, V, DO, O, causal, sc)
        for got, want, mag, name in zip((dq, dk, dv), grads, mags, ("dq", "dk", "dv")):
            _close(got.numpy()[sl], want, n, dtype, f"{name} (seq {b})", mag=mag)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@settings(max_examples=10)
@given(B=st.integers(1, 3), S=st.integers(1, 70), heads=GQA, D=st.sampled_from([1, 3, 8, 12, 16, 29, 32, 47, 64, 100]),
       causal=st.booleans(), seed=st.integers(0, 2**31))
def test_fused_attention(device, monkeypatch, config, dtype, B, S, heads, D, causal, seed):
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    monkeypatch.setenv("EVERMIND_VK_ATTENTION_VARIANT", config)
    _check(dtype, B, S, heads[0], heads[1], D, causal, seed)


@pytest.mark.parametrize("config, D", [("d32_p2_r64x64", 32), ("d32_p4_r16x32", 30), ("d64_p2_r32x32", 64),
                                       ("d64_p2_r32x32", 37), ("d128_p4_r16x16", 128), ("d128_p4_r16x16", 99)])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_layouts_with_every_part_of_a_row_used(device, monkeypatch, config, D, causal):
    """Head dims that put data in every thread's part of a row (a split row sums all its parts)."""
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    monkeypatch.setenv("EVERMIND_VK_ATTENTION_VARIANT", config)
    launch = select_attention.Launch(dtype="f32", S=1, H=1, KVH=1, D=D, batch=1)
    assert select_attention.fused_variants(launch, ev.get_device(), config)["fwd"].name.endswith(config)
    _check("f32", 2, 37, 4, 2, D, causal, D)


# Every uR row family on lavapipe (HD 8-64, R 8 and 16; d64_p1_u16's forward needs 33 KiB, so it runs dq and dkv
# only, at exactly 32 KiB, the forward taking the rule's pick) at head dims that fill the row or leave its last
# vec4s past D (zeros), sequences that end inside a block of 8 and inside the R rows, R rows past S (stored nowhere).
# Flag sa (the same rows, the lanes' partials combined by subgroupAdd / subgroupMax, no shared memory): every
# family too, d64_p1_u16's forward included.
UR_ROWS = [("d8_p1_u16_r16x32", 4), ("d16_p1_u8_r8x32", 16), ("d16_p1_u16_r16x32", 12), ("d32_p1_u8_r8x32", 32),
           ("d32_p1_u16_r16x32", 20), ("d64_p1_u8_r8x32", 60), ("d64_p1_u16_r16x32", 64)]


@pytest.mark.parametrize("config, D", UR_ROWS + [(c.replace("_r", "_sa_r"), D) for c, D in UR_ROWS])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_cpu_rows(device, monkeypatch, config, D, dtype, causal):
    if device.info.type != "cpu":
        pytest.skip("uR rows are picked on CPU devices (forced ones run anywhere, but these shapes target lavapipe)")
    if "_sa_" in config and not device.has("subgroup_arithmetic_8"):
        pytest.skip("no subgroup arithmetic in subgroups of 8 (or EVERMIND_VK_DISABLE_SUBGROUP_ARITHMETIC)")
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    monkeypatch.setenv("EVERMIND_VK_ATTENTION_VARIANT", config)
    launch = select_attention.Launch(dtype=dtype, S=37, H=4, KVH=2, D=D, batch=2)
    got = select_attention.fused_variants(launch, ev.get_device(), config)
    fits = ("dq", "dkv") if config == "d64_p1_u16_r16x32" else ("fwd", "dq", "dkv")
    assert all(got[s].name.endswith(config) for s in fits), {s: v.name for s, v in got.items()}
    _check(dtype, 2, 37, 4, 2, D, causal, D)
    _check(dtype, 1, 70, 3, 1, D, causal, D + 1, scale=0.7)  # G = 3: dkv sums three heads' queries


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@settings(max_examples=4)
@given(S=st.integers(1, 40), heads=GQA, D=st.sampled_from([33, 64, 100, 128]), causal=st.booleans(),
       seed=st.integers(0, 2**31))
def test_fused_attention_wide_heads(device, monkeypatch, dtype, S, heads, D, causal, seed):
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    _check(dtype, 1, S, heads[0], heads[1], D, causal, seed, scale=0.3)


def test_fused_attention_long_sequence(device, monkeypatch):
    """2,100 keys (66 tiles of 32, the last partial) in one causal row reduction."""
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    _check("f32", 1, 2100, 1, 1, 8, True, 7)


def _check_matmul(dtype, B, S, H, KVH, D, causal, seed, recompute=False):
    """The matmul path (EVERMIND_VK_ATTENTION=matmul) on B packed sequences against the float64 oracle per
    sequence: out, the saved probabilities [B*H, S, S] and the three gradients. In f16 the oracle rounds
    the scores, probabilities and dP/dS to f16 where the device stores them (tests/ops/test_lm_ops)."""
    rng = np.random.default_rng(seed)
    q, k, v = _data(rng, (B * S, H, D), dtype), _data(rng, (B * S, KVH, D), dtype), _data(rng, (B * S, KVH, D), dtype)
    do = _data(rng, (B * S, H, D), dtype)
    qt, kt, vt = ev.tensor(q), ev.tensor(k), ev.tensor(v)
    out, probs = ops.attention(qt, kt, vt, causal=causal, batch=B, save_probs=True)
    assert probs.shape == (B * H, S, S)
    dq, dk, dv = ops.attention_backward(qt, kt, vt, ev.tensor(do), None if recompute else probs, causal=causal,
                                        batch=B)
    sc, G = 1 / np.sqrt(D), H // KVH
    rnd = (lambda a: rounded(a, "f16")) if dtype == "f16" else ref.same
    n = 4 * (S + D) * (64 if dtype == "f16" else 1)
    for b in range(B):
        sl = slice(b * S, (b + 1) * S)
        Q, K, V, DO = (rounded(a[sl], dtype) for a in (q, k, v, do))
        wout, P = ref.attention(Q, K, V, causal, sc, rnd)
        _close(out.numpy()[sl], wout, n, dtype, f"out (seq {b})")
        _close(probs.numpy()[b * H:(b + 1) * H], P, n, dtype, f"probs (seq {b})")
        for got, want, name in zip((dq, dk, dv), ref.attention_bwd(Q, K, V, DO, causal, sc, rnd), ("dq", "dk", "dv")):
            _close(got.numpy()[sl], want, n * G, dtype, f"{name} (seq {b})")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@settings(max_examples=10)
@given(B=st.integers(1, 3), S=st.integers(1, 40), heads=GQA, D=st.sampled_from([1, 3, 8, 16, 32]),
       causal=st.booleans(), recompute=st.booleans(), seed=st.integers(0, 2**31))
def test_matmul_path_vs_oracle(device, monkeypatch, dtype, B, S, heads, D, causal, recompute, seed):
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "matmul")
    _check_matmul(dtype, B, S, *heads, D, causal, seed, recompute)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@settings(max_examples=4)
@given(B=st.integers(1, 2), S=st.integers(65, 200), heads=GQA, D=st.sampled_from([8, 16]), ways=st.integers(2, 4),
       recompute=st.booleans(), seed=st.integers(0, 2**31))
def test_matmul_path_split_along_k_vs_oracle(device, monkeypatch, dtype, B, S, heads, D, ways, recompute, seed):
    """Causal P V, dQ, dK and dV in K chunks (EVERMIND_VK_TRI_SPLIT; GPUs split long ones by variants.tri_split),
    their f32 partials summed by colsum: the same oracle as unsplit."""
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "matmul")
    monkeypatch.setenv("EVERMIND_VK_TRI_SPLIT", str(ways))
    _check_matmul(dtype, B, S, *heads, D, True, seed, recompute)


@pytest.mark.parametrize("ways", [1, 2, 3])
def test_split_products_launch_one_matmul_per_chunk(device, monkeypatch, ways):
    """A forced split runs P V and dQ as one launch per chunk and dK, dV as one per (member, chunk), and adds
    the partials with column sums (the scores and dP, K = head dim, stay whole); unsplit, dK and dV of a
    group with G = 2 still sum two member partials. The partials' launches go without barriers between them."""
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "matmul")
    monkeypatch.setenv("EVERMIND_VK_TRI_SPLIT", str(ways))
    monkeypatch.setenv("EVERMIND_VK_ATTENTION_PROBS", "keep")  # the probabilities come from the forward
    rng = np.random.default_rng(1)
    S, H, KVH, D = 150, 4, 2, 8
    q, do = (ev.tensor(rng.standard_normal((S, H, D)).astype(np.float32)) for _ in range(2))
    k, v = (ev.tensor(rng.standard_normal((S, KVH, D)).astype(np.float32)) for _ in range(2))
    with ev.record(run=False) as prog:
        out, p = ops.attention(q, k, v)
        ops.attention_backward(q, k, v, do, p, out=out)
    mm = [lb for lb in prog.labels if lb.startswith("matmul_")]
    sums = [lb for lb in prog.labels if lb.startswith("colsum")]
    assert len(mm) == 2 + 2 * ways + 2 * 2 * ways, prog.labels
    assert len(sums) >= (4 if ways > 1 else 2), prog.labels
    # chunks and members write their own rows of a workspace: no barrier between them (runtime/program.py);
    # at least every P V chunk after the first, every dQ chunk after the first and every dK and dV launch
    free = [lb for op, lb in zip(prog._ops, prog.labels) if lb.startswith("matmul_") and not op.barrier]
    assert len(free) >= 2 * (ways - 1) + 2 * 2 * ways, [(lb, op.barrier) for op, lb in zip(prog._ops, prog.labels)]


@pytest.mark.parametrize("B,H,KVH", [(1, 4, 2), (3, 4, 2), (3, 3, 1), (2, 2, 2)])
def test_matmul_path_dispatches_once_per_product(device, monkeypatch, B, H, KVH):
    """A recorded fwd + bwd on the matmul path makes one matmul dispatch per product for all B sequences
    and H heads (scores, P V, dP, dQ) and G = H / KVH for each of dK and dV, whatever B is: the loop over
    sequences (128 dispatches per layer of the 23.7M LM on the H200) must not come back."""
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "matmul")
    S, D, G = 8, 8, H // KVH
    rng = np.random.default_rng(B)
    q, do = (ev.tensor(rng.standard_normal((B * S, H, D)).astype(np.float32)) for _ in range(2))
    k, v = (ev.tensor(rng.standard_normal((B * S, KVH, D)).astype(np.float32)) for _ in range(2))
    with ev.record(run=False) as prog:
        out, p = ops.attention(q, k, v, batch=B)
        ops.attention_backward(q, k, v, do, p, batch=B, out=out)
    mm = [lb for lb in prog.labels if lb.startswith("matmul_")]
    assert len(mm) == 4 + 2 * G, prog.labels
    with ev.record(run=False) as prog:  # the backward alone, recomputing the probabilities: scores, dP, dQ, dK, dV
        ops.attention_backward(q, k, v, do, None, batch=B)
    assert len([lb for lb in prog.labels if lb.startswith("matmul_")]) == 3 + 2 * G, prog.labels


@pytest.mark.parametrize("causal", [False, True])
def test_matmul_path_tells_the_selector_each_causal_hint(device, monkeypatch, causal):
    """The tile rule for causal products (variants.TRI_TILES) sees each product's hint: scores and dP
    lower_c, P V and dQ lower_a, dK and dV upper_a; none without causality."""
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "matmul")
    seen, pick = [], variants.pick_matmul

    def spy(*a, **kw):
        seen.append(kw.get("tri", ""))
        return pick(*a, **kw)
    monkeypatch.setattr(select_matmul, "pick_matmul", spy)
    rng = np.random.default_rng(0)
    q, do = (ev.tensor(rng.standard_normal((16, 4, 8)).astype(np.float32)) for _ in range(2))
    k, v = (ev.tensor(rng.standard_normal((16, 2, 8)).astype(np.float32)) for _ in range(2))
    out, p = ops.attention(q, k, v, causal=causal)
    ops.attention_backward(q, k, v, do, p, causal=causal, out=out)
    want = ["lower_c", "lower_a", "lower_c", "lower_a"] + ["upper_a", "upper_a"] * 2
    assert seen == (want if causal else [""] * len(want))


@pytest.mark.parametrize("causal", [False, True])
def test_fused_and_matmul_paths_agree(device, monkeypatch, causal):
    rng = np.random.default_rng(3)
    B, S, H, KVH, D = 2, 37, 4, 2, 16
    q, k, v, do = (rng.standard_normal(s).astype(np.float32) for s in
                   ((B * S, H, D), (B * S, KVH, D), (B * S, KVH, D), (B * S, H, D)))
    got = {}
    for path in ("matmul", "fused"):
        monkeypatch.setenv("EVERMIND_VK_ATTENTION", path)
        out, saved = ops.attention(ev.tensor(q), ev.tensor(k), ev.tensor(v), causal=causal, batch=B)
        assert saved.shape == ((B * H, S, S) if path == "matmul" else (B * H, S))
        grads = ops.attention_backward(ev.tensor(q), ev.tensor(k), ev.tensor(v), ev.tensor(do), saved,
                                       causal=causal, batch=B, out=out)
        got[path] = [out.numpy()] + [g.numpy() for g in grads]
    for name, a, b in zip(("out", "dq", "dk", "dv"), got["matmul"], got["fused"]):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=name)


def test_recompute_and_saved_give_the_same_gradients(device, monkeypatch):
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    rng = np.random.default_rng(4)
    q, k, v, do = (ev.tensor(rng.standard_normal((9, 2, 8)).astype(np.float32)) for _ in range(4))
    out, lse = ops.attention(q, k, v)
    assert ops.attention(q, k, v, save_probs=False)[1] is None
    a = ops.attention_backward(q, k, v, do, lse, out=out)
    b = ops.attention_backward(q, k, v, do, None)
    for x, y in zip(a, b):
        assert np.array_equal(x.numpy(), y.numpy())  # deterministic kernels, no atomics


def test_fused_errors(device, monkeypatch):
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")  # the default path is the matmul one on GPUs
    q = ev.tensor(np.zeros((4, 2, 8), np.float32))
    out, lse = ops.attention(q, q, q)
    with pytest.raises(ev.ShapeError, match="logsumexp"):
        ops.attention_backward(q, q, q, q, ev.tensor(np.zeros((2, 3), np.float32)), out=out)
    with pytest.raises(ev.ShapeError, match="out"):
        ops.attention_backward(q, q, q, q, lse, out=ev.tensor(np.zeros((4, 2, 4), np.float32)))
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    wide = ev.tensor(np.zeros((2, 1, 132), np.float32))
    with pytest.raises(ev.UnsupportedError, match="no fused attention variant"):
        ops.attention(wide, wide, wide)
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "flash")
    with pytest.raises(ev.UnsupportedError, match="EVERMIND_VK_ATTENTION"):
        ops.attention(q, q, q)


def test_kill_switch_and_wide_heads_take_the_matmul_path(device, monkeypatch):
    monkeypatch.delenv("EVERMIND_VK_ATTENTION", raising=False)  # the default first, whatever the run sets
    q = ev.tensor(np.zeros((3, 1, 8), np.float32))
    fused_by_default = device.info.type == "cpu"  # the rule: fused on CPU devices unless forced
    assert ops.attention(q, q, q)[1].shape == ((1, 3) if fused_by_default else (1, 3, 3))
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "fused")
    assert ops.attention(q, q, q)[1].shape == (1, 3)
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "matmul")
    assert ops.attention(q, q, q)[1].shape == (1, 3, 3)
    monkeypatch.delenv("EVERMIND_VK_ATTENTION")
    wide = ev.tensor(np.zeros((3, 1, 160), np.float32))
    assert ops.attention(wide, wide, wide)[1].shape == (1, 3, 3)  # hd > 128: the matmul path


# -- the selection rule (pure) ------------------------------------------------------------------------
class V:
    def __init__(self, HD, ROWS, TILE, TPR, U=0, sa=False):
        u = (f"u{U}",) if U else ()
        self.name = f"a_d{HD}_p{TPR}{'_u%d' % U if U else ''}{'_sa' if sa else ''}_r{ROWS}x{TILE}"
        self.flags = (f"d{HD}", f"p{TPR}", *u, *(("sa",) if sa else ()))
        self.spec = dict(ROWS=ROWS, TILE=TILE, WG=8 if U else ROWS * TPR)
        self.bindings = ("q", "k", "v", "out", "lse")  # the forward's (runtime.variants.binding_count)


CANDS = [V(hd, r, t, p)
         for (hd, r, t, p) in ((64, 64, 32, 1), (128, 64, 16, 1), (64, 64, 64, 2), (64, 32, 64, 2),
                               (128, 32, 32, 4), (128, 16, 32, 4))]


def test_rule_picks_by_device_and_head_dim():
    assert variants.pick_attention(CANDS, "fwd", 128, 64, 4, "cpu", 32768, 8, max_bindings=32).flags[1] == "p1"
    gpu = variants.pick_attention(CANDS, "fwd", 4096, 64, 16, "discrete_gpu", 49152, 32, max_bindings=32)
    assert gpu.name == "a_d64_p2_r64x64"
    few = variants.pick_attention(CANDS, "dkv", 1024, 64, 2, "discrete_gpu", 49152, 32, max_bindings=32)
    assert few.spec["ROWS"] == 32  # few workgroups: the smaller row tile
    assert variants.pick_attention(CANDS, "fwd", 1024, 100, 16, "discrete_gpu", 49152, 32, max_bindings=32).flags[0] == "d128"
    assert variants.pick_attention(CANDS, "fwd", 1024, 129, 16, "discrete_gpu", 49152, 32, max_bindings=32) is None
    # shared memory and subgroup limits are respected
    assert variants.pick_attention(CANDS, "fwd", 1024, 64, 16, "discrete_gpu", 16384, 32, max_bindings=32) is None
    assert variants.pick_attention(CANDS, "fwd", 1024, 64, 16, "discrete_gpu", 49152, 1, max_bindings=32) is None


def test_rule_cpu_rows_where_they_fit():
    cands = CANDS + [V(64, 8, 32, 1, 8), V(64, 16, 32, 1, 16), V(16, 16, 32, 1, 16)]
    pick = lambda stage, S, D, heads, kind="cpu", shared=32768: variants.pick_attention(
        cands, stage, S, D, heads, kind, shared, 8 if kind == "cpu" else 32, max_bindings=32).name
    assert pick("fwd", 64, 16, 32) == "a_d16_p1_u16_r16x32"  # CPU: uR where D % 4 == 0, the smallest HD
    assert pick("dkv", 64, 64, 16) == "a_d64_p1_u16_r16x32"  # dq / dkv: 32 KiB of partials fit lavapipe
    assert pick("fwd", 64, 64, 16) == "a_d64_p1_u8_r8x32"  # the forward's max and sum too: R 16 does not
    assert pick("fwd", 8, 64, 1) == "a_d64_p1_u8_r8x32"  # too few rows for 4 workgroups: the smallest R
    assert pick("fwd", 64, 30, 32) == "a_d64_p1_r64x32"  # D % 4 != 0: the shared-tile layout
    assert pick("dkv", 64, 64, 16, shared=20000) == "a_d64_p1_u8_r8x32"  # less shared memory: the R that fits
    assert pick("fwd", 4096, 64, 16, "discrete_gpu", 49152) == "a_d64_p2_r64x64"  # GPUs: never uR
    # with flag sa twins: the CPU takes them (no shared memory: R 16 fits the HD 64 forward too)
    sa = cands + [V(64, 8, 32, 1, 8, True), V(64, 16, 32, 1, 16, True), V(16, 16, 32, 1, 16, True)]
    pick_sa = lambda stage, S, D, heads, kind="cpu", shared=32768: variants.pick_attention(
        sa, stage, S, D, heads, kind, shared, 8 if kind == "cpu" else 32, max_bindings=32).name
    assert pick_sa("fwd", 64, 16, 32) == "a_d16_p1_u16_sa_r16x32"
    assert pick_sa("fwd", 64, 64, 16) == "a_d64_p1_u16_sa_r16x32"
    assert pick_sa("fwd", 64, 30, 32) == "a_d64_p1_r64x32"  # D % 4 != 0: still the shared-tile layout
    assert pick_sa("fwd", 4096, 64, 16, "discrete_gpu", 49152) == "a_d64_p2_r64x64"  # GPUs: never uR
    spec = dict(HD=64, ROWS=16, TILE=32, TPR=1, WG=8, U=16)
    assert variants.attention_shared_bytes(spec, "dq") == 32768
    assert variants.attention_shared_bytes(dict(spec, SA=1), "fwd") == 0
    assert any("16-byte" in e for e in variants.attention_launch_errors(spec, "dq", 64, 62, 32768, 8))


def test_rule_refuses_loops_past_the_limit():
    spec = dict(HD=64, ROWS=64, TILE=32, TPR=1, WG=64)
    S = variants.ATTENTION_LOOP_LIMIT * 32 + 1
    assert any("loop" in e for e in variants.attention_launch_errors(spec, "fwd", S, 64, 32768, 8))
    assert not variants.attention_launch_errors(spec, "fwd", S - 1, 64, 32768, 8)


def test_rule_forced_variant_and_kill_switch():
    forced = variants.pick_attention(CANDS, "fwd", 4096, 64, 16, "discrete_gpu", 49152, 32, forced="d64_p2_r32x64", max_bindings=32)
    assert forced.name.endswith("d64_p2_r32x64")
    assert variants.attention_path("matmul", True) == "matmul"
    assert variants.attention_path("", True) == "fused" and variants.attention_path("", False) == "matmul"
    # GPUs: the matmul path unless forced (measured faster on an H200)
    assert variants.attention_path("", True, "discrete_gpu") == "matmul"
    assert variants.attention_path("fused", True, "discrete_gpu") == "fused"
    with pytest.raises(ev.UnsupportedError):
        variants.attention_path("fused", False)


def test_matmul_path_keeps_probabilities_only_while_they_are_small():
    """select.attention.keeps_probs: P [B*H, S, S] is kept while its bytes are at most KEEP_PROBS_RATIO times
    q, k, v and out's; the 23.7M model at 256 tokens keeps it, the 124M and 350M models at 1,024 recompute."""
    keeps = select_attention.keeps_probs
    assert keeps(8, 4, 256, 64) and keeps(4, 2, 64, 16)
    assert not keeps(12, 4, 1024, 64) and not keeps(16, 8, 1024, 64)
    # the boundary: H * S == ratio * (2H + 2KVH) * D keeps, one token more recomputes
    S = int(select_attention.KEEP_PROBS_RATIO * (2 * 2 + 2 * 1) * 8 / 2)
    assert keeps(2, 1, S, 8) and not keeps(2, 1, S + 1, 8)
    assert keeps(16, 8, 1024, 64, "keep") and not keeps(8, 4, 256, 64, "recompute")
    with pytest.raises(ev.UnsupportedError, match="EVERMIND_VK_ATTENTION_PROBS"):
        keeps(8, 4, 256, 64, "never")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_recomputed_probabilities_give_the_same_gradients(device, monkeypatch, dtype):
    """Where the rule recomputes (S = 150 tokens of head dim 8: P is 6x q, k, v and out), the forward keeps no
    probabilities and the backward recomputes them: the same scores and softmax kernels on the same inputs, so
    the gradients are bit-identical to those from kept probabilities."""
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", "matmul")
    rng = np.random.default_rng(3)
    B, S, H, KVH, D = 2, 150, 4, 2, 8
    assert not select_attention.keeps_probs(H, KVH, S, D)
    q, do = (ev.tensor(_data(rng, (B * S, H, D), dtype)) for _ in range(2))
    k, v = (ev.tensor(_data(rng, (B * S, KVH, D), dtype)) for _ in range(2))
    out, saved = ops.attention(q, k, v, batch=B)
    assert saved is None
    got = [g.numpy() for g in ops.attention_backward(q, k, v, do, saved, batch=B, out=out)]
    monkeypatch.setenv("EVERMIND_VK_ATTENTION_PROBS", "keep")
    out2, probs = ops.attention(q, k, v, batch=B)
    assert probs.shape == (B * H, S, S)
    np.testing.assert_array_equal(out.numpy(), out2.numpy())
    for a, b in zip(got, ops.attention_backward(q, k, v, do, probs, batch=B, out=out2)):
        np.testing.assert_array_equal(a, b.numpy())
    monkeypatch.setenv("EVERMIND_VK_ATTENTION_PROBS", "sometimes")
    with pytest.raises(ev.UnsupportedError, match="EVERMIND_VK_ATTENTION_PROBS"):
        ops.attention(q, k, v, batch=B)
