"""Matrix products on one strided, batched kernel: forward (Y = X.W or X.W^T) and both backward
products (dX, dW) are the same kernel with other strides."""
from __future__ import annotations


from ..errors import ShapeError, UnsupportedError
from ..runtime import kernels, knobs, variants
from ..runtime.tensor import Tensor, empty
from .reduce import colsum

__all__ = ["gemm_strided", "gemm_chunks", "gemm", "matmul", "matmul_backward"]


def gemm_strided(a: Tensor, b: Tensor, c: Tensor, M: int, N: int, K: int, *,
                 a_strides: tuple, b_strides: tuple, c_strides: tuple, batch: int = 1,
                 a_batch: tuple = (0, 0), b_batch: tuple = (0, 0, 1), c_batch: tuple = (0, 0),
                 alpha: float = 1.0, beta: float = 0.0, outer: tuple = (1, 0, 0, 0), tri: str = "",
                 kd: int = 0, variant=None) -> Tensor:
    """The general product over a two-level batch: for z1 in range(Z1), z2 in range(batch),
    C_z[m,n] = alpha * sum_k A_z[m,k] B_z[k,n] + beta * C_z[m,n] with
    A_z[m,k] = a[aoff + z1*sao + z2*sab + m*sam + k*sak]            a_strides = (sam, sak), a_batch = (aoff, sab)
    B_z[k,n] = b[boff + z1*sbo + (z2//bdiv)*sbb + k*sbk + n*sbn]     b_strides = (sbk, sbn), b_batch = (boff, sbb, bdiv)
    C_z[m,n] = c[coff + z1*sco + z2*scb + m*scm + n*scn]            c_strides = (scm, scn), c_batch = (coff, scb)
    outer = (Z1, sao, sbo, sco); the default (1, 0, 0, 0) is a one-level batch over z2. One dispatch for
    all Z1 * batch products (several where they pass kernels.MAX_GROUPS workgroups along z).
    tri: a causal hint (runtime/variants.py TRI) for square products whose operands are zero, or whose
    output is unused, on one side of the diagonal; the result equals the full product's. kd (lower_a and
    upper_a): this product's k = 0 is column kd of the square A, whose diagonal the hint describes (a
    chunk of a product split along K, gemm_chunks); the parallel split below computes the full product.
    a, b and c share a dtype, except that f16 a and b may write an f32 c (the c32 variants).
    variant: run this matmul variant instead of the selector's pick (the chunks of a split product keep
    the tile the split was planned for); a launch it cannot run raises UnsupportedError.
    """
    if a.dtype != b.dtype or c.dtype not in (a.dtype, "f32"):
        raise UnsupportedError(f"matmul: dtypes {a.dtype}, {b.dtype}, {c.dtype}: a and b must share one, "
                               "and c have it too or be f32")
    if len(outer) != 4:
        raise ShapeError(f"matmul: outer is (Z1, sao, sbo, sco), got {outer}")
    errs = variants.tri_errors(tri, M, N, K, float(beta), int(kd))
    if errs:
        raise ShapeError("matmul: " + "; ".join(errs))
    Z1, Z2, bdiv = int(outer[0]), int(batch), int(b_batch[2])
    chunks = variants.batch_chunks(Z1, Z2, bdiv, kernels.MAX_GROUPS)  # validates the batch
    last = {}  # the last element of each tensor the launch may address (strides are never negative)
    if M and N and Z1 and Z2:  # each must lie inside its tensor
        last = {"a": a_batch[0] + (Z1 - 1) * outer[1] + (Z2 - 1) * a_batch[1] + (M - 1) * a_strides[0]
                + (K - 1) * a_strides[1] if K else -1,
                "b": b_batch[0] + (Z1 - 1) * outer[2] + ((Z2 - 1) // bdiv) * b_batch[1] + (K - 1) * b_strides[0]
                + (N - 1) * b_strides[1] if K else -1,
                "c": c_batch[0] + (Z1 - 1) * outer[3] + (Z2 - 1) * c_batch[1] + (M - 1) * c_strides[0]
                + (N - 1) * c_strides[1]}
        for name, t in (("a", a), ("b", b), ("c", c)):
            if last[name] >= t.numel:
                raise ShapeError(f"matmul: {M}x{N}x{K} over batch {Z1}x{Z2} reaches element {last[name]} of {name}, "
                                 f"which has {t.numel}")
    lay = variants.Layout(tuple(a_strides), tuple(b_strides), tuple(c_strides), tuple(a_batch), tuple(b_batch),
                          tuple(c_batch), float(beta), tuple(outer))
    if len(chunks) > 1:  # more products than one dispatch's z range: consecutive pieces, each its own launch
        for z1, n1, z2, n2 in chunks:
            gemm_strided(a, b, c, M, N, K, a_strides=a_strides, b_strides=b_strides, c_strides=c_strides, batch=n2,
                         a_batch=(a_batch[0] + z1 * outer[1] + z2 * a_batch[1], a_batch[1]),
                         b_batch=(b_batch[0] + z1 * outer[2] + (z2 // bdiv) * b_batch[1], b_batch[1], bdiv),
                         c_batch=(c_batch[0] + z1 * outer[3] + z2 * c_batch[1], c_batch[1]),
                         alpha=alpha, beta=beta, outer=(n1, *outer[1:]), tri=tri, kd=kd)
        return c
    nz = Z1 * Z2
    dev = a.device
    c_dense = tuple(c_strides) == (N, 1) and c_batch[0] == 0 and c.numel == M * N
    forced_split = knobs.get("EVERMIND_VK_MATMUL_SPLIT_K")
    out32 = c.dtype != a.dtype  # f16 operands into an f32 C: the c32 variants
    v = variant or variants.pick_matmul(
        kernels.usable("matmul", a.dtype, dev), M, N, K, lay, dev.info.type, dev.info.shared_memory, nz,
        knobs.get("EVERMIND_VK_MATMUL_VARIANT"),
        split=variants.split_allowed(a.dtype, nz, float(beta), c_dense, dev.info.type, forced_split),
        out32=out32, tri=tri, multiprocessors=dev.info.multiprocessors)
    kind, tile = variants.matmul_kind(v.flags), (v.spec["BM"], v.spec["BN"], v.spec["BK"])
    tiles = -(-M // tile[0]) * -(-N // tile[1]) * nz  # the launch's workgroups, whole
    split = variants.matmul_split_k(M, N, K, tiles, dev.info.type, a.dtype, nz, float(beta), c_dense, forced_split,
                                    dev.info.multiprocessors, tile, kind)
    if split > 1:  # parallel split-K: S chunks of k into an f32 workspace [S, M*N], then a column sum
        ks = variants.k_chunks(K, split)  # (colsum_cast into an f16 C: the partials added in f32, rounded once)
        # a cm2 pair split's two chunks run on the planned tile's c32 twin (variants.cm2_pair_split: its halves are
        # whole k-steps of the tile); other chunks on what the selector picks for them, except an f32 whole-wave
        # split's unequal chunks (the planned tile)
        pair = kind == "cm2" and split == 2 and not forced_split and variants.cm2_pair_split(tiles, *tile, K)
        twin = variants.c32_twin(v, kernels.usable("matmul", a.dtype, dev)) if pair else None
        work = empty((len(ks), M * N), "f32", dev)
        kc = ks[0][1] - ks[0][0]
        if all(k1 - k0 == kc for k0, k1 in ks):  # equal chunks: one batched launch
            gemm_strided(a, b, work, M, N, kc, a_strides=a_strides, b_strides=b_strides, c_strides=(N, 1),
                         batch=split, a_batch=(a_batch[0], kc * a_strides[1]),
                         b_batch=(b_batch[0], kc * b_strides[0], 1), c_batch=(0, M * N), alpha=alpha,
                         variant=twin)
        else:  # a whole-wave split (f32, variants.wave_split): a launch a chunk on the planned tile, side by side
            gemm_chunks(a, b, work, 0, ks, M, N, a_strides=a_strides, b_strides=b_strides, c_strides=(N, 1),
                        a_batch=(a_batch[0], 0), b_batch=(b_batch[0], 0, 1), alpha=alpha,
                        variant=v if a.dtype == "f32" else twin)  # f16: each chunk on a c32 row
        colsum(work, out=c)
        return c
    splits = variants.matmul_k_splits(kind, v.spec, K, dev.info.type)
    if len(splits) > 1:  # split-K: later parts accumulate (beta = 1), so pick for that layout
        lay1 = variants.Layout(lay.a_strides, lay.b_strides, lay.c_strides, lay.a_batch, lay.b_batch,
                               lay.c_batch, 1.0, lay.outer)
        v = variants.pick_matmul(kernels.usable("matmul", a.dtype, dev), M, N, K, lay1, dev.info.type,
                                 dev.info.shared_memory, nz, knobs.get("EVERMIND_VK_MATMUL_VARIANT"),
                                 out32=out32, tri=tri)
        splits = variants.matmul_k_splits(variants.matmul_kind(v.flags), v.spec, K, dev.info.type)
    groups = (-(-N // v.spec["BN"]), -(-M // v.spec["BM"]), nz)  # v4: BM = 4 WG_Y, BN = 4 WG_X
    # all of C the launch touches (the barrier plan lets launches on disjoint parts of one buffer overlap)
    writes = {2: (c_batch[0], last["c"] + 1)} if last else None
    for j, (k0, k1) in enumerate(splits):
        part = variants.Layout(lay.a_strides, lay.b_strides, lay.c_strides,
                               (a_batch[0] + k0 * a_strides[1], a_batch[1]),
                               (b_batch[0] + k0 * b_strides[0], b_batch[1], b_batch[2]), lay.c_batch,
                               float(beta) if j == 0 else 1.0, lay.outer)
        errs = variants.variant_launch_errors(v, M, N, k1 - k0, part)
        if errs:  # the selector never does this; a template must never run outside its assumptions
            raise UnsupportedError(f"{v.name} cannot run {M}x{N}x{k1 - k0}: " + "; ".join(errs))
        push = dict(M=M, N=N, K=k1 - k0, sam=a_strides[0], sak=a_strides[1], sbk=b_strides[0], sbn=b_strides[1],
                    scm=c_strides[0], scn=c_strides[1], aoff=part.a_batch[0], sab=a_batch[1],
                    boff=part.b_batch[0], sbb=b_batch[1], bdiv=b_batch[2], coff=c_batch[0], scb=c_batch[1],
                    alpha=alpha, beta=part.beta, Z2=Z2, sao=outer[1], sbo=outer[2], sco=outer[3],
                    tri=variants.TRI[tri], kd=kd + k0)
        kernels.dispatch(v, [a, b, c], push, groups, writes)
    return c


def gemm_chunks(a: Tensor, b: Tensor, work: Tensor, row: int, chunks: list, M: int, N: int, *, a_strides: tuple,
                b_strides: tuple, c_strides: tuple, batch: int = 1, a_batch: tuple = (0, 0),
                b_batch: tuple = (0, 0, 1), c_batch: tuple = (0, 0), alpha: float = 1.0,
                outer: tuple = (1, 0, 0, 0), tri: str = "", variant=None) -> Tensor:
    """gemm_strided's product split along K at `chunks` ((k0, k1) pairs, runtime.variants.tri_chunks): chunk
    i writes its partial product into row `row + i` of `work` (f32, [rows, n]) with C's strides and batch
    offsets taken within the row; a column sum of the rows is the product. The chunks depend on nothing
    but a and b, so they may run side by side; a causal hint carries over, each chunk told where its k
    range starts on A's diagonal (kd = k0): a chunk wholly past a row tile's diagonal runs no step there."""
    if work.dtype != "f32" or work.ndim != 2 or row < 0 or row + len(chunks) > work.shape[0]:
        raise ShapeError(f"gemm_chunks: work {work.shape}/{work.dtype} has no f32 rows {row}..{row + len(chunks) - 1}")
    n = work.shape[1]
    for i, (k0, k1) in enumerate(chunks):
        gemm_strided(a, b, work, M, N, k1 - k0, a_strides=a_strides, b_strides=b_strides, c_strides=c_strides,
                     batch=batch, a_batch=(a_batch[0] + k0 * a_strides[1], a_batch[1]),
                     b_batch=(b_batch[0] + k0 * b_strides[0], b_batch[1], b_batch[2]),
                     c_batch=((row + i) * n + c_batch[0], c_batch[1]), alpha=alpha, outer=outer, tri=tri,
                     kd=k0 if tri else 0, variant=variant)
    return work


def gemm(a: Tensor, b: Tensor, c: Tensor, M: int, N: int, K: int, *, trans_a: bool = False,
         trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0) -> Tensor:
    """c = alpha * op(a) . op(b) + beta * c on row-major 2-D operands.

    op(a) is [M,K] (a stored [K,M] when trans_a); op(b) is [K,N] (b stored [N,K] when trans_b).
    """
    return gemm_strided(a, b, c, M, N, K,
                        a_strides=(1, M) if trans_a else (K, 1),
                        b_strides=(1, K) if trans_b else (N, 1),
                        c_strides=(N, 1), alpha=alpha, beta=beta)


def matmul(a: Tensor, b: Tensor, transpose_b: bool = False, out: Tensor | None = None) -> Tensor:
    """Y = A.B (B [K,N]) or, with transpose_b, Y = A.B^T (B [N,K]). f32, or f16 storage with f32
    accumulation. Shapes need not be tile multiples."""
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError(f"matmul takes 2-D tensors, got {a.shape} and {b.shape}")
    M, K = a.shape
    N, Kb = (b.shape if transpose_b else b.shape[::-1])
    if K != Kb:
        raise ShapeError(f"matmul: {a.shape} . {b.shape}{'^T' if transpose_b else ''}: inner dimensions {K} != {Kb}")
    if a.dtype != b.dtype:
        raise UnsupportedError(f"matmul: dtypes {a.dtype} and {b.dtype} differ")
    out = empty((M, N), a.dtype, a.device) if out is None else out
    if out.shape != (M, N) or out.dtype != a.dtype:
        raise ShapeError(f"matmul: out is {out.shape}/{out.dtype}, want {(M, N)}/{a.dtype}")
    return gemm(a, b, out, M, N, K, trans_b=transpose_b)


def matmul_backward(a: Tensor, b: Tensor, dy: Tensor, transpose_b: bool = False,
                    need_a: bool = True, need_b: bool = True, into_a: Tensor | None = None,
                    db_dtype: str | None = None):
    """Gradients of Y = A.op(B) given dY: (dA, dB), dA = dY.op(B)^T with A's shape, dB with B's shape
    (B^T.. for transpose_b: dB = dY^T.A [N,K]; else dB = A^T.dY [K,N]). into_a: a gradient of A's shape
    and dtype that dA is added into, in place (the product's beta = 1); it is then the dA returned.
    db_dtype: dB's dtype (default B's); "f32" for f16 operands writes dB in f32 straight from the product
    (the c32 variants: f32 accumulation, never rounded to f16)."""
    db_dtype = db_dtype or b.dtype
    if db_dtype not in (b.dtype, "f32"):
        raise UnsupportedError(f"matmul_backward: dB as {db_dtype} from {b.dtype} operands (only theirs or f32)")
    M, K = a.shape
    N = b.shape[0] if transpose_b else b.shape[1]
    if dy.shape != (M, N):
        raise ShapeError(f"matmul_backward: dY is {dy.shape}, want {(M, N)}")
    if into_a is not None and (into_a.shape != (M, K) or into_a.dtype != a.dtype):
        raise ShapeError(f"matmul_backward: into_a is {into_a.shape}/{into_a.dtype}, want {(M, K)}/{a.dtype}")
    da = db = None
    if need_a:
        # dA[M,K] = dY[M,N] . op(B)^T ; op(B)^T is B itself when transpose_b ([N,K]), else B^T.
        da = gemm(dy, b, empty((M, K), a.dtype, a.device) if into_a is None else into_a, M, K, N,
                  trans_b=not transpose_b, beta=0.0 if into_a is None else 1.0)
    if need_b:
        if transpose_b:  # dB[N,K] = dY^T[N,M] . A[M,K]
            db = gemm(dy, a, empty((N, K), db_dtype, b.device), N, K, M, trans_a=True)
        else:  # dB[K,N] = A^T[K,M] . dY[M,N]
            db = gemm(a, dy, empty((K, N), db_dtype, b.device), K, N, M, trans_a=True)
    return da, db
