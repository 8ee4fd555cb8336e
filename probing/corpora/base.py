"""Annotated sentences and streamable corpora: the input every later stage reads."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, overload

import numpy as np

from probing.errors import InputError, ProbingError, check_count

if TYPE_CHECKING:
    import pandas as pd

ANNOTATIONS = ("upos", "xpos", "lemmas", "senses", "instance_ids", "heads", "deprels", "feats")
TREE_FIELDS = ("heads", "deprels", "feats")
TOKEN_COLUMNS = (
    "sentence_id",
    "doc_id",
    "position",
    "word",
    "upos",
    "xpos",
    "lemma",
    "sense",
    "instance_id",
    "head",
    "deprel",
    "feats",
)
FINGERPRINT_VERSION = "probing-corpus/1"


class CorpusFormatError(ProbingError, ValueError):
    """A corpus file breaks its format; the message names the file, the line or sentence, and the rule."""


@dataclass
class Sentence:
    """One tokenized sentence with optional per-token annotations.

    Every annotation that is not None has one item per word. ``senses`` holds WordNet 3.0 sense keys
    (``()`` for tokens that are not annotated instances); ``instance_ids`` is None for such tokens.
    ``heads`` is the dependency tree: the head of word i as a 1-based position over ``words``, 0 for
    the root; when given it must form one tree (exactly one root, every word reaches it). ``deprels``
    and ``feats`` are the raw DEPREL and FEATS strings. Missing single annotations inside a list are ``""``.
    """

    id: str
    doc_id: str
    words: list[str]
    upos: list[str] | None = None
    xpos: list[str] | None = None
    lemmas: list[str] | None = None
    senses: list[tuple[str, ...]] | None = None
    instance_ids: list[str | None] | None = None
    heads: list[int] | None = None
    deprels: list[str] | None = None
    feats: list[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InputError(f"sentence id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.doc_id, str):
            raise InputError(f"sentence {self.id!r}: doc_id must be a string, got {self.doc_id!r}")
        if not self.words:
            raise InputError(f"sentence {self.id!r} has no words")
        for i, word in enumerate(self.words):
            if not isinstance(word, str) or not word.strip():
                raise InputError(f"sentence {self.id!r}: token {i} is empty ({word!r}); every token needs text")
        n = len(self.words)
        for field in ANNOTATIONS:
            values = getattr(self, field)
            if values is not None and len(values) != n:
                raise InputError(
                    f"sentence {self.id!r}: {field} has {len(values)} items but words has {n}; "
                    "every annotation needs one item per word"
                )
        if self.heads is not None:
            check_tree(self.heads, f"sentence {self.id!r}")


def check_tree(heads, where: str) -> None:
    """ValueError starting with ``where`` unless ``heads`` (1-based, 0 = root) is one dependency tree."""
    n = len(heads)
    for i, h in enumerate(heads):
        if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or not 0 <= h <= n:
            raise InputError(f"{where}: head of word {i + 1} is {h!r}, expected an integer in 0..{n} (0 = root)")
        if h == i + 1:
            raise InputError(f"{where}: word {i + 1} is its own head; heads must form a tree")
    roots = [i + 1 for i, h in enumerate(heads) if h == 0]
    if len(roots) != 1:
        raise InputError(f"{where}: {len(roots)} roots (words {roots}), a dependency tree has exactly one")
    reaches_root = [False] * (n + 1)
    reaches_root[0] = True
    for start in range(1, n + 1):
        path: list[int] = []
        node = start
        while not reaches_root[node]:
            if node in path:
                cycle = path[path.index(node) :]
                raise InputError(f"{where}: heads form a cycle through words {cycle}; heads must form a tree")
            path.append(node)
            node = int(heads[node - 1])
        for visited in path:
            reaches_root[visited] = True


def make_sentence(where: str, **fields) -> Sentence:
    """Build a Sentence, turning a validation error into a CorpusFormatError that starts with ``where``."""
    try:
        return Sentence(**fields)
    except ValueError as e:
        raise CorpusFormatError(f"{where}: {e}") from None


@dataclass(frozen=True)
class Origin:
    """Where a corpus's sentences come from: its input ``files`` (as given), the ``reader`` (its name and a
    digest of its code) and the reader's ``options`` (e.g. which documents, the first n sentences).

    Equal origins over unchanged files give equal sentences, which lets the store memoise a corpus's
    fingerprint and sentence lengths (see :mod:`probing.store.memo`) instead of parsing it on every hit.
    """

    files: tuple[Path, ...]
    reader: str
    options: tuple[tuple[str, str], ...] = ()

    def with_option(self, name: str, value: object) -> Origin:
        """This origin narrowed by one more option (applied after the earlier ones)."""
        return replace(self, options=(*self.options, (name, str(value))))


def reader_version(module_file: str, *dists: str) -> str:
    """A reader's version: a digest of its module, of this base module and ``_files.py`` (the text rules), and
    the versions of the libraries ``dists`` it parses with; it changes whenever the reader's output can."""
    import importlib.metadata

    from probing.identity import digest, file_digest

    here = Path(__file__).parent
    names = sorted({Path(module_file).name, "base.py", "_files.py"})
    code = digest([[name, file_digest(here / name)] for name in names])
    libs = []
    for dist in dists:
        try:
            libs.append(f"{dist}={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            libs.append(f"{dist}=?")
    return f"{Path(module_file).stem}:{code[:16]}:{','.join(libs)}"


def _fingerprint_record(s: Sentence) -> bytes:
    senses = None if s.senses is None else [list(t) for t in s.senses]
    record: list = [s.id, s.doc_id, s.words, s.upos, s.xpos, s.lemmas, senses, s.instance_ids]
    if s.heads is not None or s.deprels is not None or s.feats is not None:
        record += [None if s.heads is None else [int(h) for h in s.heads], s.deprels, s.feats]
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


class Corpus:
    """A named split of sentences that can be streamed any number of times.

    ``sentences`` is a zero-argument callable returning a fresh iterator, so nothing is held in memory
    between passes. ``source`` says where the sentences come from (a path or a description) and
    ``license`` is a short licence name. ``origin`` (set by the file readers, None for sentences built in
    memory) names the files and reader the sentences come from, so the store can memoise the fingerprint.
    """

    def __init__(
        self,
        sentences: Callable[[], Iterable[Sentence]],
        *,
        name: str,
        split: str,
        source: str = "",
        license: str = "",
        origin: Origin | None = None,
    ) -> None:
        if not callable(sentences):
            raise TypeError("Corpus needs a zero-argument callable that returns an iterator of Sentences")
        self._sentences = sentences
        self.name = name
        self.split = split
        self.source = source
        self.license = license
        self.origin = origin

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sentence], *, name: str, split: str = "all", **kwargs) -> Corpus:
        """A corpus over sentences already in memory (small inputs, tests)."""
        items = list(sentences)
        return cls(lambda: iter(items), name=name, split=split, **kwargs)

    def __iter__(self) -> Iterator[Sentence]:
        return iter(self._sentences())

    def __repr__(self) -> str:
        return f"Corpus(name={self.name!r}, split={self.split!r}, source={self.source!r})"

    def __len__(self) -> int:
        """The number of sentences, counted by streaming the corpus once (nothing is kept in memory)."""
        return sum(1 for _ in self)

    @overload
    def __getitem__(self, index: int) -> Sentence: ...

    @overload
    def __getitem__(self, index: slice) -> Corpus: ...

    def __getitem__(self, index: int | slice) -> Sentence | Corpus:
        """``corpus[i]``: the i-th sentence; ``corpus[a:b:c]``: a Corpus of those sentences, streamed lazily
        (same name and split). Negative indices count the corpus first (one more pass)."""
        if isinstance(index, slice):
            start, stop, step = index.start, index.stop, index.step
            if any(v is not None and v < 0 for v in (start, stop)) or (step is not None and step < 0):
                start, stop, step = index.indices(len(self))
                if step < 0:
                    raise InputError("corpus slices with a negative step are not supported (a corpus streams forward)")
            if step == 0:
                raise InputError("slice step cannot be zero")

            def part() -> Iterator[Sentence]:
                it = iter(self)
                try:
                    yield from itertools.islice(it, start, stop, step)
                finally:
                    close = getattr(it, "close", None)
                    if close is not None:
                        close()

            where = f"{'' if start is None else start}:{'' if stop is None else stop}" + (f":{step}" if step else "")
            return Corpus(
                part, name=self.name, split=self.split, source=f"{self.source} [{where}]", license=self.license
            )
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"corpus indices are integers or slices, not {type(index).__name__}")
        i = int(index)
        if i < 0:
            i += len(self)
        if i >= 0:
            for sentence in self[i : i + 1]:
                return sentence
        raise IndexError(f"sentence index {index} out of range for corpus {self.name!r}/{self.split!r}")

    def head(self, n: int) -> Corpus:
        """The first ``n`` sentences, with the same name and split."""
        n = check_count(n, "head(n)", low=0)

        def first() -> Iterator[Sentence]:
            it = iter(self)
            try:
                yield from itertools.islice(it, n)
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()

        return Corpus(
            first,
            name=self.name,
            split=self.split,
            source=f"{self.source} [first {n} sentences]",
            license=self.license,
            origin=None if self.origin is None else self.origin.with_option("head", n),
        )

    def fingerprint(self) -> str:
        """Hex sha256 of the content, computed while streaming; it changes iff an id, word or annotation does.

        Encoding (version ``probing-corpus/1``): the bytes ``b"probing-corpus/1\\n"``, then per sentence one
        line of compact UTF-8 JSON ``[id, doc_id, words, upos, xpos, lemmas, senses, instance_ids]``
        (absent annotations are ``null``, sense tuples are lists) followed by ``\\n``. A sentence with any
        of ``heads``, ``deprels``, ``feats`` appends those three (``null`` when absent), so a corpus without
        them keeps the fingerprint it had before they existed. Name, split, source and licence are not
        part of it: equal content gives an equal fingerprint.
        """
        return self.fingerprint_and_lengths()[0]

    def fingerprint_and_lengths(self, copy_to: IO[bytes] | None = None) -> tuple[str, np.ndarray]:
        """:meth:`fingerprint` and every sentence's word count (int64), from one pass over the corpus.

        With ``copy_to``, the hashed bytes are also written there: a file whose sha256 is the fingerprint
        and that :meth:`from_records` streams back about 20x faster than parsing CoNLL-U again. The
        activation store asks for all three, so a big corpus is parsed once per extraction.

        Parameters
        ----------
        copy_to : binary file, optional
            Receives the hashed bytes (header line, then one JSON record per sentence).

        Returns
        -------
        fingerprint : str
            Hex sha256, as :meth:`fingerprint` returns it.
        lengths : ndarray (n_sentences,) of int64
            Words per sentence, in corpus order.
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
                        record = json.loads(line)
                        if not isinstance(record, list) or len(record) not in (8, 11):
                            raise InputError("expected a JSON list of 8 or 11 fields")
                        id_, doc_id, words, upos, xpos, lemmas, senses, instance_ids = record[:8]
                        heads, deprels, feats = record[8:] if len(record) == 11 else (None, None, None)
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
                        heads=heads,
                        deprels=deprels,
                        feats=feats,
                    )

        return cls(records, name=name, split=split, source=str(path), **kwargs)

    def token_table(self) -> pd.DataFrame:
        """One row per token with DESIGN.md's token-table columns (all but ``oov``); missing values are ``""``
        (``head``: -1; otherwise the 1-based head position, 0 for the root)."""
        import pandas as pd

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
            cols["head"].extend(s.heads if s.heads is not None else [-1] * n)
            cols["deprel"].extend(s.deprels if s.deprels is not None else [""] * n)
            cols["feats"].extend(s.feats if s.feats is not None else [""] * n)
        table = pd.DataFrame(cols, columns=list(TOKEN_COLUMNS))
        for col in ("position", "head"):
            table[col] = table[col].astype("int64")
        return table
