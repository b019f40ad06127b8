"""matmul (both transpose_b settings, f32 and f16, every tile) and its backward vs float64 oracles."""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import evermind_vk as ev
from evermind_vk.runtime import kernels, variants
from evermind_vk.runtime.select import matmul as select_matmul
from oracle import U16, U32, assert_within, dot_bound, rounded


def kind_names(kind, c32=False, al=False):
    """Variants of one algorithm; c32: the f16 rows' twins that store C in f32 instead; al: the register
    blocks' aligned twins (whole tiles only)."""
    return [v.name for dt in ("f32", "f16") for v in kernels.variants_of("matmul", dt)
            if variants.matmul_kind(v.flags) == kind and ("c32" in v.flags) == c32 and variants.aligned(v.flags) == al]


SCALAR, V4, RB, RB_AL = kind_names("tiled"), kind_names("v4"), kind_names("rb"), kind_names("rb", al=True)
VARIANTS = {v.name: v for dt in ("f32", "f16") for v in kernels.variants_of("matmul", dt)}
dims = st.integers(1, 80)


def log_dispatches(monkeypatch, push_field: str = "") -> list:
    """The names of the variants dispatched from now on (the list fills as they run); with push_field,
    (name, that push constant or None) pairs."""
    used = []
    real = kernels.dispatch

    def logged(v, tensors, push, *rest, **kw):
        used.append((v.name, push.get(push_field)) if push_field else v.name)
        return real(v, tensors, push, *rest, **kw)
    monkeypatch.setattr(kernels, "dispatch", logged)
    return used


def force(monkeypatch, name: str) -> list:
    """Force matmul variant `name`; returns the names of the variants dispatched from then on."""
    monkeypatch.setenv("EVERMIND_VK_MATMUL_VARIANT", name)
    return log_dispatches(monkeypatch)


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


def strided_case(device, monkeypatch, name, M, N, K, a_kmajor, b_nmajor, z1, batch, bdiv, pad, c_unit, beta, seed,
                 align=4):
    """One gemm_strided launch forced onto variant `name` against the float64 oracle: A k- or m-contiguous,
    B n- or k-contiguous, row strides padded (to multiples of `align`, so a 16-byte load can straddle the
    end of a row), a two-level batch (z1 outer x batch inner, B shared by bdiv inner neighbours) with
    padded outer strides, alpha/beta, and C written with 16-byte or elementwise stores (align 8: every
    stride and offset a multiple of 8, as the cooperative-matrix variants need). A v4 variant of fewer than
    4 rows a thread runs with A k-contiguous (its launch rule)."""
    used = force(monkeypatch, name)
    dtype = name.split("_")[1]
    spec = next(v for v in kernels.variants_of("matmul", dtype) if v.name == name).spec
    if "v4" in name.split("_") and spec["BM"] // spec["WG_Y"] % 4:
        a_kmajor = True  # v4 blocks of fewer than 4 rows a thread (a decode step's) read A k-contiguous only
    cdt = "f32" if "c32" in name.split("_") else dtype  # c32: f16 A and B, f32 C
    np_dt = np.float16 if dtype == "f16" else np.float32
    rng = np.random.default_rng(seed)
    up = lambda x: -(-x // align) * align
    cu = up if align > 4 else (lambda x: x)  # C's strides: unaligned too, except for cm
    bbatch = -(-batch // bdiv)
    # A_z[m,k]: a_kmajor -> a[aoff + z1*sao + z*sab + m*lda + k], else a[... + k*lda + m]
    lda = up((K if a_kmajor else M) + pad)
    a_rows = M if a_kmajor else K
    sab, aoff = up(a_rows * lda + pad), align * (pad % 3)
    ldb = up((N if b_nmajor else K) + pad)
    b_rows = K if b_nmajor else N
    sbb, boff = up(b_rows * ldb + pad), align * (pad % 2)
    scm, scn = (cu(N + pad), 1) if c_unit else (1, M + pad)
    scb = cu((M * scm if c_unit else N * scn) + pad)
    coff = cu(pad)
    sao, sbo, sco = up(batch * sab + pad), up(bbatch * sbb + 3 * pad), cu(batch * scb + 2 * pad)
    a = rng.standard_normal(aoff + z1 * sao).astype(np_dt)
    b = rng.standard_normal(boff + z1 * sbo).astype(np_dt)
    c = rng.standard_normal(coff + z1 * sco).astype(np.float16 if cdt == "f16" else np.float32)
    A, B, C = rounded(a, dtype), rounded(b, dtype), rounded(c, cdt)
    want = C.copy()
    bound = np.zeros_like(want)
    for y in range(z1):
        for z in range(batch):
            ia = aoff + y * sao + z * sab + (np.arange(M)[:, None] * lda + np.arange(K)[None, :] if a_kmajor
                                             else np.arange(K)[None, :] * lda + np.arange(M)[:, None])
            ib = boff + y * sbo + (z // bdiv) * sbb + (np.arange(K)[:, None] * ldb + np.arange(N)[None, :] if b_nmajor
                                                       else np.arange(N)[None, :] * ldb + np.arange(K)[:, None])
            ic = coff + y * sco + z * scb + np.arange(M)[:, None] * scm + np.arange(N)[None, :] * scn
            want[ic] = 0.75 * A[ia] @ B[ib] + beta * C[ic]
            bound[ic] = 0.75 * dot_bound(np.abs(A[ia]), np.abs(B[ib]), K, cdt) + 2 * U32 * beta * np.abs(C[ic])
    ct = ev.tensor(c)
    ev.ops.gemm_strided(ev.tensor(a), ev.tensor(b), ct, M, N, K,
                        a_strides=(lda, 1) if a_kmajor else (1, lda), b_strides=(ldb, 1) if b_nmajor else (1, ldb),
                        c_strides=(scm, scn), batch=batch, a_batch=(aoff, sab), b_batch=(boff, sbb, bdiv),
                        c_batch=(coff, scb), alpha=0.75, beta=beta, outer=(z1, sao, sbo, sco))
    assert used == [name]  # one dispatch for all z1 * batch products
    # elements of c outside every C_z are untouched (bound 0 there, want == C)
    assert ct.dtype == cdt
    assert_within(ct.numpy(), want, bound + (U16 * np.abs(want) if cdt == "f16" else 0), f"gemm_strided {name}")


STRIDED = dict(a_kmajor=st.booleans(), b_nmajor=st.booleans(), z1=st.integers(1, 3), batch=st.integers(1, 3),
               bdiv=st.sampled_from([1, 3]), pad=st.integers(0, 5), c_unit=st.booleans(),
               beta=st.sampled_from([0.0, 0.5]), seed=st.integers(0, 2**31))


@pytest.mark.parametrize("name", RB)
@settings(max_examples=6)  # each example builds a pipeline
@given(M=st.integers(1, 70), N=st.integers(1, 70), K=st.integers(1, 40), **STRIDED)
@example(M=64, N=64, K=16, a_kmajor=True, b_nmajor=True, z1=1, batch=1, bdiv=1, pad=0, c_unit=True, beta=0.5,
         seed=1)  # beta != 0 with 16-byte stores: C read back 16 bytes at a time (matmul's in-place dX)
def test_rb_variants_strided(device, monkeypatch, name, M, N, K, a_kmajor, b_nmajor, z1, batch, bdiv, pad,
                             c_unit, beta, seed):
    """The GPU register-block variants through gemm_strided (see strided_case)."""
    strided_case(device, monkeypatch, name, M, N, K, a_kmajor, b_nmajor, z1, batch, bdiv, pad, c_unit, beta, seed)


@pytest.mark.parametrize("name", RB_AL)
@settings(max_examples=4)  # each example builds a pipeline
@given(m=st.integers(1, 2), n=st.integers(1, 2), k=st.integers(1, 3),
       **{k: v for k, v in STRIDED.items() if k not in ("a_kmajor", "b_nmajor")})
def test_rb_aligned_variants_strided(device, monkeypatch, name, m, n, k, z1, batch, bdiv, pad, c_unit, beta, seed):
    """The register blocks' aligned twins (flag al: loads without bounds checks; flag uAB: the operand layout
    fixed at compile time) on whole tiles in their layout, through gemm_strided (see strided_case): padded
    rows, so a load past a row's end would read the padding."""
    v = VARIANTS[name]
    t, u = v.spec, variants.unit_layout(v.flags)
    strided_case(device, monkeypatch, name, m * t["BM"], n * t["BN"], k * t["BK"], u[1] == "k", u[2] == "n", z1, batch,
                 bdiv, pad, c_unit, beta, seed)


@pytest.mark.parametrize("u, a_strides, b_strides", [
    ("ukk", (512, 1), (1, 512)),   # fwd Y = X W^T: W stored [N, K]
    ("ukn", (512, 1), (512, 1)),   # dX = dY W
    ("umn", (1, 4096), (512, 1)),  # dW = dY^T X: A m-contiguous
    ("umk", (1, 4096), (1, 512)),
])
def test_aligned_twins_take_whole_tiles_in_their_layout_only(u, a_strides, b_strides):
    """The selector gives a register-block launch its tile's aligned twin for the launch's operand layout
    exactly where M, N and K are whole tiles (variants.variant_launch_errors; pure rule), and the rule names
    what breaks it: a part tile, or another layout."""
    every = kernels.variants_of("matmul", "f32")
    L = variants.Layout

    def pick(M, N, K, lay):
        return variants.pick_matmul(every, M, N, K, lay, "discrete_gpu", 49152)
    lay = L(a_strides, b_strides, (512, 1))
    whole = pick(4096, 512, 512, lay)
    assert variants.aligned(whole.flags) and variants.unit_layout(whole.flags) == u, whole.name
    assert not variants.variant_launch_errors(whole, 4096, 512, 512, lay)
    for other in set(variants.UNIT_LAYOUTS) - {u}:
        twin = VARIANTS[whole.name.replace(u, other)]
        assert any(f"this launch is {u}" in e for e in variants.variant_launch_errors(twin, 4096, 512, 512, lay))
    for M, N, K in ((4096 - 4, 512, 512), (4096, 512 + 4, 512), (4096, 512, 512 - 4)):
        v = pick(M, N, K, lay)
        assert not variants.aligned(v.flags), (M, N, K, v.name)
        twin = VARIANTS[v.name.replace(f"_t{v.spec['BM']}", f"_al_{u}_t{v.spec['BM']}")]
        assert any("al (loads without bounds checks)" in e for e in variants.variant_launch_errors(twin, M, N, K, lay))


@pytest.mark.parametrize("name", SCALAR)
@settings(max_examples=4)  # each example builds a pipeline
@given(M=st.integers(1, 70), N=st.integers(1, 70), K=st.integers(1, 40), **STRIDED)
def test_tiled_variants_strided(device, monkeypatch, name, M, N, K, a_kmajor, b_nmajor, z1, batch, bdiv, pad,
                                c_unit, beta, seed):
    """The shared-memory tiles (any layout) through gemm_strided, two-level batch included."""
    strided_case(device, monkeypatch, name, M, N, K, a_kmajor, b_nmajor, z1, batch, bdiv, pad, c_unit, beta, seed)


@pytest.mark.parametrize("name", V4)
@settings(max_examples=6)  # each example builds a pipeline
@given(M4=st.integers(1, 40), N4=st.integers(1, 20), K4=st.integers(1, 20), **STRIDED)
def test_v4_variants_strided(device, monkeypatch, name, M4, N4, K4, a_kmajor, b_nmajor, z1, batch, bdiv, pad,
                             c_unit, beta, seed):
    """The CPU 16-byte-load variants through gemm_strided, A k-contiguous or m-contiguous (the weight
    gradients' A^T; four loads along m transposed in registers): M, N, K multiples of 4 (the launch
    rules), M up to 160 so that m-groups past M are clamped."""
    strided_case(device, monkeypatch, name, 4 * M4, 4 * N4, 4 * K4, a_kmajor, b_nmajor, z1, batch, bdiv, pad,
                 c_unit, beta, seed)


def test_batch_chunks_cover_the_batch_once():
    """The z split past MAX_GROUPS (pure): every (z1, z2) once, each piece within the limit, z2 pieces
    starting at multiples of bdiv."""
    for z1, z2, bdiv, limit in ((3, 4, 1, 5), (5, 7, 7, 7), (2, 10, 3, 7), (1, 1, 1, 1), (4, 16, 4, 65535), (3, 9, 2, 4)):
        seen = []
        for a, n1, b, n2 in variants.batch_chunks(z1, z2, bdiv, limit):
            assert n1 * n2 <= limit and (n1 == 1 or n2 == z2) and b % bdiv == 0
            seen += [(y, z) for y in range(a, a + n1) for z in range(b, b + n2)]
        assert sorted(seen) == [(y, z) for y in range(z1) for z in range(z2)], (z1, z2, bdiv, limit)
    assert variants.batch_chunks(3, 4, 1, 65535) == [(0, 3, 0, 4)]
    with pytest.raises(ev.UnsupportedError):
        variants.batch_chunks(1, 8, 8, 4)
    with pytest.raises(ev.ShapeError):
        variants.batch_chunks(0, 8, 1, 4)


@pytest.mark.parametrize("z1,batch,bdiv", [(3, 3, 3), (2, 7, 2), (1, 9, 1)])
def test_gemm_strided_splits_z_past_max_groups(device, monkeypatch, z1, batch, bdiv):
    """More products than workgroups along z (MAX_GROUPS lowered to 4): several dispatches, same result."""
    monkeypatch.setattr(kernels, "MAX_GROUPS", 4)
    monkeypatch.setattr(select_matmul, "MAX_GROUPS", 4)
    dispatched = []
    real = kernels.dispatch
    monkeypatch.setattr(kernels, "dispatch", lambda v, *a, **k: (dispatched.append(a[2]), real(v, *a, **k)))
    name = next(n for n in SCALAR if n.startswith("matmul_f32") and "t32x32" in n)
    used = force(monkeypatch, name)
    rng = np.random.default_rng(z1 * 10 + batch)
    M, N, K = 5, 6, 7
    sao, sbo, sco = batch * M * K + 3, -(-batch // bdiv) * K * N + 1, batch * M * N + 2
    a = rng.standard_normal(z1 * sao).astype(np.float32)
    b = rng.standard_normal(z1 * sbo).astype(np.float32)
    ct = ev.tensor(np.zeros(z1 * sco, np.float32))
    ev.ops.gemm_strided(ev.tensor(a), ev.tensor(b), ct, M, N, K, a_strides=(K, 1), b_strides=(N, 1), c_strides=(N, 1),
                        batch=batch, a_batch=(0, M * K), b_batch=(0, K * N, bdiv), c_batch=(0, M * N),
                        outer=(z1, sao, sbo, sco))
    assert len(used) == len(variants.batch_chunks(z1, batch, bdiv, 4)) > 1
    assert all(g[2] <= 4 for g in dispatched)
    want, bound = np.zeros(z1 * sco), np.zeros(z1 * sco)
    A, B = a.astype(np.float64), b.astype(np.float64)
    for y in range(z1):
        for z in range(batch):
            ia = y * sao + z * M * K + np.arange(M * K).reshape(M, K)
            ib = y * sbo + (z // bdiv) * K * N + np.arange(K * N).reshape(K, N)
            ic = y * sco + z * M * N + np.arange(M * N).reshape(M, N)
            want[ic], bound[ic] = A[ia] @ B[ib], dot_bound(np.abs(A[ia]), np.abs(B[ib]), K, "f32")
    assert_within(ct.numpy(), want, bound, "split z")


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


def test_gemm_strided_refuses_launches_past_its_tensors(device):
    """Strides, offsets and batches that would address an element past a tensor's end are refused before
    any dispatch (a GPU would read or write outside the buffer); the largest fitting launch runs."""
    from evermind_vk.ops.matmul import gemm_strided
    x = ev.tensor(np.ones(64, np.float32))
    kw = dict(a_strides=(8, 1), b_strides=(8, 1), c_strides=(8, 1))
    gemm_strided(x, x, ev.tensor(np.zeros(64, np.float32)), 8, 8, 8, **kw)  # exactly fits
    short = ev.tensor(np.ones(63, np.float32))
    c = ev.tensor(np.zeros(64, np.float32))
    for a, b, c_, extra, name in [(short, x, c, {}, "a"), (x, short, c, {}, "b"), (x, x, short, {}, "c"),
                                  (x, x, c, dict(c_batch=(1, 0)), "c"),                      # an offset
                                  (x, x, c, dict(batch=2, a_batch=(0, 8), c_batch=(0, 0)), "a"),  # a batch stride
                                  (x, x, c, dict(batch=2, b_batch=(0, 8, 1), c_batch=(0, 0)), "b"),
                                  (x, x, c, dict(outer=(2, 0, 0, 1)), "c")]:                 # an outer stride
        with pytest.raises(ev.ShapeError, match=f"reaches element .* of {name}, which has"):
            gemm_strided(a, b, c_, 8, 8, 8, **kw, **extra)
    gemm_strided(x, x, c, 8, 8, 8, **kw, batch=2, b_batch=(0, 8, 2), c_batch=(0, 0))  # bdiv 2: b's z stays 0


CM = [v for v in kernels.variants_of("matmul", "f16")
      if variants.matmul_kind(v.flags) in ("cm", "cm2") and "c32" not in v.flags]


def skip_unless_runs(device, variant):
    """Skip where the device lacks a variant's features, or its tile fits none of the device's shapes (cm2)."""
    cannot = kernels.run_errors(variant, device)
    if cannot:
        pytest.skip("; ".join(cannot))


@pytest.mark.parametrize("variant", CM, ids=lambda v: v.name)
@pytest.mark.parametrize("transpose_b", [False, True])
def test_coopmat_variants(device, monkeypatch, variant, transpose_b):
    """Tensor-core variants, each forced by name, on aligned shapes (skipped where the device lacks
    cooperative matrices); the selector picks some cm or cm2 variant for such shapes by itself too."""
    skip_unless_runs(device, variant)
    bm, bn, bk = variant.spec["BM"], variant.spec["BN"], variant.spec["BK"]
    rng = np.random.default_rng(bm)
    M, N, K = 2 * bm, 3 * bn, 4 * bk
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if transpose_b else (K, N)).astype(np.float16)
    lay = variants.Layout((K, 1), (1, K) if transpose_b else (N, 1), (N, 1))
    assert variants.matmul_kind(variants.pick_matmul(kernels.usable("matmul", "f16", device), M, N, K, lay,
                                                     device.info.type, device.info.shared_memory).flags) in ("cm", "cm2")
    used = force(monkeypatch, variant.name)
    monkeypatch.setenv("EVERMIND_VK_MATMUL_SPLIT_K", "0")  # K = 4 BK reaches 512 with BK 128: a GPU would split it
    got = ev.matmul(ev.tensor(a), ev.tensor(b), transpose_b=transpose_b).numpy()
    assert used[0] == variant.name  # then the read-back copy
    A, B = rounded(a, "f16"), rounded(b, "f16")
    B = B.T if transpose_b else B
    assert_within(got, A @ B, dot_bound(np.abs(A), np.abs(B), K, "f16"), variant.name)


@pytest.mark.parametrize("variant", CM, ids=lambda v: v.name)
@pytest.mark.parametrize("a_kmajor,b_nmajor,beta", [(True, True, 0.0), (False, True, 0.5), (False, False, 0.0),
                                                    (True, False, 0.5)])
def test_coopmat_variants_strided(device, monkeypatch, variant, a_kmajor, b_nmajor, beta):
    """Tensor-core variants through gemm_strided: A k- or m-contiguous (attention's dS^T Q and P^T dO,
    the weight gradients X^T dY), B n- or k-contiguous, beta (attention's group sums accumulate), a
    two-level batch with a shared B, padded strides and offsets that are multiples of 8 halves."""
    coopmat_strided(device, monkeypatch, variant, a_kmajor, b_nmajor, beta)


def coopmat_strided(device, monkeypatch, variant, a_kmajor, b_nmajor, beta):
    """One tensor-core variant through strided_case on tile-multiple shapes (skipped without cooperative
    matrices)."""
    skip_unless_runs(device, variant)
    bm, bn, bk = variant.spec["BM"], variant.spec["BN"], variant.spec["BK"]
    strided_case(device, monkeypatch, variant.name, bm, 2 * bn, 2 * bk, a_kmajor, b_nmajor, 2, 2, 2, 3, True, beta,
                 bm + bn, align=8)


# -- the cooperative-matrix rule, without a device (lavapipe has no cooperative matrices) --------------------
# A GPU with KHR cooperative matrices but not NVIDIA's cooperative_matrix2 (the cm rule alone).
F16 = [v for v in kernels.variants_of("matmul", "f16") if variants.matmul_kind(v.flags) != "cm2"]


def gpu_pick(M, N, K, lay, batch=1):
    return variants.pick_matmul(F16, M, N, K, lay, "discrete_gpu", 49152, batch)


def test_cm_rule_takes_the_f16_training_products():
    """The f16 products of the 23.7M LM step (d 512, ff 1408, 8/4 heads of 64, batch 16 x 256) all go to
    cooperative matrices: attention's products over the two-level batch (sequence, head), dK/dV with A
    m-contiguous and beta = 1, and the weight gradients X^T dY with A m-contiguous (on the H200 in round 3
    these fell to register blocks: 553 dispatches of rb4x4 and the 8 of rb8x4_t128x64, the 2816x512x4096
    dW of the up-projection, 7.1 ms)."""
    B, S, H, KVH, D, G = 16, 256, 8, 4, 64, 2
    L = variants.Layout
    cases = [  # (M, N, K, layout, batch)
        (S, S, D, L((H * D, 1), (1, KVH * D), (S, 1), (0, D), (0, D, G), (0, S * S), 0.0,
                    (B, S * H * D, S * KVH * D, H * S * S)), B * H),  # scores, dP
        (S, D, S, L((S, 1), (KVH * D, 1), (H * D, 1), (0, S * S), (0, D, G), (0, D), 0.0,
                    (B, H * S * S, S * KVH * D, S * H * D)), B * H),  # P V, dQ
        (S, D, S, L((1, S), (H * D, 1), (KVH * D, 1), (S * S, G * S * S), (D, G * D, 1), (0, D), 1.0,
                    (B, H * S * S, S * H * D, S * KVH * D)), B * KVH),  # dK, dV (second group member)
        (2816, 512, 4096, L((1, 2816), (512, 1), (512, 1)), 1),
        (512, 1408, 4096, L((1, 512), (1408, 1), (1408, 1)), 1),
        (256, 512, 4096, L((1, 256), (512, 1), (512, 1)), 1),
        (512, 512, 4096, L((1, 512), (512, 1), (512, 1)), 1),
    ]
    for M, N, K, lay, batch in cases:
        v = gpu_pick(M, N, K, lay, batch)
        assert variants.matmul_kind(v.flags) == "cm", (M, N, K, lay, v.name)
        assert not variants.matmul_launch_errors("cm", v.spec, M, N, K, lay)


def test_cm_rule_refuses_what_the_template_cannot_do():
    """Layouts the cm template cannot run stay off it (pure rule, and the selector's pick)."""
    spec = dict(BM=128, BN=128, BK=16)
    L = variants.Layout
    M = N = K = 256
    assert not variants.matmul_launch_errors("cm", spec, M, N, K, L((K, 1), (N, 1), (N, 1), beta=0.5))
    assert not variants.matmul_launch_errors("cm", spec, M, N, K, L((1, M), (1, K), (N, 1), outer=(3, 8, 16, 0)))
    bad = {
        "A without a unit stride": (M, L((2 * K, 2), (N, 1), (N, 1))),
        "C not unit-stride along n": (M, L((K, 1), (N, 1), (1, M))),
        "an outer stride not a multiple of 8": (M, L((K, 1), (N, 1), (N, 1), outer=(2, 4, 0, 0))),
        "A's far stride not a multiple of 8": (M, L((1, M + 4), (N, 1), (N, 1))),
        "M not a multiple of the tile": (M - 16, L((K, 1), (N, 1), (N, 1))),
    }
    for what, (m, lay) in bad.items():
        assert variants.matmul_launch_errors("cm", spec, m, N, K, lay), what
        assert variants.matmul_kind(gpu_pick(m, N, K, lay).flags) != "cm", what


def test_coopmat_never_selected_without_feature(device):
    if device.info.coopmat:
        pytest.skip("device has cooperative matrices")
    lay = variants.Layout((1024, 1), (1024, 1), (1024, 1))
    assert "cm" not in variants.pick_matmul(kernels.usable("matmul", "f16", device), 1024, 1024, 1024, lay,
                                            device.info.type, device.info.shared_memory).flags


@settings(max_examples=6, deadline=None)
@given(m_tiles=st.integers(1, 2), P=st.integers(2, 5), K=st.integers(128, 275).map(lambda k4: 4 * k4), trans_a=st.booleans(),
       seed=st.integers(0, 2**31))
@example(m_tiles=1, P=3, K=1024, trans_a=True, seed=0)  # 3 chunks: 352, 352, 320
def test_whole_wave_split_runs_unequal_chunks_on_the_planned_tile(device, monkeypatch, m_tiles, P, K, trans_a, seed):
    """A GPU that counts its multiprocessors (P) splits an f32 product on 256x128 tiles into the chunk count
    of variants.wave_split; chunks that K's 16s do not divide evenly run one launch each on the tile the
    split was planned for, and a column sum adds them (the local device dressed as such a GPU; the tile
    forced, as lavapipe's shared memory would pick a smaller one for products this small)."""
    import dataclasses
    monkeypatch.delenv("EVERMIND_VK_MATMUL_SPLIT_K", raising=False)
    monkeypatch.setenv("EVERMIND_VK_MATMUL_VARIANT", "matmul_f32_rb16x8_t256x128")
    monkeypatch.setattr(device, "info", dataclasses.replace(device.info, type="discrete_gpu", multiprocessors=P))
    M, N = 256 * m_tiles, 128
    lay = variants.Layout((1, M) if trans_a else (K, 1), (N, 1), (N, 1))
    v = variants.pick_matmul(kernels.usable("matmul", "f32", device), M, N, K, lay, "discrete_gpu",
                             device.info.shared_memory, forced="matmul_f32_rb16x8_t256x128", split=True)
    assert v.spec["BM"] * v.spec["BN"] >= variants.BIG_TILE_AREA
    S = variants.matmul_split_k(M, N, K, m_tiles, "discrete_gpu", "f32", 1, 0.0, True, "", P,
                                (v.spec["BM"], v.spec["BN"], v.spec["BK"]))
    ks = variants.k_chunks(K, S)
    used = log_dispatches(monkeypatch)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = ev.tensor(np.full((M, N), np.nan, np.float32))
    ev.ops.gemm(ev.tensor(a), ev.tensor(b), c, M, N, K, trans_a=trans_a, alpha=0.5)
    A = a.astype(np.float64).T if trans_a else a.astype(np.float64)
    if S > 1:
        assert used == [v.name] * (1 if len({k1 - k0 for k0, k1 in ks}) == 1 else S) + ["colsum_f32"], (S, ks, used)
    else:
        assert used == [v.name]
    assert_within(c.numpy(), 0.5 * A @ b, 0.5 * dot_bound(np.abs(A), np.abs(b.astype(np.float64)), K, "f32"),
                  f"wave split {S}")


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


@pytest.mark.parametrize("M,N,tile", [(2816, 512, "t128x256k32"), (512, 1408, "t128x128")])
def test_cm2_pair_split_matches_oracle(device, monkeypatch, M, N, tile):
    """Where the device has cooperative_matrix2: a weight gradient X^T dY over K = 4,096 that only the 64x64
    tile fills whole runs split in 2 (variants.cm2_pair_split), both chunks on the planned tile's c32 twin,
    the f32 partials summed into the f16 C by colsum_cast, and matches the float64 oracle."""
    if not device.has("cooperative_matrix2"):
        pytest.skip("the device has no cooperative_matrix2")
    monkeypatch.delenv("EVERMIND_VK_MATMUL_SPLIT_K", raising=False)
    monkeypatch.delenv("EVERMIND_VK_MATMUL_VARIANT", raising=False)
    K = 4096
    used = log_dispatches(monkeypatch, "K")
    rng = np.random.default_rng(M)
    a = rng.standard_normal((K, M)).astype(np.float16)  # X stored [tokens, M]: A m-contiguous
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = ev.tensor(np.full((M, N), np.nan, np.float16))
    ev.ops.gemm(ev.tensor(a), ev.tensor(b), c, M, N, K, trans_a=True)
    assert used == [(f"matmul_f16_cm2_l256_c32_{tile}", K // 2), ("colsum_cast_f16", None)], used
    A, B = rounded(a, "f16").T, rounded(b, "f16")
    assert_within(c.numpy().astype(np.float64), A @ B, dot_bound(np.abs(A), np.abs(B), K, "f16"), "cm2 pair split")


def test_cm2_rule_order_and_split():
    """On a GPU with NVIDIA's cooperative_matrix2 (every f16 row a candidate), aligned f16 products go to cm2 in
    CM2_ORDER's order, split along K only where no cm2 tile fills the device whole (pure rule: lavapipe has no
    cooperative matrices); what no cm2 tile divides falls to the cm rule and beyond."""
    every = kernels.variants_of("matmul", "f16")
    L = variants.Layout

    def pick(M, N, K, lay, split=False):
        return variants.pick_matmul(every, M, N, K, lay, "discrete_gpu", 49152, split=split)
    assert pick(4096, 4096, 4096, L((4096, 1), (4096, 1), (4096, 1))).name == "matmul_f16_cm2_l256_t128x256k32"
    # fwd of the down-projection, 4096 x 512 x 1408: 128x128 whole (128 workgroups), not 128x256 split 4 ways
    assert pick(4096, 512, 1408, L((1408, 1), (1, 1408), (512, 1)), split=True).name == "matmul_f16_cm2_l256_t128x128"
    # dW of a 512 x 512 weight over 4096 tokens: no cm2 tile fills the device whole; the first tile split
    dw = pick(512, 512, 4096, L((1, 512), (512, 1), (512, 1)), split=True)
    assert dw.name == "matmul_f16_cm2_l256_t128x256k32"
    assert variants.split_ways(8, 4096) == 16
    # dW of gate+up [2816, 512] and of down [512, 1408] over 4096 tokens: only 64x64 fills the device whole; the
    # first tile of at least 128x128 with 40-127 workgroups runs split in 2 instead (variants.cm2_pair_split)
    for (M, N), name, g in (((2816, 512), "matmul_f16_cm2_l256_t128x256k32", 44),
                            ((512, 1408), "matmul_f16_cm2_l256_t128x128", 44)):
        for K, want in ((4096, name), (2048, "matmul_f16_cm2_l128_t64x64")):
            v = pick(M, N, K, L((1, M), (N, 1), (N, 1)), split=True)
            assert v.name == want, (M, N, K, v.name)
            assert pick(M, N, K, L((1, M), (N, 1), (N, 1))).name == "matmul_f16_cm2_l128_t64x64"  # no split allowed
        assert variants.matmul_split_k(M, N, 4096, g, "discrete_gpu", "f16", 1, 0.0, True, kind="cm2",
                                       tile=(128, 256 if N == 512 else 128, 32 if N == 512 else 64)) == 2
    assert not variants.cm2_pair_split(39, 128, 128, 64, 4096) and variants.cm2_pair_split(40, 128, 128, 64, 4096)
    assert not variants.cm2_pair_split(44, 64, 64, 64, 4096) and not variants.cm2_pair_split(128, 128, 128, 64, 4096)
    assert not variants.cm2_pair_split(44, 128, 128, 64, 4096 + 64)  # halves of 2080: not whole k-steps of 64
    # c32 twins rank as their rows
    assert variants.pick_matmul(every, 512, 512, 4096, L((1, 512), (512, 1), (512, 1)), "discrete_gpu", 49152,
                                split=True, out32=True).name == "matmul_f16_cm2_l256_c32_t128x256k32"
    for M in (4096 - 16, 4096 + 8):  # no cm2 tile divides M
        assert variants.matmul_kind(pick(M, 512, 512, L((512, 1), (512, 1), (512, 1))).flags) != "cm2"
