"""Causal depthwise 1-D convolution over token-major tensors, forward and backward.

x is [T, C] (T tokens, C channels), kernel is [C, K] (one K-tap filter per channel, f32), optional bias
[C] (f32). Tokens are packed sequences of `seq_len` (default T: one sequence); a tap never reads across
a sequence boundary (zero padding on the left of every sequence).

Tap order (`taps`):
  "lag"   (builderforce's EvermindLM): y[t, c] = sum_{j < K, j <= s} kernel[c, j] x[t - j, c]
  "torch" (PyTorch Conv1d, K - 1 zeros padded on the left):
          y[t, c] = sum_{j < K, K-1-j <= s} kernel[c, j] x[t - (K - 1) + j, c]
where s = t mod seq_len is t's position in its sequence. The two differ only by reversing each filter.
"""
from __future__ import annotations

from ..errors import ShapeError, UnsupportedError
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, like, per_thread, want
from .reduce import colsum

__all__ = ["conv1d_causal", "conv1d_causal_backward", "conv1d_causal_weight_partials"]

TAPS = ("lag", "torch")
MAX_TAPS = 1024  # each invocation loops over the K taps (lavapipe ends a loop after 65,535 iterations)
CHUNK = 256  # tokens per stage-1 invocation of the dkernel reduction
MAX_CHUNKS = 4096  # stage 2 (colsum) loops over the chunks; past this, chunks grow instead


def _geometry(x: Tensor, kernel_shape, seq_len, taps: str) -> dict:
    want(x, "x", ndim=2, dtype=FLOATS)
    T, C = x.shape
    if len(kernel_shape) != 2 or kernel_shape[0] != C:
        raise ShapeError(f"conv1d_causal: kernel {tuple(kernel_shape)} is not [C, K] for x [T, C] = {x.shape}")
    K = kernel_shape[1]
    if not 1 <= K <= MAX_TAPS:
        raise UnsupportedError(f"conv1d_causal: {K} taps; 1..{MAX_TAPS} supported")
    if taps not in TAPS:
        raise UnsupportedError(f"conv1d_causal: taps must be one of {TAPS}, got {taps!r}")
    period = T if seq_len is None else int(seq_len)
    if T == 0 or period < 1 or T % period:
        raise ShapeError(f"conv1d_causal: {T} tokens are not whole sequences of {period}")
    if T * C * max(K, 1) >= 2 ** 31:
        raise UnsupportedError(f"conv1d_causal: T*C*K = {T * C * K} exceeds the 32-bit index range")
    return dict(T=T, C=C, K=K, period=period, torch_order=int(taps == "torch"))


def conv1d_causal(x: Tensor, kernel: Tensor, bias: Tensor | None = None, seq_len: int | None = None,
                  taps: str = "lag") -> Tensor:
    """y [T, C] (x's dtype) of the causal depthwise convolution of x [T, C] with kernel [C, K] (+ bias [C])."""
    want(kernel, "kernel", ndim=2, dtype="f32")
    g = _geometry(x, kernel.shape, seq_len, taps)
    if bias is not None:
        want(bias, "bias", shape=(g["C"],), dtype="f32")
    y = like(x)
    per_thread("conv1d_causal", x.dtype, [x, kernel, kernel if bias is None else bias, y],
               dict(g, has_bias=int(bias is not None)), g["T"] * g["C"])
    return y


def _chunk(T: int) -> int:
    return max(CHUNK, -(-T // MAX_CHUNKS))


def conv1d_causal_weight_partials(x: Tensor, dy: Tensor, kernel_shape, seq_len: int | None = None,
                                  taps: str = "lag") -> Tensor:
    """Stage 1 of dkernel: [chunks, C*K] f32 partial sums over chunks of tokens (colsum gives dkernel)."""
    C, K = kernel_shape
    g = _geometry(x, (C, K), seq_len, taps)
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    chunk = _chunk(g["T"])
    chunks = -(-g["T"] // chunk)
    part = empty((chunks, C * K), "f32", x.device)
    per_thread("conv1d_causal_weight_partials", x.dtype, [x, dy, part], dict(g, chunk=chunk), chunks * C * K)
    return part


def conv1d_causal_backward(x: Tensor, kernel: Tensor, dy: Tensor, seq_len: int | None = None,
                           taps: str = "lag", bias: bool = False):
    """(dx, dkernel, dbias) of conv1d_causal; dkernel and dbias in f32 (dbias None unless `bias`).
    dkernel is a two-stage reduction over tokens (chunks of >= 256 tokens, then their column sums)."""
    want(kernel, "kernel", ndim=2, dtype="f32")
    g = _geometry(x, kernel.shape, seq_len, taps)
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    dx = like(x)
    per_thread("conv1d_causal_backward", x.dtype, [dy, kernel, dx], g, g["T"] * g["C"])
    part = conv1d_causal_weight_partials(x, dy, kernel.shape, seq_len, taps)
    dk = colsum(part).reshape(*kernel.shape)
    return dx, dk, (colsum(dy) if bias else None)
