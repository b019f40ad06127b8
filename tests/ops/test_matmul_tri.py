"""The causal hints of gemm_strided (runtime/variants.py TRI; the matmul templates' k_range): a square product
whose A is zero above (lower_a) or below (upper_a) its diagonal, or whose C is used only on and below it
(lower_c), skips that work, and gives the full product's result: every template, forced by name (the
cooperative-matrix ones where the device has them), over a two-level batch and shapes that are not tile
multiples. A hint given for an operand that is not triangular gives a different result: the work is skipped."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import evermind_vk as ev
from evermind_vk.ops.matmul import gemm_strided
from evermind_vk.runtime import kernels, variants
from test_matmul import force

ALL = [v for dt in ("f32", "f16") for v in kernels.variants_of("matmul", dt) if v.spec.get("BM", 1) > 1]


def _case(device, monkeypatch, v, S, N, z, seed, hint, triangular=True):
    """C_z = A_z . B_z for z batches of S x S A (or S x N C for lower_c, N = S there) with `hint`; returns
    (got, full product of the same operands without the hint, the variant that ran)."""
    if [f for f in v.features if not device.has(f)]:
        pytest.skip(f"{device.info.name} lacks {v.name}'s features")
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
    return not variants.matmul_launch_errors(variants.matmul_kind(v.flags), v.spec, S, N, S, lay)


@pytest.mark.parametrize("v", ALL, ids=lambda v: v.name)
@pytest.mark.parametrize("hint", ["lower_a", "upper_a", "lower_c"])
@settings(max_examples=3, deadline=None)  # each example builds pipelines
@given(s=st.integers(1, 5), n=st.integers(1, 3), z=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_hint_gives_the_full_product(device, monkeypatch, v, hint, s, n, z, seed):
    bm, bn, kind = v.spec["BM"], v.spec["BN"], variants.matmul_kind(v.flags)
    # sizes that cross several tiles: whole tiles for cm (its launch rule), else ending mid-tile, in whole
    # 16-byte vectors for rb and v4
    if kind == "cm":
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


def test_hints_are_checked():
    x = ev.tensor(np.zeros(64, np.float32))
    with pytest.raises(ev.ShapeError, match="square A"):
        gemm_strided(x, x, x, 4, 4, 8, a_strides=(8, 1), b_strides=(4, 1), c_strides=(4, 1), tri="lower_a")
    with pytest.raises(ev.ShapeError, match="beta 0"):
        gemm_strided(x, x, x, 4, 4, 4, a_strides=(4, 1), b_strides=(4, 1), c_strides=(4, 1), beta=1.0, tri="lower_c")
    with pytest.raises(ev.ShapeError, match="unknown causal hint"):
        gemm_strided(x, x, x, 4, 4, 4, a_strides=(4, 1), b_strides=(4, 1), c_strides=(4, 1), tri="upper_c")
