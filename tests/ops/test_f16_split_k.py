"""f16 split-K (issue 13, items 4-5): f16 A and B, the S partial products stored in f32 by the c32 twins
of the f16 matmul rows, summed in f32 and rounded once into C (colsum_cast for an f16 C), against
float64 oracles. lavapipe has no cooperative matrices and never splits by itself, so the split is forced
(EVERMIND_VK_MATMUL_SPLIT_K=n) and runs on the CPU rows' c32 twins; the c32 twins of every algorithm
are checked one by one through gemm_strided (tests/ops/test_matmul.py's strided_case)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import evermind_vk as ev
from evermind_vk.errors import UnsupportedError
from evermind_vk.runtime import kernels, variants
from oracle import U16, assert_within, dot_bound, rounded
from test_matmul import STRIDED, coopmat_strided, kind_names, log_dispatches, strided_case


@settings(max_examples=25, deadline=None)
@given(S=st.sampled_from([2, 3, 4, 8]), M=st.integers(1, 40), N=st.integers(1, 40), k16=st.integers(1, 4),
       ragged=st.sampled_from([0, 0, 0, 4, 16]), trans_a=st.booleans(), trans_b=st.booleans(),
       out=st.sampled_from(["f16", "f32"]), seed=st.integers(0, 2**31))
def test_f16_split_k_vs_oracle(device, monkeypatch, S, M, N, k16, ragged, trans_a, trans_b, out, seed):
    """Forced split of an f16 product into S chunks of 16 * k16 values of k (one batched launch) and, with
    `ragged`, of a K that S equal chunks of whole 16s do not cover: chunks of whole 16s, the last shorter, a
    launch each (variants.k_chunks), or no split where S such chunks overshoot K; any M and N (v4 or shared-memory
    c32 twins), C in f16 or f32, alpha applied once. Bound: f32 accumulation over all K terms (the chunk
    sums and the S-term sum of the partials together are one K-term f32 sum) plus one rounding to C."""
    monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", str(S))
    used = log_dispatches(monkeypatch)
    K = S * 16 * k16 + ragged
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float16)
    c = ev.tensor(np.full((M, N), np.nan, np.float16 if out == "f16" else np.float32))
    ev.ops.gemm(ev.tensor(a), ev.tensor(b), c, M, N, K, trans_a=trans_a, trans_b=trans_b, alpha=0.5)
    A, B = rounded(a, "f16"), rounded(b, "f16")
    A, B = (A.T if trans_a else A), (B.T if trans_b else B)
    split = variants.matmul_split_k(M, N, K, 1, device.info.type, "f16", 1, 0.0, True, str(S))
    chunks = variants.k_chunks(K, S)
    assert split == (S if len(chunks) == S else 1)
    assert len(chunks) == S or ragged
    if split > 1:  # the partials in f32 (c32 twins), then one column sum into C's dtype
        launches = 1 if len({k1 - k0 for k0, k1 in chunks}) == 1 else S
        assert len(used) == launches + 1 and (launches == S) == bool(ragged), used
        assert all("c32" in u.split("_") and u.startswith("matmul_f16") for u in used[:-1]), used
        assert used[-1] == ("colsum_cast_f16" if out == "f16" else "colsum_f32")
    else:
        assert len(used) == 1 and used[0].startswith("matmul_f16") and ("c32" in used[0].split("_")) == (out == "f32")
    assert_within(c.numpy(), 0.5 * A @ B, 0.5 * dot_bound(np.abs(A), np.abs(B), K, out), f"f16 split-K {S} into {out}")


def test_split_k_off_switch_and_f16_default_on_cpu(device, monkeypatch):
    """EVERMIND_VK_MATMUL_SPLIT_K=0 never splits; unset, a CPU device does not split f16 either."""
    a, b = ev.tensor(np.ones((16, 256), np.float16)), ev.tensor(np.ones((256, 16), np.float16))
    for env in ("0", None):
        if env is None:
            monkeypatch.delenv("EVERMIND_VK_MATMUL_SPLIT_K", raising=False)
        else:
            monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", env)
        used = log_dispatches(monkeypatch)
        c = ev.matmul(a, b)
        assert len(used) == 1 and "c32" not in used[0].split("_"), (env, used)
        assert (c.numpy() == 256).all()


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 600), cols=st.integers(1, 300), seed=st.integers(0, 2**31))
def test_colsum_cast_vs_oracle(device, rows, cols, seed):
    """colsum of f32 rows into an f16 out (the split-K reduction; past 256 rows, in two stages with the
    cast in the last): f32 sums in row order, one rounding to f16."""
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    y = ev.tensor(np.full((cols,), np.nan, np.float16))
    ev.ops.colsum(ev.tensor(x), out=y)
    X = x.astype(np.float64)
    want = X.sum(axis=0)
    mag = np.abs(X).sum(axis=0)
    assert y.dtype == "f16"
    assert_within(y.numpy(), want, 2 * (rows + 2) * 2.0 ** -24 * mag + U16 * np.abs(want) + 2.0 ** -24, "colsum_cast")


def test_colsum_into_f16_reads_f32_only(device):
    with pytest.raises(UnsupportedError, match="f32 rows"):
        ev.ops.colsum(ev.tensor(np.ones((4, 3), np.float16)), out=ev.tensor(np.zeros(3, np.float16)))


def test_mixed_dtypes_refused(device):
    f16, f32 = ev.tensor(np.ones((4, 4), np.float16)), ev.tensor(np.ones((4, 4), np.float32))
    with pytest.raises(UnsupportedError, match="dtypes"):
        ev.ops.gemm(f32, f32, ev.tensor(np.ones((4, 4), np.float16)), 4, 4, 4)  # f32 operands, f16 C
    with pytest.raises(UnsupportedError, match="dtypes"):
        ev.ops.gemm(f16, f32, f32, 4, 4, 4)


def test_every_f16_matmul_row_has_a_c32_twin():
    """The split of an f16 product picks its tile among all f16 rows and runs the partials on the tile's
    c32 twin: every f16 row has one, with C bound as f32 and A, B as f16."""
    rows = kernels.variants_of("matmul", "f16")
    plain = {(v.name, v.spec_constants) for v in rows if "c32" not in v.flags}
    twins = {(v.name.replace("_c32", ""), v.spec_constants) for v in rows if "c32" in v.flags}
    assert plain and plain == twins
    for v in rows:
        if "c32" in v.flags:
            assert [t for _, t, _ in v.bindings] == ["f16", "f16", "f32"], v.name


C32 = kind_names("tiled", True) + kind_names("v4", True) + kind_names("rb", True)


@pytest.mark.parametrize("name", C32)
@settings(max_examples=3, deadline=None)  # each example builds a pipeline
@given(M4=st.integers(1, 17), N4=st.integers(1, 17), K4=st.integers(1, 10), **STRIDED)
def test_c32_twins_strided(device, monkeypatch, name, M4, N4, K4, a_kmajor, b_nmajor, z1, batch, bdiv, pad,
                           c_unit, beta, seed):
    """The c32 twins of the shared-memory, v4 and register-block rows, forced by name through gemm_strided
    (f16 A and B, f32 C, beta reads C back in f32; v4's launch rules: M, N, K multiples of 4)."""
    strided_case(device, monkeypatch, name, 4 * M4, 4 * N4, 4 * K4, a_kmajor, b_nmajor, z1, batch, bdiv, pad,
                 c_unit, beta, seed)


CM32 = [v for v in kernels.variants_of("matmul", "f16") if "cm" in v.flags and "c32" in v.flags]


@pytest.mark.parametrize("variant", CM32, ids=lambda v: v.name)
@pytest.mark.parametrize("a_kmajor,b_nmajor,beta", [(False, True, 0.0), (True, False, 0.5)])
def test_c32_coopmat_twins_strided(device, monkeypatch, variant, a_kmajor, b_nmajor, beta):
    """The tensor-core c32 twins (skipped where the device lacks cooperative matrices: run on the H200)."""
    coopmat_strided(device, monkeypatch, variant, a_kmajor, b_nmajor, beta)


def test_forced_variant_runs_the_split_chunks_on_its_c32_twin(device, monkeypatch):
    """EVERMIND_VK_MATMUL_VARIANT names an f16 row; a split product runs its chunks on that row's twin."""
    monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", "4")
    monkeypatch.setenv("EVERMIND_VK_MATMUL_VARIANT", "matmul_f16_t32x32")
    used = log_dispatches(monkeypatch)
    a = np.random.default_rng(1).standard_normal((64, 24)).astype(np.float16)
    c = ev.tensor(np.zeros((24, 24), np.float16))
    ev.ops.gemm(ev.tensor(a), ev.tensor(a), c, 24, 24, 64, trans_a=True)
    assert used == ["matmul_f16_c32_t32x32", "colsum_cast_f16"]
    A = rounded(a, "f16")
    assert_within(c.numpy(), A.T @ A, dot_bound(np.abs(A.T), np.abs(A), 64, "f16"), "forced split")
