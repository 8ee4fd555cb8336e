"""Memoised corpus fingerprints, so that a store hit reads no corpus file.

A store's key needs its corpus's fingerprint, a sha256 over every parsed sentence: parsing UD EWT train
for it takes seconds. A corpus read from files (one with an :class:`~probing.corpora.base.Origin`) has its
fingerprint and sentence lengths memoised in ``<store root>/corpus-memo/<digest>.json``, where the digest
names the origin (the files' resolved paths, the reader and its code digest, the reader's options). The
memo is used only while every file has the size, mtime_ns, ctime_ns and inode it had when it was parsed;
any change of those (an edit, ``touch``, a replaced file, a new reader version) re-parses and rewrites it.
A file modified within ``RACY_NS`` of being parsed is not memoised (a later write could keep the same mtime
on a coarse clock), so a file written just before its first extraction is memoised by a later one.
``verify=True`` in :func:`probing.store.extract` ignores the memo, re-hashes and replaces it.
"""

from __future__ import annotations

import errno
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probing._io import atomic_open
from probing.identity import canonical, digest

MEMO_DIR = "corpus-memo"
MEMO_VERSION = 1
RACY_NS = 2_000_000_000  # FAT's mtime step, the coarsest in use


@dataclass(frozen=True)
class CorpusState:
    """A corpus origin's identity (``ident``: what names the memo file) and its files' current stat."""

    ident: dict[str, Any]
    files: list[list[Any]]
    stat_ns: int

    @property
    def digest(self) -> str:
        return digest(self.ident)[:32]


def _stat(path: Path) -> list[Any]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def corpus_state(corpus: Any) -> CorpusState | None:
    """The state of ``corpus``'s files now; None if it has no origin or a file cannot be stat'ed (then
    the corpus is simply parsed, and the parse reports what is wrong)."""
    from probing.corpora.base import FINGERPRINT_VERSION

    origin = getattr(corpus, "origin", None)
    if origin is None:
        return None
    stat_ns = time.time_ns()
    try:
        paths = [Path(f).resolve(strict=True) for f in origin.files]
        files = [[str(p), *_stat(p)] for p in paths]
    except OSError:
        return None
    ident = {
        "memo_version": MEMO_VERSION,
        "fingerprint_version": FINGERPRINT_VERSION,
        "reader": origin.reader,
        "options": [list(o) for o in origin.options],
        "paths": [f[0] for f in files],
    }
    return CorpusState(ident, files, stat_ns)


def memo_file(root: Path, state: CorpusState) -> Path:
    return root / MEMO_DIR / f"{state.digest}.json"


def recall(root: Path, state: CorpusState) -> tuple[str, np.ndarray] | None:
    """``(fingerprint, words per sentence)`` memoised for ``state``'s files as they are now, else None.

    Parameters
    ----------
    root, state : the store root (the memo is under ``root / "corpus-memo"``) and the files' state now.

    Returns
    -------
    (fingerprint, lengths) or None
        ``fingerprint``: the corpus fingerprint (str, hex sha256); ``lengths``: ndarray (n_sentences,) of int64,
        words per sentence. None when there is no memo, it is damaged, or a file's size, mtime, ctime or inode
        changed.
    """
    try:
        with open(memo_file(root, state), "rb") as f:
            memo = json.loads(f.read())
        body = {k: v for k, v in memo.items() if k != "sha256"}
        if memo.get("sha256") != digest(body):
            return None
        if body["ident"] != state.ident or body["files"] != state.files:
            return None
        lengths = np.asarray(body["lengths"], dtype=np.int64)
        if lengths.ndim != 1 or len(lengths) != body["n_sentences"] or not isinstance(body["fingerprint"], str):
            return None
        return body["fingerprint"], lengths
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(root: Path, state: CorpusState, fingerprint: str, lengths: np.ndarray) -> None:
    """Memoise what parsing ``state``'s files gave, unless a file changed since ``state`` was taken or was
    modified too recently to be trusted; a read-only cache is left as it is.

    Parameters
    ----------
    root, state : the store root and the state of the corpus files taken before they were parsed.
    fingerprint : str
        The corpus fingerprint (hex sha256) the parse gave.
    lengths : array-like (n_sentences,) of int
        Words per sentence, stored as a JSON list.
    """
    for entry in state.files:
        if entry[2] >= state.stat_ns - RACY_NS:
            return
    try:
        if _restat(state) != state.files:
            return
    except OSError:
        return
    path = memo_file(root, state)
    previous = recall(root, state)
    if previous is not None and previous[0] != fingerprint:
        print(
            f"{path}: the memoised fingerprint of {', '.join(f[0] for f in state.files)} was stale (the content "
            "changed but not its size, mtime, ctime or inode); replaced by the re-hashed one",
            file=sys.stderr,
        )
    body = {
        "ident": state.ident,
        "files": state.files,
        "fingerprint": fingerprint,
        "n_sentences": int(len(lengths)),
        "lengths": [int(n) for n in lengths],
    }
    memo = {**body, "sha256": digest(body)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path, "wb") as f:
            f.write(canonical(memo))
    except PermissionError:
        return
    except OSError as e:
        if e.errno != errno.EROFS:
            raise


def _restat(state: CorpusState) -> list[list[Any]]:
    """``state``'s files stat'ed again now."""
    return [[p, *_stat(Path(p))] for p in state.ident["paths"]]
