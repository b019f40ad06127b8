"""GGUF files (llama.cpp's format) read through the `gguf` package, as hostile input.

read_gguf(path) checks the fixed header itself (magic, version, counts bounded by the bytes present) before
`gguf.GGUFReader` parses the rest (it memory-maps the file: tensor data is never copied until asked for);
every tensor must be of a type we handle, lie wholly inside the file and have a size that its shape and
type imply; any failure of the parser is a FormatError. Knows the format only, never our models.

    f = read_gguf("model.gguf")
    f.metadata["llama.block_count"]          # scalars, strings, lists (tokens, merges, ...)
    f.tensors["blk.0.attn_q.weight"]         # GGUFTensor: name, qtype, shape (numpy order), raw data
    f.tensors[name].dequantize()             # float32 through gguf.quants
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import FormatError, LimitError, TruncatedError, UnsupportedError
from .regular import open_regular

try:  # the optional extra evermind-vk[pretrained]
    import gguf as _gguf
except ImportError:  # pragma: no cover - exercised where the extra is missing
    _gguf = None

MAGIC = b"GGUF"
MAX_TENSORS = 1 << 16
MAX_KV = 1 << 16
MAX_DIMS = 4
MAX_ELEMENTS = 1 << 36  # per tensor (also bounded by the file's bytes below)
# tensor types the loader handles: stored as they are on the device (q*), or as float32 (f32, f16)
TENSOR_TYPES = {"F32": "f32", "F16": "f16", "Q4_0": "q4_0", "Q4_1": "q4_1", "Q8_0": "q8_0"}


def require_gguf():
    """The `gguf` module, or an UnsupportedError saying how to install it."""
    if _gguf is None:
        raise UnsupportedError("reading GGUF needs the `gguf` package: pip install 'evermind-vk[pretrained]'")
    return _gguf


@dataclass
class GGUFTensor:
    """One tensor of the file: qtype (TENSOR_TYPES' values), shape in numpy order (rows last-major: the
    file's dims reversed), data: the raw bytes (a read-only view of the mapped file) or float array."""
    name: str
    qtype: str
    shape: tuple
    data: np.ndarray
    _type: object

    def dequantize(self) -> np.ndarray:
        """The tensor as float32 of `shape` (gguf's numpy dequantization for quantized types)."""
        g = require_gguf()
        if self.qtype in ("f32", "f16"):
            return np.asarray(self.data, np.float32).reshape(self.shape)
        return g.quants.dequantize(np.asarray(self.data), self._type).astype(np.float32).reshape(self.shape)

    def blocks(self) -> np.ndarray:
        """The raw blocks of a quantized tensor, [rows, bytes a row] uint8."""
        if self.qtype in ("f32", "f16"):
            raise UnsupportedError(f"{self.name} is {self.qtype}, not quantized")
        return np.asarray(self.data, np.uint8).reshape(int(np.prod(self.shape[:-1])), -1)


@dataclass
class GGUFFile:
    """A parsed GGUF file: its metadata values and its tensors (views into the file, not copies)."""
    path: str
    metadata: dict
    tensors: dict

    @property
    def architecture(self) -> str:
        """The file's general.architecture ("llama" for SmolLM2; "" when absent)."""
        return str(self.metadata.get("general.architecture", ""))


def _check_header(path: str, head: bytes, size: int) -> None:
    """The fixed 24-byte header (the file's first bytes), read by hand: magic, version, and counts that the
    bytes present allow."""
    if len(head) < 24:
        raise TruncatedError(f"{path}: {size} bytes, shorter than a GGUF header")
    if head[:4] != MAGIC:
        raise FormatError(f"{path}: not a GGUF file (magic {head[:4]!r})")
    version, n_tensors, n_kv = struct.unpack("<IQQ", head[4:24])
    if version not in (2, 3):
        raise FormatError(f"{path}: GGUF version {version} (this reader handles 2 and 3)")
    # a tensor entry takes >= 8 (name length) + 4 (dims) + 4 (type) + 8 (offset) bytes; a kv >= 8 + 4 + 1
    if n_tensors > MAX_TENSORS or n_kv > MAX_KV or 24 + 24 * n_tensors + 13 * n_kv > size:
        raise LimitError(f"{path}: claims {n_tensors} tensors and {n_kv} metadata entries in {size} bytes")


def _value(field):
    try:
        v = field.contents()
    except (ValueError, IndexError, TypeError, UnicodeDecodeError, struct.error) as e:
        raise FormatError(f"metadata {field.name!r}: unreadable ({e})") from e
    return v


def _tensor(t, path: str, size: int) -> GGUFTensor:
    kind = t.tensor_type.name if hasattr(t.tensor_type, "name") else str(t.tensor_type)
    if kind not in TENSOR_TYPES:
        raise UnsupportedError(f"{path}: tensor {t.name!r} is of type {kind}; supported: {sorted(TENSOR_TYPES)}")
    dims = [int(d) for d in t.shape]
    if not 1 <= len(dims) <= MAX_DIMS or any(d < 1 for d in dims):
        raise FormatError(f"{path}: tensor {t.name!r} has dims {dims}")
    n = int(np.prod(dims, dtype=np.float64))
    if n > MAX_ELEMENTS or int(t.n_bytes) > size or int(t.data_offset) + int(t.n_bytes) > size:
        raise LimitError(f"{path}: tensor {t.name!r} ({dims}, {int(t.n_bytes)} bytes at {int(t.data_offset)}) "
                         f"does not fit the file's {size} bytes")
    block, type_bytes = require_gguf().GGML_QUANT_SIZES[t.tensor_type]
    if dims[0] % block or n // block * type_bytes != int(t.n_bytes) or t.data.nbytes != int(t.n_bytes):
        raise FormatError(f"{path}: tensor {t.name!r} ({kind} {dims}) has {t.data.nbytes} bytes, "
                          f"its shape implies {n // block * type_bytes}")
    return GGUFTensor(t.name, TENSOR_TYPES[kind], tuple(reversed(dims)), t.data, t.tensor_type)


def read_gguf(path) -> GGUFFile:
    """Parse a GGUF file (a regular file only): its metadata (values) and tensors (views, not copies)."""
    g = require_gguf()
    path = os.fspath(path)
    with open_regular(path, "GGUF file") as rf:  # a regular file after resolving links, else NotRegularFileError
        size, head = rf.size, rf.read_at(0, 24)
    _check_header(path, head, size)
    try:
        reader = g.GGUFReader(path, "r")
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, struct.error, UnicodeDecodeError,
            MemoryError, NotImplementedError, AssertionError) as e:
        raise FormatError(f"{path}: malformed GGUF ({type(e).__name__}: {e})") from e
    meta = {name: _value(f) for name, f in reader.fields.items() if not name.startswith("GGUF.")}
    tensors = {}
    for t in reader.tensors:
        if t.name in tensors:
            raise FormatError(f"{path}: tensor {t.name!r} appears twice")
        tensors[t.name] = _tensor(t, path, size)
    return GGUFFile(path, meta, tensors)
