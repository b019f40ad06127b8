"""matmul (both transpose_b settings, f32 and f16, every tile) and its backward vs float64 oracles."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import evermind_vk as ev
from evermind_vk.runtime import kernels, variants
from oracle import U16, U32, assert_within, dot_bound, rounded


def kind_names(kind):
    return [v.name for dt in ("f32", "f16") for v in kernels.variants_of("matmul", dt) if variants.matmul_kind(v.flags) == kind]


SCALAR, V4, RB = kind_names("tiled"), kind_names("v4"), kind_names("rb")
dims = st.integers(1, 80)


def force(monkeypatch, name: str) -> list:
    """Force matmul variant `name`; returns the names of the variants dispatched from then on."""
    monkeypatch.setenv("EVERMIND_VK_MATMUL_VARIANT", name)
    used = []
    real = kernels.dispatch
    monkeypatch.setattr(kernels, "dispatch", lambda v, *a, **k: (used.append(v.name), real(v, *a, **k)))
    return used


@pytest.mark.parametrize("name", SCALAR)
@pytest.mark.parametrize("transpose_b", [False, True])
@given(M=dims, N=dims, K=dims, seed=st.integers(0, 2**31))
def test_matmul_vs_oracle(device, monkeypatch, name, transpose_b, M, N, K, seed):
    """Every scalar variant, forced by name, on shapes that are not tile multiples."""
    used = force(monkeypatch, name)
    tile = name.rsplit("_", 1)[1]
    dtype = name.split("_")[1]
    rng = np.random.default_rng(seed)
    np_dt = np.float16 if dtype == "f16" else np.float32
    a = rng.standard_normal((M, K)).astype(np_dt)
    b = rng.standard_normal((N, K) if transpose_b else (K, N)).astype(np_dt)
    got = ev.matmul(ev.tensor(a), ev.tensor(b), transpose_b=transpose_b).numpy()
    A, B = rounded(a, dtype), rounded(b, dtype)
    B = B.T if transpose_b else B
    assert got.shape == (M, N) and got.dtype == np_dt
    assert name in used
    assert_within(got, A @ B, dot_bound(np.abs(A), np.abs(B), K, dtype), f"matmul {name} {tile}")


@pytest.mark.parametrize("name", V4)
@pytest.mark.parametrize("transpose_b", [False, True])
@settings(max_examples=4)  # each example builds a pipeline: ~0.2-0.7 s on lavapipe
@given(M=dims, N4=st.integers(1, 40), K4=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_v4_variants_on_aligned_shapes(device, monkeypatch, name, transpose_b, M, N4, K4, seed):
    """The 16-byte-load variants (K and N multiples of 4, any M), forced by name."""
    test_matmul_vs_oracle.hypothesis.inner_test(device, monkeypatch, name, transpose_b, M, 4 * N4, 4 * K4, seed)


@pytest.mark.parametrize("name", RB)
@settings(max_examples=6)  # each example builds a pipeline
@given(M=st.integers(1, 70), N=st.integers(1, 70), K=st.integers(1, 40), a_kmajor=st.booleans(),
       b_nmajor=st.booleans(), batch=st.integers(1, 3), bdiv=st.sampled_from([1, 3]), pad=st.integers(0, 5),
       c_unit=st.booleans(), beta=st.sampled_from([0.0, 0.5]), seed=st.integers(0, 2**31))
def test_rb_variants_strided(device, monkeypatch, name, M, N, K, a_kmajor, b_nmajor, batch, bdiv, pad,
                             c_unit, beta, seed):
    """The GPU register-block variants through gemm_strided: A k- or m-contiguous, B n- or k-contiguous,
    row strides padded to multiples of 4 (so a 16-byte load can straddle the end of a row), batched with
    a shared B, alpha/beta, and C written with 16-byte or elementwise stores."""
    used = force(monkeypatch, name)
    dtype = name.split("_")[1]
    np_dt = np.float16 if dtype == "f16" else np.float32
    rng = np.random.default_rng(seed)
    up4 = lambda x: -(-x // 4) * 4
    bbatch = -(-batch // bdiv)
    # A_z[m,k]: a_kmajor -> a[aoff + z*sab + m*lda + k], else a[aoff + z*sab + k*lda + m]
    lda = up4((K if a_kmajor else M) + pad)
    a_rows = M if a_kmajor else K
    sab, aoff = up4(a_rows * lda + pad), 4 * (pad % 3)
    ldb = up4((N if b_nmajor else K) + pad)
    b_rows = K if b_nmajor else N
    sbb, boff = up4(b_rows * ldb + pad), 4 * (pad % 2)
    scm, scn = (N + pad, 1) if c_unit else (1, M + pad)
    scb = (M * scm if c_unit else N * scn) + pad
    coff = pad
    a = rng.standard_normal(aoff + batch * sab).astype(np_dt)
    b = rng.standard_normal(boff + bbatch * sbb).astype(np_dt)
    c = rng.standard_normal(coff + batch * scb).astype(np_dt)
    A, B, C = rounded(a, dtype), rounded(b, dtype), rounded(c, dtype)
    want = C.copy()
    bound = np.zeros_like(want)
    for z in range(batch):
        ia = aoff + z * sab + (np.arange(M)[:, None] * lda + np.arange(K)[None, :] if a_kmajor
                               else np.arange(K)[None, :] * lda + np.arange(M)[:, None])
        ib = boff + (z // bdiv) * sbb + (np.arange(K)[:, None] * ldb + np.arange(N)[None, :] if b_nmajor
                                         else np.arange(N)[None, :] * ldb + np.arange(K)[:, None])
        ic = coff + z * scb + np.arange(M)[:, None] * scm + np.arange(N)[None, :] * scn
        want[ic] = 0.75 * A[ia] @ B[ib] + beta * C[ic]
        bound[ic] = 0.75 * dot_bound(np.abs(A[ia]), np.abs(B[ib]), K, dtype) + 2 * U32 * beta * np.abs(C[ic])
    ct = ev.tensor(c)
    ev.ops.gemm_strided(ev.tensor(a), ev.tensor(b), ct, M, N, K,
                    a_strides=(lda, 1) if a_kmajor else (1, lda), b_strides=(ldb, 1) if b_nmajor else (1, ldb),
                    c_strides=(scm, scn), batch=batch, a_batch=(aoff, sab), b_batch=(boff, sbb, bdiv),
                    c_batch=(coff, scb), alpha=0.75, beta=beta)
    assert used == [name]
    # elements of c outside every C_z are untouched (bound 0 there, want == C)
    assert_within(ct.numpy(), want, bound + (U16 * np.abs(want) if dtype == "f16" else 0), f"gemm_strided {name}")


@pytest.mark.parametrize("transpose_b", [False, True])
@given(M=dims, N=dims, K=dims, seed=st.integers(0, 2**31))
def test_matmul_backward_vs_oracle(device, transpose_b, M, N, K, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if transpose_b else (K, N)).astype(np.float32)
    dy = rng.standard_normal((M, N)).astype(np.float32)
    da, db = ev.matmul_backward(ev.tensor(a), ev.tensor(b), ev.tensor(dy), transpose_b=transpose_b)
    A, B, G = a.astype(np.float64), b.astype(np.float64), dy.astype(np.float64)
    Bop = B.T if transpose_b else B  # [K,N]
    want_da = G @ Bop.T
    want_db = (G.T @ A) if transpose_b else (A.T @ G)
    assert_within(da.numpy(), want_da, dot_bound(np.abs(G), np.abs(Bop.T), N, "f32"), "dA")
    bound_db = dot_bound(np.abs(G.T), np.abs(A), M, "f32") if transpose_b else dot_bound(np.abs(A.T), np.abs(G), M, "f32")
    assert_within(db.numpy(), want_db, bound_db, "dB")


@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_backward_finite_differences(device, transpose_b):
    # Loss L = sum(Y * G); central differences in float64 over the f32 kernel's forward.
    rng = np.random.default_rng(7)
    M, K, N = 2, 3, 4
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if transpose_b else (K, N)).astype(np.float32)
    g = rng.standard_normal((M, N)).astype(np.float32)

    def loss(a_, b_):
        y = ev.matmul(ev.tensor(a_.astype(np.float32)), ev.tensor(b_.astype(np.float32)), transpose_b=transpose_b)
        return float((y.numpy().astype(np.float64) * g).sum())

    da, db = ev.matmul_backward(ev.tensor(a), ev.tensor(b), ev.tensor(g), transpose_b=transpose_b)
    h = 1e-2
    for x, grad, other, first in ((a, da.numpy(), b, True), (b, db.numpy(), a, False)):
        fd = np.zeros_like(x, dtype=np.float64)
        for idx in np.ndindex(x.shape):
            xp, xm = x.astype(np.float64).copy(), x.astype(np.float64).copy()
            xp[idx] += h
            xm[idx] -= h
            lp = loss(xp, other) if first else loss(other, xp)
            lm = loss(xm, other) if first else loss(other, xm)
            fd[idx] = (lp - lm) / (2 * h)
        np.testing.assert_allclose(grad, fd, rtol=1e-3, atol=1e-3)


def test_matmul_shape_errors(device):
    a = ev.tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(ev.ShapeError, match="inner dimensions 4 != 5"):
        ev.matmul(a, ev.tensor(np.zeros((5, 2), np.float32)))
    with pytest.raises(ev.ShapeError, match="2-D"):
        ev.matmul(a, ev.tensor(np.zeros(4, np.float32)))
    with pytest.raises(ev.UnsupportedError, match="dtypes"):
        ev.matmul(a, ev.tensor(np.zeros((4, 2), np.float16)))


CM = [v for v in kernels.variants_of("matmul", "f16") if "cm" in v.flags]


@pytest.mark.parametrize("variant", CM, ids=lambda v: v.name)
@pytest.mark.parametrize("transpose_b", [False, True])
def test_coopmat_variants(device, monkeypatch, variant, transpose_b):
    """Tensor-core variants, each forced by name, on aligned shapes (skipped where the device lacks
    cooperative matrices); the selector picks some cm variant for such shapes by itself too."""
    missing = [f for f in variant.features if not device.has(f)]
    if missing:
        pytest.skip(f"{device.info.name} lacks {', '.join(missing)}")
    bm, bn, bk = variant.spec["BM"], variant.spec["BN"], variant.spec["BK"]
    rng = np.random.default_rng(bm)
    M, N, K = 2 * bm, 3 * bn, 4 * bk
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if transpose_b else (K, N)).astype(np.float16)
    lay = variants.Layout((K, 1), (1, K) if transpose_b else (N, 1), (N, 1))
    assert "cm" in variants.pick_matmul(kernels.usable("matmul", "f16", device), M, N, K, lay, device.info.type,
                                        device.info.shared_memory).flags
    used = force(monkeypatch, variant.name)
    got = ev.matmul(ev.tensor(a), ev.tensor(b), transpose_b=transpose_b).numpy()
    assert used[0] == variant.name  # then the read-back copy
    A, B = rounded(a, "f16"), rounded(b, "f16")
    B = B.T if transpose_b else B
    assert_within(got, A @ B, dot_bound(np.abs(A), np.abs(B), K, "f16"), variant.name)


def test_coopmat_never_selected_without_feature(device):
    if device.info.coopmat:
        pytest.skip("device has cooperative matrices")
    lay = variants.Layout((1024, 1), (1024, 1), (1024, 1))
    assert "cm" not in variants.pick_matmul(kernels.usable("matmul", "f16", device), 1024, 1024, 1024, lay,
                                            device.info.type, device.info.shared_memory).flags


@pytest.mark.parametrize("split", ["2", "4"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False)])
def test_split_k_matches_oracle(device, monkeypatch, split, trans_a, trans_b):
    """Parallel split-K (forced by EVERMIND_VK_MATMUL_SPLIT_K; GPUs choose it for few output tiles and
    a long K): chunks as one batched product into a workspace, a column sum, alpha applied once."""
    monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", split)
    used = []
    real = kernels.dispatch
    monkeypatch.setattr(kernels, "dispatch", lambda v, *a, **k: (used.append(v.op), real(v, *a, **k)))
    rng = np.random.default_rng(int(split) + 2 * trans_a + trans_b)
    M, N, K = 12, 20, 128
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
    c = ev.tensor(np.full((M, N), np.nan, np.float32))
    ev.ops.gemm(ev.tensor(a), ev.tensor(b), c, M, N, K, trans_a=trans_a, trans_b=trans_b, alpha=0.5)
    A, B = a.astype(np.float64), b.astype(np.float64)
    A, B = (A.T if trans_a else A), (B.T if trans_b else B)
    assert used == ["matmul", "colsum"]
    assert_within(c.numpy(), 0.5 * A @ B, 0.5 * dot_bound(np.abs(A), np.abs(B), K, "f32"), f"split-K {split}")
