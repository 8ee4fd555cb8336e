"""probing.probes.mdl: online codelength on hand-computed examples, no leakage of the coded block,
the reference's unit arithmetic, and compression on learnable versus random labels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from probing.probes.control import ControlTask
from probing.probes.mdl import control_codelength, online_codelength
from probing.probes.mlp import MLPProbe


class LaplaceProbe(BaseEstimator):
    """Ignores X: p(c) = (count_c + 1) / (n + K) over the training labels (indices 0..K-1)."""

    def __init__(self, n_classes: int = 3):
        self.n_classes = n_classes

    def fit(self, X, y):
        self.classes_ = np.arange(self.n_classes)
        self.p_ = (np.bincount(y, minlength=self.n_classes) + 1) / (len(y) + self.n_classes)
        return self

    def predict_proba(self, X):
        return np.tile(self.p_, (len(X), 1))


class Memoriser(BaseEstimator):
    """Remembers every row it is given (training and dev): p = 0.9 on the remembered label of an exact
    match, uniform over K otherwise. Any leak of a coded row into its probe's data lowers the cost."""

    def __init__(self, n_classes: int = 4):
        self.n_classes = n_classes

    def fit(self, X, y, X_dev=None, y_dev=None):
        self.classes_ = np.arange(self.n_classes)
        self.table_ = dict(zip(np.asarray(X)[:, 0].tolist(), np.asarray(y).tolist()))
        if X_dev is not None:
            self.table_.update(zip(np.asarray(X_dev)[:, 0].tolist(), np.asarray(y_dev).tolist()))
        return self

    def predict_proba(self, X):
        K = self.n_classes
        p = np.full((len(X), K), 1.0 / K)
        for i, v in enumerate(np.asarray(X)[:, 0].tolist()):
            if v in self.table_:
                p[i] = 0.1 / (K - 1)
                p[i, self.table_[v]] = 0.9
        return p


# Five sentences over K = 3 labels. default_rng(0).permutation(5) = [2, 4, 3, 0, 1] puts sentence s2
# first, then s4, s3, s0, s1; fractions (0.2, 0.6, 1.0) cut after int(0.2*5) = 1 and int(0.6*5) = 3 sentences:
# block 0 = s2, block 1 = s4 + s3, block 2 = s0 + s1.
SENTENCES = {"s0": "aa", "s1": "b", "s2": "ac", "s3": "bb", "s4": "c"}


def hand_example():
    groups = [s for s, labels in SENTENCES.items() for _ in labels]
    y = [c for labels in SENTENCES.values() for c in labels]
    return np.zeros((len(y), 1)), np.array(y), np.array(groups)


def test_blocks_and_costs_by_hand():
    X, y, groups = hand_example()
    code = online_codelength(
        X, y, groups, probe=LaplaceProbe(3), fractions=(0.2, 0.6, 1.0), seed=0, smoothing=0.0, dev_fraction=0.0
    )
    # block 0 (s2 = a c): uniform, 2 log2 3.
    # block 1 (s4 = c, s3 = b b) under counts a1 b0 c1 of block 0: p = a 2/5, b 1/5, c 2/5.
    # block 2 (s0 = a a, s1 = b) under counts a1 b2 c2 of blocks 0-1: p = a 2/8, b 3/8, c 3/8.
    expected = [2 * math.log2(3), math.log2(5 / 2) + 2 * math.log2(5), 2 * math.log2(4) + math.log2(8 / 3)]
    np.testing.assert_allclose(code.block_bits, expected, rtol=1e-12)
    np.testing.assert_array_equal(code.block_sentences, [1, 2, 2])
    np.testing.assert_array_equal(code.block_tokens, [2, 3, 3])
    assert code.codelength_bits == pytest.approx(sum(expected), rel=1e-12)
    assert code.uniform_bits == pytest.approx(8 * math.log2(3), rel=1e-12)  # N log2 K
    assert code.compression == pytest.approx(8 * math.log2(3) / sum(expected), rel=1e-12)
    assert code.codelength_kbits == pytest.approx(sum(expected) / 1000)
    # another seed gives another order: default_rng(1).permutation(5) = [4, 0, 1, 2, 3] -> block 0 = s4 (1 token)
    other = online_codelength(
        X, y, groups, probe=LaplaceProbe(3), fractions=(0.2, 0.6, 1.0), seed=1, smoothing=0.0, dev_fraction=0.0
    )
    np.testing.assert_array_equal(other.block_tokens, [1, 3, 4])


def test_reference_units_reproduce_the_reference_arithmetic():
    """The reference adds the first block in bits to the later blocks' summed natural-log cross-entropy
    and divides by 1024 for kbits."""
    X, y, groups = hand_example()
    kw = dict(probe=LaplaceProbe(3), fractions=(0.2, 0.6, 1.0), seed=0, smoothing=0.0, dev_fraction=0.0)
    ref = online_codelength(X, y, groups, reference_units=True, **kw)
    nats = math.log(5 / 2) + 2 * math.log(5) + 2 * math.log(4) + math.log(8 / 3)
    assert ref.codelength_bits == pytest.approx(2 * math.log2(3) + nats, rel=1e-12)
    assert ref.codelength_kbits == pytest.approx((2 * math.log2(3) + nats) / 1024, rel=1e-12)
    assert ref.uniform_kbits == pytest.approx(8 * math.log2(3) / 1024, rel=1e-12)
    bits = online_codelength(X, y, groups, **kw)
    assert bits.with_reference_units().codelength_bits == pytest.approx(ref.codelength_bits, rel=1e-12)
    assert ref.with_reference_units(False).codelength_bits == pytest.approx(bits.codelength_bits, rel=1e-12)


@pytest.mark.parametrize("external_dev", [False, True])
def test_coded_block_never_reaches_its_probe(external_dev):
    """Every token is a distinct row and labels are random, so with no leak each block costs exactly
    log2 4 = 2 bits per token (compression exactly 1); a coded row in the probe's training or dev data
    would cost -log2 0.9 = 0.15 bits instead."""
    rng = np.random.default_rng(0)
    n = 300
    X = np.arange(n, dtype=np.float64)[:, None]
    y = rng.integers(0, 4, n)
    groups = np.repeat(np.arange(60), 5)
    dev = dict(X_dev=-1.0 - X[:50], y_dev=y[:50]) if external_dev else dict(dev_fraction=0.3)
    code = online_codelength(
        X, y, groups, probe=Memoriser(4), fractions=(0.1, 0.25, 0.5, 1.0), smoothing=0.0, n_classes=4, **dev
    )
    np.testing.assert_allclose(code.block_bits, 2.0 * code.block_tokens, rtol=1e-12)
    assert code.compression == pytest.approx(1.0, rel=1e-12)


def _separable(n_sent, seed, noise=0.5):
    """Sentences of 8 tokens; labels 0..3 from the nearest of 4 class means in 6-D, plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    n = 8 * n_sent
    y = rng.integers(0, 4, n)
    means = rng.standard_normal((4, 6)) * 3
    X = means[y] + noise * rng.standard_normal((n, 6))
    return X.astype(np.float32), y, np.repeat(np.arange(n_sent), 8)


def test_learnable_labels_compress_and_random_labels_do_not():
    """A linearly decodable task compresses far better than uniform (> 5x here, ~0.1 bits/token against
    2); labels independent of X cannot be compressed: the online code is the uniform one plus a little
    for the probe fitting noise (compression in [0.9, 1.0], tolerance 0.005 above 1 for the prior's fit)."""
    X, y, groups = _separable(500, seed=0)
    learnable = online_codelength(X, y, groups, fractions=(0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0))
    assert learnable.compression > 5
    assert learnable.uniform_bits == pytest.approx(len(y) * 2.0)
    y_random = np.random.default_rng(1).integers(0, 4, len(y))
    random = online_codelength(X, y_random, groups, fractions=(0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0))
    assert 0.9 <= random.compression <= 1.005


def test_mlp_probe_is_seeded_and_learns():
    X, y, groups = _separable(200, seed=2)
    kw = dict(probe="mlp", hidden_layers=2, width=16, fractions=(0.05, 0.1, 0.25, 0.5, 1.0), seed=3)
    one = online_codelength(X, y, groups, **kw)
    again = online_codelength(X, y, groups, **kw)
    np.testing.assert_array_equal(one.block_bits, again.block_bits)  # seeded init, order and dev carving
    assert one.compression > 2
    mlp = MLPProbe(width=32, learning_rate=1e-2, max_epochs=30).fit(X[:1000], y[:1000], X[1000:1200], y[1000:1200])
    assert mlp.score(X[1200:], y[1200:]) > 0.95  # 4 classes, means ~8 noise sd apart: a linear rule gets ~100 %
    assert mlp.n_iter_ <= 30


def test_control_codelength_uses_control_task_labels():
    """Same as coding ControlTask(seed).fit_transform(words, y) with the task's K: equal uniform codes."""
    X, y, groups = _separable(100, seed=4)
    words = [f"w{i % 37}" for i in range(len(y))]
    kw = dict(fractions=(0.05, 0.2, 0.5, 1.0))
    ctrl = control_codelength(X, y, words, groups, control_seed=5, **kw)
    y_ctrl = ControlTask(seed=5).fit_transform(words, y)
    direct = online_codelength(X, y_ctrl, groups, n_classes=4, **kw)
    assert ctrl.codelength_bits == pytest.approx(direct.codelength_bits, rel=1e-12)
    assert ctrl.uniform_bits == online_codelength(X, y, groups, **kw).uniform_bits


def test_errors():
    X, y, groups = hand_example()
    with pytest.raises(ValueError, match="first block .* is empty; need at least 1000 sentences"):
        online_codelength(X, y, groups)
    with pytest.raises(ValueError, match="fractions must increase"):
        online_codelength(X, y, groups, fractions=(0.5, 0.2, 1.0))
    with pytest.raises(ValueError, match="probability 0"):
        # block 0 = s2 (a c): a linear probe on it gives label b, first seen in block 1, probability 0
        online_codelength(X, y, groups, fractions=(0.2, 1.0), smoothing=0.0)
    with pytest.raises(ValueError, match="n_classes=2 but y has 3"):
        online_codelength(X, y, groups, fractions=(0.2, 1.0), n_classes=2)


SEEN: list[tuple[int, int]] = []


class Recorder(LaplaceProbe):
    """LaplaceProbe that records (training rows, 0) of every fit; its fit takes no dev data."""

    def fit(self, X, y):
        SEEN.append((len(y), 0))
        return super().fit(X, y)


class DevRecorder(LaplaceProbe):
    """Records (training rows, dev rows) of every fit; its fit takes dev data."""

    def fit(self, X, y, X_dev=None, y_dev=None):
        SEEN.append((len(y), 0 if y_dev is None else len(y_dev)))
        return super().fit(X, y)


@pytest.mark.parametrize("probe, expected", [(Recorder(3), [(10, 0), (50, 0)]), (DevRecorder(3), [(5, 5), (25, 25)])])
def test_dev_is_carved_only_for_probes_that_use_it(probe, expected):
    """100 one-token sentences, blocks after 10 and 50: a probe whose fit takes no dev data trains on all
    earlier tokens; one that does gets dev_fraction = 0.5 of the earlier sentences held out as dev."""
    SEEN.clear()
    y = np.arange(100) % 3
    online_codelength(np.zeros((100, 1)), y, np.arange(100), probe=probe, fractions=(0.1, 0.5, 1.0), dev_fraction=0.5)
    assert SEEN == expected
