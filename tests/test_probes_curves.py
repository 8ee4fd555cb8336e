"""The learning-curve summaries of :mod:`probing.probes.curves` on curves whose answers are known."""

import math

import numpy as np
import pytest

from probing.errors import InputError
from probing.probes.curves import data_efficiency_ratio, epsilon_sample_complexity, surplus_description_length
from probing.probes.mdl import online_codelength

SIZES = [10, 20, 50, 100, 200, 500, 1000]


def _loglinear(sizes, shift=1.0):
    """0.5 + 0.1 log10(n / shift): the same curve moved right by a factor ``shift`` on the log axis."""
    return [0.5 + 0.1 * math.log10(n / shift) for n in sizes]


@pytest.mark.parametrize("at", [10, 20, 50, 100])
def test_a_reference_shifted_tenfold_on_the_log_axis_needs_ten_times_the_data(at):
    ratio = data_efficiency_ratio(SIZES, _loglinear(SIZES), SIZES, _loglinear(SIZES, shift=10), at)
    assert ratio == pytest.approx(10.0, rel=1e-12)


def test_the_reference_curve_is_interpolated_linearly_in_log_size():
    # measured only at its ends, the log-linear reference still gives the exact crossing: 10 x 37 = 370
    ratio = data_efficiency_ratio(SIZES, _loglinear(SIZES), [10, 1000], _loglinear([10, 1000], shift=10), 37)
    assert ratio == pytest.approx(10.0, rel=1e-12)


def test_a_level_the_reference_never_reaches_is_an_infinite_ratio():
    # at 200 the representation scores 0.730; the shifted reference tops out at 0.700 on the full set
    assert data_efficiency_ratio(SIZES, _loglinear(SIZES), SIZES, _loglinear(SIZES, shift=10), 200) == math.inf


def test_a_better_reference_gives_a_ratio_below_one_bounded_by_its_first_size():
    better = _loglinear(SIZES, shift=0.1)  # reaches any level with a tenth of the data
    assert data_efficiency_ratio(SIZES, _loglinear(SIZES), SIZES, better, 1000) == pytest.approx(0.1)
    # level 0.6 at n = 10 is reached by the reference at n = 1, below its first measured size 10: the ratio is
    # reported as 10 / 10, an upper bound
    assert data_efficiency_ratio(SIZES, _loglinear(SIZES), SIZES, better, 10) == 1.0


def test_a_non_monotone_reference_counts_its_first_crossing():
    ref = [0.1, 0.7, 0.4, 0.9]
    # level 0.55 is crossed between 1 and 10 (t = 0.75 -> 10 ** 0.75) and again after the dip, between 100 and
    # 1000: the first crossing counts
    ratio = data_efficiency_ratio([10, 100], [0.55, 0.6], [1, 10, 100, 1000], ref, 10)
    assert ratio == pytest.approx(10**0.75 / 10)
    # level 0.8 only after the dip: t = 0.8 between 100 and 1000
    assert data_efficiency_ratio([10, 100], [0.8, 0.85], [1, 10, 100, 1000], ref, 10) == pytest.approx(10**2.8 / 10)


def test_losses_reach_their_level_from_above():
    loss = [-v for v in _loglinear(SIZES)]
    ref = [-v for v in _loglinear(SIZES, shift=10)]
    assert data_efficiency_ratio(SIZES, loss, SIZES, ref, 50, higher_is_better=False) == pytest.approx(10.0)


@pytest.mark.parametrize(
    "sizes, values, at, match",
    [
        ([10, 5], [0.1, 0.2], 10, "strictly increasing"),
        ([10, 20], [0.1, float("nan")], 10, "finite"),
        ([10, 20], [0.1, 0.2], 40, "outside the measured sizes"),
        ([0, 20], [0.1, 0.2], 10, "positive"),
    ],
)
def test_bad_curves_are_named(sizes, values, at, match):
    with pytest.raises(InputError, match=match):
        data_efficiency_ratio(sizes, values, [10, 20], [0.1, 0.2], at)


def test_sdl_of_hand_computed_blocks():
    items, losses = [10, 10, 20], [3.0, 1.0, 0.5]
    assert surplus_description_length(items, losses, 0.75) == (10 * 2.25 + 10 * 0.25, True)
    # at epsilon 0 it is the total code (MDL), a lower bound: no loss reaches 0
    assert surplus_description_length(items, losses, 0.0) == (10 * 3 + 10 * 1 + 20 * 0.5, False)
    # the last block is still above epsilon: the learner has not got there, the value is a lower bound
    assert surplus_description_length(items, losses, 0.4) == (pytest.approx(10 * 2.6 + 10 * 0.6 + 20 * 0.1), False)


def test_sdl_of_doubling_blocks_bounds_whitney_et_al_s_item_by_item_sum_from_above():
    """Loss L(n) = 16 / n bits after n training items, epsilon = 1, items 2..15 in doubling blocks [2, 4),
    [4, 8), [8, 16), each coded by the model trained on the items before it (16/2, 16/4, 16/8 bits): the block
    sum is 2 x 7 + 4 x 3 + 8 x 1 = 34. Whitney et al.'s definition item by item, sum_{i=2..15} (16 / i - 1), is
    16 (H_15 - 1) - 14 = 23.09; charging each block its right end's loss (reprieve's convention, 16/4, 16/8,
    16/16) gives 2 x 3 + 4 x 1 + 8 x 0 = 10, a bound from below."""
    sdl, complete = surplus_description_length([2, 4, 8], [8.0, 4.0, 2.0], 1.0)
    whitney = sum(16 / i - 1 for i in range(2, 16))
    reprieve, _ = surplus_description_length([2, 4, 8], [4.0, 2.0, 1.0], 1.0)
    assert (reprieve, whitney, sdl) == (10.0, pytest.approx(23.0917, abs=1e-4), 34.0)
    assert not complete  # the last block's 2 bits are still above epsilon


def test_esc_is_the_first_measured_size_at_or_below_epsilon():
    n_train, losses = [0, 10, 30], [3.0, 1.0, 0.5]
    assert epsilon_sample_complexity(n_train, losses, 1.0) == 10
    assert epsilon_sample_complexity(n_train, losses, 5.0) == 0  # the untrained (uniform) code suffices
    assert epsilon_sample_complexity(n_train, losses, 0.4) == math.inf
    with pytest.raises(InputError, match="epsilon"):
        epsilon_sample_complexity(n_train, losses, -1.0)


def test_an_online_codes_sdl_at_zero_is_its_codelength_and_its_esc_reads_its_blocks():
    rng = np.random.default_rng(0)
    n_sent, per = 400, 5
    y = rng.integers(0, 4, n_sent * per)
    X = (np.eye(4)[y] * 2 + rng.normal(size=(len(y), 4))).astype(np.float32)
    groups = np.repeat(np.arange(n_sent), per)
    code = online_codelength(X, y, groups, fractions=(0.01, 0.05, 0.25, 1.0), seed=0, progress=False)
    sdl, complete = code.surplus_description_length(0.0)
    assert sdl == pytest.approx(code.codelength_bits, rel=1e-12) and not complete
    per_token = code.block_bits / code.block_tokens
    before = np.concatenate([[0], np.cumsum(code.block_sentences)[:-1]])
    # an epsilon just above block 2's loss (and below blocks 0-1's) is first reached by the probe that coded block 2
    assert per_token[2] < min(per_token[:2])
    assert code.sample_complexity(float(per_token[2]) + 1e-9) == before[2]
    assert code.sample_complexity(float(per_token.min()) / 2) == math.inf
