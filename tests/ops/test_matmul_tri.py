"""The causal hints of gemm_strided (runtime/variants.py TRI; the matmul templates' k_range): a square product
whose A is zero above (lower_a) or below (upper_a) its diagonal, or whose C is used only on and below it
(lower_c), skips that work, and gives the full product's result: every template, forced by name (the
cooperative-matrix ones where the device has them), over a two-level batch and shapes that are not tile
multiples. A hint given for an operand that is not triangular gives a different result: the work is skipped."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import evermind_vk as ev
from evermind_vk.ops.matmul import gemm_chunks, gemm_strided
from evermind_vk.runtime import kernels, variants
from test_matmul import force, skip_unless_runs

# Every tile; of the register blocks' aligned twins the one for these tests' layout (A and B row-major: ukn).
ALL = [v for dt in ("f32", "f16") for v in kernels.variants_of("matmul", dt) if v.spec.get("BM", 1) > 1
       and variants.unit_layout(v.flags) in ("", "ukn")]


def _case(device, monkeypatch, v, S, N, z, seed, hint, triangular=True):
    """C_z = A_z . B_z for z batches of S x S A (or S x N C for lower_c, N = S there) with `hint`; returns
    (got, full product of the same operands without the hint, the variant that ran)."""
    skip_unless_runs(device, v)
    rng = np.random.default_rng(seed)
    np_dt = np.float16 if v.dtype == "f16" else np.float32
    K = S
    N = S if hint == "lower_c" else N
    a = rng.standard_normal((z, S, K)).astype(np_dt)
    if triangular and hint == "lower_a":
        a = np.tril(a)
    elif triangular and hint == "upper_a":
        a = np.triu(a)
    b = rng.standard_normal((z, K, N)).astype(np_dt)
    ta, tb = ev.tensor(a.reshape(-1)), ev.tensor(b.reshape(-1))

    def run(h):
        c = ev.tensor(np.full(z * S * N, np.nan, np.float32 if "c32" in v.flags else np_dt))  # every element written
        gemm_strided(ta, tb, c, S, N, K, a_strides=(K, 1), b_strides=(N, 1), c_strides=(N, 1), batch=z,
                     a_batch=(0, S * K), b_batch=(0, K * N, 1), c_batch=(0, S * N), tri=h)
        return c.numpy().reshape(z, S, N)
    used = force(monkeypatch, v.name)
    monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", "0")  # a GPU would split the single f16 products along K
    got, full = run(hint), run("")  # the same variant both times: the same summation order
    assert used and set(used) == {v.name}, (used, v.name)
    return got, full, a, b


def _launchable(v, S, N):
    lay = variants.Layout((S, 1), (N, 1), (N, 1), (0, S * S), (0, S * N, 1), (0, S * N))
    return not variants.variant_launch_errors(v, S, N, S, lay)


@pytest.mark.parametrize("v", ALL, ids=lambda v: v.name)
@pytest.mark.parametrize("hint", ["lower_a", "upper_a", "lower_c"])
@settings(max_examples=3, deadline=None)  # each example builds pipelines
@given(s=st.integers(1, 5), n=st.integers(1, 3), z=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_hint_gives_the_full_product(device, monkeypatch, v, hint, s, n, z, seed):
    bm, bn, kind = v.spec["BM"], v.spec["BN"], variants.matmul_kind(v.flags)
    # sizes that cross several tiles: whole tiles for cm and the al twins (their launch rules), else ending
    # mid-tile, in whole 16-byte vectors for rb and v4
    if kind in ("cm", "cm2") or variants.aligned(v.flags):
        S, N = s * bm, n * bn
    else:
        S, N = s * bm // 2 + (4 if kind in ("rb", "v4") else 3), n * bn // 2 + (4 if kind in ("rb", "v4") else 1)
    if not _launchable(v, S, S if hint == "lower_c" else N):
        pytest.skip(f"{v.name} cannot run {S}x{N}x{S}")
    got, full, a, b = _case(device, monkeypatch, v, S, N, z, seed, hint)
    assert not np.isnan(got).any()
    if hint == "lower_c":
        low = np.tril(np.ones((S, S), bool))
        np.testing.assert_array_equal(got[:, low], full[:, low])  # on and below the diagonal: the product
        above = got[:, ~low]
        assert np.all((above == 0) | (above == full[:, ~low]))  # above: zeros where a tile was skipped
    else:
        np.testing.assert_array_equal(got, full)  # skipped terms are exact zeros


@pytest.mark.parametrize("hint", ["lower_a", "upper_a", "lower_c"])
def test_a_hint_really_skips_work(device, monkeypatch, hint):
    """With an A that is not triangular (a misuse), the hinted product differs from the full one: the
    hint is not ignored. 64 x 64 x 64 with the 16x16-thread 32x32 tiles: 4 tile rows."""
    v = next(v for v in kernels.variants_of("matmul", "f32") if v.name == "matmul_f32_t32x32")
    got, full, _, _ = _case(device, monkeypatch, v, 64, 64, 2, 0, hint, triangular=False)
    assert not np.array_equal(got, full)
    if hint == "lower_c":
        assert np.all(got[:, 0, 32:] == 0)  # the first tile row's tiles right of the diagonal block


# One variant per (dtype, kind), for the split products below.
KINDS = list({(v.dtype, variants.matmul_kind(v.flags), variants.aligned(v.flags)): v for v in ALL}.values())


@pytest.mark.parametrize("v", KINDS, ids=lambda v: v.name)
@pytest.mark.parametrize("hint", ["lower_a", "upper_a"])
@settings(max_examples=3, deadline=None)
@given(s=st.integers(2, 5), cuts=st.lists(st.integers(1, 7), min_size=1, max_size=3, unique=True),
       z=st.integers(1, 2), seed=st.integers(0, 2**31))
def test_chunks_told_their_diagonal_give_the_full_product(device, monkeypatch, v, hint, s, cuts, z, seed):
    """gemm_chunks: a causal product cut along K, each chunk launched with its diagonal offset kd = k0, gives
    per chunk exactly the unhinted chunk's partial (skipped terms are exact zeros), and the rows sum to the
    float64 product. Chunks start at whole 16s (whole tiles' k for the cooperative-matrix kinds and the aligned
    register blocks, whose launch rules want whole tiles)."""
    skip_unless_runs(device, v)
    kind = variants.matmul_kind(v.flags)
    whole = kind in ("cm", "cm2") or variants.aligned(v.flags)
    unit = v.spec["BK"] if whole else 16
    S = s * (v.spec["BM"] if whole else 32) + (0 if whole else 4)
    N = v.spec["BN"] if whole else 12
    bounds = sorted({c * unit for c in cuts if c * unit < S})
    chunks = list(zip([0] + bounds, bounds + [S]))
    rng = np.random.default_rng(seed)
    np_dt = np.float16 if v.dtype == "f16" else np.float32
    a = rng.standard_normal((z, S, S)).astype(np_dt)
    a = np.tril(a) if hint == "lower_a" else np.triu(a)
    b = rng.standard_normal((z, S, N)).astype(np_dt)
    ta, tb = ev.tensor(a.reshape(-1)), ev.tensor(b.reshape(-1))
    kw = dict(a_strides=(S, 1), b_strides=(N, 1), c_strides=(N, 1), batch=z, a_batch=(0, S * S),
              b_batch=(0, S * N, 1), c_batch=(0, S * N))

    def run(h):
        work = ev.tensor(np.full((len(chunks), z * S * N), np.nan, np.float32))
        gemm_chunks(ta, tb, work, 0, chunks, S, N, tri=h, **kw)
        return work.numpy()
    used = force(monkeypatch, v.name)
    monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", "0")
    if variants.variant_launch_errors(v, S, N, chunks[0][1], variants.Layout(
            (S, 1), (N, 1), (N, 1), (0, S * S), (0, S * N, 1), (0, S * N))):
        pytest.skip(f"{v.name} cannot run these chunks")
    got, full = run(hint), run("")
    assert used and set(used) == {v.name}, (used, v.name)
    np.testing.assert_array_equal(got, full)
    want = np.einsum("zmk,zkn->zmn", a.astype(np.float64), b.astype(np.float64)).reshape(-1)
    tol = 4 * S * (2 ** -10 if v.dtype == "f16" else 2 ** -23)
    mag = np.einsum("zmk,zkn->zmn", np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))).reshape(-1)
    assert np.all(np.abs(got.astype(np.float64).sum(0) - want) <= tol * mag + 1e-6)


@pytest.mark.parametrize("hint", ["lower_a", "upper_a"])
def test_a_chunk_really_uses_its_diagonal_offset(device, monkeypatch, hint):
    """With an A that is not triangular, a chunk's hinted partial differs from the unhinted one exactly where
    its offset puts rows wholly before (lower_a) or after (upper_a) the chunk's k range: there it is zero."""
    v = next(v for v in kernels.variants_of("matmul", "f32") if v.name == "matmul_f32_t32x32")
    monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", "0")
    force(monkeypatch, v.name)
    S, N = 128, 32
    a, b = np.ones((S, S), np.float32), np.ones((S, N), np.float32)
    chunk = (32, 96) if hint == "lower_a" else (32, 64)
    work = ev.tensor(np.full((1, S * N), np.nan, np.float32))
    gemm_chunks(ev.tensor(a), ev.tensor(b), work, 0, [chunk], S, N, a_strides=(S, 1), b_strides=(N, 1),
                c_strides=(N, 1), tri=hint)
    got = work.numpy().reshape(S, N)
    if hint == "lower_a":  # rows 0..31 end before k = 32: no step; rows 32.. run (whole 32-row tiles)
        assert np.all(got[:32] == 0) and np.all(got[32:] > 0)
    else:  # rows from 64 start after the chunk's last k, 63: no step
        assert np.all(got[:64] > 0) and np.all(got[64:] == 0)
    with pytest.raises(ev.ShapeError, match="square A"):
        gemm_chunks(ev.tensor(a), ev.tensor(b), work, 0, [(100, 140)], S, N, a_strides=(S, 1), b_strides=(N, 1),
                    c_strides=(N, 1), tri=hint)


def test_hints_are_checked():
    x = ev.tensor(np.zeros(64, np.float32))
    with pytest.raises(ev.ShapeError, match="square A"):
        gemm_strided(x, x, x, 4, 4, 8, a_strides=(8, 1), b_strides=(4, 1), c_strides=(4, 1), tri="lower_a")
    with pytest.raises(ev.ShapeError, match="beta 0"):
        gemm_strided(x, x, x, 4, 4, 4, a_strides=(4, 1), b_strides=(4, 1), c_strides=(4, 1), beta=1.0, tri="lower_c")
    with pytest.raises(ev.ShapeError, match="unknown causal hint"):
        gemm_strided(x, x, x, 4, 4, 4, a_strides=(4, 1), b_strides=(4, 1), c_strides=(4, 1), tri="upper_c")
