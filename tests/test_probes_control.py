"""Control tasks (Hewitt & Liang 2019): per-type labels with the task's token-level distribution."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from probing.probes.control import ControlTask, selectivity


def zipf_corpus(n_types=2000, n_tokens=40000, seed=0):
    """Tokens with Zipfian type frequencies; each type has a fixed gold tag (skewed tag prior)."""
    rng = np.random.default_rng(seed)
    freq = 1.0 / np.arange(1, n_types + 1) ** 1.1
    types = np.array([f"w{i}" for i in range(n_types)], dtype=object)
    tags = np.array(["NOUN", "VERB", "ADJ", "DET", "ADP", "PUNCT"])
    type_tag = rng.choice(len(tags), size=n_types, p=[0.4, 0.2, 0.15, 0.1, 0.1, 0.05])
    tok = rng.choice(n_types, size=n_tokens, p=freq / freq.sum())
    return list(types[tok]), tags[type_tag[tok]]


def test_every_occurrence_of_a_type_gets_one_label():
    words, labels = zipf_corpus()
    control = ControlTask(seed=3).fit(words, labels)
    out = control.transform(words)
    by_type: dict[str, set] = {}
    for w, c in zip(words, out):
        by_type.setdefault(w, set()).add(c)
    assert all(len(v) == 1 for v in by_type.values())
    # Deterministic per (type, seed): a fresh object, or the words in another order, agree.
    again = ControlTask(seed=3).fit(words, labels).transform(words[::-1])[::-1]
    assert np.array_equal(out, again)
    # Unseen types are labelled from the same classes, deterministically.
    unseen = ["zzz-never-seen", "qqq"]
    assert np.array_equal(control.transform(unseen), control.transform(unseen))
    assert set(control.transform(unseen)) <= set(control.classes_)


def test_seed_changes_the_assignment():
    words, labels = zipf_corpus()
    a = ControlTask(seed=0).fit_transform(words, labels)
    b = ControlTask(seed=1).fit_transform(words, labels)
    # Independent draws agree on a type with probability sum_c p_c^2 (~0.26 here), not ~1.
    types = sorted(set(words))
    first = {w: i for i, w in enumerate(words)}
    agree = np.mean([a[first[t]] == b[first[t]] for t in types])
    p = np.unique(labels, return_counts=True)[1] / len(labels)
    assert abs(agree - np.sum(p**2)) < 0.05, agree


def test_token_distribution_matches_task():
    """The control labels' token distribution matches the task's, up to sampling noise.

    Each type draws its label independently, so the token share of class c is
    sum_t w_t 1[label_t = c] with w_t = f_t / N: unbiased for p_c with variance p_c (1 - p_c) sum_t w_t^2.
    The chi-square statistic uses Kish's effective sample size n_eff = 1 / sum_t w_t^2 (not the
    token count, which would ignore that a frequent type moves all its tokens at once) and is then
    ~chi2(K - 1). Over 30 seeds: its mean must be K-1 within 4 standard errors, and at most 6 seeds
    may reach p < 0.05 (expected 1.5; binomial tail P(>= 7 of 30) = 0.0006).
    """
    words, labels = zipf_corpus()
    classes, counts = np.unique(labels, return_counts=True)
    p = counts / counts.sum()
    types, f = np.unique(np.asarray(words, dtype=object), return_counts=True)
    w = f / f.sum()
    n_eff = 1.0 / np.sum(w**2)
    k = len(classes)
    chi2, pvals = [], []
    for seed in range(30):
        control = ControlTask(seed=seed).fit(words, labels)
        assert np.array_equal(control.classes_, classes) and np.allclose(control.class_prior_, p)
        # one label per type (tested above), so token shares are frequency-weighted type shares
        type_labels = control.transform(list(types))
        q = np.array([w[type_labels == c].sum() for c in classes])
        x2 = n_eff * np.sum((q - p) ** 2 / p)
        chi2.append(x2)
        pvals.append(stats.chi2.sf(x2, k - 1))
    se = np.sqrt(2 * (k - 1) / len(chi2))
    assert abs(np.mean(chi2) - (k - 1)) < 4 * se, np.mean(chi2)
    assert np.sum(np.array(pvals) < 0.05) <= 6, pvals


def test_selectivity_and_errors():
    assert selectivity(0.97, 0.71) == pytest.approx(0.26)
    with pytest.raises(RuntimeError, match="call fit"):
        ControlTask().transform(["a"])
    with pytest.raises(ValueError, match="one label per word"):
        ControlTask().fit(["a", "b"], ["X"])
    with pytest.raises(TypeError, match=r"words\[1\] is int"):
        ControlTask().fit(["a", 3], ["X", "Y"])
