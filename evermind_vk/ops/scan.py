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
from ._util import one_variant, per_thread, want
from .matmul import matmul
from .reduce import colsum

__all__ = ["selective_scan", "selective_scan_backward", "SCAN_CHUNK"]

SCAN_CHUNK = 64  # default tokens per chunk


def _dims(u, dt, A_log, B, C, D, z, batch, groups):
    want(u, "u", ndim=2, dtype="f32")
    M, Dc = u.shape
    if batch < 1 or M % batch:
        raise ShapeError(f"{M} tokens are not {batch} sequences of equal length")
    want(dt, "dt", shape=(M, Dc), dtype="f32")
    want(B, "B", ndim=2, dtype="f32")
    if groups < 1 or Dc % groups or B.shape[1] % groups or B.shape[0] != M:
        raise ShapeError(f"B {B.shape} is not [{M}, groups*N] with {groups} groups dividing {Dc} channels")
    N = B.shape[1] // groups
    want(C, "C", shape=B.shape, dtype="f32")
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
        want(z, "z", shape=(M, Dc), dtype="f32")
    v = one_variant("scan_chunk", "f32", u.device)
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
    ch = variants.scan_chunk_len(L, chunk)
    pc = dict(_push(batch, L, Dc, N, ch), **form, dtin=int(delta_input))
    nc = pc["nc"]
    dev = u.device
    if h0 is not None:
        want(h0, "h0", shape=(batch, Dc, N), dtype="f32")
    S, P = empty((batch, nc, Dc, N), "f32", dev), empty((batch, nc, Dc, N), "f32", dev)
    hlast = empty((batch, Dc, N), "f32", dev)
    y = empty((M, Dc), "f32", dev)
    per_thread("scan_chunk", "f32", [u, dt, A_log, B, S, P], pc, batch * nc * Dc)
    per_thread("scan_carry", "f32", [S, P, h0 if h0 is not None else hlast, hlast],
               dict(pc, rev=0, use_init=int(h0 is not None)), batch * Dc * N)
    per_thread("scan_output", "f32", [u, dt, A_log, B, C, D, z if z is not None else u, S, y, P],
               dict(pc, has_z=int(z is not None), store_h=0), batch * nc * Dc)
    return y, hlast, S


def selective_scan_backward(u: Tensor, dt: Tensor, A_log: Tensor, B: Tensor, C: Tensor, D: Tensor,
                            z: Tensor | None, dy: Tensor, H0: Tensor, *, batch: int = 1,
                            chunk: int = SCAN_CHUNK, groups: int = 1, delta_input: bool = True):
    """Gradients (du, ddt, dA_log, dB, dC, dD, dz (None without z), dh0 [batch, Dc, N]) of
    selective_scan for the output gradient dy, given its H0 (the final-state gradient is zero)."""
    M, Dc, N, L, form = _dims(u, dt, A_log, B, C, D, z, batch, groups)
    want(dy, "dy", shape=(M, Dc), dtype="f32")
    ch = variants.scan_chunk_len(L, chunk)
    pc = dict(_push(batch, L, Dc, N, ch), **form, dtin=int(delta_input))
    nc = pc["nc"]
    want(H0, "H0", shape=(batch, nc, Dc, N), dtype="f32")
    dev = u.device
    zz = z if z is not None else u
    hz = int(z is not None)
    # Every h_t, recomputed chunk by chunk from H0 (a scratch of batch*L*Dc*N floats).
    Hs, yscratch = empty((M, Dc, N), "f32", dev), empty((M, Dc), "f32", dev)
    per_thread("scan_output", "f32", [u, dt, A_log, B, C, D, zz, H0, yscratch, Hs],
               dict(pc, has_z=hz, store_h=1), batch * nc * Dc)
    dC = empty(C.shape, "f32", dev)
    per_thread("scan_channel_sum", "f32", [Hs, dy, zz, dC], dict(pc, use_w=1, has_z=hz), C.numel)
    # Reverse-time carries: each chunk's summary from a zero carry, then the scan over chunks.
    K, P = empty((batch, nc, Dc, N), "f32", dev), empty((batch, nc, Dc, N), "f32", dev)
    dh0 = empty((batch, Dc, N), "f32", dev)
    per_thread("scan_backward_chunk", "f32", [dt, A_log, C, zz, dy, K, P], dict(pc, has_z=hz), batch * nc * Dc)
    per_thread("scan_carry", "f32", [K, P, dh0, dh0], dict(pc, rev=1, use_init=0), batch * Dc * N)
    du, ddt, dz = empty((M, Dc), "f32", dev), empty((M, Dc), "f32", dev), empty((M, Dc), "f32", dev)
    dA_part, dD_part = empty((batch * nc, Dc * N), "f32", dev), empty((batch * nc, Dc), "f32", dev)
    per_thread("scan_backward", "f32", [u, dt, A_log, B, C, D, zz, dy, H0, K, Hs, du, ddt, dz, dA_part, dD_part],
               dict(pc, has_z=hz), batch * nc * Dc)
    dB = empty(B.shape, "f32", dev)
    per_thread("scan_channel_sum", "f32", [Hs, dy, zz, dB], dict(pc, use_w=0, has_z=0), B.numel)
    dA_log = colsum(dA_part).reshape(Dc, N)
    if form["amode"] == 1:  # one A per head: sum each head's hd*N (channel, state) terms
        ones = empty((form["hd"] * N, 1), "f32", dev)
        kernels.fill_words(ones, 0x3F800000)  # 1.0f
        dA_log = matmul(dA_log.reshape(A_log.shape[0], form["hd"] * N), ones).reshape(A_log.shape[0])
    dD = colsum(dD_part)
    return du, ddt, dA_log, dB, dC, dD, (dz if z is not None else None), dh0
