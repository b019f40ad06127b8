"""The element types a Tensor can hold. Every tensor is carried in kp as 32-bit words
(kp 0.9.0 has no float16 tensor type), so one raw-bytes path serves every dtype."""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError

# name -> numpy dtype of the elements
DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "u32": np.dtype(np.uint32),
    "i32": np.dtype(np.int32),
}
_ALIASES = {"float32": "f32", "float16": "f16", "uint32": "u32", "int32": "i32",
            "half": "f16", "float": "f32"}


def canonical(dtype) -> str:
    """Return the dtype's short name ('f32', 'f16', 'u32', 'i32'), or raise UnsupportedError."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in DTYPES:
            return name
    else:
        try:
            np_dtype = np.dtype(dtype)
        except TypeError:
            np_dtype = None
        for name, d in DTYPES.items():
            if np_dtype == d:
                return name
    raise UnsupportedError(f"unsupported dtype {dtype!r}: evermind-vk tensors hold {', '.join(DTYPES)}")


def words(n_elements: int, dtype: str) -> int:
    """Number of 32-bit words that hold n_elements of dtype (at least one: Vulkan has no empty buffer)."""
    return max(1, -(-n_elements * DTYPES[dtype].itemsize // 4))
