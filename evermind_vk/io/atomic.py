"""The one atomic-write helper: a path holds either its old or its new content, never a mix, even
after a crash (temp file in the same directory, fsync, rename, fsync of the directory)."""
from __future__ import annotations

import os


def atomic_write(path: str, data: bytes) -> None:
    """Write data to path atomically, creating the directory if needed."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{os.path.basename(path)}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
