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
    """Whether blob starts with the frame's magic."""
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


def unframe_at(read_at, size: int, max_size: int = DEFAULT_MAX, max_ratio: float = DEFAULT_MAX_RATIO) -> bytearray:
    """unframe() of `size` bytes read through read_at(offset, n) (e.g. io.regular.RegularFile.read_at)."""
    return _unframe(read_at, size, max_size, max_ratio)


class _Source:
    """The frame's bytes [0, end) as a file-like source for zstd's stream reader."""
    def __init__(self, read, end):
        self.read_at, self.end, self.off = read, end, 0

    def read(self, n=-1):
        n = self.end - self.off if n is None or n < 0 else min(n, self.end - self.off)
        piece = bytes(self.read_at(self.off, n)) if n > 0 else b""
        self.off += len(piece)
        return piece


def _frame_length(read, n: int, head: bytes) -> int:
    """Walk the frame's block headers (no decompression): its exact length, or TruncatedError /
    FormatError. Lets trailing data be found without handing it to zstd."""
    try:
        off = zstandard.frame_header_size(head)
    except zstandard.ZstdError as e:
        raise TruncatedError(f"zstd frame header unreadable: {e}") from e
    while True:
        b = bytes(read(off, 3))
        if len(b) < 3:
            raise TruncatedError("zstd frame truncated (in a block header)")
        v = b[0] | b[1] << 8 | b[2] << 16
        last, btype, bsize = v & 1, (v >> 1) & 3, v >> 3
        if btype == 3:
            raise FormatError("zstd frame corrupt: reserved block type")
        if btype != 1 and bsize > 128 << 10:
            raise FormatError(f"zstd frame corrupt: a block of {bsize} bytes")
        off += 3 + (1 if btype == 1 else bsize)
        if off > n:
            raise TruncatedError("zstd frame truncated")
        if last:
            break
    off += 4  # the content checksum (required)
    if off > n:
        raise TruncatedError("zstd frame truncated (in its checksum)")
    return off


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
    end = _frame_length(read, n, head)
    if end != n:
        raise FormatError(f"{n - end} bytes of trailing data after the zstd frame")
    # zstd checks the declared content size only at the frame's end, so a lying header could expand far
    # beyond it within one call: read the output in bounded steps and stop as soon as it exceeds the claim.
    reader = zstandard.ZstdDecompressor(max_window_size=WINDOW_CAP).stream_reader(
        _Source(read, end), read_size=_STEP, read_across_frames=False)
    out = bytearray()
    try:
        while True:
            piece = reader.read(_STEP)
            if not piece:
                break
            out += piece
            if len(out) > size:
                raise IntegrityError(f"zstd frame produces more than the {size} bytes its header claims")
    except zstandard.ZstdError as e:
        msg = str(e)
        kind = IntegrityError if "checksum" in msg.lower() else FormatError
        raise kind(f"zstd frame corrupt: {msg}") from e
    if len(out) != size:
        raise IntegrityError(f"zstd frame produced {len(out)} bytes, header claimed {size}")
    return out
