"""ELMo's character ids: the exact encoding the official biLM was trained with.

A token becomes ``max_characters_per_token`` ids: begin-of-word, its UTF-8 bytes (cut at
``max_characters_per_token - 2`` bytes, even inside a multi-byte character, as the reference does),
end-of-word, then padding. Sentence boundaries ``<S>``/``</S>`` are single special characters between
the word marks. Every id is shifted by +1 so that 0 can mean "no token here" (batch padding).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from probing.errors import InputError

BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _boundary(char: int, max_chars: int) -> np.ndarray:
    ids = np.full(max_chars, PAD_CHAR, dtype=np.int64)
    ids[:3] = (BOW_CHAR, char, EOW_CHAR)
    return ids + 1


def check_sentences(sentences: object) -> list[list[str]]:
    """Validate a batch of tokenized sentences; refuse empty tokens and non-strings with a message."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(
            f"expected a list of tokenized sentences (a list of lists of str), got {type(sentences).__name__}"
        )
    out = []
    for i, sent in enumerate(sentences):
        if isinstance(sent, str) or not isinstance(sent, Sequence):
            raise TypeError(
                f"sentence {i}: expected a list of str tokens, got {type(sent).__name__}"
                + (" (split the string into tokens first)" if isinstance(sent, str) else "")
            )
        for j, tok in enumerate(sent):
            if not isinstance(tok, str):
                raise TypeError(f"sentence {i}, token {j}: expected str, got {type(tok).__name__}")
            if tok == "":
                raise InputError(f"sentence {i}, token {j}: empty token (ELMo needs at least one character)")
        out.append(list(sent))
    return out


def token_char_ids(token: str, max_chars: int = 50) -> np.ndarray:
    """The shifted character ids of one token, shape ``(max_chars,)``.

    Parameters
    ----------
    token : str
        One token; ``<S>`` and ``</S>`` become the sentence-boundary characters.
    max_chars : int
        Slots per token (``max_characters_per_token``, 50 for ELMo); longer tokens are cut.

    Returns
    -------
    ndarray (max_chars,) of int64
        Begin-of-word, the UTF-8 bytes, end-of-word, then padding, every id shifted by +1 (so never 0).
    """
    if token == BOS_TOKEN:
        return _boundary(BOS_CHAR, max_chars)
    if token == EOS_TOKEN:
        return _boundary(EOS_CHAR, max_chars)
    data = token.encode("utf-8", "ignore")[: max_chars - 2]
    ids = np.full(max_chars, PAD_CHAR, dtype=np.int64)
    ids[0] = BOW_CHAR
    ids[1 : 1 + len(data)] = np.frombuffer(data, dtype=np.uint8)
    ids[1 + len(data)] = EOW_CHAR
    return ids + 1


def batch_char_ids(sentences: Sequence[Sequence[str]], max_chars: int = 50) -> np.ndarray:
    """Character ids for a batch with ``<S>``/``</S>`` added: ``(batch, max_len + 2, max_chars)``, 0 = padding.

    Parameters
    ----------
    sentences : sequence (batch,) of sequences of str
        Tokenized sentences, without boundaries (see :func:`check_sentences`).
    max_chars : int
        Slots per token (``max_characters_per_token``, 50 for ELMo).

    Returns
    -------
    ndarray (batch, max_len + 2, max_chars) of int64
        Row i is ``<S> tokens </S>`` of sentence i as :func:`token_char_ids` gives them; ``max_len`` is the
        longest sentence's token count, and a shorter sentence's slots after its ``</S>`` are all 0.
    """
    longest = max((len(s) for s in sentences), default=0)
    out = np.zeros((len(sentences), longest + 2, max_chars), dtype=np.int64)
    for i, sent in enumerate(sentences):
        for j, tok in enumerate([BOS_TOKEN, *sent, EOS_TOKEN]):
            out[i, j] = token_char_ids(tok, max_chars)
    return out
