"""The Mamba-1 selective scan (S6), forward and backward, as a chunked parallel scan (issue 12).

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

__all__ = ["selective_scan", "selective_scan_backward", "complex_scan", "complex_scan_backward", "SCAN_CHUNK"]

SCAN_CHUNK = 64  # default tokens per chunk


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


# -- builderforce's Mamba-3 scan: complex states (issue 12) ----------------------------------------------
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
