"""Tensor's operators and methods that run ops. The runtime layer cannot import ops, so importing this
module (importing evermind_vk does) installs them on Tensor. Each runs eagerly, or is recorded inside
record(), like the function of the same name; none of them is noted on a gradient Tape (use
evermind_vk.autodiff.functional for that).

    a + b = add, a - b = add(a, scale(b, -1)), a * b = mul (a * 2.0 = scale), a @ b = matmul, -a,
    a.T = transpose (2-D), a.sum(dim=None, keepdim=False) = sum_dim, a[key] = index (basic indexing),
    iter(a) = a[0], a[1], ... .

Anything else (a + 1.0, mixed shapes) is a TypeError or a ShapeError, never a silent broadcast."""
from __future__ import annotations

import math
from numbers import Real

from ..errors import UnsupportedError
from ..runtime.tensor import Tensor, zeros
from .elementwise import add, cast, mul, scale
from .matmul import matmul
from .reduce import colsum, reduce_sum
from .strided import index, move_to_front, normalize_dim, transpose
from ._util import FLOATS

__all__ = ["sum_dim"]


def sum_dim(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The sum of x's elements (dim None: all of them, a 0-D tensor) or along dimension `dim` (negative
    counts from the end), in x's dtype (f32 or f16), accumulated in f32 in a fixed order (deterministic).
    keepdim keeps the summed dimension with size 1 (PyTorch's torch.sum)."""
    if x.dtype not in FLOATS:
        raise UnsupportedError(f"sum of a {x.dtype} tensor: only f32 and f16 are summed")
    if dim is None:
        out = reduce_sum(x).reshape((1,) * x.ndim if keepdim else ())
    else:
        d = normalize_dim(dim, x.ndim)
        K, rest = x.shape[d], x.shape[:d] + x.shape[d + 1:]
        out = (colsum(move_to_front(x, d).reshape(K, math.prod(rest))) if K else
               zeros((math.prod(rest),), "f32", x.device))
        out = out.reshape(x.shape[:d] + (1,) + x.shape[d + 1:] if keepdim else rest)
    return cast(out, x.dtype)


def _tensor_add(a, b):
    return add(a, b) if isinstance(b, Tensor) else NotImplemented


def _tensor_sub(a, b):
    return add(a, scale(b, -1.0)) if isinstance(b, Tensor) else NotImplemented


def _tensor_mul(a, b):
    if isinstance(b, Tensor):
        return mul(a, b)
    if isinstance(b, Real) and not isinstance(b, bool):
        return scale(a, float(b))
    return NotImplemented


def _tensor_matmul(a, b):
    return matmul(a, b) if isinstance(b, Tensor) else NotImplemented


def _tensor_sum(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """The sum of the elements, or along dimension `dim` (see evermind_vk.ops.sum_dim)."""
    return sum_dim(self, dim, keepdim)


def _tensor_getitem(self, key) -> Tensor:
    """self[key]: basic indexing (integers, slices with steps, '...'), a new tensor (see evermind_vk.ops.index)."""
    return index(self, key)


def _tensor_iter(self):
    """Iterate over the first dimension: self[0], self[1], ... (TypeError for a 0-D tensor)."""
    if not self.shape:
        raise TypeError("iteration over a 0-d tensor")
    return (index(self, i) for i in range(self.shape[0]))


def _tensor_t(self) -> Tensor:
    """The transpose of a 2-D tensor, a new tensor (see evermind_vk.ops.transpose)."""
    return transpose(self)


Tensor.__add__ = _tensor_add
Tensor.__sub__ = _tensor_sub
Tensor.__mul__ = _tensor_mul
Tensor.__rmul__ = _tensor_mul
Tensor.__matmul__ = _tensor_matmul
Tensor.__neg__ = lambda a: scale(a, -1.0)
Tensor.sum = _tensor_sum
Tensor.__getitem__ = _tensor_getitem
Tensor.__iter__ = _tensor_iter
Tensor.T = property(_tensor_t)
