"""Sentences an evaluation split shares with the training split, and when that is worth a warning.

A test (or dev) sentence whose word sequence also occurs in the training data can be labelled from memory.
A few shared sentences are normal (one-word lines such as "Thanks" recur in any web treebank: demo-ud's
test split shares 55 of its 1,012 sentences, 89 of its 13,340 tokens, with training) and move a per-token
score by less than its confidence interval. So the runner warns only when the shared sentences hold at
least ``WARN_SHARE`` of the evaluation split's tokens (the unit every tagging score counts), or when the
split is the training data itself; a smaller overlap is stated in the log.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from probing.protocols import StoreLike
from probing.tasks.common import Part

WARN_SHARE = 0.05
"""Warn when sentences that also occur in training hold at least this fraction of an evaluation split's tokens."""


@dataclass(frozen=True)
class Overlap:
    """Of an evaluation split (``role`` dev or test, named ``data``): ``shared`` of its ``total`` sentences
    (repeats counted; ``distinct`` different ones) and ``shared_tokens`` of its ``tokens`` also occur in the
    training split ``train``."""

    role: str
    data: str
    train: str
    shared: int
    distinct: int
    total: int
    shared_tokens: int
    tokens: int

    @property
    def token_share(self) -> float:
        return self.shared_tokens / self.tokens if self.tokens else 0.0

    @property
    def identical(self) -> bool:
        return self.total > 0 and self.shared == self.total

    @property
    def matters(self) -> bool:
        """Whether the overlap is large enough to warn about (see ``WARN_SHARE``)."""
        return self.identical or self.token_share >= WARN_SHARE

    def describe(self) -> str:
        """The fact, e.g. ``55 of 1,012 test sentences of demo-ud/test (22 distinct; 89 of 13,340 tokens,
        0.7 %) also occur in training (demo-ud/train)``, with what follows where it matters."""
        if self.identical:
            return (
                f"{self.role} data {self.data} is the training data: all {self.total:,} of its sentences occur in "
                f"{self.train}, so its scores measure memorisation, not generalisation"
            )
        fact = (
            f"{self.shared:,} of {self.total:,} {self.role} sentences of {self.data} ({self.distinct:,} distinct; "
            f"{self.shared_tokens:,} of {self.tokens:,} tokens, {self.token_share:.1%}) also occur in training "
            f"({self.train})"
        )
        if self.matters:
            return f"{fact}: scores on {self.data} partly measure memorisation"
        return fact


def sentence_hashes(store: StoreLike) -> tuple[np.ndarray, np.ndarray]:
    """A 64-bit hash of each sentence's word sequence ``(n_sentences,)`` uint64, and its length in tokens.

    Parameters
    ----------
    store : StoreLike
        Its ``tokens["word"]`` and ``offsets`` (n_sentences + 1,) are read; no layer is.

    Returns
    -------
    hashes : ndarray (n_sentences,) of uint64
        blake2b (8 bytes, little-endian) of the sentence's words joined by ``\\x1f``, in store order.
    lengths : ndarray (n_sentences,) of int
        Tokens per sentence (``np.diff(store.offsets)``; int64 for a :class:`~probing.store.Store`).
    """
    words = store.tokens["word"].astype(str).to_numpy()
    offsets = np.asarray(store.offsets)
    out = np.empty(len(offsets) - 1, dtype=np.uint64)
    for i in range(len(out)):
        text = "\x1f".join(words[offsets[i] : offsets[i + 1]]).encode("utf-8")
        out[i] = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")
    return out, np.diff(offsets)


def overlap(
    train: np.ndarray, other: np.ndarray, lengths: np.ndarray, *, role: str, data: str, train_name: str
) -> Overlap:
    """The sentences of ``other`` (hashes, one per sentence in order, with their ``lengths`` in tokens) that
    are among the ``train`` hashes.

    Parameters
    ----------
    train : ndarray (n_train,) of uint64
        Sentence hashes of the training split (:func:`sentence_hashes`), in any order, repeats allowed.
    other : ndarray (n_sentences,) of uint64
        Sentence hashes of the evaluation split, one per sentence.
    lengths : ndarray (n_sentences,) of int
        Tokens per sentence of ``other``, aligned with it.
    role, data, train_name : ``"dev"`` or ``"test"``, the evaluation split's name and the training split's.

    Returns
    -------
    Overlap
        Shared sentences (with repeats, and distinct) and their tokens, of all ``len(other)`` sentences.
    """
    hit = np.isin(other, train)
    return Overlap(
        role=role,
        data=data,
        train=train_name,
        shared=int(hit.sum()),
        distinct=len(np.unique(other[hit])),
        total=len(other),
        shared_tokens=int(lengths[hit].sum()),
        tokens=int(lengths.sum()),
    )


def new_overlaps(
    train: Part, evaluated: list[tuple[str, Part]], checked: set[tuple[str, str, str, str]]
) -> list[Overlap]:
    """The overlap of each ``(role, part)`` in ``evaluated`` with ``train``, for the pairs of splits not yet in
    ``checked`` (which it extends): a run states each pair once, however many tasks and encoders read it."""
    out = []
    for role, part in evaluated:
        pair = (train.dataset, train.split, part.dataset, part.split)
        if pair in checked:
            continue
        checked.add(pair)
        out.append(
            overlap(
                sentence_hashes(train.store)[0],
                *sentence_hashes(part.store),
                role=role,
                data=f"{part.dataset}/{part.split}",
                train_name=f"{train.dataset}/{train.split}",
            )
        )
    return out
