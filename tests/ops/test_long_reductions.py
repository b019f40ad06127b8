"""Reductions and accumulations past lavapipe's loop cap: Mesa's lavapipe silently ends any shader loop
after 65,535 iterations, so each op here is checked at a size beyond it (at the start of this branch,
colsum of 65,536 ones gave 65,535, embedding_backward over 70,000 tokens and the 1 x 200,000 x 1 matmul
were wrong), plus hypothesis over smaller shapes for the staged column sums."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.runtime import variants
import ref
from oracle import U16, U32, rounded

F = ["f32", "f16"]
NP = {"f32": np.float32, "f16": np.float16}


@pytest.mark.parametrize("dtype", F)
def test_colsum_of_65536_ones(device, dtype):
    got = ops.colsum(ev.tensor(np.ones((65536, 1), NP[dtype]))).numpy()
    assert got.tolist() == [65536.0]


@pytest.mark.parametrize("dtype", F)
def test_colsum_long_random(device, dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((70001, 3)).astype(NP[dtype])
    X = rounded(x, dtype)
    got = ops.colsum(ev.tensor(x)).numpy().astype(np.float64)
    bound = 4 * (2 * variants.MAX_LOOP + 8) * U32 * np.abs(X).sum(0)  # two stages of <= MAX_LOOP terms each
    assert np.all(np.abs(got - X.sum(0)) <= bound), (got, X.sum(0))


@pytest.mark.parametrize("dtype", F)
@given(rows=st.integers(1, 700), cols=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_colsum_staged(device, dtype, rows, cols, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(NP[dtype])
    X = rounded(x, dtype)
    got = ops.colsum(ev.tensor(x)).numpy().astype(np.float64)
    assert np.all(np.abs(got - X.sum(0)) <= 4 * (rows + 8) * U32 * np.abs(X).sum(0) + 1e-30)


def test_colsum_is_deterministic(device):
    x = ev.tensor(np.random.default_rng(5).standard_normal((5000, 7)).astype(np.float32))
    assert ops.colsum(x).numpy().tobytes() == ops.colsum(x).numpy().tobytes()


@pytest.mark.parametrize("dtype", F)
def test_embedding_backward_past_loop_cap(device, dtype):
    T = 70000
    ones = ops.embedding_backward(ev.tensor(np.zeros(T, np.uint32)), ev.tensor(np.ones((T, 1), NP[dtype])), 1)
    assert ones.numpy().tolist() == [[float(T)]]
    V, D = 3, 2
    rng = np.random.default_rng(7)
    ids = rng.integers(0, V + 1, T).astype(np.uint32)  # id V is ignored
    dy = rng.uniform(0.5, 1.0, (T, D)).astype(NP[dtype])  # positive: a dropped tail cannot cancel out
    DY = rounded(dy, dtype)
    want = np.zeros((V, D))
    keep = ids < V
    np.add.at(want, ids[keep], DY[keep])
    got = ops.embedding_backward(ev.tensor(ids), ev.tensor(dy), V).numpy().astype(np.float64)
    # <= MAX_LOOP sequential adds per dispatch, then one add per dispatch
    tol = 2 * (variants.MAX_LOOP + T / variants.MAX_LOOP + 8) * U32 * want
    assert np.all(np.abs(got - want) <= tol), (got, want)
    again = ops.embedding_backward(ev.tensor(ids), ev.tensor(dy), V).numpy()
    assert again.tobytes() == got.astype(np.float32).tobytes()  # token order, every time


def test_embedding_backward_sorted_past_loop_chunk(device, monkeypatch):
    """The sorted path over more than MAX_LOOP tokens: the counting sort and the run sums each take
    several ordered dispatches (the ids crowd into two values, so each run spans chunk borders)."""
    T = variants.MAX_LOOP + 1500
    monkeypatch.setenv("EVERMIND_VK_EMBEDDING_BACKWARD", "sorted")
    ones = ops.embedding_backward(ev.tensor(np.zeros(T, np.uint32)), ev.tensor(np.ones((T, 1), np.float32)), 1)
    assert ones.numpy().tolist() == [[float(T)]]
    V, D = 3, 4
    rng = np.random.default_rng(8)
    ids = rng.choice(np.array([1, 3], np.uint32), T + 2)  # id 3 = V is ignored
    dy = rng.uniform(0.5, 1.0, (T, D)).astype(np.float32)
    want = np.zeros((V, D))
    keep = ids[2:] < V
    np.add.at(want, ids[2:][keep], dy[keep])
    got = ops.embedding_backward(ev.tensor(ids), ev.tensor(dy), V, index_offset=2).numpy().astype(np.float64)
    tol = 2 * (variants.MAX_LOOP + T / variants.MAX_LOOP + 8) * U32 * want
    assert np.all(np.abs(got - want) <= tol), (got, want)


@pytest.mark.parametrize("dtype", F)
def test_matmul_huge_k(device, dtype):
    # f32: the 1 x 200,000 . 200,000 x 1 of ones (exact); f16: 2^18 ones . 1/8 = 32,768 (exact in f16).
    K, bval, want = (200000, 1.0, 200000.0) if dtype == "f32" else (262144, 0.125, 32768.0)
    a = np.ones((1, K), NP[dtype])
    b = np.full((K, 1), bval, NP[dtype])
    got = float(ev.matmul(ev.tensor(a), ev.tensor(b)).numpy()[0, 0])
    if dtype == "f32":
        assert got == want
    else:  # split-K dispatches accumulate into the f16 output: each split's partial sum is rounded to f16
        # (<= half an ulp of 32768, i.e. 8, per split); a loop cut short by the driver drops whole chunks
        # (18,720 before the split), far outside this bound
        splits = -(-K // 1024)
        assert abs(got - want) <= 8 * splits, (got, want)
    rng = np.random.default_rng(11)  # positive terms: a dropped tail cannot cancel out
    a = rng.uniform(0.5, 1.0, (1, K)).astype(NP[dtype])
    b = (rng.uniform(0.5, 1.0, (K, 1)) / 64).astype(NP[dtype])
    A, B = rounded(a, dtype), rounded(b, dtype)
    got = float(ev.matmul(ev.tensor(a), ev.tensor(b)).numpy()[0, 0])
    want = float((A @ B)[0, 0])
    tol = 4 * (K / 16 + 64) * U32 * want + (2 * U16 * want if dtype == "f16" else 0)
    assert abs(got - want) <= tol, (got, want, tol)


def test_loop_rules():
    assert variants.loop_chunks(0) == [(0, 0)]
    assert variants.loop_chunks(10, 4) == [(0, 4), (4, 8), (8, 10)]
    for rows in (1, 2, 16, 17, 4096, 65536, 70001, 10**7, 4096**2 + 1):
        plan = variants.colsum_plan(rows)
        assert all(chunk <= variants.MAX_LOOP for _, chunk in plan)
        n = rows
        for r, chunk in plan:
            assert r == n
            n = -(-n // chunk)
        assert n == 1
    spec = {"BM": 64, "BN": 64, "BK": 16, "WG_X": 16, "WG_Y": 16}
    splits = variants.matmul_k_splits("tiled", spec, 200000, "cpu")
    assert splits[0][0] == 0 and splits[-1][1] == 200000 and len(splits) > 1
    assert all(b == c for (_, b), (c, _) in zip(splits, splits[1:]))
    assert all(k0 % 64 == 0 and variants.matmul_loop_count("tiled", spec, k1 - k0) <= variants.MAX_LOOP
               for k0, k1 in splits)
    assert variants.matmul_k_splits("tiled", spec, 200000, "discrete_gpu") == [(0, 200000)]
    with pytest.raises(ev.UnsupportedError, match="MAX_LOOP"):
        variants.check_loop("final_sum", variants.MAX_LOOP + 1)


def test_launch_past_the_device_loop_cap_is_refused(device):
    if device.info.type != "cpu":
        pytest.skip("only CPU devices (lavapipe) have a loop cap")
    x = ev.tensor(np.zeros((1, 3_000_000), np.float32))  # softmax: 3 passes of 3e6 / (128 / ROWS) iterations
    with pytest.raises(variants.LoopLimitError, match="cap of 65535"):
        ops.softmax(x)
    spec = {"BM": 32, "BN": 32, "BK": 16, "WG_X": 16, "WG_Y": 16}
    assert variants.launch_loop_errors("matmul", spec, (), {"K": 200000}, "cpu")  # unsplit: refused
    assert not variants.launch_loop_errors("matmul", spec, (), {"K": 200000}, "discrete_gpu")
    assert not variants.launch_loop_errors("add", {"WG": 256, "VEC": 1}, (), {"n": 10**9}, "cpu")


def test_colsum_stage_counts():
    assert [c for _, c in variants.colsum_plan(200)] == [200]
    assert [c for _, c in variants.colsum_plan(4096)] == [64, 64]  # the LM's norm gradients: 2 stages
    assert len(variants.colsum_plan(65536)) == 2


@pytest.mark.parametrize("rows_wg", ["1", "16"])
def test_softmax_past_65535_workgroups(device, monkeypatch, rows_wg):
    """More workgroups than one grid dimension holds (a 2-D grid): 65,537 of them, one or 16 rows each, the
    last only partly filled (its empty rows still take part in the barriers); causal, so row r sees r % 3 + 1 keys."""
    monkeypatch.setenv("EVERMIND_VK_SOFTMAX_ROWS", rows_wg)
    rows = 65_536 * int(rows_wg) + 1
    x = np.random.default_rng(4).standard_normal((rows, 3)).astype(np.float32)
    y = ops.softmax(ev.tensor(x), causal=True).numpy()
    want = ref.softmax(x.astype(np.float64), True)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)
    dy = np.ones_like(x)  # softmax rows sum to 1, so the gradient of sum(y) is 0 up to rounding
    dx = ops.softmax_backward(ev.tensor(y), ev.tensor(dy)).numpy()
    assert np.abs(dx).max() < 1e-6
