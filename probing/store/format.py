"""On-disk layout of an activation store: file names, the content key, layer files, the token schema.

A store is a directory named by its key::

    <key>/
      manifest.json        written last: its presence means the store is complete
      layer_000.npy ...    one fp16 ``(n_tokens, dim)`` .npy per layer, full-size (sparse), written by row ranges
      tokens.parquet       the token table, one row per token, aligned with the layer rows
      offsets.npy          int64 ``(n_sentences + 1,)``: rows of sentence i are ``offsets[i]:offsets[i+1]``
      .lock                ``fcntl.flock`` target that serialises writers
      progress.json        resume journal (only while unfinished)
      parts/               per-chunk token tables (only while unfinished)

One full-size file per layer (rather than one file per layer per chunk) because readers then get a
plain ``np.memmap`` of the whole layer with no concatenation and no merge pass at the end. A chunk is a
row range; its integrity record is the sha256 of that row range in every layer file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from probing import paths
from probing._io import WriteError, check_file_size_limit, human_size, open_nofollow
from probing.corpora.base import TOKEN_COLUMNS as CORPUS_COLUMNS
from probing.errors import InputError, ProbingError
from probing.identity import digest

FORMAT_VERSION = 1
DTYPE = np.dtype("<f2")
FP16_MAX = float(np.finfo(np.float16).max)

MANIFEST = "manifest.json"
JOURNAL = "progress.json"


class EncoderInfo(TypedDict):
    name: str
    fingerprint: str
    layer_names: list[str]
    dim: int


class CorpusInfo(TypedDict, total=False):
    name: str
    split: str
    fingerprint: str
    n_sentences: int


class FileInfo(TypedDict):
    file: str
    sha256: str


class LayerInfo(TypedDict):
    name: str
    file: str


class ChunkInfo(TypedDict):
    index: int
    sentences: list[int]  # [first, end) sentence range of the chunk
    rows: list[int]  # [first, end) token rows
    sha256: str


class Manifest(TypedDict, total=False):
    """A complete store's ``MANIFEST.json``: what was encoded by what, where each file is, and the sha256 of
    every file and layer chunk (checked on hits and by ``Store.verify``). ``shard`` is None for a whole store;
    a merged store lists ``merged_from``; ``versions``/``timings``/``created`` are provenance."""

    format_version: int
    key: str
    dtype: str
    encoder: EncoderInfo
    corpus: CorpusInfo
    shard: dict[str, Any] | None
    n_sentences: int
    n_tokens: int
    layer_names: list[str]
    dim: int
    layers: list[LayerInfo]
    tokens: FileInfo
    offsets: FileInfo
    chunk_tokens: int | None
    chunks: list[ChunkInfo]
    merged_from: list[dict[str, Any]]
    device: str | None
    versions: dict[str, str | None]
    timings: dict[str, Any]
    created: str


TOKENS = "tokens.parquet"
OFFSETS = "offsets.npy"
LOCK = ".lock"
PARTS = "parts"

# the corpus's token columns (probing.corpora.base) plus the encoder's out-of-vocabulary flag
_AFTER = CORPUS_COLUMNS.index("instance_id") + 1
TOKEN_COLUMNS = (*CORPUS_COLUMNS[:_AFTER], "oov", *CORPUS_COLUMNS[_AFTER:])
TREE_COLUMNS = {"head": -1, "deprel": "", "feats": ""}  # added after format 1's first stores; value when absent


class StoreError(ProbingError, ValueError):
    """A store, its inputs or its encoder's outputs are not what the format expects."""


class StoreCorruptError(StoreError):
    """Bytes on disk do not match the sha256 recorded for them (the message names the files and the fix)."""


CHUNK_TOKENS = 32768
"""Tokens per chunk of an extraction, the unit that is encoded, written and journaled (and a shard's unit)."""


def store_key(
    encoder_fingerprint: str,
    corpus_fingerprint: str,
    shard: tuple[int, int] | None = None,
    chunk_tokens: int | None = None,
) -> str:
    """sha256 naming a store: encoder and corpus content, format version, dtype (and the shard, if any).

    A shard's key also names ``chunk_tokens``: shards are cut on chunk boundaries
    (:func:`~probing.store.extraction.shard_owners`), so the chunk size says which sentences a shard holds.
    The unsharded key never depends on it.
    """
    parts: dict = {
        "encoder": encoder_fingerprint,
        "corpus": corpus_fingerprint,
        "format": FORMAT_VERSION,
        "dtype": DTYPE.name,
    }
    if shard is not None:
        if chunk_tokens is None:
            raise ValueError("a shard's store key needs the chunk_tokens its sentences were cut by")
        parts["shard"] = [int(shard[0]), int(shard[1])]
        parts["shard_chunks"] = int(chunk_tokens)
    return digest(parts)


def layer_file(index: int) -> str:
    return f"layer_{index:03d}.npy"


def token_part_file(chunk: int) -> str:
    return f"{PARTS}/tokens-{chunk:06d}.parquet"


def _header(n_rows: int, dim: int) -> dict:
    return {"descr": DTYPE.str, "fortran_order": False, "shape": (int(n_rows), int(dim))}


def create_layer_file(path: Path, n_rows: int, dim: int) -> None:
    """Write an .npy header for ``(n_rows, dim)`` fp16 and extend the file to its full size (sparsely).

    Not ``posix_fallocate``: on ext4 a preallocated (unwritten) extent makes each later pwrite+fsync of a
    chunk about 10x slower. Call :func:`check_free_space` first, so that a full disk fails now rather
    than hours into an extraction. Whatever is at ``path`` (an old file, a planted link) is removed first and
    the file is created with ``O_EXCL | O_NOFOLLOW``, so no link is ever written through.
    """
    path.unlink(missing_ok=True)
    with os.fdopen(open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as f:
        np.lib.format.write_array_header_1_0(f, _header(n_rows, dim))
        f.truncate(f.tell() + int(n_rows) * int(dim) * DTYPE.itemsize)


def check_free_space(directory: Path, nbytes: int, what: str) -> None:
    """WriteError(ENOSPC) naming ``directory`` if its filesystem has less than ``nbytes`` free for ``what``."""
    free = shutil.disk_usage(next(p for p in (directory, *directory.parents) if p.exists())).free
    if free < nbytes:
        raise WriteError(
            errno.ENOSPC,
            f"{directory}: {what} need {human_size(nbytes)}, only "
            f"{human_size(free)} free (point PROBING_CACHE or --cache at a bigger disk)",
        )


def check_room(directory: Path, n_rows: int, n_layers: int, dim: int, what: str) -> None:
    """Refuse a store that cannot be written before any of it is: a WriteError naming ``directory`` if one
    layer file would pass the file-size limit (``ulimit -f``) or the disk lacks room for all of them."""
    check_file_size_limit(directory / layer_file(0), layer_file_size(n_rows, dim), f"{what} (per layer)")
    check_free_space(directory, n_layers * n_rows * dim * DTYPE.itemsize, what)


def layer_data_offset(path: Path, n_rows: int, dim: int) -> int:
    """Byte offset of row 0 in a layer file, after checking its header; StoreError if it does not match."""
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            if version != (1, 0):
                raise InputError(f"npy format version {version}, expected (1, 0)")
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        except ValueError as e:
            raise StoreError(f"{path}: not a valid layer file ({e})") from None
        if shape != (n_rows, dim) or fortran or dtype != DTYPE:
            raise StoreError(f"{path}: header says shape {shape}, dtype {dtype}, expected ({n_rows}, {dim}) {DTYPE}")
        return f.tell()


def layer_file_size(n_rows: int, dim: int) -> int:
    """Expected size in bytes of a complete layer file."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, _header(n_rows, dim))
    return buf.tell() + int(n_rows) * int(dim) * DTYPE.itemsize


def hash_region(fd: int, offset: int, nbytes: int, block: int = 1 << 24) -> str:
    """sha256 of ``nbytes`` at ``offset`` of an open file; a short read (truncated file) hashes what is there."""
    h = hashlib.sha256()
    buf = bytearray(min(block, max(nbytes, 1)))
    view = memoryview(buf)
    done = 0
    while done < nbytes:
        want = min(len(buf), nbytes - done)
        got = os.preadv(fd, [view[:want]], offset + done)
        if got <= 0:
            break
        h.update(view[:got])
        done += got
    return h.hexdigest()


def read_json(path: Path) -> dict:
    """Load a JSON object; StoreError naming the file if it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise StoreError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None
    if not isinstance(data, dict):
        raise StoreError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def store_root(cache_dir: str | os.PathLike | None) -> Path:
    """Directory holding stores: ``cache_dir`` if given, else ``probing.paths.cache_dir() / "store"``."""
    return Path(cache_dir).expanduser() if cache_dir is not None else paths.cache_dir() / "store"


@contextlib.contextmanager
def store_lock(path: Path, progress: bool) -> Iterator[None]:
    """Hold an exclusive ``fcntl.flock`` on ``path/.lock`` (waits for another writer to finish)."""
    fd = open_nofollow(path / LOCK, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                print(f"waiting for another extraction into {path} to finish", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
