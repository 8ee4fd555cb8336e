"""The one simple tokenizer used wherever a sentence may be given as a plain string.

The rule, close to the tokenisation of UD EWT, the Penn Treebank and SemCor (so a typed sentence meets
the corpora's tokens):

1. split on whitespace;
2. in each piece, leading and trailing punctuation becomes separate tokens; a run of one repeated
   character stays one token (``...``, ``--``, ``''``); a piece made only of punctuation is kept whole;
3. the English clitics ``'s 're 've 'll 'd 'm n't`` (also with ``’``) are split off the end of a word:
   ``Alusik's`` -> ``Alusik 's``, ``don't`` -> ``do n't``.

Already tokenized text passes unchanged (``Alusik 's grounder .`` stays four tokens). Nothing else is
touched: no lower-casing, inner punctuation stays (``U.S``, ``e-mail``, ``3.5``). A list of tokens is
taken as it is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from probing.errors import InputError

MAX_TOKENS = 1000
"""The most tokens a sentence may have: a line of a text file, or a sentence given on the command line."""

CLITICS = ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m")
_CLITIC = re.compile(r"(?i)^(.+?)(n['’]t|['’](?:s|re|ve|ll|d|m))$")


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith(("P", "S"))


def _runs(chars: str) -> list[str]:
    """``chars`` cut into runs of one repeated character: ``")."`` -> ``[")", "."]``, ``"..."`` -> ``["..."]``."""
    return [m.group(0) for m in re.finditer(r"(.)\1*", chars, flags=re.S)]


def _split_piece(piece: str) -> list[str]:
    if all(_is_punct(c) for c in piece) or piece.lower().replace("’", "'") in CLITICS:
        return [piece]
    start, stop = 0, len(piece)
    while start < stop and _is_punct(piece[start]):
        start += 1
    while stop > start and _is_punct(piece[stop - 1]):
        stop -= 1
    core = piece[start:stop]
    middle = [core]
    match = _CLITIC.match(core)
    if match and match.group(1)[-1:].isalpha():
        middle = [match.group(1), match.group(2)]
    return _runs(piece[:start]) + middle + _runs(piece[stop:])


def tokenize(text: str) -> list[str]:
    """The tokens of ``text`` by the module's rule: ``"Alusik's grounder."`` -> ``["Alusik", "'s", "grounder", "."]``."""
    if not isinstance(text, str):
        raise InputError(f"expected a string to tokenize, got {type(text).__name__}")
    return [token for piece in text.split() for token in _split_piece(piece)]


def as_words(sentence: str | Sequence[str], where: str = "sentence", max_tokens: int | None = None) -> list[str]:
    """A sentence as a list of tokens: a string is tokenized (:func:`tokenize`), a list is checked and copied;
    more than ``max_tokens`` tokens is an error (the command line uses the text files' limit)."""
    words = tokenize(sentence) if isinstance(sentence, str) else list(sentence)
    if not words:
        raise InputError(f"{where} is empty: it needs at least one token")
    if max_tokens is not None and len(words) > max_tokens:
        raise InputError(f"{where} has {len(words):,} tokens; at most {max_tokens:,} are taken (as in a text file)")
    for i, w in enumerate(words):
        if not isinstance(w, str) or not w.strip():
            raise InputError(f"{where}: token {i} is {w!r}; every token must be a non-empty string")
    return words
