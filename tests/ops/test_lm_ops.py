"""LM ops, forward and backward, against float64 numpy references on the same rounded inputs
(hypothesis over shapes, 1-sized dims included, and values), plus reference vectors."""
import numpy as np
import pytest
from hypothesis import example, given, strategies as st

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.runtime.select import fixed
import ref
from oracle import TINY16, TINY32, U16, U32, assert_within, rounded

F = ["f32", "f16"]
NP = {"f32": np.float32, "f16": np.float16}
seeds = st.integers(0, 2**31)
small = st.integers(1, 40)


def close(got, want, n, dtype, what, mag=None):
    """|got - want| <= tol (|want| + max|want|), or tol (mag + |want|) where the caller gives the
    magnitude of the terms that cancel; tol grows with the reduction length n, f16 adds output rounding."""
    want = np.asarray(want, np.float64)
    tol = 8 * (n + 8) * U32 + (2 * U16 if dtype == "f16" else 0)
    if mag is None:
        mag = np.abs(want).max() if want.size else 0.0
    tiny = TINY16 if dtype == "f16" else TINY32  # devices may flush subnormals (outputs or inputs) to zero
    assert_within(np.asarray(got, np.float64), want, tol * (np.abs(want) + mag) + 2 * tiny, what)


def data(rng, shape, dtype, s=1.0):
    return (rng.standard_normal(shape) * s).astype(NP[dtype])


@pytest.mark.parametrize("rows_wg", ["", "1", "4", "16"])  # the rule's pick, then each rows-a-workgroup forced
@pytest.mark.parametrize("dtype", F)
@given(rows=small, cols=st.integers(1, 130), causal=st.booleans(), seed=seeds)
def test_softmax(device, monkeypatch, rows_wg, dtype, rows, cols, causal, seed):
    monkeypatch.setenv("EVERMIND_VK_SOFTMAX_ROWS", rows_wg)
    rng = np.random.default_rng(seed)
    x = data(rng, (rows, cols), dtype, 3)
    dy = data(rng, (rows, cols), dtype)
    y = ops.softmax(ev.tensor(x), causal=causal)
    want = ref.softmax(rounded(x, dtype), causal)
    close(y.numpy(), want, cols, dtype, "softmax")
    yr = rounded(y.numpy(), dtype)
    DY = rounded(dy, dtype)
    mag = yr * (np.abs(DY) + (yr * np.abs(DY)).sum(-1, keepdims=True))
    close(ops.softmax_backward(y, ev.tensor(dy)).numpy(), ref.softmax_bwd(yr, DY), cols, dtype, "softmax bwd", mag=mag)
    # told the mask, the backward reads nothing past it (y is 0 there): the same result
    close(ops.softmax_backward(y, ev.tensor(dy), causal=causal).numpy(), ref.softmax_bwd(yr, DY), cols, dtype,
          "causal softmax bwd", mag=mag)


def test_causal_softmax_backward_reads_nothing_past_the_mask(device):
    """Given a y that is not 0 past the mask (a misuse), the causal backward still writes 0 there and sums
    only the visible entries: it does skip them. seq < cols: rows are queries of a window ending at the
    last key (keys j <= i + cols - seq)."""
    rng = np.random.default_rng(0)
    rows, cols, seq = 6, 9, 3
    y, dy = rng.random((rows, cols)).astype(np.float32), rng.standard_normal((rows, cols)).astype(np.float32)
    got = ops.softmax_backward(ev.tensor(y), ev.tensor(dy), causal=True, seq=seq).numpy()
    vis = np.arange(cols)[None, :] <= (np.arange(rows) % seq)[:, None] + cols - seq
    ym = np.where(vis, y, 0).astype(np.float64)
    want = ym * (dy - (ym * dy).sum(-1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.all(got[~vis] == 0)
    with pytest.raises(ev.ShapeError, match="causal seq"):
        ops.softmax_backward(ev.tensor(y), ev.tensor(dy), causal=True, seq=10)


@pytest.mark.parametrize("wg", ["", "8", "32", "128"])  # the rule's pick, then each workgroup size forced
@pytest.mark.parametrize("block", ["", "1", "3"])  # rms_norm_backward's rows a workgroup: the rule's, forced
@pytest.mark.parametrize("dtype", F)
@given(rows=small, cols=st.integers(1, 130), res=st.booleans(), seed=seeds)
@example(rows=27, cols=1, res=False, seed=707)  # dw cancels (kept: it failed the |want|-only bound)
@example(rows=7, cols=130, res=True, seed=1)  # with 8 threads: columns past the registers' 64, 3-row blocks
def test_rms_norm(device, monkeypatch, wg, block, dtype, rows, cols, res, seed):
    monkeypatch.setenv("EVERMIND_VK_ROW_WG", wg)
    monkeypatch.setenv("EVERMIND_VK_NORM_BLOCK_ROWS", block)
    rng = np.random.default_rng(seed)
    x, dy = data(rng, (rows, cols), dtype), data(rng, (rows, cols), dtype)
    w = rng.standard_normal(cols).astype(np.float32)
    xt = ev.tensor(x)
    y, rstd = ops.rms_norm(xt, ev.tensor(w), eps=1e-6)
    X, W, DY = rounded(x, dtype), w.astype(np.float64), rounded(dy, dtype)
    close(y.numpy(), ref.rmsnorm(X, W, 1e-6)[0], cols, dtype, "rmsnorm")
    dres = data(rng, (rows, cols), dtype) if res else None  # a residual's gradient, added into dx
    dx, dw = ops.rms_norm_backward(xt, ev.tensor(w), ev.tensor(dy), rstd,
                                   dres=ev.tensor(dres) if res else None)
    wdx, wdw = ref.rmsnorm_bwd(X, W, DY, 1e-6)
    r = ref.rmsnorm(X, W, 1e-6)[1]
    mag = r * np.abs(W * DY) + np.abs(X) * r ** 3 * np.abs(W * DY * X).mean(-1, keepdims=True)
    if res:
        wdx, mag = wdx + rounded(dres, dtype), mag + np.abs(rounded(dres, dtype))
    close(dx.numpy(), wdx, cols, dtype, "rmsnorm dx", mag=mag)
    # dw sums dy * x * rstd over the rows: terms of either sign (rows=27, cols=1, seed=707 cancelled 36 of
    # them to 0.0129 and missed a bound taken from |want| alone)
    close(dw.numpy(), wdw, cols + rows, dtype, "rmsnorm dw", mag=(np.abs(DY * X) * r).sum(0))


@pytest.mark.parametrize("wg", ["", "8", "128"])
@pytest.mark.parametrize("dtype", F)
@given(rows=small, cols=st.integers(1, 130), seed=seeds)
def test_add_rms_norm_is_add_then_rms_norm(device, monkeypatch, wg, dtype, rows, cols, seed):
    """The fused residual add + norm gives the bits of the add kernel followed by rms_norm (and so the
    oracle's values, which test_rms_norm checks)."""
    monkeypatch.setenv("EVERMIND_VK_ROW_WG", wg)
    rng = np.random.default_rng(seed)
    x, a = ev.tensor(data(rng, (rows, cols), dtype)), ev.tensor(data(rng, (rows, cols), dtype))
    w = ev.tensor(rng.standard_normal(cols).astype(np.float32))
    h, y, rstd = ops.add_rms_norm(x, a, w, eps=1e-5)
    h2 = ops.add(x, a)
    y2, rstd2 = ops.rms_norm(h2, w, eps=1e-5)
    for got, want in ((h, h2), (y, y2), (rstd, rstd2)):
        assert got.numpy().tobytes() == want.numpy().tobytes()
    want_h = rounded(x.numpy().astype(np.float32) + a.numpy().astype(np.float32), dtype)  # f32 sum, one rounding
    assert np.array_equal(h.numpy().astype(np.float64), want_h)


@pytest.mark.parametrize("dtype", F)
@given(rows=small, cols=st.integers(1, 300), res=st.booleans(), seed=seeds)
@example(rows=5, cols=300, res=True, seed=3)  # cross entropy: columns past flag sb's 32 registers a thread
def test_subgroup_row_reductions_same_bits_as_eight_threads(device, monkeypatch, dtype, rows, cols, res, seed):
    """The rows' flag sb variants (one subgroup of 8, reductions by subgroupBroadcast: the rule's pick on
    lavapipe) give the bits of the 8-thread variants without it (shared-memory reductions, forced by
    EVERMIND_VK_ROW_WG=8): rms_norm, add_rms_norm, rms_norm_backward (with and without the residual's
    gradient; rows of up to 64 columns, the widest it takes sb for) and cross entropy with its backward.
    test_rms_norm and test_cross_entropy hold the rule's pick to the float64 oracle."""
    if not device.has("subgroup_broadcast_8"):
        pytest.skip("no subgroupBroadcast in subgroups of 8 (or EVERMIND_VK_DISABLE_SUBGROUP_BROADCAST)")
    rng = np.random.default_rng(seed)
    x, a, dy = (ev.tensor(data(rng, (rows, cols), dtype, 3)) for _ in range(3))
    w = ev.tensor(rng.standard_normal(cols).astype(np.float32))
    t = ev.tensor(rng.integers(0, cols + 2, rows).astype(np.uint32))
    g = ev.tensor(np.array([1.5], np.float32))
    picked = {}

    def run():
        y, rstd = ops.rms_norm(x, w, eps=1e-6)
        outs = [y, rstd, *ops.add_rms_norm(x, a, w, eps=1e-5)]
        if cols <= 64:
            outs += ops.rms_norm_backward(x, w, dy, rstd, dres=a if res else None)
        loss, count = ops.cross_entropy(x, t)
        outs += [loss, count, ops.cross_entropy_backward(x, t, count, g)]
        return [o.numpy().tobytes() for o in outs]

    from evermind_vk.runtime import kernels
    orig = kernels.dispatch

    def spy(v, *args, **kw):
        picked.setdefault(v.op, set()).add(v.flags)
        return orig(v, *args, **kw)

    rows_ops = ("rms_norm", "add_rms_norm", "rms_norm_backward", "cross_entropy", "cross_entropy_backward")
    with monkeypatch.context() as m:  # hypothesis runs every example in one fixture: undone each time
        m.setattr(kernels, "dispatch", spy)
        m.setenv("EVERMIND_VK_ROW_WG", "")
        sb = run()
        assert all(any("sb" in f for f in picked[op]) for op in rows_ops if op in picked), picked
        assert len(picked.keys() & set(rows_ops)) == (5 if cols <= 64 else 4), picked
        m.setenv("EVERMIND_VK_ROW_WG", "8")
        picked.clear()
        plain = run()
        assert not any("sb" in f for op in rows_ops for f in picked.get(op, ())), picked
    assert sb == plain


@pytest.mark.parametrize("dtype", F)
@given(rows=small, cols=st.integers(2, 130), seed=seeds)
@example(rows=12, cols=2, seed=362879)  # two nearly equal values in a row: x - mean cancels (f32)
def test_layer_norm(device, dtype, rows, cols, seed):
    rng = np.random.default_rng(seed)
    x, dy = data(rng, (rows, cols), dtype), data(rng, (rows, cols), dtype)
    w, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    xt = ev.tensor(x)
    y, mean, rstd = ops.layer_norm(xt, ev.tensor(w), ev.tensor(b), eps=1e-5)
    X, DY = rounded(x, dtype), rounded(dy, dtype)
    mu = X.mean(-1, keepdims=True)
    r = 1 / np.sqrt(((X - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    # x - mean cancels: its rounding error, on the scale of |x|, comes out multiplied by rstd and w
    # (rows of nearly equal values, e.g. two columns: rstd up to 1/sqrt(eps))
    ymag = np.abs(w) * (np.abs(X) + np.abs(mu)) * r + np.abs(b)
    close(y.numpy(), ref.layernorm(X, w.astype(np.float64), b.astype(np.float64), 1e-5), cols, dtype, "layernorm",
          mag=ymag)
    dx, dw, db = ops.layer_norm_backward(xt, ev.tensor(w), ev.tensor(dy), mean, rstd)
    wdx, wdw, wdb = ref.layernorm_bwd(X, w.astype(np.float64), DY, 1e-5)
    g = np.abs(w * DY)
    mag = r * (g + g.mean(-1, keepdims=True) + np.abs((X - mu) * r) * (g * np.abs(X - mu) * r).mean(-1, keepdims=True))
    close(dx.numpy(), wdx, cols, dtype, "layernorm dx", mag=mag)
    close(dw.numpy(), wdw, cols + rows, dtype, "layernorm dw", mag=np.abs(DY * (X - mu) * r).sum(0))
    close(db.numpy(), wdb, rows, dtype, "layernorm db", mag=np.abs(DY).sum(0))


def test_cross_entropy_reference_vector(device):
    loss, count = ops.cross_entropy(ev.tensor(np.array([[1, 2, 3], [.5, -1, 2]], np.float32)),
                                    ev.tensor(np.array([2, 0], np.uint32)))
    assert abs(float(loss.numpy()[0]) - 1.0744586305507688) <= 1e-6
    assert float(count.numpy()[0]) == 2.0


@pytest.mark.parametrize("wg", ["", "8", "32", "128"])  # the rule's pick, then each workgroup size forced
@pytest.mark.parametrize("dtype", F)
@given(rows=small, vocab=st.integers(1, 130), seed=seeds, g=st.floats(0.1, 4))
def test_cross_entropy(device, monkeypatch, wg, dtype, rows, vocab, seed, g):
    monkeypatch.setenv("EVERMIND_VK_ROW_WG", wg)
    rng = np.random.default_rng(seed)
    x = data(rng, (rows, vocab), dtype, 3)
    t = rng.integers(0, vocab + 3, rows).astype(np.uint32)  # some targets >= vocab: ignored
    xt, tt = ev.tensor(x), ev.tensor(t)
    loss, count = ops.cross_entropy(xt, tt)
    X = rounded(x, dtype)
    # each row's loss is logsumexp - x_target, which cancel when the target dominates: f32's error follows
    # their size (max|x| + log vocab), not the loss's; the gradient's p - 1 cancels the same way, at g/count
    close(loss.numpy()[0], ref.xent(X, t), vocab + rows, dtype, "xent", mag=np.abs(X).max() + np.log(vocab))
    dx = ops.cross_entropy_backward(xt, tt, count, ev.tensor(np.array([g], np.float32)))
    close(dx.numpy(), ref.xent_bwd(X, t, np.float32(g)), vocab, dtype, "xent bwd",
          mag=g / max(float(count.numpy()[0]), 1.0))
    xi = ev.tensor(x)  # in place (F.cross_entropy's overwrite_logits): the same gradient, in the logits' buffer
    assert ops.cross_entropy_backward(xi, tt, count, ev.tensor(np.array([g], np.float32)), out=xi) is xi
    assert np.array_equal(xi.numpy(), dx.numpy())


def test_cross_entropy_whose_target_dominates(device, monkeypatch):
    # hypothesis's find (rows 15, vocab 2, seed 231, 8 threads a row): p ~ 0.999, so the loss (1.4e-3) and
    # p - 1 are small differences of O(1) numbers; f32 is off by 2.8e-8 and 8.4e-8 there
    monkeypatch.setenv("EVERMIND_VK_ROW_WG", "8")
    test_cross_entropy.hypothesis.inner_test(device, monkeypatch, "8", "f32", 15, 2, 231, 4.0)


@pytest.mark.parametrize("dtype", F)
@given(T=small, V=st.integers(1, 50), D=st.integers(1, 40), transpose=st.booleans(),
       offset=st.integers(0, 3), seed=seeds)
def test_embedding(device, dtype, T, V, D, transpose, offset, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, V + 2, T + offset).astype(np.uint32)  # ids >= V are ignored
    table = data(rng, (D, V) if transpose else (V, D), dtype)
    tab = rounded(table, dtype)
    rows = tab.T if transpose else tab
    want = np.array([rows[i] if i < V else np.zeros(D) for i in ids[offset:]])
    y = ops.embedding(ev.tensor(ids), ev.tensor(table), transpose=transpose, index_offset=offset)
    assert np.array_equal(y.numpy().astype(np.float64), want)
    dy = data(rng, (T, D), dtype)
    dt = ops.embedding_backward(ev.tensor(ids), ev.tensor(dy), V, transpose=transpose, index_offset=offset)
    wd = np.zeros((V, D))
    for t, i in enumerate(ids[offset:]):
        if i < V:
            wd[i] += rounded(dy, dtype)[t]
    close(dt.numpy(), wd.T if transpose else wd, T, "f32", "embedding bwd")


@given(T=small, V=st.integers(1, 50), D4=st.integers(1, 10), seed=seeds)
def test_embedding_backward_four_columns_same_bits(device, T, V, D4, seed):
    """[V, D] with D % 4 == 0 takes four columns per thread; its sums (token order) equal bit for bit
    those of the one-column path that the transposed layout takes."""
    from evermind_vk.runtime import variants
    assert variants.embedding_backward_cols(4 * D4, False) == 4 and variants.embedding_backward_cols(4 * D4, True) == 1
    rng = np.random.default_rng(seed)
    ids = ev.tensor(rng.integers(0, V + 2, T).astype(np.uint32))
    dy = ev.tensor(rng.standard_normal((T, 4 * D4)).astype(np.float32))
    four = ops.embedding_backward(ids, dy, V).numpy()
    one = ops.embedding_backward(ids, dy, V, transpose=True).numpy()
    assert np.array_equal(four, one.T)


@pytest.mark.parametrize("lanes", ["", "1", "4", "32"])  # embedding_rank's threads a token: the rule's, forced
@pytest.mark.parametrize("dtype", F)
@given(T=st.integers(1, 300), V=st.integers(1, 60), D=st.integers(1, 12), transpose=st.booleans(),
       offset=st.integers(0, 3), seed=seeds)
@example(T=155, V=1, D=1, transpose=False, offset=0, seed=0)  # a cancelling sum (kept: it failed the old bound)
def test_embedding_backward_sorted_path(device, monkeypatch, lanes, dtype, T, V, D, transpose, offset, seed):
    """The sorted path (counting sort of the ids, then each id's run of tokens) against the float64
    oracle, and bit for bit against the scanning path (both add in token order; T <= MAX_LOOP)."""
    monkeypatch.setenv("EVERMIND_VK_RANK_LANES", lanes)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, V + 2, T + offset).astype(np.uint32)  # ids >= V are ignored
    dy = data(rng, (T, D), dtype)
    got = {}
    for path in ("sorted", "scan"):
        monkeypatch.setenv("EVERMIND_VK_EMBEDDING_BACKWARD", path)
        got[path] = ops.embedding_backward(ev.tensor(ids), ev.tensor(dy), V, transpose=transpose,
                                           index_offset=offset).numpy()
    wd = np.zeros((V, D))
    keep = ids[offset:] < V
    np.add.at(wd, ids[offset:][keep], rounded(dy, dtype)[keep])
    mag = np.zeros((V, D))  # the size of the terms each sum adds (T=155, V=1, D=1, seed=0: 36.5 summed to 0.0053)
    np.add.at(mag, ids[offset:][keep], np.abs(rounded(dy, dtype)[keep]))
    close(got["sorted"], wd.T if transpose else wd, T, "f32", "embedding bwd (sorted)", mag=mag.T if transpose else mag)
    assert got["sorted"].tobytes() == got["scan"].tobytes()


def test_embedding_backward_path_rule(monkeypatch):
    from evermind_vk.errors import UnsupportedError
    from evermind_vk.runtime import variants
    assert variants.embedding_backward_path(512, 256, 64, 4) == "sorted"  # the LM's table: 512 < 4,096
    assert variants.embedding_backward_path(70000, 3, 2, 1) == "scan"
    assert variants.embedding_backward_path(70000, 3, 2, 1, "sorted") == "sorted"
    with pytest.raises(UnsupportedError):
        variants.embedding_backward_path(5, 5, 5, 1, "sort")


def test_embedding_reference_vector(device):
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    ids = ev.tensor(np.array([2, 1, 2, 0, 2, 7], np.uint32))
    dt = ops.embedding_backward(ids, ev.tensor(np.ones((6, 4), np.float32)), 3).numpy()
    assert np.array_equal(dt[:, 0], [1, 1, 3])  # row 2 sums three rows, id 7 >= V ignored
    assert np.array_equal(ops.embedding(ids, ev.tensor(table), index_offset=4).numpy(), [table[2], np.zeros(4)])


PICK_CPU_TWIN = fixed.pick_cpu_twin


def force_thread_layout(monkeypatch, layout):
    """layout "": the rule's pick (on CPU devices the CPU twins: rope a thread per (token, head), glu four
    columns a thread); "one": the one-element-a-thread variants, as on GPUs."""
    monkeypatch.setattr(fixed, "pick_cpu_twin", PICK_CPU_TWIN if layout == "" else
                        (lambda cands, device_type, fits=True: PICK_CPU_TWIN(cands, "discrete_gpu", fits)))


@pytest.mark.parametrize("layout", ["", "one"])
@pytest.mark.parametrize("dtype", F)
@given(S=small, H=st.integers(1, 4), half=st.integers(1, 16), start=st.integers(0, 100), seed=seeds)
def test_rope(device, monkeypatch, layout, dtype, S, H, half, start, seed):
    force_thread_layout(monkeypatch, layout)
    rng = np.random.default_rng(seed)
    x = data(rng, (S, H, 2 * half), dtype)
    y = ops.rope(ev.tensor(x), start_pos=start)
    X = rounded(x, dtype)
    # f32 angle (position * frequency) error grows with the position.
    close(y.numpy(), ref.rope(X, start, 10000.0), 8 * (start + S), dtype, "rope")
    dy = data(rng, (S, H, 2 * half), dtype)
    close(ops.rope_backward(ev.tensor(dy), start_pos=start).numpy(), ref.rope(rounded(dy, dtype), start, 10000.0, -1.0),
          8 * (start + S), dtype, "rope bwd")


@pytest.mark.parametrize("layout", ["", "one"])
@pytest.mark.parametrize("dtype", F)
@pytest.mark.parametrize("kind", ["silu", "gelu"])
@given(rows=small, d=st.integers(1, 40), limit=st.sampled_from([0.0, 0.5, 2.0]), seed=seeds)
@example(rows=3, d=12, limit=0.5, seed=5)  # d % 4 == 0: four columns a thread on CPU devices
def test_glu(device, monkeypatch, layout, dtype, kind, rows, d, limit, seed):
    force_thread_layout(monkeypatch, layout)
    rng = np.random.default_rng(seed)
    x = data(rng, (rows, 2 * d), dtype, 2)
    dy = data(rng, (rows, d), dtype)
    X, DY = rounded(x, dtype), rounded(dy, dtype)
    xt = ev.tensor(x)
    close(ops.glu(xt, kind, limit).numpy(), ref.glu(X, kind, limit), 16, dtype, f"glu {kind}")
    got = ops.glu_backward(xt, ev.tensor(dy), kind, limit).numpy().astype(np.float64)
    want = ref.glu_bwd(X, DY, kind, limit)
    # Elements within rounding of the strict |a*up| > L boundary may fall either way; skip those.
    a_up = np.abs(ref.act(X[:, :d], kind) * X[:, d:])
    near = np.tile(np.abs(a_up - limit) <= 1e-4 * max(limit, 1), 2) if limit > 0 else np.zeros_like(got, bool)
    close(np.where(near, 0, got), np.where(near, 0, want), 16, dtype, f"glu {kind} bwd")


@pytest.mark.parametrize("dtype", F)
@given(S=small, H=st.integers(1, 4), half=st.integers(1, 16), rows=small, d4=st.integers(1, 10), seed=seeds)
def test_cpu_twins_same_bits_as_one_element_a_thread(device, monkeypatch, dtype, S, H, half, rows, d4, seed):
    """rope's and glu's CPU twins (more elements a thread: the rule's pick on CPU devices) give the bits of the
    one-element-a-thread variants: the same operations on each element."""
    from evermind_vk.runtime import kernels
    cands = kernels.usable("rope", dtype, device)
    assert "th" in fixed.pick_cpu_twin(cands, "cpu").flags and "th" not in fixed.pick_cpu_twin(cands, "discrete_gpu").flags
    assert "th" not in fixed.pick_cpu_twin(cands, "cpu", fits=False).flags
    rng = np.random.default_rng(seed)
    x = ev.tensor(data(rng, (S, H, 2 * half), dtype))
    g = ev.tensor(data(rng, (rows, 8 * d4), dtype, 2))
    dy = ev.tensor(data(rng, (rows, 4 * d4), dtype))
    got = {}
    for layout in ("", "one"):
        with monkeypatch.context() as m:
            force_thread_layout(m, layout)
            outs = [ops.rope(x, start_pos=3), ops.rope_backward(x, start_pos=3)]
            for kind in ("silu", "gelu"):
                outs += [ops.glu(g, kind, 0.5), ops.glu_backward(g, dy, kind, 0.5)]
            got[layout] = [o.numpy().tobytes() for o in outs]
    assert got[""] == got["one"]


@pytest.mark.parametrize("dtype", F)
def test_gelu_tails_keep_relative_precision(device, dtype):
    # gelu' in the tails, away from its root near -0.752: the tanh form's 1 + tanh(u) cancels to 0 in f32
    # below x ~ -5 (relative error 13 before the sigmoid form); every element must now be relatively exact.
    x = np.concatenate([np.linspace(-6, -0.85, 4001), np.linspace(-0.65, 6, 4001)]).astype(NP[dtype])
    X = rounded(x, dtype)
    got = ops.gelu_backward(ev.tensor(x), ev.tensor(np.ones_like(x))).numpy()
    close(got, ref.act_d(X, "gelu"), 32, dtype, "gelu bwd tails", mag=0.0)
    close(ops.gelu(ev.tensor(x)).numpy(), ref.act(X, "gelu"), 32, dtype, "gelu tails", mag=0.0)


def test_glu_limit_is_strict(device):
    # silu(g) * up == L exactly is kept; above L both gradients are exactly 0.
    x = np.array([[0.0, 3.0, 7.0, 1.0]], np.float32)  # gates 0, 3; ups 7, 1
    a = float(ref.act(np.float64(3.0), "silu")) * 1.0
    dx = ops.glu_backward(ev.tensor(x), ev.tensor(np.ones((1, 2), np.float32)), "silu", limit=a * 0.5).numpy()
    assert dx[0, 1] == 0 and dx[0, 3] == 0 and dx[0, 0] != 0 or dx[0, 2] == 0  # gate 0 => a=0 <= L: kept
    dx_eq = ops.glu_backward(ev.tensor(np.array([[0.0, 2.0]], np.float32)), ev.tensor(np.ones((1, 1), np.float32)),
                             "silu", limit=0.0).numpy()
    assert dx_eq[0, 1] == 0.0  # silu(0) = 0 => dUp = 0 exactly, dGate = 0.5 * up
    assert abs(dx_eq[0, 0] - 1.0) < 1e-6


@pytest.mark.parametrize("dtype", F)
@given(rows=small, cols=st.integers(1, 80), seed=seeds)
def test_bias_slice_activations(device, dtype, rows, cols, seed):
    rng = np.random.default_rng(seed)
    x, dy = data(rng, (rows, cols), dtype), data(rng, (rows, cols), dtype)
    b = rng.standard_normal(cols).astype(np.float32)
    X, DY = rounded(x, dtype), rounded(dy, dtype)
    xt = ev.tensor(x)
    close(ops.bias_add(xt, ev.tensor(b)).numpy(), X + b, 2, dtype, "bias_add")
    close(ops.bias_add_backward(ev.tensor(dy)).numpy(), DY.sum(0), rows, "f32", "bias_add bwd")
    r = int(rng.integers(0, rows))
    assert np.array_equal(ops.row_slice(xt, r).numpy(), x[r])
    back = ops.row_slice_backward(ev.tensor(dy[r]), rows, r).numpy()
    assert np.array_equal(back[r], dy[r]) and not np.delete(back, r, 0).any()
    for kind in ("silu", "gelu"):
        close(getattr(ops, kind)(xt).numpy(), ref.act(X, kind), 8, dtype, kind)
        close(getattr(ops, kind + "_backward")(xt, ev.tensor(dy)).numpy(), DY * ref.act_d(X, kind), 8, dtype, kind + " bwd")


@pytest.mark.parametrize("dtype", F)
@given(n=st.integers(1, 20000), square=st.booleans(), seed=seeds)
def test_reduce_sum(device, dtype, n, square, seed):
    x = data(np.random.default_rng(seed), (n,), dtype)
    X = rounded(x, dtype)
    want = (X * X).sum() if square else X.sum()
    got = float(ops.reduce_sum(ev.tensor(x), square=square).numpy()[0])
    assert abs(got - want) <= 2 * (n + 8) * U32 * (np.abs(X) ** (2 if square else 1)).sum() + 1e-30


GQA = st.sampled_from([(1, 1), (2, 1), (4, 2), (4, 4), (3, 1)])


@pytest.mark.parametrize("path", ["matmul", "fused"])
@pytest.mark.parametrize("dtype", F)
@given(S=st.integers(1, 24), heads=GQA, D=st.integers(1, 16), causal=st.booleans(), recompute=st.booleans(), seed=seeds)
@example(S=2, heads=(1, 1), D=2, causal=True, recompute=False, seed=1750174)  # f16 fused dq: 14% of a cancelled value
def test_attention(device, monkeypatch, path, dtype, S, heads, D, causal, recompute, seed):
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", path)
    H, KVH = heads
    rng = np.random.default_rng(seed)
    q, k, v = data(rng, (S, H, D), dtype), data(rng, (S, KVH, D), dtype), data(rng, (S, KVH, D), dtype)
    do = data(rng, (S, H, D), dtype)
    Q, K, Vv, DO = (rounded(a, dtype) for a in (q, k, v, do))
    scale = 1 / np.sqrt(D)
    qt, kt, vt = ev.tensor(q), ev.tensor(k), ev.tensor(v)
    out, probs = ops.attention(qt, kt, vt, causal=causal, save_probs=not recompute)
    # f16 on the matmul path: the reference rounds scores and probabilities to f16 where the device
    # stores them; a 1-ulp difference in those roundings is allowed for through the f16 term of the
    # tolerance. The fused path keeps them in f32 registers.
    rnd = (lambda a: rounded(a, "f16")) if dtype == "f16" and path == "matmul" else ref.same
    wout, _ = ref.attention(Q, K, Vv, causal, scale, rnd)
    n = 4 * (S + D) if dtype == "f32" else 4 * (S + D) * 64
    close(out.numpy(), wout, n, dtype, "attention out")
    dq, dk, dv = ops.attention_backward(qt, kt, vt, ev.tensor(do), probs, causal=causal)
    wdq, wdk, wdv = ref.attention_bwd(Q, K, Vv, DO, causal, scale, rnd)
    mq, mk, mv = ref.attention_bwd_mag(Q, K, Vv, DO, causal, scale)
    n *= H // KVH
    close(dq.numpy(), wdq, n, dtype, "dq", mag=np.maximum(mq, np.abs(wdq).max()))
    close(dk.numpy(), wdk, n, dtype, "dk", mag=np.maximum(mk, np.abs(wdk).max()))
    close(dv.numpy(), wdv, n, dtype, "dv", mag=np.maximum(mv, np.abs(wdv).max()))


@pytest.mark.parametrize("path", ["matmul", "fused"])
def test_attention_gqa_reference_vector(device, path, monkeypatch):
    # S=1, H=4, KVH=1, hd=1: q=[1,2,3,4], k=[2], v=[3], dO=1 => P=1, dQ=0, dK=0, dV=4; the fused path
    # saves the base-2 logsumexp of the scores q.k = [2, 4, 6, 8] instead of P.
    monkeypatch.setenv("EVERMIND_VK_ATTENTION", path)
    q = ev.tensor(np.array([1, 2, 3, 4], np.float32).reshape(1, 4, 1))
    k = ev.tensor(np.array([[[2]]], np.float32))
    v = ev.tensor(np.array([[[3]]], np.float32))
    out, p = ops.attention(q, k, v)
    if path == "matmul":
        assert np.array_equal(p.numpy().ravel(), [1, 1, 1, 1])
    else:
        assert p.shape == (4, 1) and np.allclose(p.numpy().ravel(), np.array([2, 4, 6, 8]) * np.log2(np.e), rtol=1e-6)
    assert np.array_equal(out.numpy().ravel(), [3, 3, 3, 3])
    dq, dk, dv = ops.attention_backward(q, k, v, ev.tensor(np.ones((1, 4, 1), np.float32)), p, out=out)
    assert np.array_equal(dq.numpy().ravel(), [0, 0, 0, 0])
    assert dk.numpy().ravel().tolist() == [0.0] and dv.numpy().ravel().tolist() == [4.0]


def test_bad_geometry_errors(device):
    q = ev.tensor(np.zeros((2, 3, 4), np.float32))
    kv = ev.tensor(np.zeros((2, 2, 4), np.float32))
    with pytest.raises(ev.ShapeError, match="GQA"):
        ops.attention(q, kv, kv)
    with pytest.raises(ev.ShapeError, match="even"):
        ops.rope(ev.tensor(np.zeros((2, 1, 3), np.float32)))
    with pytest.raises(ev.UnsupportedError, match="gated activation"):
        ops.glu(ev.tensor(np.zeros((1, 4), np.float32)), "relu")


@given(B=st.integers(1, 3), S=st.integers(1, 10), heads=GQA, D=st.sampled_from([2, 4, 8]), seed=seeds)
def test_attention_and_rope_batched(device, B, S, heads, D, seed):
    """B packed sequences give what B separate calls give."""
    H, KVH = heads
    rng = np.random.default_rng(seed)
    q, k, v = data(rng, (B * S, H, D), "f32"), data(rng, (B * S, KVH, D), "f32"), data(rng, (B * S, KVH, D), "f32")
    do = data(rng, (B * S, H, D), "f32")
    out, p = ops.attention(ev.tensor(q), ev.tensor(k), ev.tensor(v), batch=B)
    grads = ops.attention_backward(ev.tensor(q), ev.tensor(k), ev.tensor(v), ev.tensor(do), p, batch=B)
    rq = ops.rope(ev.tensor(q), start_pos=2, seq_len=S).numpy()
    for b in range(B):
        sl = slice(b * S, (b + 1) * S)
        o1, p1 = ops.attention(ev.tensor(q[sl]), ev.tensor(k[sl]), ev.tensor(v[sl]))
        g1 = ops.attention_backward(ev.tensor(q[sl]), ev.tensor(k[sl]), ev.tensor(v[sl]), ev.tensor(do[sl]), p1)
        assert np.array_equal(out.numpy()[sl], o1.numpy())
        for g, g1_ in zip(grads, g1):
            assert np.array_equal(g.numpy()[sl], g1_.numpy())
        assert np.array_equal(rq[sl], ops.rope(ev.tensor(q[sl]), start_pos=2).numpy())
