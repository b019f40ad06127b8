"""The Mamba-1 selective scan (S6), forward and backward, as a chunked parallel scan.

Per sequence b, channel d, state n, with Δ = softplus(dt), A = -exp(clamp(A_log, -10, 5)):
    h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t u_t,    y_t = (C_t · h_t + D u_t) ⊙ silu(z_t)
u, dt, z: [batch*L, Dc] (token-major, `batch` sequences of L tokens); B, C: [batch*L, N]; A_log: [Dc, N];
D: [Dc]. h0 (optional): the state before the first token, [batch, Dc, N]. f32.
Mamba-2 form (builderforce's mamba2 layer): B, C [batch*L, groups*N] (channel d reads group
d // (Dc/groups)); A_log [H] with one A = -softplus(A_log[h]) per head of Dc/H channels; with
delta_input=False the input term is B_t u_t (builderforce's SSD leaves Δ out of it).

The sequence is cut into chunks (runtime.variants.scan_chunk_len): each chunk scans from a zero state,
a short scan over the chunk summaries gives every chunk its true initial state, and each chunk re-scans
to write y. The backward runs the same steps in reverse time. No kernel invocation loops over more than
one chunk or over more than the chunk count, so any length is exact (lavapipe ends loops at 65,535).
"""
from __future__ import annotations

from ..errors import ShapeError, UnsupportedError
from ..runtime import kernels, variants
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, one_variant, per_thread, want
from .matmul import matmul
from .reduce import colsum

__all__ = ["selective_scan", "selective_scan_backward", "complex_scan", "complex_scan_backward", "ssd", "ssd_backward",
           "complex_ssd", "complex_ssd_backward",
           "SCAN_CHUNK", "SSD_CHUNK"]

SCAN_CHUNK = 64  # default tokens per chunk
SSD_CHUNK = 64  # default tokens per SSD chunk (<= the variant's QMAX)


def _dims(u, dt, A_log, B, C, D, z, batch, groups):
    want(u, "u", ndim=2, dtype=FLOATS)
    T = u.dtype  # storage of the per-token tensors (f32 or f16); states, A_log, D and the math are f32
    M, Dc = u.shape
    if batch < 1 or M % batch:
        raise ShapeError(f"{M} tokens are not {batch} sequences of equal length")
    want(dt, "dt", shape=(M, Dc), dtype=T)
    want(B, "B", ndim=2, dtype=T)
    if groups < 1 or Dc % groups or B.shape[1] % groups or B.shape[0] != M:
        raise ShapeError(f"B {B.shape} is not [{M}, groups*N] with {groups} groups dividing {Dc} channels")
    N = B.shape[1] // groups
    want(C, "C", shape=B.shape, dtype=T)
    want(A_log, "A_log", dtype="f32")
    if A_log.ndim == 2:  # [Dc, N]: A = -exp(clamp(A_log))
        if A_log.shape != (Dc, N):
            raise ShapeError(f"A_log has shape {A_log.shape}, want ({Dc}, {N})")
        amode, hd = 0, Dc
    elif A_log.ndim == 1:  # [H]: one A = -softplus(A_log[h]) per head
        H = A_log.shape[0]
        if H < 1 or Dc % H or H % groups:
            raise ShapeError(f"{H} heads (A_log {A_log.shape}) must divide {Dc} channels and be a multiple of {groups} groups")
        amode, hd = 1, Dc // H
    else:
        raise ShapeError(f"A_log must be [Dc, N] or [heads], got {A_log.shape}")
    want(D, "D", shape=(Dc,), dtype="f32")
    if z is not None:
        want(z, "z", shape=(M, Dc), dtype=T)
    v = one_variant("scan_chunk", T, u.device)
    errs = variants.scan_errors(N, v.spec["NMAX"])
    if errs:
        raise UnsupportedError("; ".join(errs))
    return M, Dc, N, M // batch, dict(G=groups, hd=hd, amode=amode)


def _push(batch, L, Dc, N, ch):
    return dict(nb=batch, L=L, Dc=Dc, N=N, CH=ch, nc=-(-L // ch))


def selective_scan(u: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor,
                   z: Tensor | None = None, *, batch: int = 1, chunk: int = SCAN_CHUNK,
                   h0: Tensor | None = None, groups: int = 1, delta_input: bool = True):
    """Returns (y [batch*L, Dc], h_last [batch, Dc, N] the state after the last token, H0 the states
    entering each chunk [batch, n_chunks, Dc, N], which the backward needs)."""
    M, Dc, N, L, form = _dims(u, dt, A_log, B, C, D, z, batch, groups)
    ch = variants.scan_chunk_len(L, chunk, batch)
    pc = dict(_push(batch, L, Dc, N, ch), **form, dtin=int(delta_input))
    nc = pc["nc"]
    dev = u.device
    if h0 is not None:
        want(h0, "h0", shape=(batch, Dc, N), dtype="f32")
    S, P = empty((batch, nc, Dc, N), "f32", dev), empty((batch, nc, Dc, N), "f32", dev)
    hlast = empty((batch, Dc, N), "f32", dev)
    y = empty((M, Dc), u.dtype, dev)
    per_thread("scan_chunk", u.dtype, [u, dt, A_log, B, S, P], pc, batch * nc * Dc)
    per_thread("scan_carry", u.dtype, [S, P, h0 if h0 is not None else hlast, hlast],
               dict(pc, rev=0, use_init=int(h0 is not None)), batch * Dc * N)
    per_thread("scan_output", u.dtype, [u, dt, A_log, B, C, D, z if z is not None else u, S, y, P],
               dict(pc, has_z=int(z is not None), store_h=0), batch * nc * Dc)
    return y, hlast, S


def selective_scan_backward(u: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor,
                            z: Tensor | None, dy: Tensor, H0: Tensor, *, batch: int = 1,
                            chunk: int = SCAN_CHUNK, groups: int = 1, delta_input: bool = True):
    """Gradients (du, ddt, dA_log, dB, dC, dD, dz (None without z), dh0 [batch, Dc, N]) of
    selective_scan for the output gradient dy, given its H0 (the final-state gradient is zero)."""
    M, Dc, N, L, form = _dims(u, dt, A_log, B, C, D, z, batch, groups)
    want(dy, "dy", shape=(M, Dc), dtype=u.dtype)
    ch = variants.scan_chunk_len(L, chunk, batch)
    pc = dict(_push(batch, L, Dc, N, ch), **form, dtin=int(delta_input))
    nc = pc["nc"]
    want(H0, "H0", shape=(batch, nc, Dc, N), dtype="f32")
    dev = u.device
    zz = z if z is not None else u
    hz = int(z is not None)
    # Every h_t, recomputed chunk by chunk from H0 (a scratch of batch*L*Dc*N floats).
    Hs, yscratch = empty((M, Dc, N), "f32", dev), empty((M, Dc), u.dtype, dev)
    per_thread("scan_output", u.dtype, [u, dt, A_log, B, C, D, zz, H0, yscratch, Hs],
               dict(pc, has_z=hz, store_h=1), batch * nc * Dc)
    dC = empty(C.shape, u.dtype, dev)
    per_thread("scan_channel_sum", u.dtype, [Hs, dy, zz, dC], dict(pc, use_w=1, has_z=hz), C.numel)
    # Reverse-time carries: each chunk's summary from a zero carry, then the scan over chunks.
    K, P = empty((batch, nc, Dc, N), "f32", dev), empty((batch, nc, Dc, N), "f32", dev)
    dh0 = empty((batch, Dc, N), "f32", dev)
    per_thread("scan_backward_chunk", u.dtype, [dt, A_log, C, zz, dy, K, P], dict(pc, has_z=hz), batch * nc * Dc)
    per_thread("scan_carry", u.dtype, [K, P, dh0, dh0], dict(pc, rev=1, use_init=0), batch * Dc * N)
    du, ddt, dz = (empty((M, Dc), u.dtype, dev) for _ in range(3))
    dA_part, dD_part = empty((batch * nc, Dc * N), "f32", dev), empty((batch * nc, Dc), "f32", dev)
    per_thread("scan_backward", u.dtype, [u, dt, A_log, B, C, D, zz, dy, H0, K, Hs, du, ddt, dz, dA_part, dD_part],
               dict(pc, has_z=hz), batch * nc * Dc)
    dB = empty(B.shape, u.dtype, dev)
    per_thread("scan_channel_sum", u.dtype, [Hs, dy, zz, dB], dict(pc, use_w=0, has_z=0), B.numel)
    dA_log = colsum(dA_part).reshape(Dc, N)
    if form["amode"] == 1:  # one A per head: sum each head's hd*N (channel, state) terms
        ones = empty((form["hd"] * N, 1), "f32", dev)
        kernels.fill_words(ones, 0x3F800000)  # 1.0f
        dA_log = matmul(dA_log.reshape(A_log.shape[0], form["hd"] * N), ones).reshape(A_log.shape[0])
    dD = colsum(dD_part)
    return du, ddt, dA_log, dB, dC, dD, (dz if z is not None else None), dh0


# -- builderforce's Mamba-3 scan: complex states -----------------------------------------------------------
def _cdims(u, dt, A_log, B, C, D, batch, groups):
    want(u, "u", ndim=2, dtype=FLOATS)
    T = u.dtype
    M, Dc = u.shape
    if batch < 1 or M % batch:
        raise ShapeError(f"{M} tokens are not {batch} sequences of equal length")
    want(dt, "dt", shape=(M, Dc), dtype=T)
    want(A_log, "A_log", ndim=2, dtype="f32")
    H = A_log.shape[0]
    if A_log.shape[1] != 2 or H < 1 or Dc % H or groups < 1 or H % groups:
        raise ShapeError(f"A_log {A_log.shape} must be [heads, 2] with heads dividing {Dc} channels, "
                         f"a multiple of {groups} groups")
    want(B, "B", ndim=2, dtype=T)
    if B.shape[0] != M or B.shape[1] % (2 * groups):
        raise ShapeError(f"B {B.shape} is not [{M}, groups*Nc*2]")
    want(C, "C", shape=B.shape, dtype=T)
    want(D, "D", shape=(Dc,), dtype="f32")
    Nc = B.shape[1] // (2 * groups)
    v = one_variant("cscan_chunk", T, u.device)
    errs = variants.scan_errors(Nc, v.spec["NMAX"])
    if errs:
        raise UnsupportedError("; ".join(errs))
    return M, Dc, Nc, M // batch, H


def complex_scan(u: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, *, batch: int = 1,
                 chunk: int = SCAN_CHUNK, groups: int = 1, h0: Tensor | None = None):
    """builderforce's Mamba-3 scan: per channel d of head h, complex states n < Nc, λ = A_log[h,0] + i A_log[h,1],
    Δ = softplus(dt), ā = exp(Δλ), b̄ = (ā − 1) e^{−λ}: h_t = ā h_{t−1} + b̄ B_t u_t,
    y_t = Σ_n Re(conj(C_t,n) h_t,n) + D u_t. B, C [M, groups*Nc*2] (re, im interleaved); A_log [H, 2].
    Returns (y, h_last [batch, Dc, Nc, 2], H0)."""
    M, Dc, Nc, L, H = _cdims(u, dt, A_log, B, C, D, batch, groups)
    ch = variants.scan_chunk_len(L, chunk, batch)
    pc = dict(_push(batch, L, Dc, Nc, ch), G=groups, hd=Dc // H)
    nc, dev = pc["nc"], u.device
    if h0 is not None:
        want(h0, "h0", shape=(batch, Dc, Nc, 2), dtype="f32")
    S, P = empty((batch, nc, Dc, Nc, 2), "f32", dev), empty((batch, nc, Dc, Nc, 2), "f32", dev)
    hlast, y = empty((batch, Dc, Nc, 2), "f32", dev), empty((M, Dc), u.dtype, dev)
    per_thread("cscan_chunk", u.dtype, [u, dt, A_log, B, S, P], pc, batch * nc * Dc)
    per_thread("cscan_carry", u.dtype, [S, P, h0 if h0 is not None else hlast, hlast],
               dict(pc, rev=0, use_init=int(h0 is not None)), batch * Dc * Nc)
    per_thread("cscan_output", u.dtype, [u, dt, A_log, B, C, D, S, y, P], dict(pc, store_h=0), batch * nc * Dc)
    return y, hlast, S


def complex_scan_backward(u: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, dy: Tensor,
                          H0: Tensor, *, batch: int = 1, chunk: int = SCAN_CHUNK, groups: int = 1):
    """(du, ddt, dA_log [H, 2], dB, dC, dD) of complex_scan from a zero initial state."""
    M, Dc, Nc, L, H = _cdims(u, dt, A_log, B, C, D, batch, groups)
    want(dy, "dy", shape=(M, Dc), dtype=u.dtype)
    ch = variants.scan_chunk_len(L, chunk, batch)
    pc = dict(_push(batch, L, Dc, Nc, ch), G=groups, hd=Dc // H)
    nc, dev = pc["nc"], u.device
    want(H0, "H0", shape=(batch, nc, Dc, Nc, 2), dtype="f32")
    Hs, ys = empty((M, Dc, Nc, 2), "f32", dev), empty((M, Dc), u.dtype, dev)
    per_thread("cscan_output", u.dtype, [u, dt, A_log, B, C, D, H0, ys, Hs], dict(pc, store_h=1), batch * nc * Dc)
    # Gradients of B and C are in-order sums over each group's channels of 2*Nc reals (scan_channel_sum).
    pr = dict(_push(batch, L, Dc, 2 * Nc, ch), G=groups, hd=Dc // H, amode=0, dtin=1)
    dC = empty(C.shape, u.dtype, dev)
    per_thread("scan_channel_sum", u.dtype, [Hs, dy, dy, dC], dict(pr, use_w=1, has_z=0), C.numel)
    K, P = empty((batch, nc, Dc, Nc, 2), "f32", dev), empty((batch, nc, Dc, Nc, 2), "f32", dev)
    dh0 = empty((batch, Dc, Nc, 2), "f32", dev)
    per_thread("cscan_backward_chunk", u.dtype, [dt, A_log, C, dy, K, P], pc, batch * nc * Dc)
    per_thread("cscan_carry", u.dtype, [K, P, dh0, dh0], dict(pc, rev=1, use_init=0), batch * Dc * Nc)
    du, ddt = empty((M, Dc), u.dtype, dev), empty((M, Dc), u.dtype, dev)
    dA_part, dD_part = empty((batch * nc, 2 * Dc), "f32", dev), empty((batch * nc, Dc), "f32", dev)
    per_thread("cscan_backward", u.dtype, [u, dt, A_log, B, C, D, dy, H0, K, Hs, du, ddt, dA_part, dD_part], pc,
               batch * nc * Dc)
    dB = empty(B.shape, u.dtype, dev)
    per_thread("scan_channel_sum", u.dtype, [Hs, dy, dy, dB], dict(pr, use_w=0, has_z=0), B.numel)
    ones = empty((Dc // H, 1), "f32", dev)
    kernels.fill_words(ones, 0x3F800000)  # 1.0f
    dA_log = matmul(colsum(dA_part).reshape(2 * H, Dc // H), ones).reshape(H, 2)
    return du, ddt, dA_log, dB, dC, colsum(dD_part)


# -- Mamba-2 SSD: the chunked quadratic form (Dao & Gu 2024) ---------------------------------------------
def _ssd_chunks(op: str, dtype: str, dev, N: int, L: int, chunk: int):
    """(L, Q, n_chunks) of an SSD launch of op (ssd_output or cssd_output) over sequences of L tokens with
    N states: UnsupportedError unless the device's shared memory holds the Q×Q block and N fits."""
    v = one_variant(op, dtype, dev)
    errs = variants.ssd_launch_errors(v.spec, dev.info.shared_memory) + variants.scan_errors(N, v.spec["NMAX"])
    if errs:
        raise UnsupportedError("; ".join(errs))
    Q = variants.ssd_chunk_len(L, chunk, v.spec["QMAX"])
    return L, Q, -(-L // Q)


def _sdims(x, dt, A_log, B, C, D, batch, groups, chunk):
    want(x, "x", ndim=2, dtype=FLOATS)
    T = x.dtype
    M, Dc = x.shape
    if batch < 1 or M % batch:
        raise ShapeError(f"{M} tokens are not {batch} sequences of equal length")
    want(A_log, "A_log", ndim=1, dtype="f32")
    H = A_log.shape[0]
    if H < 1 or Dc % H or groups < 1 or H % groups:
        raise ShapeError(f"{H} heads (A_log {A_log.shape}) must divide {Dc} channels and be a multiple of {groups} groups")
    want(dt, "dt", shape=(M, H), dtype=T)
    want(B, "B", ndim=2, dtype=T)
    if B.shape[0] != M or B.shape[1] % groups:
        raise ShapeError(f"B {B.shape} is not [{M}, groups*N] with {groups} groups")
    N = B.shape[1] // groups
    want(C, "C", shape=B.shape, dtype=T)
    want(D, "D", shape=(Dc,), dtype="f32")
    L, Q, nc = _ssd_chunks("ssd_output", T, x.device, N, M // batch, chunk)
    pc = dict(nb=batch, L=L, H=H, hd=Dc // H, N=N, G=groups, Q=Q, nc=nc, mode=0)
    # scan_carry's view of the same chunk states
    carry = dict(nb=batch, L=L, Dc=Dc, N=N, CH=Q, nc=nc, G=groups, hd=Dc // H, amode=1, dtin=0)
    return M, Dc, N, H, pc, carry


def _ssd_groups(op: str, dtype: str, tensors: list, push: dict, items: int) -> None:
    """One workgroup per (batch, chunk, head) and block of WG of its `items`."""
    v = one_variant(op, dtype, tensors[0].device)
    n = push["nb"] * push["nc"] * push["H"] * -(-max(1, items) // v.spec["WG"])
    kernels.dispatch(v, tensors, push, kernels.grid(n))


def ssd(x: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, *, batch: int = 1,
        chunk: int = SSD_CHUNK, groups: int = 1, h0: Tensor | None = None):
    """Mamba-2 SSD in builderforce's parameterisation, by the chunked quadratic form. Per head h of hd
    channels (heads in `groups` groups sharing B and C), Δ = softplus(dt[:, h]), A_h = -softplus(A_log[h]):
        h_t = exp(Δ_t A_h) h_{t-1} + B_t x_tᵀ,    y_t = C_t · h_t + D ⊙ x_t
    x [batch*L, Dc]; dt [batch*L, H]; A_log [H]; B, C [batch*L, groups*N]; D [Dc] (f32); h0 [batch, Dc, N].
    Within each chunk of `chunk` tokens (1..64) y = (C Bᵀ ∘ L) X + exp(A) C·H + D x with H the state entering
    the chunk; the chunks' end states pass through a short scan over the chunks.
    Returns (y, h_last [batch, Dc, N], H0 the states entering each chunk [batch, n_chunks, Dc, N])."""
    M, Dc, N, H, pc, cp = _sdims(x, dt, A_log, B, C, D, batch, groups, chunk)
    dev, nc, T = x.device, pc["nc"], x.dtype
    if h0 is not None:
        want(h0, "h0", shape=(batch, Dc, N), dtype="f32")
    S, P = empty((batch, nc, Dc, N), "f32", dev), empty((batch, nc, Dc, N), "f32", dev)
    hlast, y = empty((batch, Dc, N), "f32", dev), empty((M, Dc), T, dev)
    _ssd_groups("ssd_state", T, [dt, A_log, B, x, S, P], pc, pc["hd"] * N)
    per_thread("scan_carry", T, [S, P, h0 if h0 is not None else hlast, hlast],
               dict(cp, rev=0, use_init=int(h0 is not None)), batch * Dc * N)
    dD_unused = empty((1,), "f32", dev)
    _ssd_groups("ssd_output", T, [x, dt, A_log, B, C, D, S, x, y, dD_unused], pc, pc["hd"])
    return y, hlast, S


def ssd_backward(x: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, dy: Tensor, H0: Tensor, *,
                 batch: int = 1, chunk: int = SSD_CHUNK, groups: int = 1):
    """Gradients (dx, ddt, dA_log, dB, dC, dD, dh0) of ssd for the output gradient dy, given its H0 (the
    final state's gradient is zero). The same chunks in reverse: the gradient each chunk's outputs send
    into its entering state, a reverse scan over chunks (R: the gradient of each chunk's end state), then
    per chunk dx = (C Bᵀ ∘ L)ᵀ dY + ..., the Q×Q grid dY Xᵀ ∘ L, dB, dC, and d/da by a reverse cumulative
    sum over the chunk."""
    M, Dc, N, H, pc, cp = _sdims(x, dt, A_log, B, C, D, batch, groups, chunk)
    dev, nc, T, Q = x.device, pc["nc"], x.dtype, pc["Q"]
    want(dy, "dy", shape=(M, Dc), dtype=T)
    want(H0, "H0", shape=(batch, nc, Dc, N), dtype="f32")
    K, P = empty((batch, nc, Dc, N), "f32", dev), empty((batch, nc, Dc, N), "f32", dev)
    dh0 = empty((batch, Dc, N), "f32", dev)
    pr = dict(pc, mode=1)
    _ssd_groups("ssd_state", T, [dt, A_log, C, dy, K, P], pr, pc["hd"] * N)
    per_thread("scan_carry", T, [K, P, dh0, dh0], dict(cp, rev=1, use_init=0), batch * Dc * N)
    dx, dD_part = empty((M, Dc), T, dev), empty((batch * nc, Dc), "f32", dev)
    _ssd_groups("ssd_output", T, [dy, dt, A_log, B, C, D, K, x, dx, dD_part], pr, pc["hd"])
    Wd, Wg = empty((batch * nc * H, Q * Q), "f32", dev), empty((batch * nc * H, Q * Q), "f32", dev)
    _ssd_groups("ssd_dgrid", T, [dt, A_log, B, C, x, dy, Wd, Wg], pc, Q * Q)
    dBh, dCh, E = (empty((M, H, N), "f32", dev) for _ in range(3))
    _ssd_groups("ssd_dbc", T, [dt, A_log, B, C, x, dy, H0, K, Wd, Wg, dBh, dCh, E], pc, Q * N)
    ddt, dA_part = empty((M, H), T, dev), empty((batch * nc, H), "f32", dev)
    _ssd_groups("ssd_da", T, [dt, A_log, H0, K, E, ddt, dA_part], pc, 1)
    # B and C are shared by a group's heads: sum the per-head gradients in order (scan_channel_sum).
    sp = dict(nb=batch, L=M // batch, Dc=H, N=N, CH=Q, nc=nc, G=groups, hd=1, amode=0, dtin=0, use_w=0, has_z=0)
    dB, dC = empty(B.shape, T, dev), empty(C.shape, T, dev)
    per_thread("scan_channel_sum", T, [dBh, dy, dy, dB], sp, B.numel)
    per_thread("scan_channel_sum", T, [dCh, dy, dy, dC], sp, C.numel)
    return dx, ddt, colsum(dA_part), dB, dC, colsum(dD_part), dh0


# -- builderforce's Mamba-3 by the same chunked quadratic form: a complex decay per head -------------------
def _csdims(x, dt, A_log, B, C, D, batch, groups, chunk):
    want(x, "x", ndim=2, dtype=FLOATS)
    T = x.dtype
    M, Dc = x.shape
    if batch < 1 or M % batch:
        raise ShapeError(f"{M} tokens are not {batch} sequences of equal length")
    want(A_log, "A_log", ndim=2, dtype="f32")
    H = A_log.shape[0]
    if A_log.shape[1] != 2 or H < 1 or Dc % H or groups < 1 or H % groups:
        raise ShapeError(f"A_log {A_log.shape} must be [heads, 2] with heads dividing {Dc} channels, "
                         f"a multiple of {groups} groups")
    want(dt, "dt", shape=(M, H), dtype=T)
    want(B, "B", ndim=2, dtype=T)
    if B.shape[0] != M or B.shape[1] % (2 * groups):
        raise ShapeError(f"B {B.shape} is not [{M}, groups*Nc*2]")
    Nc = B.shape[1] // (2 * groups)
    want(C, "C", shape=B.shape, dtype=T)
    want(D, "D", shape=(Dc,), dtype="f32")
    L, Q, nc = _ssd_chunks("cssd_output", T, x.device, Nc, M // batch, chunk)
    pc = dict(nb=batch, L=L, H=H, hd=Dc // H, N=Nc, G=groups, Q=Q, nc=nc, mode=0)
    carry = dict(nb=batch, L=L, Dc=Dc, N=Nc, CH=Q, nc=nc, G=groups, hd=Dc // H)  # cscan_carry's view
    return M, Dc, Nc, H, pc, carry


def complex_ssd(x: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, *, batch: int = 1,
                chunk: int = SSD_CHUNK, groups: int = 1, h0: Tensor | None = None):
    """builderforce's Mamba-3 scan (complex_scan's recurrence, one Δ per head: dt [batch*L, H]) by the chunked
    quadratic form: θ_i = λ s_i (s: the cumulative Δ), y = Re((conj(C) Bᵀ ∘ exp(θ_i − θ_j)) b̄) X within
    chunks + Re(exp(θ) conj(C) · H) + D x, end states passed between chunks by cscan_carry.
    Returns (y, h_last [batch, Dc, Nc, 2], H0 [batch, n_chunks, Dc, Nc, 2])."""
    M, Dc, Nc, H, pc, cp = _csdims(x, dt, A_log, B, C, D, batch, groups, chunk)
    dev, nc, T = x.device, pc["nc"], x.dtype
    if h0 is not None:
        want(h0, "h0", shape=(batch, Dc, Nc, 2), dtype="f32")
    S, P = empty((batch, nc, Dc, Nc, 2), "f32", dev), empty((batch, nc, Dc, Nc, 2), "f32", dev)
    hlast, y = empty((batch, Dc, Nc, 2), "f32", dev), empty((M, Dc), T, dev)
    _ssd_groups("cssd_state", T, [dt, A_log, B, x, S, P], pc, pc["hd"] * Nc)
    per_thread("cscan_carry", T, [S, P, h0 if h0 is not None else hlast, hlast],
               dict(cp, rev=0, use_init=int(h0 is not None)), batch * Dc * Nc)
    _ssd_groups("cssd_output", T, [x, dt, A_log, B, C, D, S, x, y, empty((1,), "f32", dev)], pc, pc["hd"])
    return y, hlast, S


def complex_ssd_backward(x: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor, dy: Tensor,
                         H0: Tensor, *, batch: int = 1, chunk: int = SSD_CHUNK, groups: int = 1):
    """(dx, ddt, dA_log [H, 2], dB, dC, dD, dh0) of complex_ssd (zero final-state gradient)."""
    M, Dc, Nc, H, pc, cp = _csdims(x, dt, A_log, B, C, D, batch, groups, chunk)
    dev, nc, T, Q = x.device, pc["nc"], x.dtype, pc["Q"]
    want(dy, "dy", shape=(M, Dc), dtype=T)
    want(H0, "H0", shape=(batch, nc, Dc, Nc, 2), dtype="f32")
    K, P = empty((batch, nc, Dc, Nc, 2), "f32", dev), empty((batch, nc, Dc, Nc, 2), "f32", dev)
    dh0 = empty((batch, Dc, Nc, 2), "f32", dev)
    pr = dict(pc, mode=1)
    _ssd_groups("cssd_state", T, [dt, A_log, C, dy, K, P], pr, pc["hd"] * Nc)
    per_thread("cscan_carry", T, [K, P, dh0, dh0], dict(cp, rev=1, use_init=0), batch * Dc * Nc)
    dx, dD_part = empty((M, Dc), T, dev), empty((batch * nc, Dc), "f32", dev)
    _ssd_groups("cssd_output", T, [dy, dt, A_log, B, C, D, K, x, dx, dD_part], pr, pc["hd"])
    Wd, Wb = empty((batch * nc * H, Q * Q * 2), "f32", dev), empty((batch * nc * H, Q * Q * 2), "f32", dev)
    _ssd_groups("cssd_dgrid", T, [dt, A_log, B, C, x, dy, Wd, Wb], pc, Q * Q)
    dBh, dCh, Et, Eb = (empty((M, H, Nc, 2), "f32", dev) for _ in range(4))
    _ssd_groups("cssd_dbc", T, [dt, A_log, B, C, x, dy, H0, K, Wd, Wb, dBh, dCh, Et, Eb], pc, Q * Nc)
    ddt, dA_part = empty((M, H), T, dev), empty((batch * nc, 2 * H), "f32", dev)
    _ssd_groups("cssd_da", T, [dt, A_log, H0, K, Et, Eb, ddt, dA_part], pc, 1)
    sp = dict(nb=batch, L=M // batch, Dc=H, N=2 * Nc, CH=Q, nc=nc, G=groups, hd=1, amode=0, dtin=0, use_w=0, has_z=0)
    dB, dC = empty(B.shape, T, dev), empty(C.shape, T, dev)
    per_thread("scan_channel_sum", T, [dBh, dy, dy, dB], sp, B.numel)
    per_thread("scan_channel_sum", T, [dCh, dy, dy, dC], sp, C.numel)
    return dx, ddt, colsum(dA_part).reshape(H, 2), dB, dC, colsum(dD_part), dh0
