"""safetensors files through the maintained `safetensors` library (it validates the layout):
named arrays plus string metadata, written atomically."""
from __future__ import annotations

from safetensors import safe_open
from safetensors.numpy import save

from ..errors import FormatError
from .atomic import atomic_write


def save_safetensors(path: str, arrays: dict, metadata: dict | None = None) -> None:
    atomic_write(path, save(arrays, metadata=metadata))


def load_safetensors(path: str) -> tuple[dict, dict]:
    """(named numpy arrays, string metadata) of a safetensors file; FormatError if it is not one."""
    try:
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # the library's own errors (SafetensorError, OSError) name the problem
        raise FormatError(f"{path}: not a readable safetensors file: {e}") from e
    return tensors, meta
