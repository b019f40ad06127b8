"""One zstd framing for every blob evermind-vk writes: a single frame with its content size and a
content checksum. Reading treats the blob as hostile: the frame header's claims are checked against
limits before anything is allocated, the window is capped, the frame is decompressed in 1 MiB input
steps into one growing buffer (zstd itself refuses output beyond the declared content size), and
trailing data or further frames are rejected. Each failure is a typed BlobError subclass.

What a header may honestly claim: at most `max_size` (the caller's limit), and at most
`max(SMALL, max_ratio * compressed bytes)`. zstd can physically expand ~32,000x (RLE blocks), so a
32 KB frame can truly hold 1 GiB of zeros; no file of ours compresses like that (weights compress
~1.1x, JSON a few x), so such a frame is treated as a bomb: LimitError, before decompressing. Pass a
larger max_ratio to read a legitimately tiny-but-huge blob (e.g. a checkpoint of all-zero arrays).
"""
from __future__ import annotations

import zstandard

from ..errors import FormatError, IntegrityError, LimitError, TruncatedError

MAGIC = b"\x28\xb5\x2f\xfd"
WINDOW_CAP = 1 << 27  # 128 MiB: the largest decompression window we accept
DEFAULT_MAX = 1 << 34  # 16 GiB: no blob of ours is larger
# zstd cannot expand data more than this per input byte (an RLE block: 3 header bytes + 1 byte
# for up to 128 KiB), so a frame claiming more than this ratio of its size is lying.
MAX_RATIO = (128 * 1024) // 4 + 1
DEFAULT_MAX_RATIO = 64  # the most expansion we believe by default (see above)
SMALL = 16 << 20  # any frame may expand to this much, whatever its ratio
_STEP = 1 << 20


def frame(data: bytes, level: int = 3) -> bytes:
    """Compress into one frame with content size and content checksum."""
    cctx = zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=True)
    return cctx.compress(bytes(data))


def is_framed(blob: bytes) -> bool:
    return bytes(blob[:4]) == MAGIC


def allowed_size(compressed: int, max_size: int = DEFAULT_MAX, max_ratio: float = DEFAULT_MAX_RATIO) -> int:
    """The most bytes a frame of `compressed` bytes may decompress to under these limits."""
    return int(min(max_size, max(SMALL, compressed * min(max_ratio, MAX_RATIO))))


def unframe(blob, max_size: int = DEFAULT_MAX, max_ratio: float = DEFAULT_MAX_RATIO) -> bytearray:
    """Decompress a blob written by frame() (a bytearray, so the content is not copied again)."""
    mv = memoryview(blob).cast("B")
    return _unframe(lambda off, n: mv[off:off + n], len(mv), max_size, max_ratio)


def unframe_file(f, size: int, max_size: int = DEFAULT_MAX, max_ratio: float = DEFAULT_MAX_RATIO) -> bytearray:
    """unframe() of an open binary file of `size` bytes, read in steps (the compressed bytes are never
    all in memory at once)."""
    def read(off, n):
        f.seek(off)
        return f.read(n)
    return _unframe(read, size, max_size, max_ratio)


def _unframe(read, n: int, max_size: int, max_ratio: float) -> bytearray:
    head = bytes(read(0, 18))
    if len(head) < 4 or head[:4] != MAGIC:
        raise FormatError("not a zstd frame (bad magic)")
    try:
        params = zstandard.get_frame_parameters(head)
    except zstandard.ZstdError as e:
        raise TruncatedError(f"zstd frame header unreadable: {e}") from e
    size = params.content_size
    if size == zstandard.CONTENTSIZE_UNKNOWN or size == zstandard.CONTENTSIZE_ERROR:
        raise FormatError("zstd frame does not declare its content size")
    if not params.has_checksum:
        raise FormatError("zstd frame has no content checksum")
    if size > max_size:
        raise LimitError(f"zstd frame claims {size} bytes, more than the {max_size} allowed here")
    if size > n * MAX_RATIO:
        raise LimitError(f"zstd frame claims {size} bytes from {n}: more than zstd can encode")
    cap = allowed_size(n, max_size, max_ratio)
    if size > cap:
        raise LimitError(f"zstd frame claims {size} bytes from {n} compressed ({size / max(n, 1):.0f}x): more "
                         f"than the {cap} believed here (max_ratio {max_ratio}); a decompression bomb?")
    if params.window_size > WINDOW_CAP:
        raise LimitError(f"zstd window {params.window_size} exceeds {WINDOW_CAP}")
    dobj = zstandard.ZstdDecompressor(max_window_size=WINDOW_CAP).decompressobj()
    out = bytearray()
    off = 0
    try:
        while off < n and not dobj.eof:
            piece = read(off, _STEP)
            off += len(piece)
            out += dobj.decompress(piece)
            if len(out) > size:  # zstd refuses this itself; checked so no version can surprise us
                raise IntegrityError(f"zstd frame produced more than the {size} bytes its header claimed")
    except zstandard.ZstdError as e:
        msg = str(e)
        kind = IntegrityError if "checksum" in msg.lower() else FormatError
        raise kind(f"zstd frame corrupt: {msg}") from e
    if not dobj.eof:
        raise TruncatedError("zstd frame truncated")
    trailing = len(dobj.unused_data) + (n - off)
    if trailing:
        raise FormatError(f"{trailing} bytes of trailing data after the zstd frame")
    if len(out) != size:
        raise IntegrityError(f"zstd frame produced {len(out)} bytes, header claimed {size}")
    return out
