"""Structural probes: trees, the paper's metrics on hand-worked examples, baselines, and known-answer fits."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from probing.probes.stats import bootstrap_ci_mean_of_means
from probing.probes.structural import (
    DepthProbe,
    DistanceProbe,
    dspr,
    dspr_per_sentence,
    mst_edges,
    nspr,
    position_depths,
    position_distances,
    punctuation_mask,
    random_trees,
    root_acc,
    scores_with_ci,
    tree_depths,
    tree_distances,
    uuas,
)

# "The cat sat on the mat ." in UD: The->cat, cat->sat, sat=root, on->mat, the->mat, mat->sat, .->sat
CAT = [2, 3, 0, 6, 6, 3, 3]
CAT_PUNCT = np.array([False] * 6 + [True])


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- trees ------------------------------------------------------------------------------------------


def test_tree_depths_and_distances_by_hand():
    assert tree_depths(CAT).tolist() == [2, 1, 0, 2, 2, 1, 1]
    d = tree_distances(CAT)
    assert d[0, 5] == 3, "The-cat-sat-mat"
    assert d[3, 4] == 2, "on and the are siblings under mat"
    assert d[0, 3] == 4, "The-cat-sat-mat-on"
    assert d[6, 0] == 3, ".-sat-cat-The"
    assert (d == d.T).all() and (np.diag(d) == 0).all()


def test_tree_distances_match_breadth_first_search_on_random_trees():
    """The ancestor-matrix formula against a plain BFS over the undirected tree."""
    for heads in random_trees([1, 2, 9, 23], seed=3):
        n = len(heads)
        adj = {i: set() for i in range(n)}
        for i, h in enumerate(heads):
            if h:
                adj[i].add(h - 1)
                adj[h - 1].add(i)
        want = np.zeros((n, n), dtype=int)
        for s in range(n):
            dist, frontier = {s: 0}, [s]
            while frontier:
                nxt = []
                for u in frontier:
                    for v in adj[u] - dist.keys():
                        dist[v] = dist[u] + 1
                        nxt.append(v)
                frontier = nxt
            want[s] = [dist[t] for t in range(n)]
        assert (tree_distances(heads) == want).all()
        assert (tree_depths(heads) == want[int(np.flatnonzero(heads == 0)[0])]).all()


@pytest.mark.parametrize(
    "heads,message",
    [
        ([0, 0, 1], r"2 roots \(words \[1, 2\]\)"),
        ([2, 3, 1], "0 roots"),
        ([0, 3, 2], r"cycle through words \[2, 3\]"),
        ([0, 4, 1], r"head of word 2 is 4, expected an integer in 0..3"),
        ([0, 2], "word 2 is its own head"),
    ],
)
def test_bad_trees_are_rejected_with_the_reason(heads, message):
    with pytest.raises(ValueError, match=message):
        tree_distances(heads)


def test_punctuation_uses_upos_for_ud_and_ptb_tags_otherwise():
    assert punctuation_mask(upos=["DET", "PUNCT", "NOUN"], xpos=["DT", ",", "NN"]).tolist() == [False, True, False]
    ptb = ["``", "NN", "''", ",", ".", ":", "-LRB-", "-RRB-", "$", "#"]
    assert punctuation_mask(upos=[""] * 10, xpos=ptb).tolist() == [True, False] + [True] * 6 + [False, False]


def test_mst_edges_skip_punctuation_and_break_ties_by_pair_order():
    d = np.abs(np.subtract.outer(np.arange(4), np.arange(4))).astype(float)
    assert mst_edges(d) == [(0, 1), (1, 2), (2, 3)]
    assert mst_edges(d, [False, True, False, False]) == [(2, 3), (0, 2)], "word 1 out: 0 joins at distance 2"
    ties = np.ones((3, 3)) - np.eye(3)
    assert mst_edges(ties) == [(0, 1), (0, 2)], "all pairs tie: earliest pairs first, as the reference's stable sort"


def reporter_edges(matrix, punct):
    """Direct port of ``prims_matrix_to_edges`` and its ``UnionFind`` (john-hewitt/structural-probes,
    ``reporter.py``): every ordered pair of non-punctuation words in row-major order, sorted by distance
    with Python's stable sort, joined when in different components."""
    parents = list(range(len(matrix)))

    def find(i):
        while i != parents[i]:
            i = parents[i]
        return i

    pairs = {}
    for i, line in enumerate(matrix):
        for j, dist in enumerate(line):
            if punct[i] or punct[j]:
                continue
            pairs[(i, j)] = dist
    edges = []
    for (i, j), _ in sorted(pairs.items(), key=lambda x: x[1]):
        if find(i) != find(j):
            parents[find(i)] = j
            edges.append((i, j))
    return edges


def reporter_uuas(matrices, trees, puncts):
    """``report_uuas_and_tikz``'s count: gold MST edges found in the predicted MST, as sorted pairs."""
    correct = total = 0
    for pred, heads, punct in zip(matrices, trees, puncts):
        gold = reporter_edges(tree_distances(heads), punct)
        found = {tuple(sorted(e)) for e in reporter_edges(pred, punct)}
        correct += len({tuple(sorted(e)) for e in gold} & found)
        total += len(gold)
    return correct / total


def test_mst_and_uuas_on_asymmetric_distances_follow_the_reporter():
    """Asymmetric predictions (rounded to create ties between a pair's two entries and across pairs): the
    MST's edge set and the pooled UUAS equal the reporter's, which links i and j at min(d_ij, d_ji); reading
    only the upper triangle gives another score on these inputs."""
    rng = np.random.default_rng(0)
    trees = random_trees(list(rng.integers(3, 16, size=60)), seed=1)
    puncts = [rng.random(len(h)) < 0.15 for h in trees]
    preds = [np.round(tree_distances(h) + rng.gamma(1.0, 1.5, (len(h), len(h))), 1) for h in trees]
    for pred, punct in zip(preds, puncts):
        want = {tuple(sorted(e)) for e in reporter_edges(pred, punct)}
        assert {tuple(e) for e in mst_edges(pred, punct)} == want
    assert uuas(preds, trees, puncts) == pytest.approx(reporter_uuas(preds, trees, puncts), abs=1e-15)
    upper = [np.triu(p) + np.triu(p, 1).T for p in preds]
    assert uuas(upper, trees, puncts) != pytest.approx(reporter_uuas(preds, trees, puncts), abs=1e-3)
    # a pair whose two entries tie with another pair's smaller entry: the earlier entry in row-major order wins
    d = np.array([[0.0, 5.0, 1.0], [1.0, 0.0, 5.0], [5.0, 5.0, 0.0]])
    assert reporter_edges(d, [False] * 3)[0] == (0, 2) and mst_edges(d)[0] == (0, 2)


# --- metrics on hand-worked examples ----------------------------------------------------------------


def test_uuas_by_hand_pooled_over_edges_and_punctuation_excluded():
    """Gold edges without '.': {0-1, 1-2, 2-5, 3-5, 4-5}. The position baseline's MST is the chain
    0-1-2-3-4-5: it shares 0-1, 1-2, 4-5 -> 3/5. 'Dogs bark' adds 1/1. Pooled: 4/6, not (0.6+1)/2."""
    pred = position_distances([7, 2])
    trees = [CAT, [2, 0]]
    punct = [CAT_PUNCT, np.zeros(2, bool)]
    assert uuas(pred[:1], trees[:1], punct[:1]) == pytest.approx(3 / 5)
    assert uuas(pred, trees, punct) == pytest.approx(4 / 6)
    assert uuas(pred[:1], trees[:1]) == pytest.approx(3 / 6), "with '.' kept: gold also has 2-6, chain has 5-6"
    assert uuas([tree_distances(CAT)], [CAT], [CAT_PUNCT]) == 1.0, "gold distances recover the gold tree"


def test_dspr_rows_by_hand_and_average_over_lengths():
    """Star of 5 (word 0 root) against |i-j|: row 0 gold ranks [1,3.5,3.5,3.5,3.5] vs [1..5] -> 5/sqrt(50);
    row 1 gold [1,0,2,2,2] vs pred [1,0,1,2,3] -> ranks [2,1,4,4,4] vs [2.5,1,2.5,4,5] -> 7/sqrt(76)."""
    star = [0, 1, 1, 1, 1]
    pred = position_distances([5])[0]
    gold = tree_distances(star)
    assert spearmanr(pred[0], gold[0])[0] == pytest.approx(5 / math.sqrt(50))
    assert spearmanr(pred[1], gold[1])[0] == pytest.approx(7 / math.sqrt(76))
    star_value = np.mean([spearmanr(pred[i], gold[i])[0] for i in range(5)])
    assert dspr_per_sentence([pred], [star])[0] == pytest.approx(star_value)
    # chains rooted at word 0 have gold distance |i-j|: DSpr 1. Lengths 5 (chain, star), 6 (chain), 4 (star, ignored)
    chain5, chain6, star4 = [0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5], [0, 1, 1, 1]
    trees = [chain5, star, chain6, star4]
    want = ((1.0 + star_value) / 2 + 1.0) / 2
    assert dspr(position_distances([5, 5, 6, 4]), trees) == pytest.approx(want)
    assert dspr([pred**2], [star]) == pytest.approx(star_value), "rank-based: a monotone transform changes nothing"


def test_nspr_by_hand():
    """CAT depths [2,1,0,2,2,1,1] -> ranks [6,3,1,6,6,3,3]; position [0..6] -> ranks [1..7]:
    centred products sum to -4, variances 24 and 28 -> r = -4/sqrt(672)."""
    assert nspr(position_depths([7]), [CAT]) == pytest.approx(-4 / math.sqrt(672))
    assert nspr([tree_depths(CAT) * 3.0 + 1], [CAT]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no sentence of length 5 to 50"):
        nspr(position_depths([2]), [[2, 0]])


def test_root_acc_by_hand_skips_punctuation():
    miss = np.array([5, 1, 3, 2, 2, 4, 0.0])  # '.' least deep, skipped -> 'cat' (1), but the root is 'sat' (2)
    hit = np.array([5, 3, 1, 2, 2, 4, 0.0])  # '.' skipped -> 'sat'
    assert root_acc([miss, hit], [CAT, CAT], [CAT_PUNCT, CAT_PUNCT]) == 0.5
    assert root_acc([hit], [CAT]) == 0.0, "without the punctuation mask '.' is the least deep word"


def test_scores_with_ci_values_match_the_metrics_and_intervals_cover_them():
    trees = random_trees(np.random.default_rng(0).integers(5, 20, size=60), seed=1)
    lengths = [len(h) for h in trees]
    rng = np.random.default_rng(2)
    noisy = [tree_distances(h) + rng.uniform(0, 1.5, (len(h), len(h))) for h in trees]
    noisy = [(a + a.T) / 2 for a in noisy]
    rows = dict((m, (v, lo, hi)) for m, v, lo, hi in scores_with_ci("distance", noisy, trees, n_boot=300))
    assert rows["uuas"][0] == pytest.approx(uuas(noisy, trees))
    assert rows["dspr"][0] == pytest.approx(dspr(noisy, trees))
    depths = position_depths(lengths)
    rows_d = dict((m, (v, lo, hi)) for m, v, lo, hi in scores_with_ci("depth", depths, trees, n_boot=300))
    assert rows_d["root_acc"][0] == pytest.approx(root_acc(depths, trees))
    assert rows_d["nspr"][0] == pytest.approx(nspr(depths, trees))
    for v, lo, hi in [*rows.values(), *rows_d.values()]:
        assert lo <= v <= hi and hi - lo < 0.5


def test_mean_of_means_bootstrap_matches_a_slow_loop_with_the_same_draws():
    x = np.array([1.0, 2.0, 3.0, 10.0, 0.5])
    strata = np.array([5, 5, 6, 7, 7])
    lo, hi = bootstrap_ci_mean_of_means(x, strata, n_boot=200, seed=4)
    idx = np.random.default_rng(4).integers(0, 5, size=(200, 5))
    reps = []
    for row in idx:
        means = [x[row][strata[row] == k].mean() for k in np.unique(strata[row])]
        reps.append(np.mean(means))
    assert (lo, hi) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])))


# --- baselines and controls -------------------------------------------------------------------------


def test_random_trees_are_seeded_valid_and_uniform_over_shapes():
    a, b = random_trees([3, 8, 1], seed=5), random_trees([3, 8, 1], seed=5)
    assert [len(h) for h in a] == [3, 8, 1] and all((x == y).all() for x, y in zip(a, b, strict=True))
    assert a[2].tolist() == [0]
    # over 3 words there are 3 trees (paths centred on word 0, 1 or 2), each with probability 1/3
    draws = random_trees([3] * 3000, seed=6)
    centres = np.array(
        [int(np.argmax(np.bincount(np.concatenate([h[h > 0] - 1, np.flatnonzero(h > 0)])))) for h in draws]
    )
    assert np.allclose(np.bincount(centres, minlength=3) / 3000, 1 / 3, atol=0.04)


def test_position_baselines_by_hand():
    assert position_distances([3])[0].tolist() == [[0, 1, 2], [1, 0, 1], [2, 1, 0]]
    assert position_depths([4])[0].tolist() == [0, 1, 2, 3], "left-branching: word i at depth i"
    chain = [[0, 1, 2, 3, 4]]  # word 0 the root, each word heads the next: the baseline is exact
    assert uuas(position_distances([5]), chain) == 1.0 and root_acc(position_depths([5]), chain) == 1.0


# --- known-answer fits ------------------------------------------------------------------------------


def tree_vectors(heads: np.ndarray, dim: int, rotation: np.ndarray, noise: float, rng) -> np.ndarray:
    """(n, dim) vectors whose squared distances are the tree distances before noise: word i is the sum of
    orthogonal unit vectors e_c of the arcs (c -> head) on its path to the root, then rotated."""
    n = len(heads)
    v = np.zeros((n, dim))
    for i in range(n):
        j = i
        while heads[j] != 0:
            v[i, j] = 1.0
            j = heads[j] - 1
    return (v @ rotation + noise * rng.standard_normal((n, dim))).astype(np.float32)


def layered_data(n_sent: int, dim: int, seed: int):
    """Three 'layers': 1 embeds the tree (rotated + noise 0.05), 0 and 2 are noise of the same scale.
    The fits use lr 0.01 (the reference's 1e-3 needs more steps than these 10 batches per epoch)."""
    rng = np.random.default_rng(seed)
    trees = random_trees(rng.integers(5, 16, size=n_sent), seed=seed)
    rotation = np.linalg.qr(rng.standard_normal((dim, dim)))[0]
    layers = {1: [tree_vectors(h, dim, rotation, 0.05, rng) for h in trees]}
    for k in (0, 2):
        layers[k] = [rng.standard_normal((len(h), dim)).astype(np.float32) for h in trees]
    return trees, layers


def test_distance_probe_recovers_the_tree_only_at_the_layer_that_encodes_it():
    """UUAS >= 0.95 where squared distances are tree distances up to rotation and noise (the probe can
    reach ~1: B = rotation^T is exact); <= 0.35 on noise, whose MST matches a gold edge with
    probability about 2/n (0.10-0.40 for n = 5..15, here ~0.2)."""
    trees, layers = layered_data(250, 16, seed=0)
    got = {}
    for k, X in layers.items():
        probe = DistanceProbe(seed=0, lr=0.01).fit(X[:200], trees[:200], X[200:220], trees[200:220])
        got[k] = probe.score(X[220:], trees[220:])
        assert probe.B_.shape == (16, 16)
    assert got[1] >= 0.95, got
    assert got[0] <= 0.35 and got[2] <= 0.35, got


def test_depth_probe_finds_the_root_only_at_the_layer_that_encodes_depth():
    """Squared norms of layer-1 vectors are the depths (+ noise): Root% >= 0.9 and NSpr >= 0.9 there.
    On noise the root is the least deep of ~10 words by chance: Root% <= 0.35."""
    trees, layers = layered_data(250, 16, seed=1)
    got = {}
    for k, X in layers.items():
        probe = DepthProbe(seed=0, lr=0.01).fit(X[:200], trees[:200], X[200:220], trees[200:220])
        got[k] = probe.score(X[220:], trees[220:])
        if k == 1:
            assert nspr(probe.predict(X[220:]), trees[220:]) >= 0.9
    assert got[1] >= 0.9, got
    assert got[0] <= 0.35 and got[2] <= 0.35, got


def test_rank_limits_what_the_probe_can_express_and_fit_is_seeded():
    """A rank-1 probe maps words to a line, whose MST is a path: it cannot fit branching trees as well as
    full rank. Equal seeds give equal B."""
    trees, layers = layered_data(150, 16, seed=2)
    X = layers[1]
    full = DistanceProbe(seed=0, lr=0.01).fit(X[:100], trees[:100], X[100:120], trees[100:120])
    one = DistanceProbe(rank=1, seed=0, lr=0.01).fit(X[:100], trees[:100], X[100:120], trees[100:120])
    assert one.B_.shape == (16, 1)
    assert one.score(X[120:], trees[120:]) < full.score(X[120:], trees[120:]) - 0.2
    again = DistanceProbe(rank=1, seed=0, lr=0.01).fit(X[:100], trees[:100], X[100:120], trees[100:120])
    assert np.array_equal(one.B_, again.B_)


def test_loss_is_the_papers_normalised_l1_and_padding_is_masked():
    """One batch of a 2-word and a 3-word sentence: loss = (sum |pred-gold| / n^2) averaged over the two,
    computed by hand; the padded pairs of the short sentence do not count."""
    probe = DistanceProbe(rank=1)
    B = torch.tensor([[1.0], [0.0]])
    x = [np.array([[0.0, 5.0], [2.0, 1.0]], np.float32), np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]], np.float32)]
    xb, lengths = probe._batch(x, [0, 1], 2)
    pred = probe._forward(xb, B)
    assert pred[0, :2, :2].tolist() == [[0.0, 4.0], [4.0, 0.0]]
    labels = [tree_distances([0, 1]).astype(np.float32), tree_distances([0, 1, 2]).astype(np.float32)]
    # sentence 1: |4-1|*2 / 4 = 1.5; sentence 2: pred [[0,1,9],[1,0,4],[9,4,0]] vs [[0,1,2],[1,0,1],[2,1,0]] -> 20 / 9
    assert float(probe._loss(pred, labels, lengths)) == pytest.approx((1.5 + 20 / 9) / 2)
    depth = DepthProbe(rank=1)
    dpred = depth._forward(xb, B)
    dlabels = [tree_depths([0, 1]).astype(np.float32), tree_depths([0, 1, 2]).astype(np.float32)]
    # depths pred [0, 4] vs [0, 1] -> 3/2; [0, 1, 9] vs [0, 1, 2] -> 7/3
    assert float(depth._loss(dpred, dlabels, lengths)) == pytest.approx((1.5 + 7 / 3) / 2)


def test_fit_rejects_mismatched_inputs_with_the_sentence():
    X = [np.zeros((3, 4), np.float32), np.zeros((2, 4), np.float32)]
    with pytest.raises(ValueError, match="fit sentence 1: 2 roots"):
        DistanceProbe().fit(X, [[0, 1, 1], [0, 0]])
    with pytest.raises(ValueError, match="2 sentences of vectors but 1 trees"):
        DistanceProbe().fit(X, [[0, 1, 1]])
    with pytest.raises(ValueError, match="predicted distances have shape"):
        uuas([np.zeros((2, 2))], [[0, 1, 1]])
    with pytest.raises(RuntimeError, match="not fitted"):
        DepthProbe().predict(X)


def test_gold_predictions_score_one_on_all_rooted_trees_of_three_words():
    """Of the 64 head arrays over 3 words exactly 9 are trees (3 shapes x 3 roots); on each, the gold
    distances and depths give UUAS 1 and Root% 1."""
    valid = 0
    for heads in itertools.product(range(4), repeat=3):
        try:
            d = tree_distances(list(heads))
        except ValueError:
            continue
        valid += 1
        assert uuas([d], [list(heads)]) == 1.0
        assert root_acc([tree_depths(list(heads))], [list(heads)]) == 1.0
    assert valid == 9


# --- stores -----------------------------------------------------------------------------------------


def test_store_trees_and_sentences_come_from_the_token_table_and_memory_map(tmp_path):
    """Heads written by extract() come back per sentence; StoreSentences slices the layer by offsets."""
    from test_store_fakes import FakeEncoder

    from probing.corpora import Corpus, Sentence
    from probing.probes.structural import StoreSentences, store_punct, store_trees
    from probing.store import Store, extract

    sents = [
        Sentence(
            "a",
            "d",
            ["The", "cat", "sat", "on", "the", "mat", "."],
            upos=["DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"],
            heads=CAT,
        ),
        Sentence("b", "d", ["Dogs", "bark"], upos=["NOUN", "VERB"], heads=[2, 0]),
    ]
    enc = FakeEncoder(dim=4, n_layers=2)
    store = extract(enc, Corpus.from_sentences(sents, name="toy-ud", split="train"), cache_dir=tmp_path, progress=False)
    assert [h.tolist() for h in store_trees(store)] == [CAT, [2, 0]]
    assert [p.tolist() for p in store_punct(store)] == [CAT_PUNCT.tolist(), [False, False]]
    X = StoreSentences(store, 1)
    assert len(X) == 2 and X[1].dtype == np.float32
    assert np.array_equal(X[1], np.asarray(store.layer(1)[7:9], dtype=np.float32)), "rows 7, 8 are sentence b"

    flat = [Sentence("c", "d", ["Hi", "there"])]
    no_heads = extract(
        enc, Corpus.from_sentences(flat, name="plain-text", split="test"), cache_dir=tmp_path, progress=False
    )
    with pytest.raises(ValueError, match=r"corpus plain-text/test .* has no dependency heads .*sentence 'c'"):
        store_trees(no_heads)

    # a store written before the tree columns existed: its token table lacks them
    import pyarrow.parquet as pq

    tokens = store.path / "tokens.parquet"
    pq.write_table(pq.read_table(tokens).drop(["head", "deprel", "feats"]), tokens)
    old = Store.open(store.path)
    assert old.tokens["head"].tolist() == [-1] * 9 and old.tokens["feats"].tolist() == [""] * 9
    with pytest.raises(ValueError, match="toy-ud/train .* has no dependency heads"):
        store_trees(old)
