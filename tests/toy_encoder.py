"""A toy encoder kind defined outside the package (``tests/test_encoder_kinds.py`` registers it with one line):
each word's vector is a few features of its spelling, times the kind's own option ``scale``; layer ``"0"`` is
that vector, layer ``"1"`` the mean over the sentence's words (numbered layers, as DESIGN.md's layer contract
asks: the figures draw any other layer name as a baseline)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from probing.encoders import EncoderKind
from probing.identity import digest


@dataclass(frozen=True)
class ToyOptions:
    """The toy kind's key in its ``[[encoders]]`` table: ``scale``, a positive number."""

    scale: float = 1.0


class SpellingEncoder:
    """Word length, vowels, capitals and a constant, times ``scale``."""

    layer_names = ["0", "1"]
    dim = 4

    def __init__(self, scale: float, name: str):
        self.scale = scale
        self.name = name

    @property
    def fingerprint(self) -> str:
        return digest({"spelling": self.scale})

    def features(self, word: str) -> list[float]:
        return [len(word), sum(c in "aeiouAEIOU" for c in word), sum(c.isupper() for c in word), 1.0]

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Both layers of each sentence.

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str

        Returns
        -------
        list (n_sentences,) of ndarray (2, n_tokens, 4), float32
        """
        out = []
        for words in sentences:
            x = self.scale * np.array([self.features(w) for w in words], dtype=np.float32)
            out.append(np.stack([x, np.broadcast_to(x.mean(axis=0), x.shape)]).astype(np.float32))
        return out

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        """All False: every word has a spelling.

        Parameters
        ----------
        words : sequence (n,) of str

        Returns
        -------
        ndarray (n,) of bool
        """
        return np.zeros(len(words), dtype=bool)


def build(options: ToyOptions, name: str | None, device: str | None) -> SpellingEncoder:
    return SpellingEncoder(options.scale, name or "spelling")


def shorthand(text: str) -> ToyOptions | None:
    """``spelling`` or ``spelling:SCALE``."""
    head, _, scale = text.partition(":")
    return None if head != "spelling" else ToyOptions(float(scale) if scale else 1.0)


SPELLING = EncoderKind("spelling", ToyOptions, build, shorthand=shorthand, forms=lambda: "spelling[:SCALE]")
