"""safetensors files through the maintained `safetensors` library (it validates the layout: header size,
offsets within the file): named arrays plus string metadata, written atomically. `read_header` gives
names, shapes and dtypes without reading any tensor, so a caller can check them first.

Hostile files: the path must be a regular file (io.regular.open_regular), and the JSON header is
checked here before the library sees it: at most MAX_HEADER bytes (the library itself allows 100 MB,
which its parser turns into far more memory), its structure within the JSON limits
(jsjson.check_json_structure). The library then opens the very descriptor that was checked."""
from __future__ import annotations

import struct

from safetensors import safe_open
from safetensors.numpy import save

from ..errors import FormatError, LimitError, TruncatedError
from .atomic import atomic_write
from .jsjson import check_json_structure
from .regular import fd_path, open_regular

DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8",
          "BOOL": "bool"}
MAX_HEADER = 16 << 20  # bytes of JSON header (~100k tensors with metadata); larger headers are refused


def save_safetensors(path: str, arrays: dict, metadata: dict | None = None) -> None:
    """Write arrays (name -> numpy array) and string metadata to path as a .safetensors file, atomically."""
    atomic_write(path, save(arrays, metadata=metadata))


def _check_header(rf) -> None:
    head = rf.read_at(0, 8)
    if len(head) < 8:
        raise TruncatedError(f"{rf.path}: {rf.size} bytes, a safetensors file starts with an 8-byte header size")
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER:
        raise LimitError(f"{rf.path}: safetensors header of {n} bytes exceeds the {MAX_HEADER} allowed")
    if 8 + n > rf.size:
        raise TruncatedError(f"{rf.path}: safetensors header of {n} bytes runs past the {rf.size}-byte file")
    check_json_structure(rf.read_at(8, n), f"{rf.path}: safetensors header")


def read_header(path: str) -> tuple[dict, dict]:
    """({name: (shape tuple, numpy dtype name)}, string metadata) of a safetensors file, no tensor read."""
    with open_regular(path, "safetensors file") as rf:
        _check_header(rf)
        try:
            with safe_open(fd_path(rf), framework="numpy") as f:
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
    with open_regular(path, "safetensors file") as rf:
        _check_header(rf)
        try:
            with safe_open(fd_path(rf), framework="numpy") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except Exception as e:  # the library's own errors (SafetensorError, OSError) name the problem
            raise FormatError(f"{path}: not a readable safetensors file: {e}") from e
    return tensors, meta
