"""CoNLL-U reader (Universal Dependencies), streamed with the ``conllu`` library's ``parse_incr``.

Words are the syntactic words: multiword-token ranges (``3-4``) and empty nodes (``8.1``) are skipped,
so ``can't`` gives the two words ``ca`` and ``n't``. ``upos``, ``xpos`` and ``lemmas`` come from their
columns (``_`` becomes ``""``, except a lemma ``_`` of the word ``_``). HEAD gives ``heads`` (word ids
are 1..n, so a head is a 1-based position over the words; 0 = root) when every word has one, and
``None`` when no word has one; DEPREL and FEATS are kept as raw strings (``deprels``/``feats``, ``None``
when the whole column is ``_``). The sentence id is ``# sent_id``
(else ``<file>-<n>``); the doc id is the last ``# newdoc id``, else the sent_id without its trailing
number (``doc-0003`` -> ``doc``), else the file name.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO, cast

import conllu as _conllu
from conllu.exceptions import ParseException

from probing.corpora._files import base_name, numbered_lines, require_file
from probing.corpora.base import Corpus, CorpusFormatError, Origin, Sentence, make_sentence, reader_version

_N_COLUMNS = 10
_FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel")  # DEPS and MISC are only counted
_RAW = {"feats": lambda line, i: line[i]}  # FEATS as written, not parsed into a dict
_LIBRARY_SEPARATOR = re.compile(r"\t| {2,}")  # how the conllu library splits a token line
_TRAILING_NUMBER = re.compile(r"[-_.:]?\d+$")


class _TrackedLines(io.TextIOBase):
    """A text stream for ``parse_incr`` that keeps line numbers and checks the column count."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._lines = numbered_lines(path)
        self.lineno = 0
        self.block_start = 0
        self.block: list[tuple[int, str]] = []
        self._in_block = False

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]  # a text stream: str lines
        self.lineno, line = next(self._lines, (self.lineno, ""))
        if not line:
            return line
        if not line.strip():
            self._in_block = False
            return line
        if not self._in_block:
            self._in_block = True
            self.block_start = self.lineno
            self.block = []
        self.block.append((self.lineno, line))
        if not line.startswith("#"):
            text = line.rstrip("\r\n")
            n = len(text.split("\t"))
            if n != _N_COLUMNS:
                raise CorpusFormatError(
                    f"{self.path}:{self.lineno}: expected {_N_COLUMNS} tab-separated columns, found {n}: {text[:80]!r}"
                )
            if len(_LIBRARY_SEPARATOR.split(text)) != _N_COLUMNS:
                raise CorpusFormatError(
                    f"{self.path}:{self.lineno}: a field holds two consecutive spaces, which the conllu library "
                    f"reads as a column separator: {text[:80]!r}"
                )
        return line

    def locate(self, error: ParseException) -> CorpusFormatError:
        """Point at the exact token line of the current block that the library rejects."""
        for lineno, line in self.block:
            if line.startswith("#"):
                continue
            try:
                _conllu.parse(line, fields=_FIELDS, field_parsers=_RAW)
            except ParseException as e:
                return CorpusFormatError(f"{self.path}:{lineno}: {e}: {line.rstrip()[:80]!r}")
        return CorpusFormatError(f"{self.path}:{self.block_start}: sentence block rejected: {error}")


def _missing(value) -> str:
    return "" if value is None or value == "_" else str(value)


def _sentences(path: Path) -> Iterator[Sentence]:
    stem = base_name(path)
    seen: set[str] = set()
    doc_id: str | None = None
    lines = _TrackedLines(path)
    parsed = _conllu.parse_incr(cast(TextIO, lines), fields=_FIELDS, field_parsers=_RAW)
    n = 0
    while True:
        try:
            tokenlist = next(parsed)
        except StopIteration:
            return
        except ParseException as e:
            raise lines.locate(e) from None
        n += 1
        meta = tokenlist.metadata
        where = f"{path}:{lines.block_start}"
        if "newdoc id" in meta:
            doc_id = meta["newdoc id"]
        elif "newdoc" in meta:
            doc_id = None
        sent_id = meta.get("sent_id") or f"{stem}-{n}"
        if sent_id in seen:
            raise CorpusFormatError(f"{where}: sentence id {sent_id!r} appears twice in this file")
        seen.add(sent_id)
        words: list[str] = []
        upos: list[str] = []
        xpos: list[str] = []
        lemmas: list[str] = []
        heads: list[int | None] = []
        deprels: list[str] = []
        feats: list[str] = []
        token_lines = [lineno for lineno, line in lines.block if not line.startswith("#")]
        for tok, lineno in zip(tokenlist, token_lines):
            if not isinstance(tok["id"], int):
                continue
            if tok["id"] != len(words) + 1:
                raise CorpusFormatError(
                    f"{path}:{lineno}: word id {tok['id']} where {len(words) + 1} was expected: ids in a "
                    "sentence must run 1, 2, 3, ... with no repeat, gap or reordering"
                )
            form = tok["form"]
            heads.append(tok["head"])
            deprels.append(_missing(tok["deprel"]))
            feats.append(_missing(tok["feats"]))
            words.append(form)
            upos.append(_missing(tok["upos"]))
            xpos.append(_missing(tok["xpos"]))
            lemma = tok["lemma"]
            lemmas.append(lemma if lemma == "_" and form == "_" else _missing(lemma))
        doc = doc_id or (_TRAILING_NUMBER.sub("", sent_id) if "sent_id" in meta else stem) or stem
        missing = [i + 1 for i, h in enumerate(heads) if h is None]
        if missing and len(missing) < len(heads):
            raise CorpusFormatError(
                f"{where}: sentence {sent_id!r}: words {missing[:10]} have no HEAD but others do; "
                "give every word a head (0 for the root) or none"
            )
        yield make_sentence(
            where,
            id=sent_id,
            doc_id=doc,
            words=words,
            upos=upos,
            xpos=xpos,
            lemmas=lemmas,
            heads=None if missing else heads,
            deprels=deprels if any(deprels) else None,
            feats=feats if any(feats) else None,
        )


def read_conllu(path: str | Path, *, name: str | None = None, split: str = "all", license: str = "") -> Corpus:
    """Stream a CoNLL-U file (``.gz`` read transparently) as a Corpus."""
    path = require_file(path)
    return Corpus(
        lambda: _sentences(path),
        name=name or base_name(path),
        split=split,
        source=str(path),
        license=license,
        origin=Origin((path,), reader_version(__file__, "conllu")),
    )
