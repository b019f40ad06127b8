"""What a model's forward accepts: the one home of the token-id and input-array contracts.

Every model's forward takes a device Tensor as before, or host data that these helpers check and upload:
token ids as a Python list or a numpy integer array (any width: int32, int64, uint32, ...), each an
integer in [0, vocab_size) (TokenError names the first bad one: an id >= vocab would read past the
embedding, and one past 32 bits would wrap in the u32 tensor); float inputs (SharedExpertMoE's
activations) as a nested list or a numpy float array, converted to f32."""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import ShapeError, TokenError
from ..runtime import Tensor, tensor

__all__ = ["check_ids", "as_ids", "as_floats"]


def check_ids(ids, vocab_size: int, what: str = "token ids") -> list[int]:
    """ids as a list of Python ints, each an integer in [0, vocab_size); TokenError names the first bad one
    (an id >= vocab would read past the embedding; one past 32 bits would wrap in a u32 tensor)."""
    if isinstance(ids, np.ndarray) and ids.dtype.kind in "iu":
        _check_array(ids.ravel(), vocab_size, what)
        return [int(i) for i in ids.ravel().tolist()]
    out = []
    for k, i in enumerate(ids.tolist() if isinstance(ids, np.ndarray) else ids):
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise TokenError(f"{what}: id #{k} is {i!r}, not an integer")
        i = int(i)
        if not 0 <= i < vocab_size:
            raise TokenError(f"{what}: id #{k} is {i}, outside the vocabulary [0, {vocab_size})")
        out.append(i)
    return out


def _check_array(ids: np.ndarray, vocab_size: int, what: str) -> None:
    """A 1-D numpy integer array's ids all in [0, vocab_size) (vectorised), or TokenError naming the first bad one."""
    bad = np.flatnonzero((ids < 0) | (ids >= vocab_size))
    if bad.size:
        k = int(bad[0])
        raise TokenError(f"{what}: id #{k} is {int(ids[k])}, outside the vocabulary [0, {vocab_size})")


def as_ids(ids, vocab_size: int, device, what: str = "forward: ids") -> Tensor:
    """Token ids for a model's forward: a u32 Tensor as it is (its values are not read back; the
    embedding gives zeros for ids >= vocab), or a 1-D Python list / numpy integer array checked against
    [0, vocab_size) (TokenError) and uploaded as a u32 tensor on `device`. Several sequences go packed
    one after another, with the forward's batch argument saying how many."""
    if isinstance(ids, Tensor):
        return ids
    try:
        arr = np.asarray(ids)
    except (ValueError, OverflowError) as e:  # ragged lists, ints past int64
        raise TokenError(f"{what}: cannot read {type(ids).__name__} as token ids: {e}") from e
    if arr.ndim != 1:
        raise ShapeError(f"{what}: ids of shape {arr.shape}; want one dimension (pack several sequences "
                         "one after another and pass batch)")
    if isinstance(ids, np.ndarray) and arr.dtype.kind in "iu":
        _check_array(arr, vocab_size, what)
    elif isinstance(ids, np.ndarray):
        raise TokenError(f"{what}: ids of dtype {arr.dtype}, want integers")
    else:
        arr = np.array(check_ids(list(ids), vocab_size, what), dtype=np.int64)
    return tensor(arr.astype(np.uint32), device=device)


def as_floats(x, device) -> Tensor:
    """A float input for a model's forward: a Tensor as it is, or a (nested) list / numpy array uploaded
    as an f32 tensor on `device` (float64 rounds to f32; strings, ragged lists: UnsupportedError)."""
    return x if isinstance(x, Tensor) else tensor(x, dtype="f32", device=device)
