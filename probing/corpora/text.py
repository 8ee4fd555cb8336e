"""Plain text: one sentence per line, tokens separated by whitespace (``.gz`` read transparently).

Blank lines are skipped, so a paragraph-separated file reads cleanly; the sentence id is
``<file>:<line number>`` (1-based, counting blank lines), so an id always points at its line. The doc id is
the file name. There are no annotations.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from probing.corpora._files import base_name, numbered_lines, require_file
from probing.corpora.base import Corpus, Sentence, make_sentence


def _sentences(path: Path) -> Iterator[Sentence]:
    stem = base_name(path)
    for lineno, line in numbered_lines(path):
        words = line.split()
        if words:
            yield make_sentence(f"{path}:{lineno}", id=f"{stem}:{lineno}", doc_id=stem, words=words)


def read_text(path: str | Path, *, name: str | None = None, split: str = "all", license: str = "") -> Corpus:
    """Stream a whitespace-tokenized text file, one sentence per non-blank line."""
    path = require_file(path)
    return Corpus(
        lambda: _sentences(path), name=name or base_name(path), split=split, source=str(path), license=license
    )
