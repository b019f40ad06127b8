"""Checkpoint store with lineage and integrity hashes (doppler's semantics, safer files).

    save_checkpoint(key, payload, configHash=..., datasetHash=..., ...)   -> the saved record
    load_checkpoint(key, expected_metadata=None, force_resume=False, reason=..., operator=..., source=...)

The eight metadata fields (configHash, datasetHash, tokenizerHash, optimizerHash, runtimePresetId,
kernelPathId, environmentMetadata, buildProvenance) each take the first non-null of: the arguments,
payload["metadata"], the previous checkpoint under the key. Lineage is {checkpointKey, sequence,
previousCheckpointHash}. checkpointHash = sha256 of stableJson({payload minus metadata, metadata:
{eight fields, lineage}}) — timestamp, resume audits and extra metadata keys are not hashed.

Files: a key containing / or \\ or ending in .json is a path; otherwise it is sanitised to
[A-Za-z0-9._-] and stored under `directory`. Our files are one zstd frame holding a small binary
header, the JSON record and the raw bytes of every numpy array in the payload (arrays are referenced
from the JSON with their dtype, shape, offset and sha256, so the hash covers their contents). Writes
are atomic (unique O_EXCL|O_NOFOLLOW temp file, fsync, rename, fsync of the directory; an existing
file's permissions are kept). Doppler's own JSON checkpoints load too, with their hash verified exactly.

Concurrency: save_checkpoint's read-modify-write (and load_checkpoint's forced-resume re-save) runs
under a per-file lock (threads and processes, `atomic.locked`), so lineage never forks: N savers of one
key get sequences 1..N. Keys that sanitise to one file name ("run é", "run ü", "run ?" -> run__.json)
are refused (CheckpointKeyCollisionError) when the file holds another key's lineage, on save and load.
A saver killed mid-write leaves a temp file (`.NAME.<hex>.tmp`): the next save to that key removes it
(under the lock, older than the lock's holder); nothing reads temp files.

Non-finite values: save_checkpoint refuses payload arrays holding NaN/Inf (NonFiniteError naming each
and its count; nothing written) unless allow_nonfinite=True.

Memory: the frame may not claim more than `max_size` nor more than `max_ratio` times its compressed
size (framing.allowed_size); arrays are checked (dtype, shape product, byte count, order) before any
is built; JSON nesting is capped (jsjson.MAX_DEPTH).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
import struct
import time

import numpy as np

from ..errors import (CheckpointKeyCollisionError, CheckpointMismatchError, FormatError, IntegrityError,
                      NonFiniteError, TruncatedError)
from . import framing
from .atomic import atomic_write, locked, remove_orphans
from .jsjson import UNDEFINED, loads, stable_json
from .layouts import refuse_nonfinite
from .regular import read_regular

FIELDS = ("configHash", "datasetHash", "tokenizerHash", "optimizerHash", "runtimePresetId", "kernelPathId",
          "environmentMetadata", "buildProvenance")
_SNAKE = {re.sub(r"([A-Z])", r"_\1", f).lower(): f for f in FIELDS}
MAGIC = b"EVCK"
VERSION = 1
DTYPES = {"float32", "float16", "float64", "int32", "uint32", "int64", "uint8", "int8", "uint16", "int16", "bool"}
MAX_FILE = 1 << 34
MAX_NDIM = 32


# -- keys and files -------------------------------------------------------------------------------
def _is_path_key(key: str) -> bool:
    return "/" in key or "\\" in key or key.endswith(".json")


def checkpoint_path(key: str, directory: str = ".evermind-checkpoints") -> str:
    """The file a checkpoint key maps to: a key that is a path is used as it is; any other key becomes a
    file name (characters outside [a-zA-Z0-9._-] as "_") under directory."""
    if not isinstance(key, str):
        raise TypeError(f"checkpoint key must be a string, got {type(key).__name__}")
    if _is_path_key(key):
        return os.path.abspath(key)
    d = directory.strip() or ".evermind-checkpoints"
    return os.path.join(d, re.sub(r"[^a-zA-Z0-9._-]", "_", key) + ".json")


# -- encoding -------------------------------------------------------------------------------------
def _split_arrays(obj, blobs: list):
    """JSON-able copy of obj with numpy arrays replaced by references into blobs."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.name not in DTYPES:
            raise FormatError(f"cannot store arrays of dtype {obj.dtype}")
        a = np.ascontiguousarray(obj)
        raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        off = sum(len(b) for b in blobs)
        blobs.append(raw)
        return {"__ndarray__": {"dtype": a.dtype.name, "shape": list(a.shape), "offset": off, "nbytes": len(raw),
                                "sha256": hashlib.sha256(raw).hexdigest()}}
    if isinstance(obj, dict):
        return {str(k): _split_arrays(v, blobs) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_split_arrays(v, blobs) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return obj


def _join_arrays(obj, body, state: dict):
    if isinstance(obj, dict):
        ref = obj.get("__ndarray__")
        if ref is not None and len(obj) == 1:
            return _load_array(ref, body, state)
        return {k: _join_arrays(v, body, state) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join_arrays(v, body, state) for v in obj]
    return obj


def _load_array(ref, body, state: dict) -> np.ndarray:
    if not isinstance(ref, dict) or set(ref) != {"dtype", "shape", "offset", "nbytes", "sha256"}:
        raise FormatError(f"bad array reference {str(ref)[:200]}")
    dtype, shape, off, nbytes = ref["dtype"], ref["shape"], ref["offset"], ref["nbytes"]
    if dtype not in DTYPES:
        raise FormatError(f"array dtype {dtype!r} not allowed")
    if not (isinstance(shape, list) and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s for s in shape)):
        raise FormatError(f"bad array shape {shape!r}")
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (off, nbytes)):
        raise FormatError("bad array offset or size")
    if len(shape) > MAX_NDIM:
        raise FormatError(f"array of {len(shape)} dimensions (at most {MAX_NDIM})")
    count = math.prod(shape)  # exact (Python ints), so a product that wraps in C cannot match nbytes
    if math.prod(s for s in shape if s) >= 1 << 62:  # numpy refuses such shapes even when empty
        raise FormatError(f"array shape {shape} is beyond any array size")
    if count * np.dtype(dtype).itemsize != nbytes:
        raise FormatError(f"array of shape {shape} and dtype {dtype} cannot be {nbytes} bytes")
    if off != state["next"]:
        raise FormatError(f"array data out of order or overlapping (offset {off}, expected {state['next']})")
    if off + nbytes > len(body):
        raise TruncatedError(f"array data [{off}, {off + nbytes}) beyond the {len(body)}-byte section")
    raw = body[off:off + nbytes]  # a view: no copy until the array itself
    if hashlib.sha256(raw).hexdigest() != ref["sha256"]:
        raise IntegrityError(f"array at offset {off}: sha256 mismatch")
    state["next"] = off + nbytes
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"), count=count).astype(dtype).reshape(shape)


def checkpoint_hash(record: dict) -> str:
    """doppler's checkpointHash over a record {..., metadata: {...}} (arrays already references)."""
    meta = record.get("metadata") or {}
    lin = meta.get("lineage") or {}
    seq = lin.get("sequence")
    hashed = {
        "payload": {**record, "metadata": UNDEFINED},
        "metadata": {**{f: (meta.get(f) if meta.get(f) is not None else None) for f in FIELDS},
                     "lineage": {"checkpointKey": lin.get("checkpointKey"),
                                 "sequence": seq if isinstance(seq, int) and not isinstance(seq, bool) else 0,
                                 "previousCheckpointHash": lin.get("previousCheckpointHash")}},
    }
    return hashlib.sha256(stable_json(hashed).encode("utf-8")).hexdigest()


def encode(record_json: dict, blobs: list) -> bytes:
    """A checkpoint blob: the framed header (magic, version, sizes), the record's JSON and the array bytes."""
    try:
        js = json.dumps(record_json, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except ValueError as e:  # a NaN/Inf number in the JSON part (arrays were checked by the caller)
        raise NonFiniteError(f"checkpoint record holds a non-finite number: {e}") from e
    body = b"".join(blobs)
    return framing.frame(MAGIC + struct.pack("<IQQ", VERSION, len(js), len(body)) + js + body)


def decode(blob, max_size: int = MAX_FILE, max_ratio: float = framing.DEFAULT_MAX_RATIO) -> tuple[dict, dict]:
    """(record with arrays restored, record as stored with references). Raises BlobError subclasses.
    blob: the file's bytes, or (already unframed) the bytes inside the frame."""
    if framing.is_framed(blob):
        return decode_raw(framing.unframe(blob, max_size, max_ratio), framed=True)
    return decode_raw(blob)


def decode_raw(raw, framed: bool = False) -> tuple[dict, dict]:
    """decode() of a blob whose zstd frame is already removed: our EVCK bytes (framed=True: nothing
    else), or doppler's JSON."""
    raw = memoryview(raw).cast("B")
    if framed or bytes(raw[:4]) == MAGIC:
        if len(raw) < 24:
            raise TruncatedError(f"checkpoint header needs 24 bytes, got {len(raw)}")
        if bytes(raw[:4]) != MAGIC:
            raise FormatError("not an evermind checkpoint (bad magic)")
        version, jlen, blen = struct.unpack_from("<IQQ", raw, 4)
        if version != VERSION:
            raise FormatError(f"checkpoint version {version} unsupported (this reader: {VERSION})")
        if 24 + jlen + blen != len(raw):
            kind = TruncatedError if 24 + jlen + blen > len(raw) else FormatError
            raise kind(f"checkpoint sections ({jlen} + {blen} bytes) do not fill its {len(raw) - 24} bytes")
        stored = loads(raw[24:24 + jlen], "checkpoint JSON")
        body = raw[24 + jlen:]
        state = {"next": 0}
        record = _join_arrays(stored, body, state)
        if state["next"] != len(body):
            raise FormatError(f"{len(body) - state['next']} bytes of array data are not referenced")
    else:
        stored = loads(raw, "checkpoint (neither a framed checkpoint nor doppler's JSON)")  # doppler's JSON store
        record = stored
    if not isinstance(stored, dict) or not isinstance(stored.get("metadata", {}), dict):
        raise FormatError("checkpoint record must be an object with an object 'metadata'")
    meta = stored.get("metadata", {})
    for field, kind in (("lineage", dict), ("resumeAudits", list)):
        if meta.get(field) is not None and not isinstance(meta[field], kind):
            raise FormatError(f"checkpoint metadata.{field} must be {'an object' if kind is dict else 'a list'}, "
                              f"not {type(meta[field]).__name__}")
    return record, stored


def _read(path: str):
    """The checkpoint file's bytes (exactly its size at open; a regular file only), or None if absent."""
    try:
        return read_regular(path, "checkpoint", MAX_FILE)
    except FileNotFoundError:
        return None


def verify(stored: dict) -> str:
    """Recompute the hash of a stored record; raise IntegrityError if metadata.checkpointHash differs."""
    want = (stored.get("metadata") or {}).get("checkpointHash")
    got = checkpoint_hash(stored)
    if want is not None and want != got:
        raise IntegrityError(f"checkpoint hash mismatch (stored {want}, computed {got})")
    return got


# -- the store ------------------------------------------------------------------------------------
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _fields(kw: dict) -> dict:
    out = {}
    for k, v in kw.items():
        name = _SNAKE.get(k, k)
        if name not in FIELDS:
            raise TypeError(f"unknown checkpoint metadata field {k!r} (known: {', '.join(FIELDS)})")
        out[name] = v
    return out


def _same(a, b) -> bool:
    """Equality of metadata values that may hold numpy arrays (never numpy's ambiguous truth value)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and bool(np.array_equal(a, b)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError) as e:
        raise FormatError(f"cannot compare metadata values {type(a).__name__} and {type(b).__name__}: {e}") from e


def _check_owner(key: str, path: str, meta: dict) -> None:
    """Refuse a file that holds another key's lineage (two keys sanitised to one file name)."""
    owner = (meta.get("lineage") or {}).get("checkpointKey") if isinstance(meta, dict) else None
    if not _is_path_key(key) and owner is not None and owner != key:
        raise CheckpointKeyCollisionError(
            f"checkpoint key {key!r} maps to {os.path.basename(path)}, which holds key {owner!r}'s lineage; "
            f"keys must differ in their [A-Za-z0-9._-] characters (or pass a path ending in .json)")


def save_checkpoint(key: str, payload: dict, *, directory: str = ".evermind-checkpoints",
                    prior_checkpoint_hash: str | None = None, max_size: int = MAX_FILE,
                    max_ratio: float = framing.DEFAULT_MAX_RATIO, allow_nonfinite: bool = False, **metadata) -> dict:
    """Save payload (a dict; numpy arrays anywhere inside are stored as binary) under key. The previous
    checkpoint is read, and the new one written, under the key's lock. Float arrays holding NaN/Inf are
    refused (NonFiniteError naming each and its count; nothing is written) unless allow_nonfinite."""
    if not isinstance(payload, dict):
        raise TypeError("payload must be a dict")
    refuse_nonfinite(payload, f"checkpoint {key!r}", allow_nonfinite, verb="save")
    path = checkpoint_path(key, directory)
    opts = _fields(metadata)
    with locked(path):
        remove_orphans(path, time.time())  # every writer of path holds this lock: older temp files are orphans
        prev = None
        prev_blob = _read(path)
        if prev_blob is not None:
            prev, _ = decode(prev_blob, max_size, max_ratio)
        return _save_locked(key, path, payload, prev, opts, prior_checkpoint_hash)


def _save_locked(key, path, payload, prev, opts, prior_checkpoint_hash) -> dict:
    prev_meta = (prev or {}).get("metadata") or {}
    _check_owner(key, path, prev_meta)
    pay_meta = payload.get("metadata") or {}
    previous_hash = (prior_checkpoint_hash or prev_meta.get("checkpointHash")
                     or (prev_meta.get("lineage") or {}).get("previousCheckpointHash") or None)
    seq = (prev_meta.get("lineage") or {}).get("sequence")
    sequence = seq + 1 if isinstance(seq, int) and not isinstance(seq, bool) and prev is not None else 1
    meta = dict(pay_meta)
    meta["timestamp"] = _now()
    for f in FIELDS:
        for src in (opts, pay_meta, prev_meta):
            if src.get(f) is not None:
                meta[f] = src[f]
                break
        else:
            meta[f] = None
    meta["lineage"] = {"checkpointKey": key, "sequence": sequence, "previousCheckpointHash": previous_hash}
    blobs: list = []
    record = _split_arrays({**payload, "metadata": meta}, blobs)
    record["metadata"]["checkpointHash"] = checkpoint_hash(record)
    atomic_write(path, encode(record, blobs))
    return {"key": key, "path": path, "metadata": record["metadata"]}


def load_checkpoint(key: str, expected_metadata: dict | None = None, force_resume: bool = False,
                    reason: str | None = None, operator: str | None = None, source: str | None = None,
                    *, directory: str = ".evermind-checkpoints", max_size: int = MAX_FILE,
                    max_ratio: float = framing.DEFAULT_MAX_RATIO):
    """The checkpoint under key (None if there is none), hash verified. With expected_metadata, fields
    that differ raise CheckpointMismatchError; with force_resume a resume audit is appended and the
    checkpoint re-saved (sequence + 1), read and re-saved under the key's lock. max_size / max_ratio:
    the most bytes the file may decompress to (framing.allowed_size)."""
    path = checkpoint_path(key, directory)
    found = _load(key, path, expected_metadata, max_size, max_ratio)
    if found is None or not found[1]:
        return found if found is None else found[0]
    if not force_resume:
        raise CheckpointMismatchError(f"Checkpoint mismatch on fields: {', '.join(found[1])}")
    with locked(path):  # read again under the lock: the re-save continues the latest lineage
        found = _load(key, path, expected_metadata, max_size, max_ratio)
        if found is None or not found[1]:
            return found if found is None else found[0]
        record, mismatched, _ = found
        meta = record["metadata"]
        audit = {"timestamp": _now(), "mismatchedFields": mismatched, "source": source or "unspecified",
                 "operator": operator, "reason": reason or "forced resume flag provided",
                 "priorCheckpointMetadataHash": meta.get("checkpointHash")}
        payload = {k: v for k, v in record.items() if k != "metadata"}
        new_meta = {k: v for k, v in meta.items() if k not in ("lineage", "checkpointHash", "timestamp")}
        new_meta["resumeAudits"] = list(meta.get("resumeAudits") or []) + [audit]
        # doppler re-saves with the stored checkpoint's fields: expected_metadata only decides what mismatches
        saved = _save_locked(key, path, {**payload, "metadata": new_meta}, record, {}, None)
    return {**payload, "metadata": saved["metadata"]}


def _load(key, path, expected_metadata, max_size, max_ratio):
    """None, or (record, mismatched fields, expected fields); CheckpointMismatchError is for the caller."""
    blob = _read(path)
    if blob is None:
        return None
    record, stored = decode(blob, max_size, max_ratio)
    verify(stored)
    meta = record.get("metadata")
    _check_owner(key, path, meta or {})
    if not meta or not expected_metadata:
        return record, [], {}
    expected = _fields(expected_metadata)
    mismatched = [k for k, v in expected.items() if not _same(meta.get(k), v)]
    return record, mismatched, expected
