"""The numbers that summarise a learning curve: how much data a representation needs (issue 31).

A learning curve is a score measured after training on growing amounts of data ``n_1 < n_2 < ...``
(sentences, tokens). Three summaries, defined in DESIGN.md ("Learning curves"):

* :func:`data_efficiency_ratio`: how many times more data a reference (GloVe, layer 0) needs to reach
  the score a representation reaches with ``n`` items, read off the reference's curve interpolated
  linearly in ``log n``.
* :func:`surplus_description_length` (SDL) and :func:`epsilon_sample_complexity` (eSC) of Whitney et
  al. (2020, "Evaluating representations by the complexity of learning low-loss predictors"), from a
  loss-data curve such as the online code's blocks (:class:`probing.probes.mdl.OnlineCode`): the item
  ``i`` is coded by a model trained on the items before its block, so the block's mean loss is the
  curve's value over that block.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from probing.errors import InputError

__all__ = ["data_efficiency_ratio", "epsilon_sample_complexity", "surplus_description_length"]


def _curve(n: ArrayLike, values: ArrayLike, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Sizes (k,) strictly increasing and positive, and finite values (k,), as float arrays."""
    sizes = np.asarray(n, dtype=np.float64)
    vals = np.asarray(values, dtype=np.float64)
    if sizes.ndim != 1 or sizes.shape != vals.shape or sizes.size == 0:
        raise InputError(
            f"{name}: sizes and values must be 1-D of the same non-zero length, got {sizes.shape}, {vals.shape}"
        )
    if not (np.all(np.isfinite(sizes)) and np.all(sizes > 0) and np.all(np.diff(sizes) > 0)):
        raise InputError(f"{name}: sizes must be positive and strictly increasing, got {sizes.tolist()}")
    if not np.all(np.isfinite(vals)):
        raise InputError(f"{name}: values must be finite, got {vals.tolist()}")
    return sizes, vals


def _level_at(sizes: np.ndarray, values: np.ndarray, at: float) -> float:
    """The curve's value at size ``at``, linear in ``log n`` between measured sizes."""
    if not sizes[0] <= at <= sizes[-1]:
        raise InputError(f"data_efficiency_ratio: at={at} lies outside the measured sizes [{sizes[0]}, {sizes[-1]}]")
    return float(np.interp(math.log(at), np.log(sizes), values))


def _first_reach(sizes: np.ndarray, values: np.ndarray, level: float) -> float:
    """The smallest size at which the piecewise log-linear curve reaches ``level`` (``inf`` if it never
    does; the first size if it starts at or above it)."""
    if values[0] >= level:
        return float(sizes[0])
    for i in range(len(sizes) - 1):
        lo, hi = values[i], values[i + 1]
        if hi >= level:
            t = (level - lo) / (hi - lo)
            return float(math.exp(math.log(sizes[i]) + t * (math.log(sizes[i + 1]) - math.log(sizes[i]))))
    return math.inf


def data_efficiency_ratio(
    n: ArrayLike,
    score: ArrayLike,
    n_reference: ArrayLike,
    score_reference: ArrayLike,
    at: float,
    *,
    higher_is_better: bool = True,
) -> float:
    """How many times more training data the reference needs to reach the score reached at size ``at``.

    ``n_ref`` is the smallest size at which the reference's curve, linear in ``log n`` between its measured
    points, reaches ``score(at)``: ``inf`` when it never does within its sizes ("more than the full set").
    When the reference's first point already reaches the level, ``n_ref`` is that first size, so the ratio is
    an upper bound (the curve was not measured lower). A ratio of 10 at ``at = 1 %`` of the data: the
    reference needs 10 % to match.

    Parameters
    ----------
    n, score : (k,)
        The representation's curve (sizes strictly increasing).
    n_reference, score_reference : (m,)
        The reference's curve, on the same size unit.
    at : float
        A size within ``n``.
    higher_is_better : bool
        False for losses (the level is reached at or below it).

    Returns
    -------
    float
        ``n_ref / at``.
    """
    sizes, vals = _curve(n, score, "data_efficiency_ratio")
    ref_sizes, ref_vals = _curve(n_reference, score_reference, "data_efficiency_ratio (reference)")
    sign = 1.0 if higher_is_better else -1.0
    level = _level_at(sizes, sign * vals, float(at))
    return _first_reach(ref_sizes, sign * ref_vals, level) / float(at)


def _loss_blocks(n_train: ArrayLike, block_items: ArrayLike, losses: ArrayLike):
    trained = np.asarray(n_train, dtype=np.float64)
    items = np.asarray(block_items, dtype=np.float64)
    loss = np.asarray(losses, dtype=np.float64)
    if not (trained.ndim == 1 and trained.shape == items.shape == loss.shape and trained.size):
        raise InputError(
            f"n_train, block_items and losses must be 1-D of the same non-zero length, got "
            f"{trained.shape}, {items.shape}, {loss.shape}"
        )
    if np.any(trained < 0) or np.any(np.diff(trained) <= 0) or np.any(items <= 0):
        raise InputError("n_train must be non-negative and strictly increasing, block_items positive")
    if not np.all(np.isfinite(loss)):
        raise InputError(f"losses must be finite, got {loss.tolist()}")
    return trained, items, loss


def surplus_description_length(block_items: ArrayLike, losses: ArrayLike, epsilon: float) -> tuple[float, bool]:
    """Whitney et al.'s SDL over the measured blocks, as a block sum that bounds it from above:
    ``sum_k block_items[k] * max(losses[k] - epsilon, 0)``.

    SDL is the data-cost of learning a predictor with loss ``epsilon``: the loss in excess of ``epsilon``
    summed over every item until the learner gets there, ``sum_i [L(A, i) - epsilon]_+``; at ``epsilon = 0``
    the block sum is the online codelength itself (MDL). An online code's block is coded by a model trained on
    the items before it, so each of its items is charged the loss at the block's left end, at least its own
    ``L(A, i)`` where the loss falls with data: an upper bound of the definition, loose with doubling blocks
    (2.6-3.7x Whitney et al.'s ``reprieve``, which charges each segment its right end's loss, on a real
    online code). Compare values only between curves with the same blocks.

    Parameters
    ----------
    block_items : (k,)
        Items in each block of the curve.
    losses : (k,)
        The mean loss per item of the model that coded the block (bits per token for an online code).
    epsilon : float
        The loss a predictor must reach, in the same unit.

    Returns
    -------
    sdl : float
    complete : bool
        False when the last block's loss is still above ``epsilon``, so ``sdl`` is a lower bound (the curve
        goes on beyond the data).
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= 0):
        raise InputError(f"surplus_description_length: epsilon must be a non-negative number, got {epsilon!r}")
    _, items, loss = _loss_blocks(np.arange(np.size(block_items)), block_items, losses)
    return float(np.sum(items * np.maximum(loss - epsilon, 0.0))), bool(loss[-1] <= epsilon)


def epsilon_sample_complexity(n_train: ArrayLike, losses: ArrayLike, epsilon: float) -> float:
    """Whitney et al.'s eSC: the smallest training size whose model has loss at most ``epsilon``.

    Like the reference implementation, the answer is the smallest measured size (no interpolation).

    Parameters
    ----------
    n_train : (k,)
        Training sizes, strictly increasing (for an online code: the items sent before each block, 0 for
        the first).
    losses : (k,)
        The loss of the model trained on that many items.
    epsilon : float

    Returns
    -------
    float
        That size, ``inf`` when no measured model reaches ``epsilon``.
    """
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= 0):
        raise InputError(f"epsilon_sample_complexity: epsilon must be a non-negative number, got {epsilon!r}")
    trained, _, loss = _loss_blocks(n_train, np.ones(np.size(n_train)), losses)
    reached = np.flatnonzero(loss <= epsilon)
    return float(trained[reached[0]]) if reached.size else math.inf
