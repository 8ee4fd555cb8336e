"""The structural types the pipeline passes between its stages (DESIGN.md's contracts).

Anything with these attributes works: the toolkit's own corpora, encoders and stores, or a user's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


@runtime_checkable
class EncoderLike(Protocol):
    """``encode`` returns one float32 ``(n_layers, len(sentence), dim)`` array per sentence, independent of
    how sentences are batched, and not overwritten by a later call (the store reads them on another thread
    while the next batch is encoded); ``oov_mask`` flags words the encoder has no vector for (all False for
    character models)."""

    name: str

    @property
    def fingerprint(self) -> str: ...

    @property
    def layer_names(self) -> list[str]: ...

    @property
    def dim(self) -> int: ...

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Every layer of each sentence.

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str
            Tokenized sentences.

        Returns
        -------
        list (n_sentences,) of ndarray (n_layers, n_tokens, dim), float32
            ``n_layers = len(layer_names)``, ``n_tokens`` that sentence's length; fresh arrays, whatever
            the batching.
        """
        ...

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        """Which words the encoder has no vector for.

        Parameters
        ----------
        words : sequence (n,) of str

        Returns
        -------
        ndarray (n,) of bool
            True where the word is out of vocabulary (all False for character models).
        """
        ...


@runtime_checkable
class CorpusLike(Protocol):
    """A named split that streams ``probing.corpora.Sentence`` objects and hashes its content. One that also has
    ``fingerprint_and_lengths(copy_to=)`` and ``from_records`` (as ``probing.corpora.Corpus`` does) is
    parsed once per extraction instead of three times."""

    name: str
    split: str

    def __iter__(self) -> Iterator[Any]: ...

    def fingerprint(self) -> str: ...


@runtime_checkable
class StoreLike(Protocol):
    """Per-token activations aligned with a token table: ``layer(k)`` is ``(n_tokens, dim)``, ``tokens`` has
    one row per token (DESIGN.md's columns), ``offsets`` is ``(n_sentences + 1,)`` row offsets."""

    path: Path
    manifest: dict

    @property
    def key(self) -> str: ...

    @property
    def layer_names(self) -> list[str]: ...

    @property
    def dim(self) -> int: ...

    @property
    def tokens(self) -> pd.DataFrame: ...

    @property
    def offsets(self) -> np.ndarray:
        """int64 ``(n_sentences + 1,)``: the rows of sentence i are ``offsets[i]:offsets[i + 1]``.

        Returns
        -------
        ndarray (n_sentences + 1,), int64
        """
        ...

    def __len__(self) -> int: ...

    def layer_index(self, k: int | str) -> int: ...

    def layer(self, k: int | str, rows: Any = None, dtype: Any = None) -> np.ndarray:
        """Activations of layer ``k``, row i = token i of :attr:`tokens`.

        Parameters
        ----------
        k : int or str
            A layer index or name, or a direction half (``"1f"``, ``"1b"``).
        rows : indices (m,), boolean mask (n_tokens,) or slice, optional
            Only these rows; None: every row.
        dtype : optional
            Convert to it; None: the store's own dtype (fp16 for the toolkit's stores).

        Returns
        -------
        ndarray (m, dim), or (m, dim // 2) for a half
            m = n_tokens when ``rows`` is None.
        """
        ...
