"""One decode of any blob file we read: `open_blob(path)` -> Decoded(kind, ...), kind "package" (an
EvermindPackage) or "checkpoint" (the record with arrays restored and the record as stored). The file
is read and unframed once, in steps, under `max_size` / `max_ratio` (framing.allowed_size); callers
such as `evermind-vk inspect` / `verify` use this and nothing else, so a file is never decoded twice."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import FormatError
from . import framing
from .checkpoint import MAGIC as CHECKPOINT_MAGIC, MAX_FILE, decode_raw
from .package import MAX_PACKAGE, PKG_MAGIC, EvermindPackage
from .regular import open_regular

_PKG_MAGIC_BYTES = PKG_MAGIC.to_bytes(4, "little")


@dataclass
class Decoded:
    kind: str  # "package" or "checkpoint"
    package: EvermindPackage | None = None
    record: dict | None = None  # checkpoint with numpy arrays restored (their sha256 verified)
    stored: dict | None = None  # checkpoint as stored (array references): what its hash covers


def open_blob(path: str, max_size: int = max(MAX_FILE, MAX_PACKAGE),
              max_ratio: float = framing.DEFAULT_MAX_RATIO) -> Decoded:
    """Read and decode path once. BlobError subclasses for bad content; NotRegularFileError for a path
    that is not a regular file; OSError for the file itself (missing, unreadable)."""
    with open_regular(path, "model or checkpoint file", max_size) as rf:
        framed = framing.is_framed(rf.read_at(0, 4))
        inner = framing.unframe_at(rf.read_at, rf.size, max_size, max_ratio) if framed else rf.read_all()
    head = bytes(inner[:4])
    if head == _PKG_MAGIC_BYTES:
        return Decoded("package", package=EvermindPackage.from_blob(inner))
    if head == CHECKPOINT_MAGIC or (not framed and inner[:1] == b"{"):
        record, stored = decode_raw(inner, framed=framed)
        return Decoded("checkpoint", record=record, stored=stored)
    raise FormatError(f"{path}: neither an .evermind package nor a checkpoint")
