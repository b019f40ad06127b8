"""Products with weights kept in GGUF's quantized blocks on the device (Q4_0, Q4_1, Q8_0), dequantized inside
the kernels (templates/qmatmul.comp.j2): Y = X W^T, its input gradient dX = dY W (the weights are frozen:
there is no dW), and the embedding lookup of a quantized table. A QuantWeight holds the file's bytes as they
are (a u32 buffer, rows of K/32 blocks), its quant type and its logical shape [N, K]."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.select import quant as select_quant
from ..runtime.select.quant import BLOCK, QUANT_TYPES
from ..runtime.tensor import Tensor, empty, tensor
from ._util import one_variant, want

__all__ = ["QuantWeight", "qmatmul", "qmatmul_backward", "qembedding", "QUANT_TYPES"]


class QuantWeight:
    """A frozen [rows, cols] weight in quantized blocks on the device: `data` (u32 words of the raw blocks,
    row-major, cols/32 blocks a row), `qtype` ("q4_0", "q4_1" or "q8_0"), `shape`."""

    def __init__(self, data: Tensor, qtype: str, shape: tuple):
        if qtype not in QUANT_TYPES:
            raise UnsupportedError(f"quant type {qtype!r}: kernels exist for {sorted(QUANT_TYPES)}")
        rows, cols = (int(s) for s in shape)
        if rows < 1 or cols < 1 or cols % BLOCK:
            raise ShapeError(f"quantized weight {shape}: columns must be a positive multiple of {BLOCK}")
        need = rows * (cols // BLOCK) * QUANT_TYPES[qtype]
        if data.dtype != "u32" or data.numel * 4 < need:
            raise ShapeError(f"quantized weight {shape} {qtype} needs {need} bytes, got {data.numel * 4} ({data.dtype})")
        self.data, self.qtype, self.shape = data, qtype, (rows, cols)
        self.device = data.device

    @classmethod
    def from_blocks(cls, blocks: np.ndarray, qtype: str, shape: tuple, device=None) -> "QuantWeight":
        """Upload raw blocks (any array of the [rows, cols/32 * block bytes] bytes) as they are."""
        raw = np.ascontiguousarray(blocks).view(np.uint8).ravel()
        words = np.zeros(-(-raw.size // 4), np.uint32)
        words.view(np.uint8)[: raw.size] = raw
        return cls(tensor(words, device=device), qtype, shape)

    @property
    def nbytes(self) -> int:
        """Device bytes of the blocks."""
        return self.data.numel * 4

    def row_bytes(self) -> int:
        """Bytes of one row of blocks (shape[1] / 32 blocks of the quant type's size)."""
        return self.shape[1] // BLOCK * QUANT_TYPES[self.qtype]

    def __repr__(self) -> str:
        return f"QuantWeight(shape={self.shape}, qtype={self.qtype}, nbytes={self.nbytes})"


def qmatmul(x: Tensor, w: QuantWeight, out: Tensor | None = None, variant=None) -> Tensor:
    """Y [M, N] = X [M, K] . W^T for a quantized W [N, K] (f32 X and Y, f32 accumulation). variant: a
    qmatmul or qgemv variant of W's quant type to run instead of the selector's (tests: they all agree)."""
    want(x, "x", ndim=2, dtype="f32")
    M, K = x.shape
    N, Kw = w.shape
    if K != Kw:
        raise ShapeError(f"qmatmul: x {x.shape} . W^T {w.shape}: inner dimensions {K} != {Kw}")
    out = empty((M, N), "f32", x.device) if out is None else out
    want(out, "out", shape=(M, N), dtype="f32")
    if M == 0:
        return out
    _run(select_quant.plan(select_quant.Launch("qmatmul", w.qtype, M, N, K), x.device, variant), [x, w.data, out])
    return out


def _run(plan, tensors: list) -> None:
    """Execute a quantized product's plan (runtime.select.quant.plan) over its tensors."""
    for d in plan.dispatches:
        kernels.dispatch(d.variant, tensors, d.push, d.groups)


def qmatmul_backward(dy: Tensor, w: QuantWeight) -> Tensor:
    """dX [M, K] = dY [M, N] . W of qmatmul (the weight is frozen: no dW). W's rows run in chunks of
    runtime.select.quant.DX_ROWS_PER_LAUNCH (each thread loops over a chunk: lavapipe's loop cap), each
    later chunk added into dX (runtime.select.quant.plan)."""
    want(dy, "dy", ndim=2, dtype="f32")
    M, N = dy.shape
    if N != w.shape[0]:
        raise ShapeError(f"qmatmul_backward: dY {dy.shape} against W {w.shape}")
    K = w.shape[1]
    dx = empty((M, K), "f32", dy.device)
    _run(select_quant.plan(select_quant.Launch("qmatmul_dx", w.qtype, M, N, K), dy.device), [dy, w.data, dx])
    return dx


def qembedding(ids: Tensor, w: QuantWeight) -> Tensor:
    """Rows ids of a quantized table W [V, K], dequantized: [T, K] f32. ids: u32 [T] in [0, V) (checked on
    the host by the caller, e.g. the model's tokenizer; the kernel clamps, never reading past the table)."""
    want(ids, "ids", ndim=1, dtype="u32")
    T, (V, K) = ids.numel, w.shape
    y = empty((T, K), "f32", ids.device)
    v = one_variant("qembedding", "f32", ids.device, w.qtype)
    kernels.dispatch(v, [ids, w.data, y], dict(T=T, V=V, K=K), kernels.grid(-(-max(1, T * K) // v.spec["WG"])))
    return y
