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
are atomic (temp file, fsync, rename, fsync of the directory). Doppler's own JSON checkpoints load
too, with their hash verified exactly.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import struct

import numpy as np

from ..errors import CheckpointMismatchError, FormatError, IntegrityError, LimitError, TruncatedError
from . import framing
from .atomic import atomic_write
from .jsjson import UNDEFINED, stable_json

FIELDS = ("configHash", "datasetHash", "tokenizerHash", "optimizerHash", "runtimePresetId", "kernelPathId",
          "environmentMetadata", "buildProvenance")
_SNAKE = {re.sub(r"([A-Z])", r"_\1", f).lower(): f for f in FIELDS}
MAGIC = b"EVCK"
VERSION = 1
DTYPES = {"float32", "float16", "float64", "int32", "uint32", "int64", "uint8", "int8", "uint16", "int16", "bool"}
MAX_FILE = 1 << 34


# -- keys and files -------------------------------------------------------------------------------
def checkpoint_path(key: str, directory: str = ".evermind-checkpoints") -> str:
    if "/" in key or "\\" in key or key.endswith(".json"):
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


def _join_arrays(obj, body: bytes, state: dict):
    if isinstance(obj, dict):
        ref = obj.get("__ndarray__")
        if ref is not None and len(obj) == 1:
            return _load_array(ref, body, state)
        return {k: _join_arrays(v, body, state) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join_arrays(v, body, state) for v in obj]
    return obj


def _load_array(ref, body: bytes, state: dict) -> np.ndarray:
    if not isinstance(ref, dict) or set(ref) != {"dtype", "shape", "offset", "nbytes", "sha256"}:
        raise FormatError(f"bad array reference {str(ref)[:200]}")
    dtype, shape, off, nbytes = ref["dtype"], ref["shape"], ref["offset"], ref["nbytes"]
    if dtype not in DTYPES:
        raise FormatError(f"array dtype {dtype!r} not allowed")
    if not (isinstance(shape, list) and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s for s in shape)):
        raise FormatError(f"bad array shape {shape!r}")
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (off, nbytes)):
        raise FormatError("bad array offset or size")
    count = 1
    for s in shape:
        count *= s
        if count * 8 > len(body):  # overflow / absurd claims stop before any multiplication grows
            break
    if count * np.dtype(dtype).itemsize != nbytes:
        raise FormatError(f"array of shape {shape} and dtype {dtype} cannot be {nbytes} bytes")
    if off != state["next"]:
        raise FormatError(f"array data out of order or overlapping (offset {off}, expected {state['next']})")
    if off + nbytes > len(body):
        raise TruncatedError(f"array data [{off}, {off + nbytes}) beyond the {len(body)}-byte section")
    raw = body[off:off + nbytes]
    if hashlib.sha256(raw).hexdigest() != ref["sha256"]:
        raise IntegrityError(f"array at offset {off}: sha256 mismatch")
    state["next"] = off + nbytes
    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype).reshape(shape)


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
    js = json.dumps(record_json, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    body = b"".join(blobs)
    return framing.frame(MAGIC + struct.pack("<IQQ", VERSION, len(js), len(body)) + js + body)


def decode(blob: bytes) -> tuple[dict, dict]:
    """(record with arrays restored, record as stored with references). Raises BlobError subclasses."""
    if framing.is_framed(blob):
        raw = framing.unframe(blob, MAX_FILE)
        if len(raw) < 24:
            raise TruncatedError(f"checkpoint header needs 24 bytes, got {len(raw)}")
        if raw[:4] != MAGIC:
            raise FormatError("not an evermind checkpoint (bad magic)")
        version, jlen, blen = struct.unpack_from("<IQQ", raw, 4)
        if version != VERSION:
            raise FormatError(f"checkpoint version {version} unsupported (this reader: {VERSION})")
        if 24 + jlen + blen != len(raw):
            kind = TruncatedError if 24 + jlen + blen > len(raw) else FormatError
            raise kind(f"checkpoint sections ({jlen} + {blen} bytes) do not fill its {len(raw) - 24} bytes")
        try:
            stored = json.loads(raw[24:24 + jlen].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise FormatError(f"checkpoint JSON unreadable: {e}") from e
        body = raw[24 + jlen:]
        state = {"next": 0}
        record = _join_arrays(stored, body, state)
        if state["next"] != len(body):
            raise FormatError(f"{len(body) - state['next']} bytes of array data are not referenced")
    else:
        try:
            stored = json.loads(bytes(blob).decode("utf-8"))  # doppler's JSON store
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise FormatError(f"neither a framed checkpoint nor JSON: {e}") from e
        record = stored
    if not isinstance(stored, dict) or not isinstance(stored.get("metadata", {}), dict):
        raise FormatError("checkpoint record must be an object with an object 'metadata'")
    return record, stored


def _read(path: str):
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return None
    if size > MAX_FILE:
        raise LimitError(f"{path}: {size} bytes exceeds {MAX_FILE}")
    with open(path, "rb") as f:
        return f.read()


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


def save_checkpoint(key: str, payload: dict, *, directory: str = ".evermind-checkpoints",
                    prior_checkpoint_hash: str | None = None, **metadata) -> dict:
    """Save payload (a dict; numpy arrays anywhere inside are stored as binary) under key."""
    if not isinstance(payload, dict):
        raise TypeError("payload must be a dict")
    path = checkpoint_path(key, directory)
    prev = None
    prev_blob = _read(path)
    if prev_blob is not None:
        prev, _ = decode(prev_blob)
    prev_meta = (prev or {}).get("metadata") or {}
    opts = _fields(metadata)
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
                    *, directory: str = ".evermind-checkpoints"):
    """The checkpoint under key (None if there is none), hash verified. With expected_metadata, fields
    that differ raise CheckpointMismatchError; with force_resume a resume audit is appended and the
    checkpoint re-saved (sequence + 1)."""
    path = checkpoint_path(key, directory)
    blob = _read(path)
    if blob is None:
        return None
    record, stored = decode(blob)
    verify(stored)
    meta = record.get("metadata")
    if not meta or not expected_metadata:
        return record
    expected = _fields(expected_metadata)
    mismatched = [k for k, v in expected.items() if meta.get(k) != v]
    if not mismatched:
        return record
    if not force_resume:
        raise CheckpointMismatchError(f"Checkpoint mismatch on fields: {', '.join(mismatched)}")
    audit = {"timestamp": _now(), "mismatchedFields": mismatched, "source": source or "unspecified",
             "operator": operator, "reason": reason or "forced resume flag provided",
             "priorCheckpointMetadataHash": meta.get("checkpointHash")}
    payload = {k: v for k, v in record.items() if k != "metadata"}
    new_meta = {k: v for k, v in meta.items() if k not in ("lineage", "checkpointHash", "timestamp")}
    new_meta["resumeAudits"] = list(meta.get("resumeAudits") or []) + [audit]
    # doppler re-saves with the stored checkpoint's fields: expected_metadata only decides what mismatches
    saved = save_checkpoint(key, {**payload, "metadata": new_meta}, directory=directory)
    return {**payload, "metadata": saved["metadata"]}
