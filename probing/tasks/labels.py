"""Labels, items and vocabularies of the token-labelling kinds (:mod:`probing.tasks.tagging`).

An item is a token whose label is not ``""``; labels come from a :data:`LabelFn` on the store's token table:
a column (``label = "upos"``, ``"xpos"``, ``"lemma"``, ``"deprel"``, ``"feats"``: the whole FEATS string) or one
morphological feature, ``label = "feats:Number"`` (the feature's value in FEATS, ``"none"`` where the token
has no such feature: every token is an item); :func:`supersense_labels` gives each sense-annotated token its
WordNet lexname. :func:`items` and :func:`train_dev` collect a part's items; :func:`default_vocabularies`,
:func:`vocabulary_splits` and :func:`split_rows` give the ``oov_split`` rows (accuracy inside and outside each
vocabulary).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from probing.protocols import StoreLike
from probing.store.format import TOKEN_COLUMNS
from probing.tasks.common import (
    Part,
    TaskError,
    fraction_row,
    holdout_dev,
    sentence_groups,
)

LabelFn = Callable[[pd.DataFrame], np.ndarray]


VocabFn = Callable[[Sequence[str]], np.ndarray]
"""Words -> bool ``(n_words,)``: which of them are in a vocabulary."""


# token-table columns that are not per-token labels a probe could predict
_NOT_LABELS = {"sentence_id", "doc_id", "position", "word", "sense", "instance_id", "oov", "head"}


LABEL_COLUMNS = tuple(c for c in TOKEN_COLUMNS if c not in _NOT_LABELS)


FEATS_PREFIX = "feats:"


NO_FEATURE = "none"


_FEATURE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*(\[[a-z0-9]+\])?$")  # UD: Number, Number[psor]


LABEL_FORMS = (
    f"{', '.join(LABEL_COLUMNS)}, or {FEATS_PREFIX}FEATURE (one FEATS feature, e.g. feats:Number, feats:Tense)"
)


def column_labels(column: str) -> LabelFn:
    """Labels from a token-table column (``upos``, ``xpos``)."""

    def labels(tokens: pd.DataFrame) -> np.ndarray:
        if column not in tokens.columns:
            raise TaskError(f"the token table has no column {column!r}")
        return tokens[column].fillna("").astype(str).to_numpy()

    labels.__name__ = column
    return labels


def feature_labels(feature: str) -> LabelFn:
    """The value of one FEATS feature per token (``Number=Sing|Person=3`` -> ``Sing`` for ``Number``; multiple
    values stay as written, ``Sing,Plur``), :data:`NO_FEATURE` where the token lacks it."""
    if not _FEATURE_NAME.match(feature):
        raise TaskError(f"{feature!r} is not a FEATS feature name (e.g. Number, Tense, Person, Number[psor])")
    pattern = rf"(?:^|\|){re.escape(feature)}=([^|]*)"

    def labels(tokens: pd.DataFrame) -> np.ndarray:
        if "feats" not in tokens.columns:
            raise TaskError("the token table has no FEATS column (a store written before it existed: re-extract)")
        feats = tokens["feats"].fillna("").astype(str)
        if not (feats != "").any():
            raise TaskError(f"label {FEATS_PREFIX}{feature}: no token has FEATS (is the corpus CoNLL-U with FEATS?)")
        return feats.str.extract(pattern, expand=False).fillna(NO_FEATURE).astype(str).to_numpy()

    labels.__name__ = f"{FEATS_PREFIX}{feature}"
    return labels


def feature_names(tokens: pd.DataFrame) -> list[str]:
    """The FEATS feature names that occur in a token table (sorted; empty without a FEATS column)."""
    if "feats" not in tokens.columns:
        return []
    pairs = tokens["feats"].fillna("").astype(str).str.split("|").explode()
    return sorted({p.split("=", 1)[0] for p in pairs if "=" in p})


def absent_feature(label: str, tokens: pd.DataFrame) -> str:
    """The error text for a ``feats:X`` label that no training token has: the features the corpus has, the
    closest first."""
    have = feature_names(tokens)
    close = difflib.get_close_matches(label[len(FEATS_PREFIX) :], have, n=1, cutoff=0.6)
    hint = f" (did you mean {FEATS_PREFIX}{close[0]}?)" if close else ""
    return f"no training token has the feature {label[len(FEATS_PREFIX) :]!r}{hint}; the corpus has " + (
        ", ".join(have) or "no FEATS"
    )


def label_function(label: str) -> LabelFn:
    """The :data:`LabelFn` of a tagging task's ``label`` (see the module docstring)."""
    if label.startswith(FEATS_PREFIX):
        return feature_labels(label[len(FEATS_PREFIX) :])
    return column_labels(label)


def is_label(label: str) -> bool:
    """Whether ``label`` is a tagging label: one of :data:`LABEL_COLUMNS` or ``feats:FEATURE``."""
    if label.startswith(FEATS_PREFIX):
        return _FEATURE_NAME.match(label[len(FEATS_PREFIX) :]) is not None
    return label in LABEL_COLUMNS


def supersense_labels(inventory=None) -> LabelFn:
    """The lexname (WordNet supersense, e.g. ``noun.person``) of each annotated token's first gold key."""
    from probing.probes.wsd import supersense_labels as lexnames

    def labels(tokens: pd.DataFrame) -> np.ndarray:
        senses = tokens["sense"].fillna("").astype(str).to_numpy()
        out = np.full(len(senses), "", dtype=object)
        annotated = np.flatnonzero(np.char.str_len(senses.astype(str)) > 0)
        out[annotated] = lexnames(senses[annotated].tolist(), inventory)
        return out.astype(str)

    labels.__name__ = "supersense"
    return labels


def default_vocabularies() -> dict[str, VocabFn]:
    """The vocabularies ``oov_split`` splits by: ``glove`` (GloVe 6B, lowercased lookups: its OOV tokens get
    the zero vector) and ``train`` (the bundled model's training vocabulary, case-sensitive:
    :func:`probing.encoders.training_vocabulary`)."""
    from probing.encoders import training_vocabulary
    from probing.glove import Vectors

    glove = Vectors.glove_6b_50d()
    train = training_vocabulary("default")
    return {
        "glove": lambda words: ~np.asarray(glove.lookup(list(words))[1], dtype=bool),
        "train": lambda words: np.fromiter((w in train for w in words), dtype=bool, count=len(words)),
    }


def vocabulary_splits(words: Sequence[str], vocabularies: Mapping[str, VocabFn]) -> dict[str, np.ndarray]:
    """For each vocabulary, the in-vocabulary mask of ``words`` (bool ``(n_words,)``).

    Parameters
    ----------
    words : sequence of str (n_words,)
        The test items' word forms.
    vocabularies : mapping of name to VocabFn
        E.g. :func:`default_vocabularies`; a function that returns another shape is a TaskError.

    Returns
    -------
    dict of str to ndarray (n_words,) of bool
        Per vocabulary name: True where the word is in that vocabulary.
    """
    out = {}
    for name, fn in vocabularies.items():
        mask = np.asarray(fn(words), dtype=bool)
        if mask.shape != (len(words),):
            raise TaskError(f"vocabulary {name!r} gave a mask of shape {mask.shape} for {len(words)} words")
        out[name] = mask
    return out


def split_rows(
    task: str,
    part: Part,
    encoder: str,
    layer: str,
    correct: np.ndarray,
    groups: np.ndarray,
    splits: Mapping[str, np.ndarray],
    seed: int,
    n_boot: int,
) -> list[dict]:
    """``accuracy-iv-NAME`` and ``accuracy-oov-NAME`` rows (accuracy on the tokens inside / outside
    vocabulary NAME, with a cluster-bootstrap CI over sentences); a group with no token has no row.

    Parameters
    ----------
    task, part, encoder, layer : the rows' identity (``part`` gives their dataset and split).
    correct : ndarray (n,)
        Per-item correctness (bool or 0/1) of the probe on the test items.
    groups : ndarray (n,)
        The sentence id of each item (the bootstrap's clusters).
    splits : mapping of name to ndarray (n,) of bool
        In-vocabulary mask of the items per vocabulary (:func:`vocabulary_splits`).
    seed, n_boot : the rows' ``seed`` column and the bootstrap replicates.

    Returns
    -------
    list of dict
        Per vocabulary, the ``iv`` row then the ``oov`` row (each only when its group has tokens).
    """
    rows = []
    for name, inside in splits.items():
        for group, mask in (("iv", inside), ("oov", ~inside)):
            if mask.any():
                metric = f"accuracy-{group}-{name}"
                rows.append(fraction_row(task, part, encoder, layer, metric, correct[mask], groups[mask], seed, n_boot))
    return rows


@dataclass
class Items:
    """The labelled tokens of one store: their rows, labels, words and sentence ids."""

    store: StoreLike
    rows: np.ndarray
    y: np.ndarray
    words: np.ndarray
    groups: np.ndarray
    oov: np.ndarray

    def take(self, rows: np.ndarray) -> Items:
        """The items at some of these store rows.

        Parameters
        ----------
        rows : ndarray (m,) of int
            Store rows, each one of ``self.rows``; another row is a TaskError.

        Returns
        -------
        Items
            Of ``rows``, in their order: ``y``, ``words``, ``groups`` and ``oov`` each (m,).
        """
        rows = np.asarray(rows, dtype=np.int64)
        pos = np.searchsorted(self.rows, rows)
        found = pos < len(self.rows)
        found[found] = self.rows[pos[found]] == rows[found]
        if not found.all():
            raise TaskError(f"store row {int(rows[~found][0])} is not one of these items' rows")
        return Items(self.store, rows, self.y[pos], self.words[pos], self.groups[pos], self.oov[pos])


def items(part: Part, labels: LabelFn, task: str) -> Items:
    tokens = part.store.tokens
    y = np.asarray(labels(tokens))
    rows = np.flatnonzero(y != "").astype(np.int64)
    if len(rows) == 0:
        raise TaskError(
            f"task {task!r}: {part.dataset}/{part.split} has no labelled tokens "
            f"(label {getattr(labels, '__name__', 'labels')!r} is empty everywhere)"
        )
    oov = tokens["oov"].to_numpy(dtype=bool) if "oov" in tokens.columns else np.zeros(len(tokens), bool)
    return Items(
        part.store,
        rows,
        y[rows].astype(str),
        tokens["word"].to_numpy()[rows].astype(str),
        sentence_groups(part.store, rows),
        oov[rows],
    )


def train_dev(train: Part, dev: Part | None, labels: LabelFn, task: str) -> tuple[Items, Items]:
    """Training and dev items; without a dev part, every 10th training sentence is held out as dev."""
    tr = items(train, labels, task)
    if dev is not None:
        return tr, items(dev, labels, task)
    tr_rows, dv_rows = holdout_dev(train.store, tr.rows)
    return tr.take(tr_rows), tr.take(dv_rows)
