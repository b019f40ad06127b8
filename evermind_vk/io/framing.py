"""One zstd framing for every blob evermind-vk writes: a single frame with its content size and a
content checksum. Reading treats the blob as hostile: the frame header's claims are checked against
limits and against what the compressed size could honestly encode before anything is allocated,
the window is capped, and trailing data or further frames are rejected. Each failure is a typed
BlobError subclass."""
from __future__ import annotations

import zstandard

from ..errors import FormatError, IntegrityError, LimitError, TruncatedError

MAGIC = b"\x28\xb5\x2f\xfd"
WINDOW_CAP = 1 << 27  # 128 MiB: the largest decompression window we accept
DEFAULT_MAX = 1 << 34  # 16 GiB: no blob of ours is larger
# zstd cannot expand data more than this per input byte (an RLE block: 3 header bytes + 1 byte
# for up to 128 KiB), so a frame claiming more than this ratio of its size is lying.
MAX_RATIO = (128 * 1024) // 4 + 1


def frame(data: bytes, level: int = 3) -> bytes:
    """Compress into one frame with content size and content checksum."""
    cctx = zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=True)
    return cctx.compress(bytes(data))


def is_framed(blob: bytes) -> bool:
    return bytes(blob[:4]) == MAGIC


def unframe(blob: bytes, max_size: int = DEFAULT_MAX) -> bytes:
    """Decompress a blob written by frame(); never allocates more than the (validated) content size."""
    blob = bytes(blob)
    if len(blob) < 4 or blob[:4] != MAGIC:
        raise FormatError("not a zstd frame (bad magic)")
    try:
        params = zstandard.get_frame_parameters(blob)
    except zstandard.ZstdError as e:
        raise TruncatedError(f"zstd frame header unreadable: {e}") from e
    size = params.content_size
    if size == zstandard.CONTENTSIZE_UNKNOWN or size == zstandard.CONTENTSIZE_ERROR:
        raise FormatError("zstd frame does not declare its content size")
    if not params.has_checksum:
        raise FormatError("zstd frame has no content checksum")
    if size > max_size:
        raise LimitError(f"zstd frame claims {size} bytes, more than the {max_size} allowed here")
    if size > len(blob) * MAX_RATIO:
        raise LimitError(f"zstd frame claims {size} bytes from {len(blob)}: more than zstd can encode")
    if params.window_size > WINDOW_CAP:
        raise LimitError(f"zstd window {params.window_size} exceeds {WINDOW_CAP}")
    dobj = zstandard.ZstdDecompressor(max_window_size=WINDOW_CAP).decompressobj()
    try:
        out = dobj.decompress(blob)
    except zstandard.ZstdError as e:
        msg = str(e)
        kind = IntegrityError if "checksum" in msg.lower() else FormatError
        raise kind(f"zstd frame corrupt: {msg}") from e
    if not dobj.eof:
        raise TruncatedError("zstd frame truncated")
    if dobj.unused_data:
        raise FormatError(f"{len(dobj.unused_data)} bytes of trailing data after the zstd frame")
    if len(out) != size:
        raise IntegrityError(f"zstd frame produced {len(out)} bytes, header claimed {size}")
    return out
