"""Uncertainty for probe scores: cluster bootstrap over sentences, t-intervals over seeds.

Tokens of one sentence are not independent (a probe that mis-tags one word often mis-tags its
neighbours), so confidence intervals resample whole sentences (Field & Welsh 2007's cluster
bootstrap); the statistic is the token-level mean of the resampled sentences.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as _st

from probing.errors import InputError

_GATHER_BUDGET = 1 << 22  # elements per block of bootstrap indices (32 MiB of int64)


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")


MAX_BOOT = 1_000_000  # 1,000-10,000 replicates give stable 95 % intervals; more only costs time and memory


def bootstrap_ci(
    correct,
    groups=None,
    *,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval for the mean of per-item scores.

    Per-cluster sums are taken once (``np.bincount``), so a replicate costs O(n_clusters). Without
    groups, 0/1 scores use the exact shortcut: the resampled count is Binomial(n, mean).

    Parameters
    ----------
    correct : (n,)
        Per-token 0/1 correctness or any per-item score.
    groups : (n,), optional
        Cluster id per item (e.g. sentence ids); clusters are resampled with replacement and the statistic
        is sum(scores) / sum(items) over the resample. ``None``: items are resampled.
    n_boot, alpha, seed : replicates, level and seed.

    Returns
    -------
    low, high : float
        The ``alpha/2`` and ``1 - alpha/2`` quantiles of ``n_boot`` replicates.
    """
    _check_alpha(alpha)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not 1 <= n_boot <= MAX_BOOT:
        raise InputError(f"bootstrap_ci: n_boot must be an integer from 1 to {MAX_BOOT:,}, got {n_boot!r}")
    x = np.asarray(correct, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise InputError(f"bootstrap_ci: correct must be a non-empty 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise InputError(f"bootstrap_ci: correct contains NaN or infinity (index {int(np.argmin(np.isfinite(x)))})")
    rng = np.random.default_rng(seed)
    n = x.size

    if groups is None:
        if np.all((x == 0) | (x == 1)):
            reps = rng.binomial(n, x.mean(), size=n_boot) / n
            return _percentiles(reps, alpha)
        sums, counts = x, None  # type: np.ndarray, np.ndarray | None
    else:
        g = np.asarray(groups)
        if g.shape != x.shape:
            raise InputError(f"bootstrap_ci: groups has shape {g.shape}, expected {x.shape} like correct")
        codes = np.unique(g, return_inverse=True)[1]
        sums = np.bincount(codes, weights=x)
        counts = np.bincount(codes).astype(np.float64)

    n_groups = sums.size
    reps = np.empty(n_boot)
    block = max(1, _GATHER_BUDGET // n_groups)
    for start in range(0, n_boot, block):
        b = min(block, n_boot - start)
        idx = rng.integers(0, n_groups, size=(b, n_groups))
        total = sums[idx].sum(axis=1)
        reps[start : start + b] = total / (n_groups if counts is None else counts[idx].sum(axis=1))
    return _percentiles(reps, alpha)


def _percentiles(reps: np.ndarray, alpha: float) -> tuple[float, float]:
    low, high = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def mean_and_ci_over_seeds(values: Sequence[float], alpha: float = 0.05) -> tuple[float, float, float]:
    """Mean of a score over seeds and its Student-t interval: mean ± t_{1-alpha/2, k-1} s / sqrt(k).

    Parameters
    ----------
    values : (k,)
        One score per seed.
    alpha : float

    Returns
    -------
    mean, low, high : float
        With one value the interval is undefined: ``(value, nan, nan)``.
    """
    _check_alpha(alpha)
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise InputError(f"mean_and_ci_over_seeds: values must be a non-empty 1-D sequence, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise InputError("mean_and_ci_over_seeds: values contain NaN or infinity")
    mean = float(v.mean())
    if v.size == 1:
        return mean, float("nan"), float("nan")
    half = float(_st.t.ppf(1 - alpha / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return mean, mean - half, mean + half


def bootstrap_ci_mean_of_means(
    values,
    strata,
    *,
    n_boot: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval for the mean over strata of the per-stratum mean of ``values``.

    Items are resampled with replacement; a stratum absent from a replicate is left out of that
    replicate's mean, as it is left out of the statistic when a corpus has no sentence of that length
    (Hewitt & Manning's DSpr./NSpr. average over the lengths present).

    Parameters
    ----------
    values : (n,)
        One score per item (e.g. per sentence).
    strata : (n,)
        The item's stratum (e.g. its length).
    n_boot, alpha, seed : replicates, level and seed.

    Returns
    -------
    low, high : float
    """
    _check_alpha(alpha)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise InputError(f"bootstrap_ci_mean_of_means: n_boot must be a positive integer, got {n_boot!r}")
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise InputError(f"bootstrap_ci_mean_of_means: values must be a non-empty 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise InputError("bootstrap_ci_mean_of_means: values contain NaN or infinity")
    s = np.asarray(strata)
    if s.shape != x.shape:
        raise InputError(f"bootstrap_ci_mean_of_means: strata has shape {s.shape}, expected {x.shape} like values")
    _, codes = np.unique(s, return_inverse=True)
    k = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    n = x.size
    reps = np.empty(n_boot)
    block = max(1, _GATHER_BUDGET // n)
    for start in range(0, n_boot, block):
        b = min(block, n_boot - start)
        idx = rng.integers(0, n, size=(b, n))
        cell = (np.arange(b)[:, None] * k + codes[idx]).ravel()
        sums = np.bincount(cell, weights=x[idx].ravel(), minlength=b * k).reshape(b, k)
        counts = np.bincount(cell, minlength=b * k).reshape(b, k)
        with np.errstate(invalid="ignore", divide="ignore"):
            reps[start : start + b] = np.nanmean(sums / counts, axis=1)
    return _percentiles(reps, alpha)
