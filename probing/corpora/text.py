"""Plain text: one sentence per line, tokens separated by whitespace (``.gz`` read transparently).

Blank lines are skipped, so a paragraph-separated file reads cleanly; the sentence id is
``<file>:<line number>`` (1-based, counting blank lines), so an id always points at its line. The doc id is
the file name. There are no annotations.

Long lines: a line of more than ``MAX_TOKENS`` (1,000) tokens is refused with its line number rather than
cut or chunked (either would silently change the context the encoder sees): split it into sentences. An
encoder's memory grows with the longest sentence (ELMo: ~40 KB per token; 20,000 tokens took ~800 MB).
The byte-level rules (BOM, NUL, UTF-8, 1 MiB per line) are those of ``probing.corpora._files``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from probing.corpora._files import base_name, numbered_lines, require_file
from probing.corpora.base import Corpus, CorpusFormatError, Origin, Sentence, make_sentence, reader_version
from probing.tokenize import MAX_TOKENS


def line_tokens(path: Path, lineno: int, line: str, max_tokens: int = MAX_TOKENS) -> list[str]:
    """The whitespace tokens of one line; CorpusFormatError naming file and line past ``max_tokens``."""
    words = line.split()
    if len(words) > max_tokens:
        raise CorpusFormatError(
            f"{path}:{lineno}: {len(words)} tokens on one line, more than {max_tokens}; split it into sentences "
            "(one per line)"
        )
    return words


def _sentences(path: Path) -> Iterator[Sentence]:
    stem = base_name(path)
    for lineno, line in numbered_lines(path):
        words = line_tokens(path, lineno, line)
        if words:
            yield make_sentence(f"{path}:{lineno}", id=f"{stem}:{lineno}", doc_id=stem, words=words)


def read_text(path: str | Path, *, name: str | None = None, split: str = "all", license: str = "") -> Corpus:
    """Stream a whitespace-tokenized text file, one sentence per non-blank line."""
    path = require_file(path)
    return Corpus(
        lambda: _sentences(path),
        name=name or base_name(path),
        split=split,
        source=str(path),
        license=license,
        origin=Origin((path,), reader_version(__file__)),
    )
