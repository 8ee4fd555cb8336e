"""Cluster bootstrap and seed t-intervals: coverage on simulations with known truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from probing.probes.stats import bootstrap_ci, mean_and_ci_over_seeds


def coverage(intervals, truth):
    return np.mean([lo <= truth <= hi for lo, hi in intervals])


def test_binomial_coverage_is_95_percent():
    # 1000 simulated test sets of 400 independent tokens, p = 0.8. With 1000 simulations the
    # coverage estimate has SE 0.0069; the percentile interval's true coverage at n=400 is ~0.945.
    # Tolerance 0.025 (~3.5 SE).
    rng = np.random.default_rng(1)
    p, n = 0.8, 400
    cis = [bootstrap_ci(rng.random(n) < p, seed=s) for s in range(1000)]
    assert abs(coverage(cis, p) - 0.95) < 0.025


def test_item_resampling_coverage_for_continuous_scores():
    # Non-binary per-item scores take the general resampling path. 300 simulations: SE 0.0126,
    # tolerance 0.04 (~3.2 SE). Scores ~ Beta(2, 5): mean 2/7.
    rng = np.random.default_rng(2)
    cis = [bootstrap_ci(rng.beta(2, 5, 150), seed=s) for s in range(300)]
    assert abs(coverage(cis, 2 / 7) - 0.95) < 0.04


def test_grouping_restores_coverage_when_errors_cluster():
    # 150 sentences of 8 tokens; each sentence has its own accuracy p_g ~ Beta(1.87, 0.47):
    # mean 0.8, intra-sentence correlation 0.3, design effect 1 + 7 * 0.3 = 3.1. Resampling
    # tokens ignores this and its interval is ~sqrt(3.1) = 1.76x too narrow (nominal 95% ->
    # ~73% coverage); resampling sentences is right up to the usual small-sample shortfall.
    rng = np.random.default_rng(3)
    G, m = 150, 8
    groups = np.repeat(np.arange(G), m)
    clustered, naive = [], []
    for s in range(300):
        p_g = rng.beta(1.87, 0.47, G)
        correct = rng.random(G * m) < np.repeat(p_g, m)
        clustered.append(bootstrap_ci(correct, groups, seed=s))
        naive.append(bootstrap_ci(correct, seed=s))
    assert 0.91 <= coverage(clustered, 0.8) <= 0.98
    assert coverage(naive, 0.8) < 0.82
    widths = np.array([(h - l) for l, h in clustered]) / np.array([(h - l) for l, h in naive])
    assert 1.5 < widths.mean() < 2.1, widths.mean()


def test_binomial_shortcut_matches_item_resampling():
    # Without groups, 0/1 scores use Binomial(n, mean) draws; resampling items one by one (each
    # item its own group) must give the same interval up to Monte-Carlo error (~0.003 here).
    rng = np.random.default_rng(4)
    x = rng.random(2000) < 0.9
    fast = bootstrap_ci(x, n_boot=4000)
    slow = bootstrap_ci(x, groups=np.arange(x.size), n_boot=4000)
    assert np.allclose(fast, slow, atol=0.004), (fast, slow)


def test_statistic_is_the_token_mean_of_resampled_sentences():
    # Sentence A: 1 token, correct; sentence B: 9 tokens, all wrong. Token accuracy 0.1;
    # the mean of sentence accuracies would be 0.5. Every replicate is k / (k + 9 (2 - k))
    # with k ~ Binomial(2, 1/2) copies of A: values 0, 0.1, 1 with probabilities 1/4, 1/2, 1/4.
    x = np.array([1] + [0] * 9)
    g = np.array(["A"] + ["B"] * 9)
    # The 30% and 70% quantiles both fall in the 0.1 atom; the 5% and 95% ones in 0 and 1.
    assert bootstrap_ci(x, g, alpha=0.6, n_boot=20000) == pytest.approx((0.1, 0.1))
    assert bootstrap_ci(x, g, alpha=0.1, n_boot=20000) == (0.0, 1.0)
    assert bootstrap_ci(np.ones(50)) == (1.0, 1.0)


def test_seeded_and_validated():
    x = np.random.default_rng(5).random(300)
    assert bootstrap_ci(x, seed=7) == bootstrap_ci(x, seed=7)
    assert bootstrap_ci(x, seed=7) != bootstrap_ci(x, seed=8)
    with pytest.raises(ValueError, match="non-empty 1-D"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="NaN or infinity"):
        bootstrap_ci([0.5, np.nan])
    with pytest.raises(ValueError, match="groups has shape"):
        bootstrap_ci([1, 0, 1], groups=[0, 1])
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci([1, 0], alpha=1.5)


def test_mean_and_ci_over_seeds_is_student_t():
    v = [0.951, 0.948, 0.955, 0.950, 0.946]
    mean, lo, hi = mean_and_ci_over_seeds(v)
    ref = stats.t.interval(0.95, len(v) - 1, loc=np.mean(v), scale=stats.sem(v))
    assert mean == pytest.approx(np.mean(v))
    assert (lo, hi) == pytest.approx(ref)
    # hand check: t_{0.975, 4} = 2.7764, s = 0.003536 -> half-width 0.004390
    assert hi - mean == pytest.approx(2.7764 * np.std(v, ddof=1) / math.sqrt(5), rel=1e-4)
    one = mean_and_ci_over_seeds([0.9])
    assert one[0] == 0.9 and math.isnan(one[1]) and math.isnan(one[2])
    with pytest.raises(ValueError, match="non-empty"):
        mean_and_ci_over_seeds([])
