"""One decode of any blob file we read: `open_blob(path)` -> Decoded(kind, ...), kind "package" (an
EvermindPackage), "checkpoint" (the record with arrays restored and the record as stored) or "raw" (one
of builderforce's bare weight files, EVL0, MoE0, MBJS or VRQ0: its layout name and the layout's parse).
The file is read and unframed once, in steps, under `max_size` / `max_ratio` (framing.allowed_size);
callers such as `evermind-vk inspect` / `verify` use this and nothing else, so a file is never decoded
twice. Which model a raw layout holds, and the config an MBJS file needs, is evermind_vk.files' business."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import FormatError
from . import framing
from .checkpoint import MAGIC as CHECKPOINT_MAGIC, MAX_FILE, decode_raw
from .layouts import EVL0, MBJS, MOE0, VRQ0, parse_evl0, parse_mbjs, parse_moe0, parse_vrq0
from .package import MAX_PACKAGE, PKG_MAGIC, EvermindPackage
from .regular import open_regular

_PKG_MAGIC_BYTES = PKG_MAGIC.to_bytes(4, "little")
# builderforce's bare files, by their little-endian u32 magic; each parser checks the exact length (and the
# CRC trailer where the layout has one: EVL0's is optional, as builderforce's loader reads legacy files)
RAW_LAYOUTS = {MOE0.to_bytes(4, "little"): ("MoE0", parse_moe0),
               EVL0.to_bytes(4, "little"): ("EVL0", lambda b: parse_evl0(b, require_crc=False)),
               MBJS.to_bytes(4, "little"): ("MBJS", parse_mbjs),
               VRQ0.to_bytes(4, "little"): ("VRQ0", parse_vrq0)}


def raw_layout(head: bytes) -> str | None:
    """The builderforce layout whose magic the first 4 bytes are ("EVL0", "MoE0", "MBJS", "VRQ0"), or None."""
    entry = RAW_LAYOUTS.get(bytes(head[:4]))
    return entry[0] if entry else None


def parse_raw(blob) -> tuple[str, dict]:
    """(layout name, its parse) of a bare builderforce file's bytes; FormatError if it is none of them."""
    entry = RAW_LAYOUTS.get(bytes(blob[:4]))
    if entry is None:
        raise FormatError("not an EVL0, MoE0, MBJS or VRQ0 file (bad magic)")
    return entry[0], entry[1](bytes(blob))


@dataclass
class Decoded:
    """What a file turned out to be: kind "package" (with the EvermindPackage), "checkpoint" (the record
    with its arrays restored, and as stored) or "raw" (a bare builderforce weight file)."""
    kind: str  # "package", "checkpoint" or "raw"
    package: EvermindPackage | None = None
    record: dict | None = None  # checkpoint with numpy arrays restored (their sha256 verified)
    stored: dict | None = None  # checkpoint as stored (array references): what its hash covers
    layout: str | None = None  # raw: "EVL0", "MoE0", "MBJS" or "VRQ0"
    parsed: dict | None = None  # raw: the layout's parse (layouts.parse_*)


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
    if raw_layout(head):
        layout, parsed = parse_raw(inner)
        return Decoded("raw", layout=layout, parsed=parsed)
    raise FormatError(f"{path}: neither an .evermind package, a checkpoint, nor an EVL0, MoE0, MBJS or VRQ0 file")
