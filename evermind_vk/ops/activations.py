"""Activations: softmax over the last dimension (optionally causal), SiLU, tanh-GELU, and the
row-split gated activation (SwiGLU / GeGLU with the SwiGLU limit)."""
from __future__ import annotations

import math

from ..errors import ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.select import fixed as select_fixed
from ..runtime.tensor import Tensor, empty
from ._util import FLOATS, like, per_thread, rows_cols, run_softmax, want

__all__ = ["softmax", "softmax_backward", "silu", "gelu", "silu_backward", "gelu_backward", "glu", "glu_backward"]


def softmax(x: Tensor, causal: bool = False, seq: int | None = None) -> Tensor:
    """Softmax over the last dimension. With causal, row r is query position r % seq (seq defaults
    to the number of columns) and sees keys j <= position + (cols - seq); masked entries are 0."""
    want(x, "x", dtype=FLOATS)
    rows, cols = rows_cols(x)
    seq = _seq("softmax", causal, seq, cols)
    y = like(x)
    run_softmax("softmax", [x, y], dict(rows=rows, cols=cols, causal=int(causal), seq=seq), rows, cols)
    return y


def _seq(op: str, causal: bool, seq, cols: int) -> int:
    seq = cols if seq is None else int(seq)
    if causal and not 1 <= seq <= cols:
        raise ShapeError(f"{op}: causal seq {seq} must be in 1..{cols}")
    return seq


def softmax_backward(y: Tensor, dy: Tensor, causal: bool = False, seq: int | None = None) -> Tensor:
    """dx = y * (dy - sum(y * dy)) from the softmax output y. causal and seq as the forward's: the masked
    entries (y = 0, so dx = 0) are then written without reading y or dy there."""
    want(dy, "dy", shape=y.shape, dtype=y.dtype)
    rows, cols = rows_cols(y)
    seq = _seq("softmax_backward", causal, seq, cols)
    dx = like(y)
    run_softmax("softmax_backward", [y, dy, dx], dict(rows=rows, cols=cols, causal=int(causal), seq=seq), rows, cols)
    return dx


def _act(op: str, x: Tensor) -> Tensor:
    want(x, "x", dtype=FLOATS)
    y = like(x)
    per_thread(op, x.dtype, [x, y], dict(n=x.numel, alpha=0.0), x.numel)  # these variants have VEC = 1
    return y


def _act_backward(op: str, x: Tensor, dy: Tensor) -> Tensor:
    want(dy, "dy", shape=x.shape, dtype=x.dtype)
    dx = like(x)
    per_thread(op, x.dtype, [x, dy, dx], dict(n=x.numel), x.numel)
    return dx


def silu(x: Tensor) -> Tensor:
    """SiLU (x * sigmoid(x)) of x, elementwise."""
    return _act("silu", x)


def gelu(x: Tensor) -> Tensor:
    """tanh-approximated GELU."""
    return _act("gelu", x)


def silu_backward(x: Tensor, dy: Tensor) -> Tensor:
    """dx of SiLU at x for the output gradient dy."""
    return _act_backward("silu_backward", x, dy)


def gelu_backward(x: Tensor, dy: Tensor) -> Tensor:
    """dx of GELU at x for the output gradient dy."""
    return _act_backward("gelu_backward", x, dy)


ACTIVATIONS = ("silu", "gelu")


def _glu_args(x: Tensor, act: str, limit: float):
    if act not in ACTIVATIONS:
        raise UnsupportedError(f"gated activation {act!r}: choose one of {ACTIVATIONS}")
    if not math.isfinite(limit) or limit < 0:
        raise UnsupportedError(f"swiglu_limit must be finite and >= 0, got {limit}")
    want(x, "x", dtype=FLOATS)
    rows, width = rows_cols(x)
    if width % 2:
        raise ShapeError(f"gated activation needs rows [gate | up] of even width, got {width}")
    return rows, width // 2


def glu(x: Tensor, act: str = "silu", limit: float = 0.0) -> Tensor:
    """Row-split gated activation: rows [gate | up] of width 2d -> act(gate) * up of width d, clamped
    to +-limit when limit > 0 (the SwiGLU limit)."""
    rows, d = _glu_args(x, act, limit)
    y = empty(x.shape[:-1] + (d,), x.dtype, x.device)
    _glu_dispatch("glu", act, [x, y], rows, d, limit)
    return y


def glu_backward(x: Tensor, dy: Tensor, act: str = "silu", limit: float = 0.0) -> Tensor:
    """d[gate | up]; where limit > 0 and |act(gate) * up| > limit (strict) both gradients are 0."""
    rows, d = _glu_args(x, act, limit)
    want(dy, "dy", shape=x.shape[:-1] + (d,), dtype=x.dtype)
    dx = like(x)
    _glu_dispatch("glu_backward", act, [x, dy, dx], rows, d, limit)
    return dx


def _glu_dispatch(op: str, act: str, tensors: list, rows: int, d: int, limit: float) -> None:
    """glu or glu_backward on the variant runtime.select.fixed.pick_cpu_twin picks (four columns a thread on CPU
    devices where d % 4 == 0, else one)."""
    dev = tensors[0].device
    cands = [v for v in kernels.usable(op, tensors[0].dtype, dev) if act in v.flags]
    if not cands:
        raise UnsupportedError(f"no {op} kernel with {act} for dtype {tensors[0].dtype}")
    v = select_fixed.pick_cpu_twin(cands, dev.info.type, fits=d % 4 == 0)
    threads = rows * d // (4 if "c4" in v.flags else 1)
    kernels.dispatch(v, tensors, dict(rows=rows, d=d, limit=limit), kernels.grid(-(-max(1, threads) // v.spec["WG"])))
