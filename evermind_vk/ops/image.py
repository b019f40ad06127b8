"""Image ops on NCHW tensors, forward and backward: group_norm (with weight and bias gradients),
per-channel sums, nearest upsample2d and pixel_shuffle (NCHW, or doppler's token layout).
Statistics, norm weights and biases are f32; activations f32 or f16 storage.

Long reductions are two-stage (one f32 partial per CHUNK elements, then one workgroup per row or
channel adds the partials in a fixed order), so no shader invocation loops more than
max(CHUNK, partials) / 256 times: lavapipe ends any shader loop after 65,535 iterations."""
from __future__ import annotations

from ..errors import ShapeError
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, like, per_thread, run, want

__all__ = ["group_norm", "group_norm_backward", "group_norm_partials", "group_norm_stats",
           "group_norm_backward_stats", "channel_partials", "channel_totals", "channel_sum",
           "upsample2d", "upsample2d_backward", "pixel_shuffle", "pixel_shuffle_backward"]

CHUNK = 4096  # elements per stage-1 workgroup (16 per thread)


def _nchw(x: Tensor, name: str = "x") -> tuple[int, int, int, int]:
    want(x, name, ndim=4, dtype=FLOATS)
    if x.numel == 0:
        raise ShapeError(f"{name} {x.shape} is empty")
    return x.shape


def _chunks(n: int) -> int:
    return -(-n // CHUNK)


# -- group_norm --------------------------------------------------------------------------------
def group_norm_partials(x: Tensor, rows: int, L: int) -> Tensor:
    """Stage 1: per chunk of each contiguous row of L elements, (sum, centred sum of squares)."""
    nch = _chunks(L)
    part = empty((rows * nch, 2), "f32", x.device)
    run("group_norm_partials", x.dtype, [x, part], dict(rows=rows, L=L, chunk=CHUNK, nchunk=nch), rows * nch)
    return part


def group_norm_stats(part: Tensor, rows: int, L: int, eps: float) -> Tensor:
    """Stage 2: (mean, rstd) per row, f32 [rows, 2]."""
    stats = empty((rows, 2), "f32", part.device)
    run("group_norm_stats", "f32", [part, stats], dict(rows=rows, L=L, chunk=CHUNK, nchunk=_chunks(L), eps=eps), rows)
    return stats


def _groups(x: Tensor, num_groups: int) -> tuple:
    N, C, H, W = _nchw(x)
    if num_groups < 1 or C % num_groups:
        raise ShapeError(f"group_norm: {C} channels do not split into {num_groups} groups")
    return N, C, H * W, num_groups


def group_norm(x: Tensor, num_groups: int, weight: Tensor, bias: Tensor, eps: float = 1e-5):
    """torch.nn.functional.group_norm on NCHW x: each (image, group of C/G channels) normalised over
    its channels and pixels (biased variance), then y = xhat * weight[c] + bias[c]. weight and bias f32
    [C]. Returns (y, stats) with stats f32 [N*G, 2] = (mean, rstd) per (image, group)."""
    N, C, HW, G = _groups(x, num_groups)
    want(weight, "weight", shape=(C,), dtype="f32")
    want(bias, "bias", shape=(C,), dtype="f32")
    rows, L = N * G, (C // G) * HW
    stats = group_norm_stats(group_norm_partials(x, rows, L), rows, L, eps)
    y = like(x)
    per_thread("group_norm", x.dtype, [x, weight, bias, stats, y], dict(n=x.numel, C=C, HW=HW, G=G), x.numel)
    return y, stats


def channel_partials(dy: Tensor, x: Tensor | None = None, stats: Tensor | None = None, num_groups: int = 1) -> Tensor:
    """Stage 1 of per-channel sums: per (image, channel, chunk of pixels), sum(dy) and, given x and its
    group statistics, sum(dy * xhat). f32 [N*C*chunks, 2]."""
    N, C, H, W = _nchw(dy, "dy")
    nch = _chunks(H * W)
    part = empty((N * C * nch, 2), "f32", dy.device)
    xhat = x is not None
    if xhat:
        want(x, "x", shape=dy.shape, dtype=dy.dtype)
        want(stats, "stats", shape=(N * num_groups, 2), dtype="f32")
    else:
        stats = part  # bound, never read
    run("channel_partials", dy.dtype, [x if xhat else dy, dy, stats, part],
        dict(NC=N * C, C=C, HW=H * W, G=num_groups, chunk=CHUNK, nchunk=nch, xhat=int(xhat)), N * C * nch)
    return part


def channel_totals(part: Tensor, N: int, C: int, HW: int, xhat: bool):
    """Stage 2: per channel, the sums over images and chunks: db (and dw with xhat), f32 [C]."""
    db = empty((C,), "f32", part.device)
    dw = empty((C,), "f32", part.device) if xhat else db
    run("channel_totals", "f32", [part, db, dw], dict(N=N, C=C, nchunk=_chunks(HW), xhat=int(xhat)), C)
    return (db, dw) if xhat else db


def channel_sum(x: Tensor) -> Tensor:
    """sum over images and pixels of NCHW x per channel, f32 [C] (conv2d's bias gradient)."""
    N, C, H, W = _nchw(x)
    return channel_totals(channel_partials(x), N, C, H * W, False)


def group_norm_backward_stats(part: Tensor, weight: Tensor, N: int, C: int, HW: int, G: int) -> Tensor:
    """Per (image, group): mean of weight*dy and of weight*dy*xhat over the group, f32 [N*G, 2]."""
    rsum = empty((N * G, 2), "f32", part.device)
    run("group_norm_backward_stats", "f32", [part, weight, rsum],
        dict(rows=N * G, C=C, G=G, nchunk=_chunks(HW), L=(C // G) * HW), N * G)
    return rsum


def group_norm_backward(x: Tensor, num_groups: int, weight: Tensor, dy: Tensor, stats: Tensor):
    """(dx, dweight, dbias) of group_norm: dx = rstd (w dy - mean(w dy) - xhat mean(w dy xhat)) per
    group; dweight[c] = sum dy xhat, dbias[c] = sum dy over images and pixels (f32)."""
    N, C, HW, G = _groups(x, num_groups)
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    want(weight, "weight", shape=(C,), dtype="f32")
    part = channel_partials(dy, x, stats, G)
    db, dw = channel_totals(part, N, C, HW, True)
    rsum = group_norm_backward_stats(part, weight, N, C, HW, G)
    dx = like(x)
    per_thread("group_norm_backward", x.dtype, [x, weight, dy, stats, rsum, dx], dict(n=x.numel, C=C, HW=HW, G=G),
               x.numel)
    return dx, dw, db


# -- upsample2d --------------------------------------------------------------------------------
def _scale(scale_factor) -> tuple[int, int]:
    sh, sw = (scale_factor, scale_factor) if isinstance(scale_factor, int) else tuple(scale_factor)
    if not (isinstance(sh, int) and isinstance(sw, int)) or sh < 1 or sw < 1:
        raise ShapeError(f"upsample2d: scale_factor must be a positive integer or pair, got {scale_factor!r}")
    return sh, sw


def upsample2d(x: Tensor, scale_factor=2) -> Tensor:
    """Nearest-neighbour upsampling of NCHW x by integer factors (torch interpolate mode='nearest')."""
    N, C, H, W = _nchw(x)
    sh, sw = _scale(scale_factor)
    y = empty((N, C, H * sh, W * sw), x.dtype, x.device)
    per_thread("upsample2d", x.dtype, [x, y], dict(NC=N * C, H=H, W=W, sh=sh, sw=sw), y.numel)
    return y


def upsample2d_backward(dy: Tensor, scale_factor=2) -> Tensor:
    """dx[n, c, y, x] = sum of the sh x sw block of dy that pixel was copied to."""
    N, C, OH, OW = _nchw(dy, "dy")
    sh, sw = _scale(scale_factor)
    if OH % sh or OW % sw:
        raise ShapeError(f"upsample2d_backward: dy {dy.shape} is not a multiple of scale {(sh, sw)}")
    dx = empty((N, C, OH // sh, OW // sw), dy.dtype, dy.device)
    per_thread("upsample2d_backward", dy.dtype, [dy, dx], dict(NC=N * C, H=OH // sh, W=OW // sw, sh=sh, sw=sw),
               dx.numel)
    return dx


# -- pixel_shuffle -----------------------------------------------------------------------------
def _shuffle_geometry(shape: tuple, r: int, layout: str, grid):
    """(N, C, GH, GW) of a pixel_shuffle input of this shape in either layout."""
    if not isinstance(r, int) or r < 1:
        raise ShapeError(f"pixel_shuffle: upscale_factor must be a positive integer, got {r!r}")
    if 0 in shape:
        raise ShapeError(f"pixel_shuffle: input {shape} is empty")
    if layout == "nchw":
        if len(shape) != 4:
            raise ShapeError(f"pixel_shuffle: x must be 4-D NCHW, got shape {shape}")
        N, Cr, GH, GW = shape
        if Cr % (r * r):
            raise ShapeError(f"pixel_shuffle: {Cr} channels not divisible by upscale_factor^2 = {r * r}")
        return N, Cr // (r * r), GH, GW
    if layout != "tokens":
        raise ShapeError(f"pixel_shuffle: layout must be 'nchw' or 'tokens', got {layout!r}")
    if len(shape) not in (2, 3):
        raise ShapeError(f"pixel_shuffle tokens layout takes [tokens, r*r*C] or [N, tokens, r*r*C], got {shape}")
    N, T, PC = (1, *shape) if len(shape) == 2 else shape
    if grid is None:
        raise ShapeError("pixel_shuffle tokens layout needs grid=(grid_h, grid_w)")
    GH, GW = grid
    if GH * GW != T or PC % (r * r):
        raise ShapeError(f"pixel_shuffle: {shape} is not [N, {GH}*{GW} tokens, r*r*C] with r = {r}")
    return N, PC // (r * r), GH, GW


def pixel_shuffle(x: Tensor, upscale_factor: int, layout: str = "nchw", grid=None) -> Tensor:
    """Rearrange r*r channels into an r x r block of pixels. layout 'nchw': torch.pixel_shuffle,
    [N, C*r*r, H, W] -> [N, C, H*r, W*r]. layout 'tokens' (doppler): x [N, gh*gw, r*r*C] (or without
    N) -> [N, C, gh*r, gw*r] (or [C, gh*r, gw*r]), out[c, gy*r + sy, gx*r + sx] = x[gy*gw + gx,
    (sy*r + sx)*C + c]."""
    r = upscale_factor
    want(x, "x", dtype=FLOATS)
    N, C, GH, GW = _shuffle_geometry(x.shape, r, layout, grid)
    shape = (N, C, GH * r, GW * r) if not (layout == "tokens" and x.ndim == 2) else (C, GH * r, GW * r)
    y = empty(shape, x.dtype, x.device)
    per_thread("pixel_shuffle", x.dtype, [x, y], dict(N=N, C=C, GH=GH, GW=GW, r=r, tokens=int(layout == "tokens")),
               y.numel)
    return y


def pixel_shuffle_backward(dy: Tensor, x_shape, upscale_factor: int, layout: str = "nchw", grid=None) -> Tensor:
    """The gradient of pixel_shuffle (its inverse permutation), shaped like its input x_shape."""
    r = upscale_factor
    want(dy, "dy", dtype=FLOATS)
    N, C, GH, GW = _shuffle_geometry(tuple(x_shape), r, layout, grid)
    if dy.numel != N * C * GH * r * GW * r:
        raise ShapeError(f"pixel_shuffle_backward: dy {dy.shape} does not match input {tuple(x_shape)}")
    dx = empty(tuple(x_shape), dy.dtype, dy.device)
    per_thread("pixel_shuffle_backward", dy.dtype, [dy, dx],
               dict(N=N, C=C, GH=GH, GW=GW, r=r, tokens=int(layout == "tokens")), dx.numel)
    return dx
