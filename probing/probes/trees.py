"""Dependency trees as head arrays, for the structural probes: ``heads[i]`` is the 1-based position of word
i's head, 0 for the root (the CoNLL-U convention, and the ``head`` column of the store's token table).
Distances and depths in the tree, punctuation, the minimum spanning tree of a distance matrix, and the
position baseline and random control trees. No torch: the figures use it too.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from probing.corpora.base import check_tree
from probing.errors import InputError

PTB_PUNCT = frozenset({"''", ",", ".", ":", "``", "-LRB-", "-RRB-"})


# --- trees ------------------------------------------------------------------------------------------


def as_heads(heads: Sequence[int] | np.ndarray, where: str = "tree") -> np.ndarray:
    """The validated head array of one tree.

    Parameters
    ----------
    heads : (n,) int
        1-based head position of each word, 0 for the root.
    where : str
        What the tree is, for the error message.

    Returns
    -------
    ndarray, int64 (n,)
        The same heads; InputError if they are not one tree.
    """
    h = np.asarray(heads)
    if h.ndim != 1 or h.size == 0 or not np.issubdtype(h.dtype, np.integer):
        raise InputError(f"{where}: heads must be a non-empty 1-D integer array, got {h.dtype} shape {h.shape}")
    check_tree([int(v) for v in h], where)
    return h.astype(np.int64)


def _ancestors(heads: np.ndarray) -> np.ndarray:
    """Boolean (n, n): A[i, k] is True iff word k is word i or one of its ancestors."""
    n = len(heads)
    anc = np.eye(n, dtype=bool)
    node = np.arange(n)
    parent = heads - 1  # -1 for the root
    for _ in range(n):
        alive = node >= 0
        if not alive.any():
            break
        node = np.where(alive, parent[np.maximum(node, 0)], -1)
        rows = np.flatnonzero(node >= 0)
        anc[rows, node[rows]] = True
    return anc


def tree_depths(heads: Sequence[int] | np.ndarray) -> np.ndarray:
    """Number of arcs from each word to the root (the root has depth 0).

    Parameters
    ----------
    heads : (n,) int
        Head array (1-based, 0 = root).

    Returns
    -------
    ndarray, int64 (n,)
    """
    return _ancestors(as_heads(heads)).sum(axis=1).astype(np.int64) - 1


def tree_distances(heads: Sequence[int] | np.ndarray) -> np.ndarray:
    """Number of arcs on the path between words i and j of the tree.

    With A the ancestor-or-self matrix, ``d(i, j) = |A_i| + |A_j| - 2 |A_i & A_j|``: the shared
    ancestors are exactly those of the lowest common ancestor.

    Parameters
    ----------
    heads : (n,) int
        Head array (1-based, 0 = root).

    Returns
    -------
    ndarray, int64 (n, n)
    """
    a = _ancestors(as_heads(heads)).astype(np.int64)
    size = a.sum(axis=1)
    return size[:, None] + size[None, :] - 2 * (a @ a.T)


def punctuation_mask(upos: Sequence[str] | None = None, xpos: Sequence[str] | None = None) -> np.ndarray:
    """Which words are punctuation: UPOS ``PUNCT`` when UPOS is given and not all empty, else a PTB
    punctuation tag.

    Parameters
    ----------
    upos, xpos : (n,) str, optional
        The sentence's UPOS and XPOS tags.

    Returns
    -------
    ndarray, bool (n,)
    """
    if upos is not None and any(upos):
        return np.array([u == "PUNCT" for u in upos], dtype=bool)
    if xpos is not None:
        return np.array([x in PTB_PUNCT for x in xpos], dtype=bool)
    raise InputError("punctuation_mask needs upos or xpos tags")


def mst_edges(distances: np.ndarray, punct: Sequence[bool] | np.ndarray | None = None) -> list[tuple[int, int]]:
    """Edges (i < j, 0-based) of a minimum spanning tree over the non-punctuation words.

    Kruskal's algorithm as in the reference implementation (``prims_matrix_to_edges`` of Hewitt & Manning's
    ``reporter.py``): every ordered pair (i, j), i != j, in row-major order, stably sorted by
    ``distances[i, j]``. An asymmetric matrix (a user's predictions, e.g. from a non-PSD bilinear probe)
    therefore links i and j at ``min(d_ij, d_ji)``, and ties go to the pair whose smaller entry comes
    first in row-major order.

    Parameters
    ----------
    distances : (n, n) float
        Predicted (or gold) distances between the words.
    punct : (n,) bool, optional
        Punctuation words, left out of the tree.

    Returns
    -------
    list of (int, int)
        The n_kept - 1 edges, each with i < j.
    """
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1]:
        raise InputError(f"mst_edges: distances must be a square (n, n) array, got shape {d.shape}")
    keep = np.ones(len(d), dtype=bool) if punct is None else ~np.asarray(punct, dtype=bool)
    if keep.shape != (len(d),):
        raise InputError(f"mst_edges: punct has shape {keep.shape}, expected ({len(d)},)")
    words = np.flatnonzero(keep)
    if len(words) < 2:
        return []
    i, j = np.meshgrid(words, words, indexing="ij")
    upper = i < j
    i, j = i[upper], j[upper]
    forward = d[i, j] <= d[j, i]  # the entry the reference meets first among the pair's two
    n = len(d)
    order = np.lexsort((np.where(forward, i * n + j, j * n + i), np.where(forward, d[i, j], d[j, i])))
    parent = list(range(len(d)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    edges = []
    for k in order:
        a, b = find(int(i[k])), find(int(j[k]))
        if a != b:
            parent[a] = b
            edges.append((int(i[k]), int(j[k])))
            if len(edges) == len(words) - 1:
                break
    return edges


# --- baselines and controls -------------------------------------------------------------------------


def position_distances(lengths: Sequence[int]) -> list[np.ndarray]:
    """Linear-position baseline for distances: ``|i - j|`` for every pair.

    Parameters
    ----------
    lengths : sentence lengths n_s.

    Returns
    -------
    list of ndarray, float64 (n_s, n_s)
        One per sentence.
    """
    return [np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]).astype(np.float64) for n in lengths]


def position_depths(lengths: Sequence[int]) -> list[np.ndarray]:
    """Linear-position baseline for depths: left-branching depth, word i (0-based) at depth i.

    It is the depth in the chain whose root is the first word and where each word heads the next;
    its Root% is the share of sentences rooted at their first non-punctuation word.

    Parameters
    ----------
    lengths : sentence lengths n_s.

    Returns
    -------
    list of ndarray, float64 (n_s,)
        One per sentence.
    """
    return [np.arange(n, dtype=np.float64) for n in lengths]


def random_trees(lengths: Sequence[int], seed: int = 0) -> list[np.ndarray]:
    """Control trees: for each length n a tree drawn uniformly from all n^(n-2) trees over n words
    (decoded from a random Prüfer sequence), rooted at a uniformly drawn word.

    Parameters
    ----------
    lengths : sentence lengths n_s.
    seed : seeds the draw.

    Returns
    -------
    list of ndarray, int64 (n_s,)
        One head array per sentence (1-based, 0 = root).
    """
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        n = int(n)
        if n < 1:
            raise InputError(f"random_trees: lengths must be positive, got {n}")
        adj: list[list[int]] = [[] for _ in range(n)]
        if n == 2:
            adj[0].append(1)
            adj[1].append(0)
        elif n > 2:
            prufer = rng.integers(0, n, size=n - 2)
            degree = np.ones(n, dtype=np.int64)
            np.add.at(degree, prufer, 1)
            leaves = [i for i in range(n) if degree[i] == 1]
            heapq.heapify(leaves)
            for v in prufer:
                leaf = heapq.heappop(leaves)
                adj[leaf].append(int(v))
                adj[int(v)].append(leaf)
                degree[v] -= 1
                if degree[v] == 1:
                    heapq.heappush(leaves, int(v))
            a, b = heapq.heappop(leaves), heapq.heappop(leaves)
            adj[a].append(b)
            adj[b].append(a)
        root = int(rng.integers(0, n))
        heads = np.zeros(n, dtype=np.int64)
        seen, stack = {root}, [root]
        while stack:
            u = stack.pop()
            for v in adj[u]:
                if v not in seen:
                    seen.add(v)
                    heads[v] = u + 1
                    stack.append(v)
        out.append(heads)
    return out
