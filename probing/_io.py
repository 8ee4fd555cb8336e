"""Atomic file writes: a reader sees the old file or the complete new one, never a partial one."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import resource
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from probing.errors import InputError, ProbingError


class UnsafePathError(ProbingError, OSError):
    """A file the toolkit writes is a symbolic link (planted or left over): it is never followed."""


class WriteError(ProbingError, OSError):
    """A file could not be written: the disk is full, over quota or read-only, or the file would pass the
    process's file-size limit (``ulimit -f``). The message names the file; the CLI prints it as one line."""

    def __str__(self) -> str:
        return str(self.strerror)


WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
_WRITE_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "the file would pass the file-size limit (ulimit -f) or the file system's largest file",
    errno.EROFS: "the file system is read-only",
}


def write_error(path: str | os.PathLike, e: OSError) -> WriteError:
    """The WriteError for ``e`` (one of :data:`WRITE_ERRNOS`) raised while writing ``path``."""
    reason = _WRITE_REASONS.get(e.errno or 0, e.strerror)
    return WriteError(e.errno, f"cannot write {path}: {reason}; no partial file is kept")


@contextlib.contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """The one write-error path: a full disk, quota, read-only file system or file-size limit met in the
    block becomes a :class:`WriteError` naming ``path`` (other errors pass unchanged)."""
    try:
        yield
    except WriteError:
        raise
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        raise write_error(path, e) from None


def check_file_size_limit(path: str | os.PathLike, nbytes: int, what: str) -> None:
    """WriteError(EFBIG) naming ``path`` if a ``nbytes`` file would pass the file-size limit (``ulimit -f``):
    refused before anything is written, rather than failing midway."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY and nbytes > soft:
        raise WriteError(
            errno.EFBIG,
            f"cannot write {path}: {what} need {human_size(nbytes)} in one file, over this process's "
            f"file-size limit of {human_size(soft)} (ulimit -f)",
        )


class _GuardedFile:
    """A binary file for a library that cannot unwind a failed write (HDF5 floods stderr and can crash
    when its cache fails to flush): the first failed write is remembered, later writes are dropped, and
    :func:`guarded_file` raises it once the library has closed the file."""

    def __init__(self, f: IO[bytes]):
        self._f = f
        self.error: OSError | None = None

    def _guard(self, op: Any, *args: Any) -> Any:
        if self.error is None:
            try:
                return op(*args)
            except OSError as e:
                self.error = e
        return None

    def write(self, data: Any) -> int:
        self._guard(self._f.write, data)
        return memoryview(data).nbytes

    def truncate(self, size: int | None = None) -> int:
        self._guard(self._f.truncate, size)
        return self._f.tell() if size is None else size

    def flush(self) -> None:
        self._guard(self._f.flush)

    def readinto(self, buffer: Any) -> int:
        return self._f.readinto(buffer)  # type: ignore[attr-defined]

    def read(self, size: int = -1) -> bytes:
        return self._f.read(size)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()


@contextlib.contextmanager
def guarded_file(path: str | os.PathLike) -> Iterator[_GuardedFile]:
    """Open ``path`` (an :func:`atomic_path` temp) for a library to write through :class:`_GuardedFile`; a
    write that failed in the block is raised on exit, once (atomic_path turns it into a WriteError naming
    the file being written)."""
    with open(path, "w+b") as f:
        guard = _GuardedFile(f)
        try:
            yield guard
        except BaseException:
            if guard.error is None:
                raise
        if guard.error is not None:
            raise guard.error


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import: os.umask is process-wide and briefly changed to read it


_TEMP_NAME = re.compile(r"\..+\.(\d+)-[A-Za-z0-9_]{8}\.tmp")  # atomic_path's names; group 1 is the writer's pid
STALE_AFTER_S = 1.0  # a temp file younger than this is never removed (its owner may be about to lock it)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    The temporary file is created with ``O_EXCL`` (a planted link is never followed; ``os.replace`` then
    replaces a link at ``path`` rather than writing through it); its name holds the writer's pid and it
    holds a POSIX lock (``lockf``: HDF5 takes ``flock`` locks on the files it writes), so
    :func:`remove_stale_temps` can tell a killed writer's leftover from a live one's file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp", dir=path.parent)
    tmp_path = Path(tmp)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; the result gets an ordinary file's mode
        with writing(path):
            yield tmp_path
            with open(tmp_path, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[IO]:
    """Open a temporary file for writing; it replaces ``path`` when the block exits cleanly."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as f:
            yield f


def open_nofollow(path: str | os.PathLike, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that never follows a symbolic link at ``path`` (UnsafePathError naming it instead)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePathError(
                errno.ELOOP, f"{path} is a symbolic link; the toolkit does not write through links: remove it"
            ) from None
        raise


def held_temp(directory: str | os.PathLike, prefix: str, suffix: str) -> tuple[int, Path]:
    """A new file ``directory/<prefix><pid>-<random><suffix>`` (``O_EXCL``), locked (``lockf``) for as long
    as the returned descriptor stays open: :func:`remove_stale_temps` removes it only once its owner is gone."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=f"{prefix}{os.getpid()}-", suffix=suffix)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    return fd, Path(name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temps(directory: str | os.PathLike, pattern: re.Pattern[str] = _TEMP_NAME) -> list[Path]:
    """Remove files in ``directory`` named like ``pattern`` whose writer is gone; return them.

    ``pattern``'s group 1 is the writer's pid (:func:`atomic_path`, :func:`held_temp`). A file is removed
    only if no process has that pid, no process holds a lock on it (a writer on another host sharing the
    cache) and it is older than ``STALE_AFTER_S``. A directory that cannot be listed or written (a
    read-only cache) is left alone.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(os.fspath(directory)))
    except OSError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(str(entry.name))
        if m is None or _alive(int(m.group(1))):
            continue
        try:
            if entry.is_symlink():
                os.unlink(entry.path)
                removed.append(Path(entry.path))
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            if time.time() - os.fstat(fd).st_mtime >= STALE_AFTER_S:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:  # locked by a live writer, or not ours to remove
            pass
        finally:
            os.close(fd)
    return removed


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class PinnedHashError(InputError):
    """A file's sha256 is not the one pinned for it: the file changed since the hash was taken."""


_SHA256 = re.compile(r"[0-9a-f]{64}")
_file_hashes: dict[tuple[str, int, int, int, int], str] = {}
SETTLED_S = 2.0  # a file modified this recently may change again within its clock's tick: its hash is not kept


def is_sha256(value: str) -> bool:
    """Whether ``value`` is a sha256 in hex (64 digits, either case)."""
    return _SHA256.fullmatch(value.lower()) is not None


def check_sha256(value: str, what: str) -> str:
    """``value`` as a pinned sha256: 64 hex digits, returned lowercase; else an InputError naming ``what``."""
    if not isinstance(value, str) or not is_sha256(value):
        raise InputError(f"{what}: a sha256 is 64 hex digits, got {value!r}")
    return value.lower()


def file_record(path: str | os.PathLike, sha256: str | None = None) -> dict[str, Any]:
    """What a result was computed from: ``{"path", "size", "sha256"}`` of the file ``path`` (resolved), its
    hash read in 1 MiB chunks, once per process while its path, size, mtime, ctime and inode stay the same (a
    rewrite changes them; a file modified in the last :data:`SETTLED_S` seconds is hashed every time).

    With ``sha256`` (a pinned hex digest) a file whose hash differs is refused: a :class:`PinnedHashError`
    naming the file and both hashes."""
    resolved = Path(path).resolve()
    st = resolved.stat()
    key = (str(resolved), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    found = _file_hashes.get(key) or sha256_file(resolved)
    if time.time() - st.st_mtime >= SETTLED_S:
        _file_hashes[key] = found
    if sha256 is not None and found != check_sha256(sha256, str(path)):
        raise PinnedHashError(
            f"{path}: sha256 {found} is not the pinned {sha256.lower()}: the file changed since it was pinned "
            "(damaged, replaced or re-exported); restore it, or pin the new hash if the change is intended"
        )
    return {"path": str(resolved), "size": st.st_size, "sha256": found}


def human_size(n_bytes: float) -> str:
    """``n_bytes`` in binary units, e.g. ``'1.5 GiB'``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    i = 0
    while n_bytes >= 1024 and i < len(units) - 1:
        n_bytes /= 1024
        i += 1
    return f"{n_bytes:.0f} B" if i == 0 else f"{n_bytes:.1f} {units[i]}"
