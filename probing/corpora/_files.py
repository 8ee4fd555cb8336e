"""Open corpus files the same way whether or not they are gzip-compressed."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from probing.corpora.base import CorpusFormatError


def open_text(path: Path) -> IO[str]:
    """Open ``path`` for reading as UTF-8 text; ``*.gz`` is decompressed on the fly."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of a UTF-8 text file; bytes that are not UTF-8 are a CorpusFormatError."""
    lineno = 0
    with open_text(path) as fh:
        try:
            for lineno, line in enumerate(fh, 1):
                yield lineno, line
        except UnicodeDecodeError as e:
            raise CorpusFormatError(f"{path}: not UTF-8 text after line {lineno}: {e.reason}") from None


def open_binary(path: Path) -> IO[bytes]:
    """Open ``path`` for reading as bytes; ``*.gz`` is decompressed on the fly."""
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def with_gz(path: Path) -> Path | None:
    """``path`` if it exists, else ``path.gz`` if that exists, else None."""
    if path.is_file():
        return path
    gz = path.with_name(path.name + ".gz")
    return gz if gz.is_file() else None


def require_file(path: str | Path) -> Path:
    """``path`` as a Path, or a FileNotFoundError naming it."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"corpus file not found: {path}")
    return path


def base_name(path: Path) -> str:
    """File name without ``.gz`` and without the last extension: ``a/en-ud-dev.conllu.gz`` -> ``en-ud-dev``."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.rsplit(".", 1)[0] if "." in name else name
