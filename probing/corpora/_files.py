"""Open corpus files the same way whether or not they are gzip-compressed, with one set of text rules.

Text rules (every line-based reader: plain text, CoNLL-U, gold keys, ``probing embed``): UTF-8, a leading
byte-order mark is dropped, a NUL byte or invalid UTF-8 is refused with its line number, and so is a line
longer than ``MAX_LINE_BYTES`` (read no further: one huge line must not fill memory). A truncated or
corrupt ``.gz`` is refused with the file's name.
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from probing.corpora.base import CorpusFormatError
from probing.errors import InputError

MAX_LINE_BYTES = 1 << 20


def open_text(path: Path) -> IO[str]:
    """Open ``path`` for reading as UTF-8 text (a leading BOM dropped); ``*.gz`` is decompressed on the fly."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def numbered_lines(path: Path, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, str]]:
    """(1-based line number, line with its newline) of a UTF-8 text file, under the module's text rules;
    a break of them is a CorpusFormatError naming the file and line."""
    lineno = 0
    try:
        with open_binary(path) as fh:
            while raw := fh.readline(max_line_bytes + 1):
                lineno += 1
                if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                    raise CorpusFormatError(
                        f"{path}:{lineno}: line longer than {max_line_bytes} bytes; split it (one sentence per line)"
                    )
                if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8) :]
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise CorpusFormatError(
                        f"{path}:{lineno}: not UTF-8 text ({e.reason} at byte {e.start} of the line)"
                    ) from None
                if "\x00" in line:
                    raise CorpusFormatError(f"{path}:{lineno}: NUL byte at column {line.index(chr(0)) + 1}")
                yield lineno, line
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise CorpusFormatError(f"{path}: truncated or corrupt gzip data after line {lineno} ({e})") from None


def open_binary(path: Path) -> IO[bytes]:
    """Open ``path`` for reading as bytes; ``*.gz`` is decompressed on the fly."""
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


def with_gz(path: Path) -> Path | None:
    """``path`` if it exists, else ``path.gz`` if that exists, else None."""
    if path.is_file():
        return path
    gz = path.with_name(path.name + ".gz")
    return gz if gz.is_file() else None


def require_file(path: str | Path, what: str = "corpus file") -> Path:
    """``path`` as a Path if it is a regular file; else a FileNotFoundError naming it, or an InputError if it
    exists but is something else (a folder, a device such as /dev/null, a pipe)."""
    path = Path(path).expanduser()
    if not path.is_file():
        if path.exists():
            kind = "a folder" if path.is_dir() else "a device, pipe or socket"
            raise InputError(f"{what} {path} is not a regular file (it is {kind}); expected a text file")
        raise FileNotFoundError(f"{what} not found: {path}")
    return path


def base_name(path: Path) -> str:
    """File name without ``.gz`` and without the last extension: ``a/en-ud-dev.conllu.gz`` -> ``en-ud-dev``."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.rsplit(".", 1)[0] if "." in name else name
