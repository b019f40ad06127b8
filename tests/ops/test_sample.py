"""Sampling on the device (ops.sample) against the host sampler (train.generate.sampling_probs): exactly the
same id under greedy, the same distribution when sampling (chi-square over many draws), reproducible from
(seed, step); and the position-reading kernels of recorded decoding (rope_at, kv_write, attention_decode)
against ops.rope and a float64 oracle."""
import math
import os

import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.errors import ShapeError
from evermind_vk.ops.decode import hyper_words
from evermind_vk.train.generate import sampling_probs
from oracle import U32, assert_within, rounded

Z_1E4 = 3.719  # standard normal quantile at 1 - 1e-4


def chi2_bar(k: int) -> float:
    """The chi-square upper 1e-4 quantile with k degrees of freedom (Wilson-Hilferty)."""
    return k * (1 - 2 / (9 * k) + Z_1E4 * math.sqrt(2 / (9 * k))) ** 3


@pytest.fixture(params=[8, 64, 256], ids=["wg8", "wg64", "wg256"])
def sample_wg(request, monkeypatch):
    """Each sampler workgroup size in turn (8: lavapipe's pick for short rows, one subgroup there), whatever
    pick_sample_wg would choose on this device."""
    import evermind_vk.ops.decode as dec
    monkeypatch.setattr(dec, "pick_sample_wg",
                        lambda cands, device_type, cols: next(v for v in cands if v.spec["WG"] == request.param))
    return request.param


def run_sample(logits, seen_ids, items, **kw):
    """Draw `items` ids from row 0 of logits, item r in slot r (its own random stream)."""
    V = logits.shape[1]
    seen = np.zeros((items, V), np.uint32)
    seen[:, list(seen_ids)] = 1
    picked = ev.empty((2 * items,), "u32")
    h = hyper_words([(0, r, 0, 0) for r in range(items)], **kw)
    ops.sample(ev.tensor(logits), ev.tensor(h), ev.tensor(seen), picked, items)
    out = picked.numpy()
    return out[:items], out[items:]


@given(V=st.integers(2, 700), seed=st.integers(0, 2**31), rp=st.sampled_from([1.0, 1.7, 0.6]),
       dtype=st.sampled_from(["f32", "f16"]))
def test_greedy_equals_host(device, sample_wg, V, seed, rp, dtype):
    rng = np.random.default_rng(seed)
    z = rounded(rng.standard_normal((3, V)) * 3, dtype).astype(np.float32)
    seen_ids = sorted(set(rng.integers(0, V, 4).tolist()))
    z[0, rng.integers(0, V)] = z[0].max()  # a tie: the first maximum wins, as np.argmax
    logits = z.astype(np.float16) if dtype == "f16" else z
    got, stop = run_sample(logits, seen_ids, 2, temperature=0.0, repetition_penalty=rp, stop_tokens=[5])
    want = sampling_probs(z[0], seen_ids, 0.0, None, None, rp)
    assert got.tolist() == [want, want]
    assert stop.tolist() == [int(want == 5)] * 2


CASES = [  # (temperature, top_k, top_p, repetition penalty)
    (1.0, None, None, 1.0), (0.7, 4, None, 1.0), (1.3, None, 0.8, 1.0), (1.0, 5, 0.6, 1.5), (2.0, 1, None, 1.0),
]


@pytest.mark.parametrize("case", CASES)
def test_distribution_equals_host(device, sample_wg, case):
    """2,000 draws of 12 ids per case (the slow twin: 10,000 draws)."""
    check_distribution(case, 2000, 12)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("EVERMIND_VK_SLOW_TESTS") != "1", reason="slow: EVERMIND_VK_SLOW_TESTS=1 runs it")
@pytest.mark.parametrize("case", CASES)
def test_distribution_equals_host_10k(device, case):
    check_distribution(case, 10000, 40)


def check_distribution(case, n, V):
    T, k, p, rp = case
    rng = np.random.default_rng(V + n)
    z = (rng.standard_normal(V) * 1.5).astype(np.float32)
    z[3] = z[7]  # tied values: top-k keeps both, top-p breaks the tie by id
    seen_ids = [1, 2]
    want = sampling_probs(z, seen_ids, T, k, p, rp)
    got, _ = run_sample(z[None, :], seen_ids, n, temperature=T, top_k=k or 0, top_p=p, repetition_penalty=rp,
                        seed=11, step=3)
    counts = np.bincount(got.astype(np.int64), minlength=V)
    assert counts[want == 0].sum() == 0, f"ids the host never draws: {np.flatnonzero(counts * (want == 0))}"
    live = want > 0
    if live.sum() == 1:
        assert counts[live][0] == n
        return
    exp = want[live] * n
    stat = float((((counts[live] - exp) ** 2) / exp).sum())
    assert stat < chi2_bar(int(live.sum()) - 1), f"chi-square {stat:.1f} over {live.sum()} ids: {counts} vs {exp}"


def test_seeded_reproducible(device, sample_wg):
    z = np.random.default_rng(0).standard_normal((1, 50)).astype(np.float32)
    a, _ = run_sample(z, [], 64, temperature=1.0, seed=5, step=2)
    b, _ = run_sample(z, [], 64, temperature=1.0, seed=5, step=2)
    c, _ = run_sample(z, [], 64, temperature=1.0, seed=5, step=3)
    d, _ = run_sample(z, [], 64, temperature=1.0, seed=6 << 32, step=2)
    assert (a == b).all() and (a != c).any() and (a != d).any()


def test_sample_marks_seen_and_flags_stops(device, sample_wg):
    z = np.zeros((1, 8), np.float32)
    z[0, 6] = 9.0
    seen = ev.tensor(np.zeros((1, 8), np.uint32))
    picked = ev.empty((2,), "u32")
    h = hyper_words([(0, 0, 0, 1)], temperature=0.0, stop_tokens=[2, 6])
    ops.sample(ev.tensor(z), ev.tensor(h), seen, picked, 1)
    assert picked.numpy().tolist() == [6, 1]
    assert seen.numpy().tolist() == [[0, 0, 0, 0, 0, 0, 1, 0]]
    with pytest.raises(ShapeError):
        ops.sample(ev.tensor(z), ev.tensor(h), seen, ev.empty((3,), "u32"), 1)


@given(R=st.integers(1, 3), Q=st.integers(1, 3), H=st.integers(1, 3), half=st.integers(1, 5),
       seed=st.integers(0, 2**31))
def test_rope_at_equals_rope(device, R, Q, H, half, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((R * Q, H, 2 * half)).astype(np.float32)
    pos = rng.integers(0, 500, R)
    h = hyper_words([(int(pos[r]), 0, 0, 0) for r in range(R)])
    got = ops.rope_at(ev.tensor(x), ev.tensor(h), Q, 500.0).numpy()
    for r in range(R):
        want = ops.rope(ev.tensor(x[r * Q:(r + 1) * Q]), int(pos[r]), 500.0).numpy()
        assert np.array_equal(got[r * Q:(r + 1) * Q], want)


@given(R=st.integers(1, 3), Q=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_kv_write_places_rows(device, R, Q, seed):
    rng = np.random.default_rng(seed)
    slots, L, row = 4, 7, 5
    x = rng.standard_normal((R * Q, row)).astype(np.float32)
    cache0 = rng.standard_normal((slots, L, row)).astype(np.float32)
    items = [(int(rng.integers(0, L - Q + 1)), int(s), 0, 0) for s in rng.permutation(slots)[:R]]
    cache = ev.tensor(cache0)
    ops.kv_write(ev.tensor(x), cache, ev.tensor(hyper_words(items)), Q)
    want = cache0.copy()
    for r, (pos, slot, _, _) in enumerate(items):
        want[slot, pos:pos + Q] = x[r * Q:(r + 1) * Q]
    assert np.array_equal(cache.numpy(), want)


@given(R=st.integers(1, 3), Q=st.integers(1, 2), heads=st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3)]),
       half=st.integers(1, 5), seed=st.integers(0, 2**31), dtype=st.sampled_from(["f32", "f16"]))
def test_rope_kv_at_equals_its_three_ops(device, R, Q, heads, half, seed, dtype):
    """The fused kernel: q rotated as rope_at, k rotated and v copied into their cache rows as kv_write,
    bit for bit; cache rows of other positions and slots untouched."""
    H, KVH = heads
    rng = np.random.default_rng(seed)
    npd = np.float16 if dtype == "f16" else np.float32
    slots, L, D = 3, 6, 2 * half
    q, k, v = (rng.standard_normal((R * Q, n, D)).astype(npd) for n in (H, KVH, KVH))
    kc0, vc0 = (rng.standard_normal((slots, L, KVH, D)).astype(npd) for _ in range(2))
    items = [(int(rng.integers(0, L - Q + 1)), int(s), 0, 0) for s in rng.permutation(slots)[:R]]
    hyper = ev.tensor(hyper_words(items))
    kc, vc = ev.tensor(kc0), ev.tensor(vc0)
    got_q = ops.rope_kv_at(ev.tensor(q), ev.tensor(k), ev.tensor(v), hyper, kc, vc, Q, 500.0).numpy()
    assert np.array_equal(got_q, ops.rope_at(ev.tensor(q), hyper, Q, 500.0).numpy())
    want_k, want_v = ev.tensor(kc0), ev.tensor(vc0)
    ops.kv_write(ops.rope_at(ev.tensor(k), hyper, Q, 500.0), want_k, hyper, Q)
    ops.kv_write(ev.tensor(v), want_v, hyper, Q)
    assert np.array_equal(kc.numpy(), want_k.numpy())
    assert np.array_equal(vc.numpy(), want_v.numpy())
    assert not np.array_equal(kc.numpy(), kc0)  # it wrote something


def test_rope_kv_at_refuses_mismatched_shapes(device):
    q, k = ev.zeros((1, 2, 4)), ev.zeros((1, 1, 4))
    cache = ev.zeros((2, 5, 1, 4))
    h = ev.tensor(hyper_words([(0, 0, 0, 0)]))
    with pytest.raises(ShapeError):
        ops.rope_kv_at(q, k, k, h, cache, ev.zeros((2, 5, 1, 6)))
    with pytest.raises(ShapeError):
        ops.rope_kv_at(ev.zeros((1, 2, 3)), ev.zeros((1, 1, 3)), ev.zeros((1, 1, 3)), h, ev.zeros((2, 5, 1, 3)),
                       ev.zeros((2, 5, 1, 3)))
    with pytest.raises(ShapeError):
        ops.rope_kv_at(q, k, k, ev.tensor(hyper_words([])), cache, cache, 1)


@given(R=st.integers(1, 3), heads=st.sampled_from([(1, 1), (2, 1), (4, 2)]), D=st.sampled_from([1, 5, 16, 17, 40]),
       seed=st.integers(0, 2**31), dtype=st.sampled_from(["f32", "f16"]))
def test_attention_decode_matches_oracle(device, R, heads, D, seed, dtype):
    H, KVH = heads
    rng = np.random.default_rng(seed)
    slots, L = 3, 9
    npd = np.float16 if dtype == "f16" else np.float32
    q = rng.standard_normal((R, H, D)).astype(npd)
    kc = rng.standard_normal((slots, L, KVH, D)).astype(npd)
    vc = rng.standard_normal((slots, L, KVH, D)).astype(npd)
    items = [(int(rng.integers(0, L)), int(rng.integers(0, slots)), 0, 0) for _ in range(R)]
    score = ev.empty((R * H * L,), "f32")
    got = ops.attention_decode(ev.tensor(q), ev.tensor(kc), ev.tensor(vc), ev.tensor(hyper_words(items)),
                               score).numpy().astype(np.float64)
    want = np.zeros((R, H, D))
    qq, kk, vv = (a.astype(np.float64) for a in (q, kc, vc))
    for r, (pos, slot, _, _) in enumerate(items):
        for h in range(H):
            s = kk[slot, :pos + 1, h // (H // KVH)] @ qq[r, h] / math.sqrt(D)
            p = np.exp(s - s.max())
            want[r, h] = (p / p.sum()) @ vv[slot, :pos + 1, h // (H // KVH)]
    tol = 8 * (L + D + 8) * U32 + (2.0 ** -10 if dtype == "f16" else 0)
    assert_within(got, want, tol * (np.abs(want) + np.abs(want).max()) + 1e-30, "attention_decode")


def test_attention_decode_workgroup_choice(device):
    from evermind_vk.runtime.select.decode import pick_decode_wg
    from evermind_vk.runtime import kernels
    from evermind_vk.errors import UnsupportedError
    cands = kernels.variants_of("attention_decode", "f32")
    assert pick_decode_wg(cands, 16, "cpu").spec["WG"] == 16
    assert pick_decode_wg(cands, 17, "cpu").spec["WG"] == 32
    assert pick_decode_wg(cands, 64, "discrete_gpu").spec["WG"] == 128
    assert pick_decode_wg(cands, 128, "cpu").spec["WG"] == 128
    with pytest.raises(UnsupportedError, match="head dim 129"):
        pick_decode_wg(cands, 129, "cpu")


def test_sample_workgroup_choice(device):
    from evermind_vk.runtime import kernels
    from evermind_vk.runtime.select.decode import pick_sample_wg
    from evermind_vk.runtime.select.decode import sample_loop_count
    from evermind_vk.runtime.select.loops import MAX_LOOP
    cands = kernels.variants_of("sample", "f32")
    assert pick_sample_wg(cands, "cpu", 256).spec["WG"] == 8
    assert sample_loop_count(256, 8) <= MAX_LOOP
    # SmolLM2's 49,152 logits: no workgroup size keeps the loops within MAX_LOOP; the fewest threads within
    # lavapipe's cap (64), past it the most threads (256)
    assert sample_loop_count(49152, 64) <= 65535 < sample_loop_count(49152, 32)
    assert pick_sample_wg(cands, "cpu", 49152).spec["WG"] == 64
    assert sample_loop_count(200000, 256) <= 65535 < sample_loop_count(200000, 64)
    assert pick_sample_wg(cands, "cpu", 200000).spec["WG"] == 256
    assert pick_sample_wg(cands, "cpu", 10**6).spec["WG"] == 256  # past every cap: dispatch refuses it
    assert pick_sample_wg(cands, "discrete_gpu", 256).spec["WG"] == 256


def test_sample_past_the_loop_cap_is_refused(device, monkeypatch):
    """lavapipe ends an invocation's loops after 65,535 iterations, silently: sampling 49,152 logits with 32
    threads a row (107k iterations) returned no id at all there. dispatch now refuses such a launch (on CPU
    devices), and the rule's pick for that row (64 threads, 54,613 iterations at most) samples as the host does."""
    import evermind_vk.ops.decode as dec
    from evermind_vk.errors import UnsupportedError
    if device.info.type != "cpu":
        pytest.skip("the loop cap is lavapipe's (CPU devices)")
    rng = np.random.default_rng(7)
    z = (rng.standard_normal((1, 49152)) * 4).astype(np.float32)
    kw = dict(temperature=0.7, top_k=50, top_p=0.9, seed=3)
    got, _ = run_sample(z, [], 1, **kw)
    probs = sampling_probs(z[0], [], 0.7, 50, 0.9, 1.0)
    assert probs[int(got[0])] > 0  # a kept id (the cut-short kernel gave 2**32 - 1)
    with monkeypatch.context() as m:
        m.setattr(dec, "pick_sample_wg", lambda cands, device_type, cols: next(v for v in cands if v.spec["WG"] == 32))
        with pytest.raises(UnsupportedError, match="loop iterations"):
            run_sample(z, [], 1, **kw)
