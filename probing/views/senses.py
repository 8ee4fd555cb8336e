"""Which occurrences a sense view shows, and a number behind the picture: sense separation per layer.

Sense views default to ONE word form and part of speech per lemma (e.g. the noun "play"): with all
forms mixed, a map (or a nearest-neighbour score) can separate ``play / plays / played`` and look as if
it separated senses. :func:`lemma_rows` makes that choice; :func:`sense_separation` scores a layer by
leave-one-out 1-nearest-neighbour sense accuracy on the original vectors (cosine), with a bootstrap
interval over occurrences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from probing.errors import InputError
from probing.probes.stats import bootstrap_ci

TIE_TOL = 1e-5  # cosines this close to the best one count as tied (BLAS may round identical rows differently)


class LemmaSelection(NamedTuple):
    """The occurrences a lemma spec selects: store ``rows`` (int64, sorted) and a short description."""

    spec: str
    lemma: str
    form: str | None  # the one lower-cased word form shown, None for all forms
    upos: str | None  # the one UPOS tag shown, None for all tags
    rows: np.ndarray
    n_lemma: int  # occurrences of the lemma before the form / POS restriction

    @property
    def label(self) -> str:
        """``'play' (NOUN "play")`` or ``'play' (all forms)``."""
        if self.form is None:
            return f"'{self.lemma}' (all forms{', ' + self.upos if self.upos else ''})"
        return f"'{self.lemma}' ({self.upos} \"{self.form}\")"


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``"play:NOUN"`` -> ``("play", "NOUN")``; ``"play"`` -> ``("play", None)``."""
    name, _, tag = spec.partition(":")
    if not name.strip():
        raise InputError(f"empty lemma in {spec!r}; expected LEMMA or LEMMA:UPOS (e.g. play:NOUN)")
    return name.strip(), (tag.strip().upper() or None)


def lemma_rows(tokens: pd.DataFrame, spec: str, *, all_forms: bool = False) -> LemmaSelection:
    """Non-OOV occurrences of a lemma spec ``LEMMA[:UPOS]`` (case-insensitive) in a token table.

    Default: only the most frequent (lower-cased word form, UPOS) pair of the lemma (ties: the
    alphabetically first), so that a sense view is not a word-form view. ``all_forms=True`` keeps
    every form (still only ``UPOS`` when the spec names one).
    """
    lemma, upos = parse_spec(spec)
    lemma_col = tokens["lemma"].astype(str).str.lower().to_numpy()
    base = (lemma_col == lemma.lower()) & ~tokens["oov"].to_numpy(dtype=bool)
    n_lemma = int(base.sum())
    if upos is not None:
        base &= tokens["upos"].astype(str).to_numpy() == upos
    rows = np.flatnonzero(base).astype(np.int64)
    if len(rows) == 0:
        what = f"lemma {lemma!r}" + (f" with UPOS {upos}" if upos else "")
        raise InputError(f"no occurrences of {what} in the store (lemma and upos columns of the token table)")
    if all_forms:
        return LemmaSelection(spec, lemma, None, upos, rows, n_lemma)
    forms = tokens["word"].astype(str).str.lower().to_numpy()[rows]
    tags = tokens["upos"].astype(str).to_numpy()[rows]
    counts = pd.DataFrame({"form": forms, "upos": tags}).value_counts()
    best = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    keep = (forms == best[0]) & (tags == best[1])
    return LemmaSelection(spec, lemma, best[0], best[1], rows[keep], n_lemma)


def first_sense(senses: Sequence[str] | np.ndarray) -> np.ndarray:
    """The first sense key of each space-separated sense field ("" when unannotated), object array.

    Parameters
    ----------
    senses : sequence of str (n,)
        Sense fields (the token table's ``sense`` column: keys separated by spaces, ``""`` when unannotated).

    Returns
    -------
    ndarray (n,) of object (str)
        The first key of each field, ``""`` where the field is empty.
    """
    return np.array([s.split()[0] if s else "" for s in senses], dtype=object)


class SenseSeparation(NamedTuple):
    """Leave-one-out 1-NN sense accuracy of one set of occurrences at one layer (fractions in [0, 1])."""

    score: float
    ci_low: float
    ci_high: float
    chance: float  # the score when every vector is the same (a type vector): two random occurrences agree
    n: int  # annotated occurrences scored
    n_senses: int

    def text(self) -> str:
        if self.n < 2:
            return "1-NN sense acc: too few annotated occurrences"
        return f"1-NN sense acc {self.score:.2f} [{self.ci_low:.2f}, {self.ci_high:.2f}], chance {self.chance:.2f} (n={self.n})"


def chance_agreement(labels: Sequence[str] | np.ndarray) -> float:
    """Probability that two different occurrences drawn at random share a label: sum n_s (n_s - 1) / (n (n - 1)).

    Parameters
    ----------
    labels : sequence of str (n,)
        One label per occurrence (compared as strings).

    Returns
    -------
    float
        In [0, 1]; NaN with fewer than two occurrences.
    """
    _, counts = np.unique(np.asarray(labels, dtype=str), return_counts=True)
    n = counts.sum()
    return float((counts * (counts - 1)).sum() / (n * (n - 1))) if n > 1 else float("nan")


def nn_correct(x: np.ndarray, labels: Sequence[str] | np.ndarray, *, tie_tol: float = TIE_TOL) -> np.ndarray:
    """Per-occurrence leave-one-out 1-NN correctness under cosine, ``(n,)`` float in [0, 1].

    ``x`` is ``(n, dim)``. The nearest neighbour of i is searched among the other rows; when several
    rows tie for the best cosine (within ``tie_tol``; identical vectors always tie), the score is the
    share of the tied rows with i's label: the expected accuracy of a random tie-break. So a layer
    that gives every occurrence the same vector scores exactly :func:`chance_agreement`. Rows with a
    zero vector have no cosine, and a single row has no other row: InputError (a ValueError).

    Parameters
    ----------
    x : ndarray (n, dim)
        One vector per occurrence (any float dtype; computed in float64); zero or non-finite rows: InputError.
    labels : sequence of str (n,)
        One label per row (compared as strings).
    tie_tol : cosines within this of a row's best count as tied.

    Returns
    -------
    ndarray (n,), float64
        Row i's share of tied nearest rows with its label.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(labels, dtype=str)
    if x.ndim != 2 or len(x) != len(y):
        raise InputError(f"x must be (n, dim) with one label per row; got x {x.shape} and {len(y)} labels")
    if len(x) < 2:
        raise InputError(f"nearest neighbours need at least 2 rows, got {len(x)}")
    norms = np.linalg.norm(x, axis=1)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise InputError(f"row {int(np.argmin((norms > 0) & np.isfinite(norms)))} is zero or not finite: no cosine")
    unit = x / norms[:, None]
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    tied = sims >= sims.max(axis=1, keepdims=True) - tie_tol
    same = y[:, None] == y[None, :]
    return (tied & same).sum(axis=1) / tied.sum(axis=1)


def sense_separation(
    x: np.ndarray,
    senses: Sequence[str] | np.ndarray,
    *,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> SenseSeparation:
    """Leave-one-out 1-NN sense accuracy of the occurrences ``x`` (``(n, dim)``) at one layer, cosine.

    ``senses`` are the sense fields of the rows (the first key counts; unannotated rows are left
    out). The interval is a percentile bootstrap over occurrences of the per-occurrence correctness
    (:func:`probing.probes.stats.bootstrap_ci`), neighbours held fixed. ``chance`` is the score of a
    constant vector (see :func:`nn_correct`): GloVe and ELMo's layer 0 give one vector per word form,
    so with one form their score is exactly this chance level.

    Parameters
    ----------
    x : ndarray (n, dim)
        One vector per occurrence; the annotated rows must be non-zero and finite (:func:`nn_correct`).
    senses : sequence of str (n,)
        The sense field of each row (``""``: unannotated).
    n_boot, alpha, seed : replicates, level and seed of the bootstrap interval.

    Returns
    -------
    SenseSeparation
        ``score, ci_low, ci_high, chance`` (NaN with fewer than two annotated rows), ``n`` annotated rows and
        ``n_senses`` distinct first keys among them.
    """
    keys = first_sense(senses)
    keep = keys != ""
    labels = keys[keep].astype(str)
    n = int(keep.sum())
    if n < 2:
        return SenseSeparation(float("nan"), float("nan"), float("nan"), float("nan"), n, len(set(labels)))
    correct = nn_correct(np.asarray(x)[keep], labels)
    low, high = bootstrap_ci(correct, n_boot=n_boot, alpha=alpha, seed=seed)
    return SenseSeparation(float(correct.mean()), low, high, chance_agreement(labels), n, len(set(labels)))
