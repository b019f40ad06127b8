"""Strided views made contiguous: one gather kernel (gather_strided) serves the 2-D transpose, basic
indexing (integers and slices with steps, negative ones included) and moving an axis to the front."""
from __future__ import annotations

import math
import operator

from ..errors import IndexOutOfRangeError, ShapeError, UnsupportedError
from ..runtime import kernels
from ..runtime.tensor import Tensor, empty, zeros
from ._util import one_variant

__all__ = ["gather_strided", "scatter_strided", "copy_prefix", "transpose", "index", "index_backward", "move_to_front", "expand",
           "normalize_dim"]

MAX_DIMS = 4  # the gather kernel's index arithmetic (after merging contiguous dimensions)


def _merged(shape: tuple, strides: tuple) -> list:
    """(size, stride) pairs with size-1 dimensions dropped and runs that are contiguous in x merged."""
    dims: list = []
    for d, s in zip(shape, strides):
        if d == 1:
            continue
        if dims and dims[-1][1] == d * s:
            dims[-1] = (dims[-1][0] * d, s)
        else:
            dims.append((d, s))
    return dims


def _launch(op: str, x: Tensor, y: Tensor, view: Tensor, shape: tuple, strides: tuple, offset: int) -> None:
    """Dispatch gather_strided / scatter_strided of x into y over the strided view of `view` (x or y)."""
    n = math.prod(shape)
    if n == 0:
        return
    lo = offset + sum(min(0, (d - 1) * s) for d, s in zip(shape, strides))
    hi = offset + sum(max(0, (d - 1) * s) for d, s in zip(shape, strides))
    if lo < 0 or hi >= view.numel:
        raise ShapeError(f"{op}: the view spans elements {lo}..{hi} of a tensor of {view.numel}")
    dims = _merged(shape, strides)
    if len(dims) > MAX_DIMS:
        raise UnsupportedError(f"{op}: the view {shape} with strides {strides} has {len(dims)} "
                               f"non-contiguous dimensions (at most {MAX_DIMS})")
    dims = [(1, 0)] * (MAX_DIMS - len(dims)) + dims
    v = one_variant(op, x.dtype if x.dtype in ("f32", "f16") else "u32", x.device)
    push = dict(n=n, off=offset, d1=dims[1][0], d2=dims[2][0], d3=dims[3][0],
                **{f"s{k}": dims[k][1] % 2**32 for k in range(MAX_DIMS)})  # two's complement (see the template)
    kernels.dispatch(v, [x, y], push, kernels.grid(-(-n // v.spec["WG"])))


def copy_prefix(x: Tensor, y: Tensor, n: int, offset: int = 0) -> Tensor:
    """y.flat[offset + i] = x.flat[i] for i < n, in place (x and y of one dtype; u32 moves words exactly);
    y's other elements are left as they are. Returns y. (The recorded multi-token decode passes each step's
    picked ids on to the next step's inputs this way.)"""
    if x.dtype != y.dtype:
        raise UnsupportedError(f"copy_prefix: {x.dtype} into {y.dtype}")
    if not 0 <= n <= x.numel or offset < 0:
        raise ShapeError(f"copy_prefix: {n} elements of a tensor of {x.numel} to offset {offset}")
    _launch("scatter_strided", x, y, y, (int(n),), (1,), int(offset))
    return y


def _checked(shape, strides) -> tuple:
    shape, strides = tuple(int(d) for d in shape), tuple(int(s) for s in strides)
    if len(shape) != len(strides):
        raise ShapeError(f"strided view: {len(shape)} dimensions but {len(strides)} strides")
    return shape, strides


def gather_strided(x: Tensor, shape, strides, offset: int = 0) -> Tensor:
    """A new contiguous tensor y of `shape` with y[i0, .., ik] = x.flat[offset + i0*strides[0] + .. +
    ik*strides[k]] (strides in elements, negative allowed, zero repeats an element). Every element read
    must lie inside x (ShapeError otherwise); after merging contiguous runs at most 4 strided dimensions
    remain (UnsupportedError otherwise)."""
    shape, strides = _checked(shape, strides)
    y = empty(shape, x.dtype, x.device)
    _launch("gather_strided", x, y, x, shape, strides, offset)
    return y


def scatter_strided(x: Tensor, y: Tensor, strides, offset: int = 0) -> Tensor:
    """gather_strided's backward, in place: y.flat[offset + i0*strides[0] + ..] = x[i0, ..] for every
    element of x (the positions must be distinct: no zero strides where x's dimension exceeds 1);
    y's other elements are left as they are. Returns y."""
    shape, strides = _checked(x.shape, strides)
    if x.dtype != y.dtype:
        raise UnsupportedError(f"scatter_strided: {x.dtype} into {y.dtype}")
    if any(s == 0 and d > 1 for d, s in zip(shape, strides)):
        raise ShapeError("scatter_strided: a zero stride would write one element several times")
    _launch("scatter_strided", x, y, y, shape, strides, offset)
    return y


def _contiguous_strides(shape: tuple) -> list:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]


def transpose(x: Tensor) -> Tensor:
    """The transpose of a 2-D tensor, as a new [cols, rows] tensor (PyTorch's x.T); a 0-D or 1-D tensor
    is returned as it is (as PyTorch and numpy do)."""
    if x.ndim < 2:
        return x
    if x.ndim != 2:
        raise ShapeError(f"transpose (.T) needs a 2-D tensor, got shape {x.shape}")
    R, C = x.shape
    return gather_strided(x, (C, R), (1, C))


def move_to_front(x: Tensor, dim: int) -> Tensor:
    """x with dimension `dim` moved to the front, as a new contiguous tensor (x itself when dim is 0)."""
    dim = normalize_dim(dim, x.ndim)
    if dim == 0:
        return x
    strides = _contiguous_strides(x.shape)
    order = [dim] + [d for d in range(x.ndim) if d != dim]
    return gather_strided(x, [x.shape[d] for d in order], [strides[d] for d in order])


def normalize_dim(dim, ndim: int) -> int:
    """dim as a non-negative dimension index of an ndim-D tensor (negative counts from the end)."""
    if isinstance(dim, bool):
        raise TypeError(f"dimension {dim!r} is a bool")
    d = operator.index(dim)
    if not -ndim <= d < ndim:
        raise IndexOutOfRangeError(f"dimension {d} out of range for a {ndim}-D tensor")
    return d % ndim


def _key_items(key, ndim: int) -> list:
    """The index key as one item per leading dimension: Ellipsis expanded, missing trailing items full."""
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(k is Ellipsis for k in items) > 1:
        raise IndexOutOfRangeError("an index can only have a single ellipsis ('...')")
    at = next((j for j, k in enumerate(items) if k is Ellipsis), None)
    if at is not None:
        items[at:at + 1] = [slice(None)] * (ndim - len(items) + 1)
    if len(items) > ndim:
        raise IndexOutOfRangeError(f"too many indices for a {ndim}-D tensor: {len(items)}")
    return items + [slice(None)] * (ndim - len(items))


def _index_view(shape: tuple, key) -> tuple:
    """(result shape, strides, offset) of shape[key] over a contiguous tensor of `shape` (see index)."""
    items = _key_items(key, len(shape))
    strides = _contiguous_strides(shape)
    offset, out_shape, out_strides = 0, [], []
    for k, (item, n, s) in enumerate(zip(items, shape, strides)):
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            out_shape.append(len(range(start, stop, step)))
            out_strides.append(step * s)
            offset += start * s if out_shape[-1] else 0
            continue
        try:
            if isinstance(item, (bool, Tensor)):
                raise TypeError
            i = operator.index(item)
        except TypeError:
            raise UnsupportedError(f"index {item!r} (dimension {k}): only integers, slices and '...' "
                                   "(basic indexing) are supported") from None
        if not -n <= i < n:
            raise IndexOutOfRangeError(f"index {i} is out of range for dimension {k} of size {n}")
        offset += (i % n) * s
    return tuple(out_shape), tuple(out_strides), offset


def index(x: Tensor, key) -> Tensor:
    """x[key] for basic indexing: integers (negative from the end) and slices (any step, negative too),
    one per leading dimension, with at most one Ellipsis. Returns a new contiguous tensor (not a view:
    writes to it do not reach x); an integer drops its dimension. Out-of-range integers raise
    IndexOutOfRangeError (an IndexError); advanced indexing (arrays, tensors, bools, None) is refused."""
    shape, strides, offset = _index_view(x.shape, key)
    return gather_strided(x, shape, strides, offset)


def index_backward(dy: Tensor, shape, key) -> Tensor:
    """The gradient of index(x, key) for x of `shape`: zeros with dy at the indexed positions."""
    out_shape, strides, offset = _index_view(tuple(shape), key)
    if dy.shape != out_shape:
        raise ShapeError(f"index_backward: dy has shape {dy.shape}, the index gives {out_shape}")
    return scatter_strided(dy, zeros(tuple(shape), dy.dtype, dy.device), strides, offset)


def expand(x: Tensor, shape) -> Tensor:
    """x broadcast to `shape` as a new contiguous tensor (PyTorch's x.expand(shape).contiguous()): x's
    dimensions align with the trailing ones of shape, and each must equal its counterpart or be 1."""
    shape = tuple(int(d) for d in shape)
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ShapeError(f"expand: cannot expand shape {x.shape} to fewer dimensions {shape}")
    src = _contiguous_strides(x.shape)
    strides = [0] * lead
    for d, n, s in zip(x.shape, shape[lead:], src):
        if d not in (1, n):
            raise ShapeError(f"expand: shape {x.shape} does not broadcast to {shape}")
        strides.append(s if d == n and d != 1 else 0)
    return gather_strided(x, shape, strides)
