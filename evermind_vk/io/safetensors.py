"""safetensors files through the maintained `safetensors` library (it validates the layout: header size,
offsets within the file): named arrays plus string metadata, written atomically. `read_header` gives
names, shapes and dtypes without reading any tensor, so a caller can check them first."""
from __future__ import annotations

from safetensors import safe_open
from safetensors.numpy import save

from ..errors import FormatError
from .atomic import atomic_write

DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8",
          "BOOL": "bool"}


def save_safetensors(path: str, arrays: dict, metadata: dict | None = None) -> None:
    """Write arrays (name -> numpy array) and string metadata to path as a .safetensors file, atomically."""
    atomic_write(path, save(arrays, metadata=metadata))


def read_header(path: str) -> tuple[dict, dict]:
    """({name: (shape tuple, numpy dtype name)}, string metadata) of a safetensors file, no tensor read."""
    try:
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            spec = {}
            for k in f.keys():
                sl = f.get_slice(k)
                spec[k] = (tuple(sl.get_shape()), DTYPES.get(sl.get_dtype(), sl.get_dtype()))
    except Exception as e:  # the library's own errors (SafetensorError, OSError) name the problem
        raise FormatError(f"{path}: not a readable safetensors file: {e}") from e
    return spec, meta


def load_safetensors(path: str) -> tuple[dict, dict]:
    """(named numpy arrays, string metadata) of a safetensors file; FormatError if it is not one."""
    try:
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # the library's own errors (SafetensorError, OSError) name the problem
        raise FormatError(f"{path}: not a readable safetensors file: {e}") from e
    return tensors, meta
