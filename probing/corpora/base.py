"""Annotated sentences and streamable corpora: the input every later stage reads."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from probing.errors import ProbingError

ANNOTATIONS = ("upos", "xpos", "lemmas", "senses", "instance_ids")
TOKEN_COLUMNS = ("sentence_id", "doc_id", "position", "word", "upos", "xpos", "lemma", "sense", "instance_id")
FINGERPRINT_VERSION = "probing-corpus/1"


class CorpusFormatError(ProbingError, ValueError):
    """A corpus file breaks its format; the message names the file, the line or sentence, and the rule."""


@dataclass
class Sentence:
    """One tokenized sentence with optional per-token annotations.

    Every annotation that is not None has one item per word. ``senses`` holds WordNet 3.0 sense keys
    (``()`` for tokens that are not annotated instances); ``instance_ids`` is None for such tokens.
    Missing single annotations inside a list are ``""``.
    """

    id: str
    doc_id: str
    words: list[str]
    upos: list[str] | None = None
    xpos: list[str] | None = None
    lemmas: list[str] | None = None
    senses: list[tuple[str, ...]] | None = None
    instance_ids: list[str | None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"sentence id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.doc_id, str):
            raise ValueError(f"sentence {self.id!r}: doc_id must be a string, got {self.doc_id!r}")
        if not self.words:
            raise ValueError(f"sentence {self.id!r} has no words")
        for i, word in enumerate(self.words):
            if not isinstance(word, str) or not word.strip():
                raise ValueError(f"sentence {self.id!r}: token {i} is empty ({word!r}); every token needs text")
        n = len(self.words)
        for field in ANNOTATIONS:
            values = getattr(self, field)
            if values is not None and len(values) != n:
                raise ValueError(
                    f"sentence {self.id!r}: {field} has {len(values)} items but words has {n}; "
                    "every annotation needs one item per word"
                )


def make_sentence(where: str, **fields) -> Sentence:
    """Build a Sentence, turning a validation error into a CorpusFormatError that starts with ``where``."""
    try:
        return Sentence(**fields)
    except ValueError as e:
        raise CorpusFormatError(f"{where}: {e}") from None


def _fingerprint_record(s: Sentence) -> bytes:
    senses = None if s.senses is None else [list(t) for t in s.senses]
    record = [s.id, s.doc_id, s.words, s.upos, s.xpos, s.lemmas, senses, s.instance_ids]
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


class Corpus:
    """A named split of sentences that can be streamed any number of times.

    ``sentences`` is a zero-argument callable returning a fresh iterator, so nothing is held in memory
    between passes. ``source`` says where the sentences come from (a path or a description) and
    ``license`` is a short licence name.
    """

    def __init__(
        self,
        sentences: Callable[[], Iterable[Sentence]],
        *,
        name: str,
        split: str,
        source: str = "",
        license: str = "",
    ) -> None:
        if not callable(sentences):
            raise TypeError("Corpus needs a zero-argument callable that returns an iterator of Sentences")
        self._sentences = sentences
        self.name = name
        self.split = split
        self.source = source
        self.license = license

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sentence], *, name: str, split: str = "all", **kwargs) -> Corpus:
        """A corpus over sentences already in memory (small inputs, tests)."""
        items = list(sentences)
        return cls(lambda: iter(items), name=name, split=split, **kwargs)

    def __iter__(self) -> Iterator[Sentence]:
        return iter(self._sentences())

    def __repr__(self) -> str:
        return f"Corpus(name={self.name!r}, split={self.split!r}, source={self.source!r})"

    def head(self, n: int) -> Corpus:
        """The first ``n`` sentences, with the same name and split."""
        if n < 0:
            raise ValueError(f"head(n) needs n >= 0, got {n}")

        def first() -> Iterator[Sentence]:
            it = iter(self)
            try:
                yield from itertools.islice(it, n)
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()

        return Corpus(
            first, name=self.name, split=self.split, source=f"{self.source} [first {n} sentences]", license=self.license
        )

    def fingerprint(self) -> str:
        """Hex sha256 of the content, computed while streaming; it changes iff an id, word or annotation does.

        Encoding (version ``probing-corpus/1``): the bytes ``b"probing-corpus/1\\n"``, then per sentence one
        line of compact UTF-8 JSON ``[id, doc_id, words, upos, xpos, lemmas, senses, instance_ids]``
        (absent annotations are ``null``, sense tuples are lists) followed by ``\\n``. Name, split, source
        and licence are not part of it: equal content gives an equal fingerprint.
        """
        return self.fingerprint_and_lengths()[0]

    def fingerprint_and_lengths(self, copy_to: IO[bytes] | None = None) -> tuple[str, np.ndarray]:
        """:meth:`fingerprint` and every sentence's word count (int64), from one pass over the corpus.

        With ``copy_to``, the hashed bytes are also written there: a file whose sha256 is the fingerprint
        and that :meth:`from_records` streams back about 20x faster than parsing CoNLL-U again. The
        activation store asks for all three, so a big corpus is parsed once per extraction.
        """
        head = FINGERPRINT_VERSION.encode("ascii") + b"\n"
        h = hashlib.sha256(head)
        if copy_to is not None:
            copy_to.write(head)
        lengths = []
        for s in self:
            record = _fingerprint_record(s)
            h.update(record)
            if copy_to is not None:
                copy_to.write(record)
            lengths.append(len(s.words))
        return h.hexdigest(), np.array(lengths, dtype=np.int64)

    @classmethod
    def from_records(cls, path: str | Path, *, name: str, split: str, **kwargs) -> Corpus:
        """Stream the file that ``fingerprint_and_lengths(copy_to=...)`` wrote, as a Corpus."""
        path = Path(path)

        def records() -> Iterator[Sentence]:
            with open(path, "rb") as f:
                if f.readline().rstrip(b"\n") != FINGERPRINT_VERSION.encode("ascii"):
                    raise CorpusFormatError(f"{path}:1: expected the header {FINGERPRINT_VERSION!r}")
                for lineno, line in enumerate(f, start=2):
                    try:
                        id_, doc_id, words, upos, xpos, lemmas, senses, instance_ids = json.loads(line)
                    except (ValueError, TypeError) as e:
                        raise CorpusFormatError(f"{path}:{lineno}: expected one sentence record: {e}") from None
                    yield make_sentence(
                        f"{path}:{lineno}",
                        id=id_,
                        doc_id=doc_id,
                        words=words,
                        upos=upos,
                        xpos=xpos,
                        lemmas=lemmas,
                        instance_ids=instance_ids,
                        senses=None if senses is None else [tuple(k) for k in senses],
                    )

        return cls(records, name=name, split=split, source=str(path), **kwargs)

    def token_table(self) -> pd.DataFrame:
        """One row per token with DESIGN.md's token-table columns (all but ``oov``); missing values are ``""``."""
        cols: dict[str, list] = {c: [] for c in TOKEN_COLUMNS}
        for s in self:
            n = len(s.words)
            cols["sentence_id"].extend([s.id] * n)
            cols["doc_id"].extend([s.doc_id] * n)
            cols["position"].extend(range(n))
            cols["word"].extend(s.words)
            for col, values in (("upos", s.upos), ("xpos", s.xpos), ("lemma", s.lemmas)):
                cols[col].extend(values if values is not None else [""] * n)
            cols["sense"].extend([" ".join(k) for k in s.senses] if s.senses is not None else [""] * n)
            ids = s.instance_ids if s.instance_ids is not None else [None] * n
            cols["instance_id"].extend(i if i is not None else "" for i in ids)
        table = pd.DataFrame(cols, columns=list(TOKEN_COLUMNS))
        table["position"] = table["position"].astype("int64")
        return table
