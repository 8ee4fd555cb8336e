"""Run an encoder over a corpus into a content-addressed, resumable, chunked activation store."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import sys
import time
import warnings
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

import probing
from probing._io import (
    atomic_open,
    atomic_path,
    check_file_size_limit,
    held_temp,
    open_nofollow,
    remove_stale_temps,
    sha256_file,
    writing,
)
from probing.errors import InputError
from probing.protocols import CorpusLike, EncoderLike
from probing.store.format import (
    CHUNK_TOKENS,
    DTYPE,
    FORMAT_VERSION,
    FP16_MAX,
    JOURNAL,
    MANIFEST,
    OFFSETS,
    PARTS,
    TOKENS,
    Manifest,
    StoreCorruptError,
    StoreError,
    check_free_space,
    check_room,
    create_layer_file,
    hash_region,
    layer_data_offset,
    layer_file,
    layer_file_size,
    read_json,
    store_key,
    store_lock,
    store_root,
    token_part_file,
)
from probing.store.memo import corpus_state, recall, remember
from probing.store.reader import Store
from probing.store.tokens import concat_parts, token_table, write_part

if TYPE_CHECKING:
    import torch


def extract(
    encoder: EncoderLike,
    corpus: CorpusLike,
    *,
    cache_dir: str | os.PathLike | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
    batch_tokens: int = 4096,
    shard: tuple[int, int] | None = None,
    progress: bool = True,
    verify: bool = False,
) -> Store:
    """Encode every token of ``corpus`` with ``encoder`` into a store keyed by their content; return it.

    The store lives at ``store_root(cache_dir) / key`` with key = sha256(encoder fingerprint, corpus
    fingerprint, format version, dtype[, shard]). If it is already complete this is a cache hit: only
    ``encoder.name``, ``.fingerprint``, ``.layer_names`` and ``.dim`` are read (a lazy encoder never
    loads its model) and :meth:`Store.check_sample` runs (sizes, the token table and offsets hashed whole,
    the layers too up to ``FULL_CHECK_BYTES``, else a random ~32 MiB of layer chunks); ``verify=True`` re-hashes every chunk instead, and
    re-parses the corpus rather than trust its memoised fingerprint (:mod:`probing.store.memo`).
    Whatever fails its sha256 is recomputed (the message names it), or, in a read-only cache, reported
    as a StoreCorruptError that says how to rebuild. An unfinished store resumes from its last committed chunk (a resume
    keeps the chunk plan it started with, whatever ``chunk_tokens`` says now). A ``probing.corpora.Corpus``
    is parsed once per call: the pass that computes its fingerprint also counts its words and copies its
    sentences to a temporary file, which is replayed to the encoder.

    Sentences are encoded in batches of about ``batch_tokens`` (padded) tokens, sorted by length within
    each chunk of about ``chunk_tokens`` tokens; rows keep corpus order. The calling thread only runs
    the encoder; one thread range-checks each batch and casts it to fp16 into a chunk buffer, another
    writes, hashes and fsyncs each finished chunk, so writing overlaps encoding. Two chunk buffers
    alternate, so peak memory is about two chunks (``2 * chunk_tokens * n_layers * dim * 2`` bytes) plus
    up to four batches of encoder output, besides the encoder itself (an ELMo's oneDNN kernel caches are
    capped: :func:`probing.elmo.model.bound_primitive_caches`). The arrays ``encoder.encode`` returns are read after it returns,
    so a later call must not overwrite them. Free disk space and the file-size limit are checked before
    anything is encoded (before the store's folder is made, when the corpus's lengths are known); a failed
    write is a WriteError naming the file.

    ``shard=(i, n)`` extracts only the i-th of n contiguous sentence ranges, balanced by token count
    (sentence j belongs to shard ``floor(n * first_row(j) / n_tokens)``); :func:`merge` joins them.
    Concurrent calls for the same key are serialised by a file lock; the later one gets the cache hit.
    The returned store's ``cache_hit`` says whether it was complete before the call.
    Files are created without following links (a planted symlink is removed, never written through);
    temp files and corpus copies left by a killed run are removed by the next one.
    """
    if not isinstance(chunk_tokens, int) or chunk_tokens < 1:
        raise InputError(f"chunk_tokens must be a positive int, got {chunk_tokens!r}")
    if not isinstance(batch_tokens, int) or batch_tokens < 1:
        raise InputError(f"batch_tokens must be a positive int, got {batch_tokens!r}")
    if shard is not None:
        if len(shard) != 2 or not 0 <= shard[0] < shard[1]:
            raise InputError(f"shard must be (i, n) with 0 <= i < n, got {shard!r}")
        shard = (int(shard[0]), int(shard[1]))
    root = store_root(cache_dir)
    with _read_once(corpus, root, verify) as (corpus_fp, lengths, source):
        for what, fp in (("encoder.fingerprint", encoder.fingerprint), ("corpus.fingerprint()", corpus_fp)):
            if not isinstance(fp, str) or not fp:
                raise StoreError(f"{what} must be a non-empty str (a content hash), got {fp!r}")
        key = store_key(encoder.fingerprint, corpus_fp, shard, chunk_tokens)
        path = root / key
        if path.is_symlink():
            raise StoreError(f"{path} is a symbolic link, not a store folder: remove it (stores are never followed)")
        hit = None if verify else _complete(path, encoder, key, progress)
        if hit is not None:  # no lock needed: a complete store is only rewritten after its manifest is removed
            return _reported(hit, True)
        if lengths is not None and not path.exists():  # a store that cannot be written leaves no folder
            s0, s1 = (0, len(lengths)) if shard is None else shard_range(lengths, *shard, chunk_tokens)
            n_rows = int(lengths[s0:s1].sum())
            what = f"the activations of {corpus.name}/{corpus.split}"
            check_room(path, n_rows, len(encoder.layer_names), int(encoder.dim), what)
        path.mkdir(parents=True, exist_ok=True)
        with store_lock(path, progress):
            hit = None if verify else _complete(path, encoder, key, progress)
            if hit is not None:
                return _reported(hit, True)
            for folder in (path, path / PARTS):
                remove_stale_temps(folder)
            repair = None
            if (path / MANIFEST).is_file():
                store = Store.open(path)
                try:
                    _check_compatible(store, encoder, key)
                except StoreCorruptError:
                    if not verify:
                        raise
                    print(f"{path / MANIFEST} does not match its encoder; rebuilding the store", file=sys.stderr)
                    (path / MANIFEST).unlink()
                else:
                    if not store.bad_chunks() and not store.bad_files():
                        return _reported(store, True)
                    repair = store
            run = _Extraction(
                encoder, source, path, key, corpus_fp, lengths, shard, chunk_tokens, batch_tokens, progress
            )
            return _reported(run.run(repair), False)


def _reported(store: Store, hit: bool) -> Store:
    """``store`` with ``cache_hit`` set: True when nothing had to be encoded."""
    store.cache_hit = hit
    return store


@contextlib.contextmanager
def _read_once(corpus: CorpusLike, root: Path, verify: bool) -> Iterator[tuple[str, np.ndarray | None, CorpusLike]]:
    """``(fingerprint, words per sentence or None, corpus to encode from)``.

    A corpus read from files whose fingerprint is memoised (:mod:`probing.store.memo`) is not read at all
    here (unless ``verify``): a store hit then reads no corpus file, and a miss parses it once, to encode.
    Otherwise a corpus that can copy what it hashes (``probing.corpora.Corpus``) is parsed once: the copy, a
    temporary file under ``root``, gives the lengths now and the sentences to encode later (replaying it
    is ~20x faster than parsing CoNLL-U again), and its fingerprint is memoised. Any other corpus is read
    for its fingerprint, then again for its lengths and once more to encode.
    """
    remove_stale_temps(root, _CORPUS_COPY)  # every run, hit or miss: copies of killed runs (live pids are kept)
    state = corpus_state(corpus)
    known = None if state is None or verify else recall(root, state)
    if known is not None:
        yield known[0], known[1], corpus
        return
    fused = getattr(corpus, "fingerprint_and_lengths", None)
    replay = getattr(corpus, "from_records", None)
    if fused is not None and replay is not None:
        try:
            root.mkdir(parents=True, exist_ok=True)
            fd, copy = held_temp(root, ".corpus-", ".jsonl")
        except OSError as e:  # a read-only cache can still serve complete stores: no copy, parse again
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            fused = None
    if fused is None or replay is None:
        yield corpus.fingerprint(), None, corpus
        return
    try:
        with open(fd, "wb", closefd=False) as f:
            fp, lengths = fused(copy_to=f)
        if state is not None:
            remember(root, state, fp, lengths)
        yield fp, lengths, replay(copy, name=corpus.name, split=corpus.split)
    finally:
        copy.unlink(missing_ok=True)
        os.close(fd)


def corpus_fingerprint(corpus: CorpusLike, cache_dir: str | os.PathLike | None = None) -> str:
    """``corpus``'s fingerprint, memoised in the store root like :func:`extract` does (no parse while the
    corpus's files are unchanged)."""
    with _read_once(corpus, store_root(cache_dir), False) as (fp, _, _):
        return fp


_CORPUS_COPY = re.compile(r"\.corpus-(\d+)-\w+\.jsonl")  # held_temp's names for _read_once's copies


def _complete(path: Path, encoder: EncoderLike, key: str, progress: bool) -> Store | None:
    """The store at ``path`` if it is complete and passes :meth:`Store.check_sample` (a cache hit).

    None if it is unfinished or fails the check (then the caller re-hashes everything and recomputes
    what is corrupt); StoreCorruptError if it fails and cannot be rewritten (a read-only cache).
    """
    if not (path / MANIFEST).is_file():
        return None
    store = Store.open(path)
    _check_compatible(store, encoder, key)
    problems = store.check_sample()
    if problems:
        if not os.access(path, os.W_OK):
            raise StoreCorruptError(
                f"{path}: {'; '.join(problems)}. The cache is read-only, so the store cannot be repaired here: "
                f"delete {path}, or point PROBING_CACHE / --cache at a writable folder, and run again"
            )
        print(
            f"{path}: {'; '.join(problems)}; re-hashing every chunk and recomputing the corrupt ones", file=sys.stderr
        )
        return None
    if progress:
        print(f"store hit: {len(store)} tokens, layers {store.layer_names} -> {path}", file=sys.stderr)
    return store


def _check_compatible(store: Store, encoder: EncoderLike, key: str) -> None:
    """StoreCorruptError if the manifest disagrees with its folder's key or with the encoder that key names.

    The key hashes the encoder's fingerprint, which changes whenever its outputs change, so a manifest with
    other layers or another dim than that encoder's was edited or damaged."""
    fix = f"rebuild it with probing extract ... --verify (extract(..., verify=True)), or delete {store.path}"
    if store.key != key:
        raise StoreCorruptError(
            f"{store.path / MANIFEST} is damaged: key {store.key}, but the directory is named {key}; {fix}"
        )
    if store.layer_names != list(encoder.layer_names) or store.dim != int(encoder.dim):
        raise StoreCorruptError(
            f"{store.path / MANIFEST} is damaged: it says layers {store.layer_names} dim {store.dim}, but encoder "
            f"{encoder.name!r}, whose fingerprint names this store, has layers {list(encoder.layer_names)} dim "
            f"{encoder.dim}; {fix}"
        )


def shard_owners(lengths: np.ndarray, count: int, chunk_tokens: int) -> np.ndarray:
    """The shard of each sentence when a store is cut into ``count`` shards of whole chunks.

    Shards are unions of the chunks a single-process extraction plans (:func:`plan_chunks`), chunk c going
    to shard ``first_row_c * count // total_tokens``: so every shard encodes the same length-sorted batches
    as the unsharded extraction, and the merged store holds the same values bit for bit (batch composition
    changes the GEMM shapes of the recurrence, and with them the rounding, which the LSTM carries forward).

    Parameters
    ----------
    lengths : ndarray (n_sentences,) of int
        Words per sentence, in corpus order.
    count : int
        The number of shards.
    chunk_tokens : int
        The extraction's chunk size (see :func:`plan_chunks`).

    Returns
    -------
    ndarray (n_sentences,) of int64
        Non-decreasing shard indices in ``[0, count)``.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    owner = np.zeros(len(lengths), dtype=np.int64)
    total = max(int(lengths.sum()), 1)
    for s0, s1, r0, _ in plan_chunks(lengths, chunk_tokens):
        owner[s0:s1] = r0 * count // total
    return owner


def shard_range(lengths: np.ndarray, index: int, count: int, chunk_tokens: int) -> tuple[int, int]:
    """Sentence range ``[start, stop)`` of shard ``index`` of ``count``: contiguous whole chunks, balanced by tokens.

    The shards partition the sentences in order (:func:`shard_owners`); each holds about
    ``total_tokens / count`` tokens, to within a chunk (:func:`~probing.store.distributed.shard_count` says
    how many shards stay non-empty).

    Parameters
    ----------
    lengths : ndarray (n_sentences,) of int
        Words per sentence (each at least 1, as a :class:`~probing.corpora.base.Sentence` has), in corpus order.
    index, count : the shard's 0-based index and the number of shards.
    chunk_tokens : int
        The extraction's chunk size: shards never split a chunk.

    Returns
    -------
    start, stop : int
        The shard's sentences, ``0 <= start <= stop <= n_sentences`` (``start == stop``: an empty shard).
    """
    owner = shard_owners(lengths, count, chunk_tokens)
    return int(np.searchsorted(owner, index, "left")), int(np.searchsorted(owner, index, "right"))


def plan_chunks(lengths: np.ndarray, chunk_tokens: int) -> list[list[int]]:
    """Greedy chunks ``[s0, s1, r0, r1]``: consecutive sentences until at least ``chunk_tokens`` tokens.

    Parameters
    ----------
    lengths : ndarray (n_sentences,) of int
        Words per sentence, in store order.
    chunk_tokens : int
        The fewest tokens of a chunk (the last one may hold fewer).

    Returns
    -------
    list of [s0, s1, r0, r1] (n_chunks,)
        Sentences ``s0:s1`` and their token rows ``r0:r1`` per chunk; the chunks cover every sentence in order.
    """
    chunks, s0, r0, rows = [], 0, 0, 0
    for j, n in enumerate(lengths.tolist()):
        rows += n
        if rows - r0 >= chunk_tokens:
            chunks.append([s0, j + 1, r0, rows])
            s0, r0 = j + 1, rows
    if s0 < len(lengths):
        chunks.append([s0, len(lengths), r0, rows])
    return chunks


def length_batches(lengths: Sequence[int], batch_tokens: int) -> Iterator[list[int]]:
    """Indices of non-empty sentences, sorted by length, grouped so ``count * longest <= batch_tokens``.

    A sentence longer than ``batch_tokens`` forms a batch of its own.
    """
    batch: list[int] = []
    for j in sorted(range(len(lengths)), key=lengths.__getitem__):
        n = lengths[j]
        if n == 0:
            continue
        if batch and (len(batch) + 1) * n > batch_tokens:
            yield batch
            batch = []
        batch.append(j)
    if batch:
        yield batch


def _as_tensor(a: np.ndarray) -> torch.Tensor:
    """A torch view of ``a`` (read-only arrays too: torch only reads it here)."""
    import torch

    if any(stride < 0 for stride in a.strides):
        a = np.ascontiguousarray(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(a)


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"probing": probing.__version__, "python": platform.python_version()}
    for dist in ("numpy", "torch", "pandas", "pyarrow"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _write_rows(fd: int, offset: int, rows: np.ndarray) -> None:
    """Write a C-contiguous array's bytes at ``offset`` (pwrite moves at most ~2 GB per call)."""
    view = memoryview(cast(Any, rows.reshape(-1))).cast("B")
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done : done + (1 << 30)], offset + done)


_PENDING = 3  # batches of encoder output that may wait for the filler thread (bounds memory)


class _Extraction:
    """One (possibly resumed or repairing) extraction run into ``path``; holds the store lock."""

    def __init__(
        self,
        encoder: EncoderLike,
        corpus: CorpusLike,
        path: Path,
        key: str,
        corpus_fp: str,
        lengths: np.ndarray | None,
        shard: tuple[int, int] | None,
        chunk_tokens: int,
        batch_tokens: int,
        progress: bool,
    ):
        self.encoder, self.corpus, self.path, self.key = encoder, corpus, path, key
        self.corpus_fp, self.corpus_lengths, self.shard = corpus_fp, lengths, shard
        self.chunk_tokens, self.batch_tokens, self.progress = chunk_tokens, batch_tokens, progress
        self.layer_names = [str(n) for n in encoder.layer_names]
        self.dim = int(encoder.dim)
        self.files = [layer_file(i) for i in range(len(self.layer_names))]

    # -- the run ------------------------------------------------------------------------------------------
    def run(self, repair: Store | None) -> Store:
        t_start = time.perf_counter()
        self._scan()
        self._load_journal(repair)
        self.journal["timings"]["runs"] += 1
        self.base_timings = dict(self.journal["timings"])
        check_file_size_limit(
            self.path / self.files[0], layer_file_size(self.n_tokens, self.dim), "the activations (per layer)"
        )
        self._prepare_layer_files()
        self._drop_unverified()
        chunks, done = self.journal["chunks"], self.journal["done"]
        todo_rows = sum(r1 - r0 for c, (_, _, r0, r1) in enumerate(chunks) if str(c) not in done)
        check_free_space(
            self.path,
            todo_rows * len(self.files) * self.dim * DTYPE.itemsize,
            f"the activations of {self.corpus.name}/{self.corpus.split}",
        )
        resumed = len(done)
        self._encode_all()
        return self._finalize(t_start, time.perf_counter(), resumed)

    def _scan(self) -> None:
        """Count words per sentence (one streaming pass, unless the corpus counted them with its
        fingerprint) and pick this shard's sentence range."""
        t0 = time.perf_counter()
        lengths = self.corpus_lengths
        if lengths is None:
            lengths = np.fromiter((len(s.words) for s in self._items()), dtype=np.int64)
        self.corpus_sentences = len(lengths)
        self.sentences = (
            (0, len(lengths)) if self.shard is None else shard_range(lengths, *self.shard, self.chunk_tokens)
        )
        self.shard_first_row = int(lengths[: self.sentences[0]].sum())
        self.lengths = lengths[self.sentences[0] : self.sentences[1]].copy()
        self.n_tokens = int(self.lengths.sum())
        self.scan_s = time.perf_counter() - t0
        if self.n_tokens == 0:
            where = f"shard {self.shard[0]} of {self.shard[1]} of " if self.shard else ""
            raise StoreError(
                f"{where}corpus {self.corpus.name!r} split {self.corpus.split!r} has no tokens to encode"
                + (" (use fewer shards)" if self.shard else "")
            )

    def _items(self) -> Iterator[Any]:
        for g, s in enumerate(self.corpus):
            if not hasattr(s, "words"):
                raise StoreError(
                    f"corpus {self.corpus.name!r} item {g} is a {type(s).__name__}, expected a Sentence with .words"
                )
            yield s

    def _stream(self) -> Iterator[Any]:
        """This run's sentences in order, checked against the scan (the corpus must not change meanwhile)."""
        g0, g1 = self.sentences
        seen = 0
        for g, s in enumerate(self._items()):
            if g >= g1:
                return
            seen = g + 1
            if g < g0:
                continue
            if len(s.words) != self.lengths[g - g0]:
                raise StoreError(
                    f"corpus {self.corpus.name!r} changed during extraction: sentence {g} ({s.id!r}) has "
                    f"{len(s.words)} words, the first pass saw {self.lengths[g - g0]}"
                )
            yield s
        if seen < g1:
            raise StoreError(f"corpus {self.corpus.name!r} changed during extraction: it ended before sentence {g1}")

    def _journal_header(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "key": self.key,
            "n_sentences": len(self.lengths),
            "n_tokens": self.n_tokens,
            "layer_names": self.layer_names,
            "dim": self.dim,
        }

    def _load_journal(self, repair: Store | None) -> None:
        """Start from the journal of an unfinished run, the manifest of a store being repaired, or afresh."""
        header = self._journal_header()
        timings = {"encode_s": 0.0, "write_s": 0.0, "runs": 0}
        if repair is not None:
            m = repair.manifest
            if m["n_tokens"] != self.n_tokens or m["n_sentences"] != len(self.lengths):
                raise StoreError(
                    f"{self.path}: manifest has {m['n_tokens']} tokens in {m['n_sentences']} sentences, the corpus "
                    f"{self.n_tokens} in {len(self.lengths)} with the same fingerprint: fingerprint() is wrong"
                )
            chunks = [c["sentences"] + c["rows"] for c in m["chunks"]]
            done = {str(c["index"]): c["sha256"] for c in m["chunks"]}
            timings.update({k: m.get("timings", {}).get(k, 0) for k in ("encode_s", "write_s", "runs")})
            self.journal = {
                **header,
                "chunk_tokens": m.get("chunk_tokens"),
                "chunks": chunks,
                "done": done,
                "parts": {},
                "timings": timings,
            }
            self._write_journal()
            (self.path / MANIFEST).unlink()
            return
        journal_path = self.path / JOURNAL
        if journal_path.is_file():
            try:
                journal = read_json(journal_path)
            except StoreError:
                journal = {}
            shaped = all(isinstance(journal.get(k), dict) for k in ("done", "parts", "timings"))
            if shaped and all(journal.get(k) == v for k, v in header.items()) and self._plan_ok(journal.get("chunks")):
                self.journal = journal
                return
            if self.progress:
                print(f"{journal_path}: journal does not match this corpus/encoder; starting afresh", file=sys.stderr)
        self.journal = {
            **header,
            "chunk_tokens": self.chunk_tokens,
            "chunks": plan_chunks(self.lengths, self.chunk_tokens),
            "done": {},
            "parts": {},
            "timings": timings,
        }
        shutil.rmtree(self.path / PARTS, ignore_errors=True)

    def _plan_ok(self, chunks: Any) -> bool:
        if not isinstance(chunks, list) or not chunks:
            return False
        offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        s = 0
        for c in chunks:
            if not (isinstance(c, list) and len(c) == 4 and c[0] == s and c[0] < c[1] <= len(self.lengths)):
                return False
            if c[2] != offsets[c[0]] or c[3] != offsets[c[1]]:
                return False
            s = c[1]
        return s == len(self.lengths)

    def _write_journal(self) -> None:
        with atomic_open(self.path / JOURNAL, "w", encoding="utf-8") as f:
            json.dump(self.journal, f)

    def _prepare_layer_files(self) -> None:
        """Create each layer file with its header, or fix the size of an existing one (then verify)."""
        self.data_offsets = []
        expected = layer_file_size(self.n_tokens, self.dim)
        for name in self.files:
            p = self.path / name
            try:
                offset = layer_data_offset(p, self.n_tokens, self.dim) if p.is_file() and not p.is_symlink() else None
            except StoreError:
                offset = None
            with writing(p):
                if offset is None:
                    create_layer_file(p, self.n_tokens, self.dim)
                    offset = layer_data_offset(p, self.n_tokens, self.dim)
                elif p.stat().st_size != expected:
                    os.truncate(p, expected)
            self.data_offsets.append(offset)

    def _drop_unverified(self) -> None:
        """Forget committed chunks or token parts whose bytes no longer match their sha256."""
        row_bytes = self.dim * DTYPE.itemsize
        chunks, done = self.journal["chunks"], self.journal["done"]
        fds = [open_nofollow(self.path / f, os.O_RDONLY) for f in self.files]
        try:
            for c in list(done):
                r0, r1 = chunks[int(c)][2:]
                for fd, name, off in zip(fds, self.files, self.data_offsets):
                    if hash_region(fd, off + r0 * row_bytes, (r1 - r0) * row_bytes) != done[c].get(name):
                        if self.progress:
                            print(
                                f"{self.path / name}: rows {r0}:{r1} (chunk {c}) fail their sha256; recomputing",
                                file=sys.stderr,
                            )
                        del done[c]
                        break
        finally:
            for fd in fds:
                os.close(fd)
        parts = self.journal["parts"]
        for c in list(parts):
            p = self.path / token_part_file(int(c))
            if not p.is_file() or sha256_file(p) != parts[c]:
                del parts[c]

    def _encode_all(self) -> None:
        """Encode the chunks still to do; two threads cast and commit behind the encoder.

        The main thread only streams the corpus and runs the encoder. Each batch's outputs go to the
        filler thread, which range-checks them and casts them to fp16 into the chunk's buffer (two
        buffers alternate: one fills while the other is committed). At a chunk's end the committer thread
        pwrites its rows, hashes and fsyncs them, writes its token part and records the chunk in the
        journal; it has its own thread so that waiting for the disk never holds up the filler. At most
        ``_PENDING`` batches of encoder output wait for the filler.
        """
        from tqdm.auto import tqdm

        chunks, done, parts = self.journal["chunks"], self.journal["done"], self.journal["parts"]
        done_tokens = sum(chunks[int(c)][3] - chunks[int(c)][2] for c in done)
        todo = [c for c in range(len(chunks)) if str(c) not in done]
        rank = {c: i for i, c in enumerate(todo)}
        rows = max((chunks[c][3] - chunks[c][2] for c in todo), default=0)
        # np.empty reserves address space only: a buffer's pages are touched when first filled, then reused
        buffers = [np.empty((len(self.files), rows, self.dim), dtype=DTYPE) for _ in range(min(2, len(todo)))]
        self.run_encode_s = self.run_fill_s = self.run_commit_s = 0.0
        self.in_flight: deque[Future] = deque()
        self.run_tokens = 0
        t0 = time.perf_counter()
        bar = tqdm(
            total=self.n_tokens,
            initial=done_tokens,
            unit="tok",
            unit_scale=True,
            dynamic_ncols=True,
            desc=f"{self.encoder.name} on {self.corpus.name}/{self.corpus.split}",
            disable=not self.progress,
        )
        stream = self._stream()
        fds = [open_nofollow(self.path / f, os.O_RDWR) for f in self.files]
        try:
            with (
                ThreadPoolExecutor(1, thread_name_prefix="store-filler") as filler,
                ThreadPoolExecutor(1, thread_name_prefix="store-committer") as committer,
            ):
                commits: list[Future] = []
                free: list[Future | None] = [None, None]  # commit of the chunk last put in buffers[k]
                for c, (s0, s1, r0, r1) in enumerate(chunks):
                    need_arrays, need_tokens = str(c) not in done, str(c) not in parts
                    if not need_arrays and not need_tokens:
                        for _ in range(s1 - s0):
                            next(stream)
                        continue
                    sentences = [next(stream) for _ in range(s1 - s0)]
                    buffer, fills = None, []
                    if need_arrays:
                        buffer = buffers[rank[c] % 2][:, : r1 - r0]
                        fills = self._encode_chunk(filler, free[rank[c] % 2], buffer, sentences, bar)
                        self.run_tokens += r1 - r0
                    commits.append(
                        committer.submit(self._commit, c, fds, buffer, fills, sentences if need_tokens else None)
                    )
                    if need_arrays:
                        free[rank[c] % 2] = commits[-1]
                for f in commits:
                    f.result()
        finally:
            for fd in fds:
                os.close(fd)
            bar.close()
        self.loop_s = time.perf_counter() - t0

    @property
    def run_write_s(self) -> float:
        """This run's seconds of store work off the encoder's thread: fp16 casts plus chunk commits."""
        return self.run_fill_s + self.run_commit_s

    def _encode_chunk(
        self, filler: ThreadPoolExecutor, free: Future | None, buffer: np.ndarray, sentences: list, bar: Any
    ) -> list[Future]:
        """Encode the chunk's sentences in length-sorted batches; the filler fills ``buffer`` from them
        once ``free`` (the commit of the buffer's previous chunk) is done."""
        lengths = [len(s.words) for s in sentences]
        starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        targets = [_as_tensor(layer) for layer in buffer]
        want_layers = len(self.files)
        fills: list[Future] = []
        for batch in length_batches(lengths, self.batch_tokens):
            t0 = time.perf_counter()
            outs = self.encoder.encode([list(sentences[j].words) for j in batch])
            self.run_encode_s += time.perf_counter() - t0
            if len(outs) != len(batch):
                raise StoreError(
                    f"encoder {self.encoder.name!r} returned {len(outs)} arrays for {len(batch)} sentences"
                )
            outs = [np.asarray(out) for out in outs]
            for j, out in zip(batch, outs):
                want = (want_layers, lengths[j], self.dim)
                if out.shape != want or not np.issubdtype(out.dtype, np.floating):
                    raise StoreError(
                        f"encoder {self.encoder.name!r} returned {out.dtype} {out.shape} for sentence "
                        f"{sentences[j].id!r}, expected float32 {want} (layers, words, dim)"
                    )
            fills.append(
                filler.submit(
                    self._fill,
                    None if fills else free,
                    targets,
                    [(starts[j], starts[j + 1], sentences[j].id) for j in batch],
                    outs,
                )
            )
            self.in_flight.append(fills[-1])
            if len(self.in_flight) > _PENDING:  # across chunks: a filler held up by a commit stops the encoder
                self.in_flight.popleft().result()
            bar.update(sum(lengths[j] for j in batch))
        return fills

    def _fill(
        self, free: Future | None, targets: list[torch.Tensor], rows: list[tuple[int, int, str]], outs: list[np.ndarray]
    ) -> None:
        """Check one batch's outputs fit fp16 and cast them into their rows of the chunk buffer (filler thread)."""
        if free is not None:
            free.result()
        t0 = time.perf_counter()
        for (a, b, sentence_id), out in zip(rows, outs):
            lo, hi = out.min(), out.max()  # NaN propagates into both and fails the test below
            if not (-FP16_MAX <= lo and hi <= FP16_MAX):
                what = "non-finite values" if not np.isfinite([lo, hi]).all() else f"values in [{lo:g}, {hi:g}]"
                raise StoreError(
                    f"encoder {self.encoder.name!r} returned {what} for sentence {sentence_id!r}; "
                    f"the store keeps fp16 (|x| <= {FP16_MAX:g})"
                )
            src = _as_tensor(out)
            for layer, target in enumerate(targets):  # torch casts to fp16 ~15x faster than numpy
                target[a:b].copy_(src[layer])
        self.run_fill_s += time.perf_counter() - t0

    def _commit(
        self, c: int, fds: list[int], buffer: np.ndarray | None, fills: list[Future], sentences: list | None
    ) -> None:
        """Write chunk ``c``'s rows and/or its token part, then record it in the journal atomically (committer thread).

        Rows are fsynced before the journal names them, so a committed chunk survives a crash of the machine,
        not just of the process; resuming re-hashes committed chunks anyway.
        """
        for f in fills:  # re-raises a failed range check
            f.result()
        t0 = time.perf_counter()
        if buffer is not None:
            r0 = self.journal["chunks"][c][2]
            row_bytes = self.dim * DTYPE.itemsize
            hashes = {}
            for name, fd, offset, rows in zip(self.files, fds, self.data_offsets, buffer):
                with writing(self.path / name):
                    _write_rows(fd, offset + r0 * row_bytes, rows)
                    os.fsync(fd)
                hashes[name] = hashlib.sha256(memoryview(rows.reshape(-1)).cast("B")).hexdigest()
        if sentences is not None:
            part = self.path / token_part_file(c)
            part.parent.mkdir(exist_ok=True)
            with atomic_path(part) as tmp:
                write_part(token_table(sentences, self.encoder), tmp)
                part_hash = sha256_file(tmp)
        if buffer is not None:
            self.journal["done"][str(c)] = hashes
        if sentences is not None:
            self.journal["parts"][str(c)] = part_hash
        self.run_commit_s += time.perf_counter() - t0
        self.journal["timings"].update(
            encode_s=self.base_timings["encode_s"] + self.run_encode_s,
            write_s=self.base_timings["write_s"] + self.run_write_s,
        )
        self._write_journal()

    def _finalize(self, t_start: float, t_loop_end: float, resumed: int) -> Store:
        """Write offsets and the token table, then the manifest (last: it marks the store complete)."""
        offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        with atomic_open(self.path / OFFSETS, "wb") as f:
            np.save(f, offsets, allow_pickle=False)
        n_chunks = len(self.journal["chunks"])
        concat_parts([self.path / token_part_file(c) for c in range(n_chunks)], self.path / TOKENS)
        t_end = time.perf_counter()
        timings = self.base_timings
        encode_s = timings["encode_s"] + self.run_encode_s
        wall = t_end - t_start
        manifest: Manifest = {
            "format_version": FORMAT_VERSION,
            "key": self.key,
            "dtype": DTYPE.name,
            "encoder": {
                "name": self.encoder.name,
                "fingerprint": self.encoder.fingerprint,
                "layer_names": self.layer_names,
                "dim": self.dim,
            },
            "corpus": {
                "name": self.corpus.name,
                "split": self.corpus.split,
                "fingerprint": self.corpus_fp,
                "n_sentences": self.corpus_sentences,
            },
            "shard": None
            if self.shard is None
            else {
                "index": self.shard[0],
                "count": self.shard[1],
                "sentences": list(self.sentences),
                "first_row": self.shard_first_row,
            },
            "n_sentences": len(self.lengths),
            "n_tokens": self.n_tokens,
            "layer_names": self.layer_names,
            "dim": self.dim,
            "layers": [{"name": n, "file": f} for n, f in zip(self.layer_names, self.files)],
            "tokens": {"file": TOKENS, "sha256": sha256_file(self.path / TOKENS)},
            "offsets": {"file": OFFSETS, "sha256": sha256_file(self.path / OFFSETS)},
            "chunk_tokens": self.journal.get("chunk_tokens"),
            "chunks": [
                {"index": c, "sentences": ch[:2], "rows": ch[2:], "sha256": self.journal["done"][str(c)]}
                for c, ch in enumerate(self.journal["chunks"])
            ],
            "versions": _versions(),
            "device": getattr(self.encoder, "device_used", None),
            "timings": {
                "scan_s": round(self.scan_s, 3),
                "encode_s": round(encode_s, 3),
                "write_s": round(timings["write_s"] + self.run_write_s, 3),
                "finalize_s": round(t_end - t_loop_end, 3),
                "run_s": round(wall, 3),
                "run_tokens": self.run_tokens,
                "tokens_per_s": round(self.run_tokens / wall, 1) if wall > 0 else None,
                "encoder_tokens_per_s": (
                    round(self.run_tokens / self.run_encode_s, 1) if self.run_encode_s > 0 else None
                ),
                "resumed_chunks": resumed,
                "runs": timings["runs"],
            },
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        with atomic_open(self.path / MANIFEST, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
        shutil.rmtree(self.path / PARTS, ignore_errors=True)
        (self.path / JOURNAL).unlink(missing_ok=True)
        if self.progress:
            rate = self.run_tokens / wall if wall > 0 else float("nan")
            print(
                f"store: {self.n_tokens} tokens ({self.run_tokens} encoded now) in {wall:.1f} s, "
                f"{rate:,.0f} tokens/s -> {self.path}",
                file=sys.stderr,
            )
        return Store.open(self.path)
