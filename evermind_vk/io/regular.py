"""The one way a user-given path is read: `open_regular(path, what)`.

The path is resolved (links followed), opened with O_NONBLOCK (so opening a FIFO cannot hang) and the
*opened descriptor* is fstat()ed, so what is checked is what is read: anything but a regular file (a
character device such as /dev/zero or /dev/urandom, a FIFO, a socket, a directory) raises
NotRegularFileError naming the path, before a byte is read. Reads are bounded by the size found at open
(`RegularFile.size`): `read_all()` reads exactly that many bytes (TruncatedError if the file shrank
meanwhile; bytes appended after the open are never read), never read() to EOF.

`fd_path(rf)` names the opened descriptor (/proc/self/fd/N on Linux) for libraries that want a path
(safetensors, zipfile), so they open the very file that was checked."""
from __future__ import annotations

import errno
import os
import stat

from ..errors import LimitError, NotRegularFileError, TruncatedError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_STEP = 1 << 20


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path, what: str = "file") -> None:
    """Refuse (NotRegularFileError) a path that exists and is not a regular file after resolving links;
    a missing path is left to the caller (so a writer may create it)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(errno.EINVAL, f"{what} is {_kind(st.st_mode)}, not a regular file", str(path))


class RegularFile:
    """An open regular file: `.fd`, `.path` (as given), `.size` (at open). Use as a context manager."""

    def __init__(self, path, what: str = "file", max_size: int | None = None):
        self.path, self.what = str(path), what
        fd = os.open(os.path.realpath(path), os.O_RDONLY | _CLOEXEC | _NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularFileError(errno.EINVAL, f"{what} is {_kind(st.st_mode)}, not a regular file",
                                          self.path)
            if max_size is not None and st.st_size > max_size:
                raise LimitError(f"{self.path}: {what} of {st.st_size} bytes exceeds the {max_size} allowed")
            if _NONBLOCK:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        self.fd, self.size = fd, st.st_size

    def read_at(self, off: int, n: int) -> bytes:
        """Up to n bytes at off, never past the size found at open."""
        n = max(0, min(n, self.size - off))
        return os.pread(self.fd, n, off) if n else b""

    def read_all(self) -> bytearray:
        """Exactly `.size` bytes (read in 1 MiB steps into one buffer); TruncatedError if the file shrank."""
        out = bytearray(self.size)
        view, off = memoryview(out), 0
        while off < self.size:
            got = os.preadv(self.fd, [view[off:off + _STEP]], off) if hasattr(os, "preadv") else \
                _pread_into(self.fd, view[off:off + _STEP], off)
            if got == 0:
                raise TruncatedError(f"{self.path}: {self.what} shrank from {self.size} to {off} bytes while read")
            off += got
        return out

    def close(self) -> None:
        """Close the descriptor (again: nothing)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _pread_into(fd: int, view, off: int) -> int:
    piece = os.pread(fd, len(view), off)
    view[:len(piece)] = piece
    return len(piece)


def open_regular(path, what: str = "file", max_size: int | None = None) -> RegularFile:
    """Open path for reading if it is a regular file after resolving links (NotRegularFileError naming
    the path otherwise; FileNotFoundError / PermissionError as the OS says); LimitError when its size
    exceeds max_size."""
    return RegularFile(path, what, max_size)


def read_regular(path, what: str = "file", max_size: int | None = None) -> bytearray:
    """The whole content of a regular file, exactly the size found at open (see open_regular)."""
    with open_regular(path, what, max_size) as rf:
        return rf.read_all()


def fd_path(rf: RegularFile) -> str:
    """A path naming rf's open descriptor (/proc/self/fd/N) where the OS has one, else rf's real path."""
    p = f"/proc/self/fd/{rf.fd}"
    return p if os.path.exists(p) else os.path.realpath(rf.path)
