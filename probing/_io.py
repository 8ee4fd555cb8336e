"""Atomic file writes: a reader sees the old file or the complete new one, never a partial one."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import: os.umask is process-wide and briefly changed to read it


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp makes 0600; the result gets an ordinary file's mode
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[IO]:
    """Open a temporary file for writing; it replaces ``path`` when the block exits cleanly."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as f:
            yield f


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def source_digest(root: str | os.PathLike, names: Iterable[str]) -> str:
    """sha256 over source files ``root/name`` (each hashed with its name): identifies the code that computed
    a cached result, so a code change is never served stale results."""
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode() + b"\0" + (Path(root) / name).read_bytes())
    return h.hexdigest()


def human_size(n_bytes: float) -> str:
    """``n_bytes`` in binary units, e.g. ``'1.5 GiB'``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    i = 0
    while n_bytes >= 1024 and i < len(units) - 1:
        n_bytes /= 1024
        i += 1
    return f"{n_bytes:.0f} B" if i == 0 else f"{n_bytes:.1f} {units[i]}"
