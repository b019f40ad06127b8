"""The one atomic-write helper and the per-file lock.

atomic_write: a path holds either its old or its new content, never a mix, even after a crash or with
other writers in the directory. The temp file gets an unpredictable name in the target directory and is
created with O_CREAT|O_EXCL|O_NOFOLLOW, so a planted file or symlink can neither be reused nor redirect
the write; it is fsynced, renamed over the target and the directory fsynced; on any error it is removed.
An existing target keeps its permission bits (a 0600 file stays 0600); a new one gets 0666 & ~umask.
Directories created on the way are fsynced into their parents. A writer killed between create and
rename leaves its temp file; `remove_orphans(path, before)` (called by the checkpoint store under the
key's lock, on every save) removes those older than the lock holder. Readers never open temp files.

locked(path): an exclusive lock for a read-modify-write of path, across threads (a lock per path in
this process) and processes (fcntl.flock on `.NAME.lock` beside it, opened with O_NOFOLLOW; the lock
file stays, so every waiter locks the same inode). POSIX only, like the directory fsync above.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import threading

try:
    import fcntl
except ImportError:  # not POSIX: no flock (and no directory fsync either)
    fcntl = None

from ..errors import UnsupportedError

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _fsync_dir(d: str) -> None:
    fd = os.open(d, os.O_RDONLY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(d: str) -> None:
    """os.makedirs(d, exist_ok=True), fsyncing each new directory's parent so the entry survives a crash."""
    d = os.path.abspath(d)
    missing = []
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for m in reversed(missing):
        try:
            os.mkdir(m)
        except FileExistsError:
            if not os.path.isdir(m):
                raise
        _fsync_dir(os.path.dirname(m))


def atomic_write(path: str, data) -> None:
    """Write data (bytes-like) to path atomically, creating (and fsyncing) the directory if needed."""
    path = os.path.abspath(path)
    d = os.path.dirname(path)
    makedirs_durable(d)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)  # follows a symlinked target: that is the file replaced
    except FileNotFoundError:
        mode = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(16):
        tmp = os.path.join(d, f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666 if mode is None else 0o600)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"could not create a unique temp file beside {path}")
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data).cast("B")
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(d)


_TMP_NAME = re.compile(r"\.(?P<base>.+)\.[0-9a-f]{16}\.tmp")


def temp_files(path: str) -> list:
    """The temp files atomic_write(path) leaves when its process is killed between create and rename
    (`.NAME.<16 hex>.tmp` beside path)."""
    path = os.path.abspath(path)
    d, base = os.path.dirname(path), os.path.basename(path)
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    return [os.path.join(d, n) for n in names
            if (m := _TMP_NAME.fullmatch(n)) is not None and m.group("base") == base]


def remove_orphans(path: str, before: float) -> int:
    """Remove path's temp files last modified before `before` (a time.time(); call it with path's lock
    held, `before` the moment the lock was taken: every writer of path holds that lock, so such a file's
    writer is dead). Only regular files are removed (never a planted symlink's target). Returns the count."""
    removed = 0
    for tmp in temp_files(path):
        try:
            st = os.lstat(tmp)
            if stat.S_ISREG(st.st_mode) and st.st_mtime < before:
                os.unlink(tmp)
                removed += 1
        except FileNotFoundError:
            continue
    return removed


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def locked(path: str):
    """Hold an exclusive lock on path's read-modify-write (threads and processes)."""
    if fcntl is None:
        raise UnsupportedError("checkpoint locking needs fcntl.flock (POSIX)")
    path = os.path.abspath(path)
    with _THREAD_LOCKS_GUARD:
        tlock = _THREAD_LOCKS.setdefault(path, threading.Lock())
    with tlock:
        d = os.path.dirname(path)
        makedirs_durable(d)
        lock = os.path.join(d, f".{os.path.basename(path)}.lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o600)
        except OSError as e:
            if os.path.islink(lock):  # planted: following it would let someone else choose what we open
                raise OSError(e.errno, f"lock file {lock} is a symlink; refusing to follow it") from e
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
