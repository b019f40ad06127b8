"""2-D convolution (NCHW, weight [OC, IC, KH, KW], stride, padding, dilation, optional f32 bias) as
implicit GEMM on the strided batched matmul:

    forward  col = im2col(x) [IC*KH*KW, N*OH*OW];  y[n] = W[OC, K] . col[:, n]    (one batched matmul)
    dX       dcol[:, n] = W^T . dy[n] (one batched matmul);  dx = col2im(dcol)      (a gather, no atomics)
    dW       dW = dy^T[OC, N*OH*OW] . col^T        (split-K: one batched matmul over pieces of KSPLIT
             pixels into partial products, then one matmul with a ones vector sums them)
    dB       per-channel two-stage sum of dy (f32)

The matmul's k loop runs K / BK times (BK >= 4) and lavapipe ends any shader loop after 65,535
iterations: dW's reduction (over every output pixel of the batch) is split into KSPLIT pieces, which
also gives a GPU parallel work where OC x IC*KH*KW alone is a handful of tiles; any other product whose
reduction is longer than KCHUNK is split into products accumulated with beta = 1."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedError
from ..runtime.tensor import Tensor, empty, tensor
from ._util import FLOATS, per_thread, want
from .image import channel_sum
from .matmul import gemm_strided

__all__ = ["conv2d", "conv2d_backward", "conv2d_output_size", "im2col", "col2im", "swap_axes01",
           "channel_bias_add"]

KCHUNK = 16384  # longest reduction of one matmul dispatch (lavapipe's loop cap; see the module doc)
KSPLIT = 4096  # pixels per partial product of dW


def _pair(v, name: str, low: int) -> tuple[int, int]:
    a, b = (v, v) if isinstance(v, int) else tuple(v)
    if not (isinstance(a, int) and isinstance(b, int)) or a < low or b < low:
        raise ShapeError(f"conv2d: {name} must be an integer >= {low} or a pair of them, got {v!r}")
    return a, b


def conv2d_output_size(H: int, W: int, KH: int, KW: int, stride=1, padding=0, dilation=1) -> tuple[int, int]:
    """The output (height, width) of a conv2d over H x W with a KH x KW kernel, stride, padding and
    dilation (PyTorch's formula)."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride, "stride", 1), _pair(padding, "padding", 0), _pair(dilation, "dilation", 1)
    return (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1, (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1


def _geometry(x: Tensor, w: Tensor, stride, padding, dilation) -> dict:
    want(x, "x", ndim=4, dtype=FLOATS)
    want(w, "weight", ndim=4, dtype=x.dtype)
    N, C, H, W = x.shape
    OC, IC, KH, KW = w.shape
    if IC != C:
        raise ShapeError(f"conv2d: x has {C} channels, weight {w.shape} expects {IC}")
    if 0 in x.shape or 0 in w.shape:
        raise ShapeError(f"conv2d: empty input {x.shape} or weight {w.shape}")
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride, "stride", 1), _pair(padding, "padding", 0), _pair(dilation, "dilation", 1)
    OH, OW = conv2d_output_size(H, W, KH, KW, (sh, sw), (ph, pw), (dh, dw))
    if OH < 1 or OW < 1:
        raise ShapeError(f"conv2d: a {KH}x{KW} kernel (dilation {(dh, dw)}) does not fit the {H}x{W} input "
                         f"padded by {(ph, pw)}")
    return dict(N=N, C=C, H=H, W=W, KH=KH, KW=KW, OH=OH, OW=OW, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh, dw=dw)


def im2col(x: Tensor, g: dict) -> Tensor:
    """col [C*KH*KW, N*OH*OW] of x (zeros where a tap falls in the padding)."""
    col = empty((g["C"] * g["KH"] * g["KW"], g["N"] * g["OH"] * g["OW"]), x.dtype, x.device)
    per_thread("im2col", x.dtype, [x, col], g, col.numel)
    return col


def col2im(dcol: Tensor, g: dict) -> Tensor:
    """dx [N, C, H, W]: each pixel sums the entries of dcol [C*KH*KW, N*OH*OW] im2col copied it to."""
    dx = empty((g["N"], g["C"], g["H"], g["W"]), dcol.dtype, dcol.device)
    per_thread("col2im", dcol.dtype, [dcol, dx], g, dx.numel)
    return dx


def swap_axes01(x: Tensor, A: int, B: int, R: int) -> Tensor:
    """y [B, A, R] from x [A, B, R]."""
    y = empty((B, A, R), x.dtype, x.device)
    per_thread("swap_axes01", x.dtype, [x, y], dict(A=A, B=B, R=R), y.numel)
    return y


def channel_bias_add(y: Tensor, bias: Tensor) -> Tensor:
    """y[n, c, ...] += bias[c], in place (bias f32 [C])."""
    N, C = y.shape[:2]
    want(bias, "bias", shape=(C,), dtype="f32")
    per_thread("channel_bias_add", y.dtype, [y, bias], dict(n=y.numel, C=C, HW=y.numel // max(1, N * C)), y.numel)
    return y


def _gemm_k(a, b, c, M, N, K, *, a_strides, b_strides, c_strides, batch=1, a_batch=(0, 0), b_batch=(0, 0, 1),
            c_batch=(0, 0)):
    """gemm_strided with the reduction split into pieces of at most KCHUNK, accumulated in c."""
    for k0 in range(0, K, KCHUNK):
        gemm_strided(a, b, c, M, N, min(KCHUNK, K - k0), a_strides=a_strides, b_strides=b_strides,
                     c_strides=c_strides, batch=batch, a_batch=(a_batch[0] + k0 * a_strides[1], a_batch[1]),
                     b_batch=(b_batch[0] + k0 * b_strides[0], b_batch[1], b_batch[2]), c_batch=c_batch,
                     beta=0.0 if k0 == 0 else 1.0)
    return c


def _weight_grad(dyt: Tensor, col: Tensor, OC: int, K: int, NP: int) -> Tensor:
    """dW [OC, K] = dyt [OC, NP] . col [K, NP]^T, split-K: part[z] = the product over pixels
    [z*KSPLIT, (z+1)*KSPLIT) (one batched matmul, plus one for a shorter last piece), then
    dW = ones[1, Z] . part[Z, OC*K] (the pieces summed in order, f32 accumulation)."""
    dev, dt = dyt.device, dyt.dtype
    dw = empty((OC, K), dt, dev)
    Z, rem = divmod(NP, KSPLIT)
    if Z == 0 or (Z == 1 and rem == 0):
        return _gemm_k(dyt, col, dw, OC, K, NP, a_strides=(NP, 1), b_strides=(1, NP), c_strides=(K, 1))
    parts = Z + (rem > 0)
    part = empty((parts, OC * K), dt, dev)
    gemm_strided(dyt, col, part, OC, K, KSPLIT, a_strides=(NP, 1), b_strides=(1, NP), c_strides=(K, 1),
                 batch=Z, a_batch=(0, KSPLIT), b_batch=(0, KSPLIT, 1), c_batch=(0, OC * K))
    if rem:
        gemm_strided(dyt, col, part, OC, K, rem, a_strides=(NP, 1), b_strides=(1, NP), c_strides=(K, 1),
                     a_batch=(Z * KSPLIT, 0), b_batch=(Z * KSPLIT, 0, 1), c_batch=(Z * OC * K, 0))
    with dev.eager():  # a constant made once, not an operation of a recorded step
        ones = tensor(np.ones(parts, np.float16 if dt == "f16" else np.float32), device=dev)
    _gemm_k(ones, part, dw, 1, OC * K, parts, a_strides=(parts, 1), b_strides=(OC * K, 1), c_strides=(OC * K, 1))
    return dw


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1) -> Tensor:
    """torch.nn.functional.conv2d (groups=1): y [N, OC, OH, OW] from x [N, C, H, W] and weight
    [OC, C, KH, KW] (same dtype; f32 accumulation), bias f32 [OC] or None. stride, padding and dilation
    are an int or an (h, w) pair."""
    g = _geometry(x, weight, stride, padding, dilation)
    N, OC, P = g["N"], weight.shape[0], g["OH"] * g["OW"]
    if N > 65535:
        raise UnsupportedError(f"conv2d: batch {N} exceeds 65535 images per call")
    K = g["C"] * g["KH"] * g["KW"]
    col = im2col(x, g)
    y = empty((N, OC, g["OH"], g["OW"]), x.dtype, x.device)
    # y[n][oc, q] = sum_k W[oc, k] col[k, n*P + q]
    _gemm_k(weight, col, y, OC, P, K, a_strides=(K, 1), b_strides=(N * P, 1), c_strides=(P, 1),
            batch=N, b_batch=(0, P, 1), c_batch=(0, OC * P))
    if bias is not None:
        channel_bias_add(y, bias)
    return y


def conv2d_backward(x: Tensor, weight: Tensor, dy: Tensor, stride=1, padding=0, dilation=1,
                    need_x: bool = True, need_weight: bool = True, need_bias: bool = False):
    """(dx, dweight, dbias) of conv2d (None where not needed; dbias f32)."""
    g = _geometry(x, weight, stride, padding, dilation)
    N, OC, P = g["N"], weight.shape[0], g["OH"] * g["OW"]
    want(dy, "dy", shape=(N, OC, g["OH"], g["OW"]), dtype=x.dtype)
    K = g["C"] * g["KH"] * g["KW"]
    dx = dw = db = None
    if need_x:
        dcol = empty((K, N * P), x.dtype, x.device)
        # dcol[k, n*P + q] = sum_oc W[oc, k] dy[n][oc, q]
        _gemm_k(weight, dy, dcol, K, P, OC, a_strides=(1, K), b_strides=(P, 1), c_strides=(N * P, 1),
                batch=N, b_batch=(0, OC * P, 1), c_batch=(0, P))
        dx = col2im(dcol, g)
    if need_weight:
        col = im2col(x, g)
        dyt = swap_axes01(dy, N, OC, P)  # [OC, N*P]
        dw = _weight_grad(dyt, col, OC, K, N * P).reshape(weight.shape)
    if need_bias:
        db = channel_sum(dy)
    return dx, dw, db
