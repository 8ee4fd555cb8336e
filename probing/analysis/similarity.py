"""Representation similarity between layers: CKA, CCA, SVCCA, PWCCA, without training any probe.

All measures compare two sets of activations of the *same* tokens, ``X`` (n, d_x) and ``Y`` (n, d_y)
(any float dtype, fp16 memmaps included; everything is computed in float64 on centred copies).

* :func:`cka`: centred kernel alignment (Kornblith et al. 2019). ``kernel="linear"`` is
  ``||Xc^T Yc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)``, computed in feature space (d x d matrices, so
  memory stays O(n d + d^2) for n >> d). ``debiased=True`` replaces each HSIC by the unbiased estimator
  of Song et al. (2012), as in Kornblith et al.'s reference code. ``kernel="rbf"`` needs the n x n
  kernel ``exp(-||x_i - x_j||^2 / (2 threshold^2 median_sq_dist))`` (the median over all n^2 squared
  distances, the diagonal included) and therefore refuses more than ``max_rbf_tokens`` tokens.
* :func:`cca`: mean squared canonical correlation, ``R^2_CCA = sum(rho_i^2) / min(r_x, r_y)`` with
  r the rank of each centred matrix (its number of features when full rank, which is Kornblith et
  al.'s definition; their demo applies it to uncentred features, reproduced by ``center=False``).
* :func:`svcca`: SVCCA (Raghu et al. 2017): keep the top principal directions of each side that explain
  ``keep`` of its variance (eigenvalues of the covariance, i.e. squared singular values; the 99 % rule
  of Kornblith et al. 2019, where google/svcca's tutorials keep a fixed count), then the mean canonical
  correlation (not squared) between the two reduced sets.
* :func:`pwcca`: projection-weighted CCA (Morcos et al. 2018), the weighted mean of the canonical
  correlations, weighted by how much of X (the first argument) each canonical direction accounts for, so
  ``pwcca(X, Y) != pwcca(Y, X)`` in general. Two weightings, which differ by several points on real
  activations (see :func:`pwcca`): ``reference=True`` (the default, measure ``"pwcca"``) reproduces
  google/svcca's ``compute_pwcca``, the code behind published PWCCA numbers; ``reference=False``
  (measure ``"pwcca_paper"``) is the paper's definition.

Every CCA-type measure works from the centred covariances, so only d x d matrices are factorised;
directions with eigenvalue below ``1e-10`` of the largest are treated as null (rank-deficient inputs, such
as GloVe's zero rows for OOV words, are fine).

:func:`layer_similarity` compares every layer of several encoders on the same (subsampled) tokens and
returns the tidy table ``encoder_a, layer_a, encoder_b, layer_b, measure, value, n_tokens``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from probing.errors import InputError
from probing.results.schema import SIMILARITY_COLUMNS

__all__ = [
    "MEASURES",
    "SIMILARITY_COLUMNS",
    "cka",
    "cca",
    "svcca",
    "pwcca",
    "layer_similarity",
]

MEASURES = ("linear_cka", "debiased_cka", "rbf_cka", "cca", "svcca", "pwcca", "pwcca_paper")
RBF_MAX_TOKENS = 5000
_CHUNK = 16384
_NULL = 1e-10  # eigenvalues below this fraction of the largest span the null space


class _Centred:
    """One activation matrix, centred in float64, with its covariance eigendecomposition on demand.

    ``x`` (n, d) float64 centred; ``mean`` (d,) the column means removed; ``gram`` = x^T x (d, d); ``eig``/``basis``: eigenvalues (descending)
    and eigenvectors of ``gram`` restricted to its non-null directions.
    """

    def __init__(self, X: Any, name: str, center: bool = True):
        X = _as_2d(X, name)
        n, d = X.shape
        x = np.empty((n, d), dtype=np.float64)
        for start in range(0, n, _CHUNK):
            x[start : start + _CHUNK] = X[start : start + _CHUNK]
        if not np.isfinite(x).all():
            row, col = np.argwhere(~np.isfinite(x))[0]
            raise InputError(f"{name} contains NaN or infinity (row {row}, column {col})")
        self.mean = x.mean(axis=0) if center else np.zeros(d)
        if center:
            x -= self.mean
        self.x = x
        self._gram: np.ndarray | None = None
        self._eig: tuple[np.ndarray, np.ndarray] | None = None
        self._rows: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @property
    def gram(self) -> np.ndarray:
        if self._gram is None:
            self._gram = self.x.T @ self.x
        return self._gram

    @property
    def row_norms(self) -> np.ndarray:
        """(n,) squared norms of the centred rows."""
        if self._rows is None:
            self._rows = np.einsum("ij,ij->i", self.x, self.x)
        return self._rows

    @property
    def eig(self) -> tuple[np.ndarray, np.ndarray]:
        if self._eig is None:
            w, v = np.linalg.eigh(self.gram)
            w, v = w[::-1], v[:, ::-1]
            keep = w > _NULL * max(float(w[0]), 0.0) if len(w) else np.zeros(0, bool)
            self._eig = (w[keep], v[:, keep])
        return self._eig


def _as_2d(X: Any, name: str) -> np.ndarray:
    if isinstance(X, _Centred):
        return X.x
    X = np.asarray(X) if not isinstance(X, np.ndarray) else X
    if X.ndim != 2:
        raise InputError(f"{name} must be a 2-D array (n_tokens, dim), got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise InputError(f"{name} must be numeric, got dtype {X.dtype}")
    return X


def _pair(X: Any, Y: Any, min_n: int = 2) -> tuple[_Centred, _Centred]:
    cx = X if isinstance(X, _Centred) else _Centred(X, "X")
    cy = Y if isinstance(Y, _Centred) else _Centred(Y, "Y")
    if cx.n != cy.n:
        raise InputError(f"X and Y must hold the same tokens: X has {cx.n} rows, Y has {cy.n}")
    if cx.n < min_n:
        raise InputError(f"need at least {min_n} tokens, got {cx.n}")
    return cx, cy


# ----------------------------------------------------------------------------- CKA


def _debiased_dot(xty: float, rows_x: np.ndarray, rows_y: np.ndarray, n: int) -> float:
    """Unbiased HSIC (Song et al. 2012) times n(n-3), from the feature-space ``||Xc^T Yc||_F^2`` and the
    squared row norms of the centred matrices (for a centred kernel, ``1^T K~ 1 = -sum_i K_ii``)."""
    sx, sy = float(rows_x.sum()), float(rows_y.sum())
    return xty - n / (n - 2.0) * float(rows_x @ rows_y) + sx * sy / ((n - 1.0) * (n - 2.0))


def _linear_cka(cx: _Centred, cy: _Centred, debiased: bool, cross: np.ndarray | None = None) -> float:
    """``cross``: ``cx.x.T @ cy.x`` when the caller has it already."""
    n = cx.n
    if cross is None and cx.x.shape[1] + cy.x.shape[1] > 2 * n:  # few tokens: the n x n Gram form is cheaper
        return _gram_cka(cx.x @ cx.x.T, cy.x @ cy.x.T, debiased)
    xty = float(np.sum((cx.x.T @ cy.x if cross is None else cross) ** 2))
    xtx = float(np.sum(cx.gram**2))
    yty = float(np.sum(cy.gram**2))
    if debiased:
        rx, ry = cx.row_norms, cy.row_norms
        xty = _debiased_dot(xty, rx, ry, n)
        xtx = _debiased_dot(xtx, rx, rx, n)
        yty = _debiased_dot(yty, ry, ry, n)
    return _ratio(xty, xtx, yty)


def _ratio(xy: float, xx: float, yy: float) -> float:
    if xx <= 0 or yy <= 0:
        raise InputError("CKA is undefined: one input has zero variance (all its rows are equal)")
    return xy / np.sqrt(xx * yy)


def _centre_gram(K: np.ndarray, unbiased: bool) -> np.ndarray:
    """Doubly centred kernel; ``unbiased``: the U-statistic centring whose inner products are
    n(n-3) times Song et al.'s unbiased HSIC."""
    K = K.copy()
    n = K.shape[0]
    if unbiased:
        np.fill_diagonal(K, 0.0)
        means = K.sum(axis=0) / (n - 2.0)
        means -= means.sum() / (2.0 * (n - 1.0))
        K -= means[:, None]
        K -= means[None, :]
        np.fill_diagonal(K, 0.0)
    else:
        means = K.mean(axis=0)
        K -= means[:, None]
        K -= means[None, :]
        K += means.mean()
    return K


def _gram_cka(K: np.ndarray, L: np.ndarray, debiased: bool) -> float:
    Kc, Lc = _centre_gram(K, debiased), _centre_gram(L, debiased)
    return _ratio(float(np.vdot(Kc, Lc)), float(np.vdot(Kc, Kc)), float(np.vdot(Lc, Lc)))


def _rbf_gram(x: np.ndarray, threshold: float) -> np.ndarray:
    sq = np.einsum("ij,ij->i", x, x)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (x @ x.T)
    np.maximum(d2, 0.0, out=d2)
    median = float(np.median(d2))
    if median <= 0:
        raise InputError("RBF CKA: the median squared distance between tokens is 0 (mostly identical rows)")
    d2 *= -1.0 / (2.0 * threshold**2 * median)
    return np.exp(d2, out=d2)


def cka(
    X: Any,
    Y: Any,
    kernel: str = "linear",
    debiased: bool = False,
    threshold: float = 0.5,
    *,
    max_rbf_tokens: int = RBF_MAX_TOKENS,
) -> float:
    """Centred kernel alignment between X (n, d_x) and Y (n, d_y), rows = the same tokens.

    In [0, 1] (the debiased estimate can be slightly negative); invariant to orthogonal transforms and
    isotropic scaling of either side. ``kernel="rbf"`` uses bandwidth ``threshold`` times the median
    distance and holds n x n matrices, so it refuses more than ``max_rbf_tokens`` rows.

    Parameters
    ----------
    X : array-like (n, d_x)
        One row per token (a store layer's fp16 memmap is fine: it is read in float64 chunks).
    Y : array-like (n, d_y)
        The same n tokens in the other representation.
    kernel : ``"linear"`` or ``"rbf"``.
    debiased : the unbiased HSIC estimator (Song et al. 2012) instead of the plug-in one.
    threshold, max_rbf_tokens : the RBF kernel's bandwidth factor and row limit.

    Returns
    -------
    float
    """
    if kernel not in ("linear", "rbf"):
        raise InputError(f"cka: kernel must be 'linear' or 'rbf', got {kernel!r}")
    cx, cy = _pair(X, Y, min_n=4 if debiased else 2)
    if kernel == "linear":
        return _linear_cka(cx, cy, debiased)
    if not threshold > 0:
        raise InputError(f"cka: threshold must be positive, got {threshold!r}")
    if cx.n > max_rbf_tokens:
        gib = 3 * cx.n**2 * 8 / 2**30
        raise InputError(
            f"cka(kernel='rbf') builds n x n kernel matrices: {cx.n} tokens would need about {gib:.1f} GiB; "
            f"subsample to at most max_rbf_tokens={max_rbf_tokens} rows (or raise max_rbf_tokens)"
        )
    return _gram_cka(_rbf_gram(cx.x, threshold), _rbf_gram(cy.x, threshold), debiased)


# ----------------------------------------------------------------------------- CCA family


def _whitener(c: _Centred, keep: float | None = None) -> np.ndarray:
    """(d, r) matrix W with ``W^T gram W = I`` over the non-null directions (``keep``: only the top
    principal directions explaining that fraction of the variance)."""
    w, v = c.eig
    if not len(w):
        raise InputError("CCA is undefined: one input has zero variance (all its rows are equal)")
    if keep is not None:
        k = int(np.searchsorted(np.cumsum(w) / w.sum(), keep - 1e-12) + 1)
        w, v = w[:k], v[:, :k]
    return v / np.sqrt(w)


def _whitened_cross(cx: _Centred, cy: _Centred, keep: float | None, cross: np.ndarray | None):
    """X's whitener (d_x, r_x) and the whitened cross-covariance ``Wx^T Xc^T Yc Wy`` (r_x, r_y) (``cross`` =
    Xc^T Yc if known); Y's whitener is Y's eigenvectors over the square roots of its eigenvalues."""
    wx, wy = _whitener(cx, keep), _whitener(cy, keep)
    return wx, wx.T @ (cx.x.T @ cy.x if cross is None else cross) @ wy


def _svd(a: np.ndarray, full_matrices: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.linalg.svd``, falling back to LAPACK's QR-iteration driver (gesvd) where the default divide and
    conquer (gesdd) does not converge: seen on a layer's whitened cross-covariance with itself (406 x 406,
    every singular value 1), from OpenBLAS on an AMD EPYC."""
    try:
        return np.linalg.svd(a, full_matrices=full_matrices)
    except np.linalg.LinAlgError:
        import scipy.linalg

        return scipy.linalg.svd(a, full_matrices=full_matrices, lapack_driver="gesvd")


def _canonical(cx: _Centred, cy: _Centred, keep: float | None = None, cross: np.ndarray | None = None):
    """Canonical correlations rho (descending, length min(r_x, r_y)) and X's canonical directions
    (d_x, len(rho))."""
    wx, m = _whitened_cross(cx, cy, keep, cross)
    u, rho, _ = _svd(m, full_matrices=False)
    return np.clip(rho, 0.0, 1.0), wx @ u


def cca(X: Any, Y: Any, *, center: bool = True) -> float:
    """Mean squared canonical correlation ``R^2_CCA`` between X (n, d_x) and Y (n, d_y).

    Invariant to any invertible linear map of either side. Needs n > d_x + d_y for a meaningful value
    (with fewer tokens the correlations are trivially 1). ``center=False`` skips the centring, which is
    what Kornblith et al.'s demo does when it calls its ``cca`` on raw features (its 0.54312 on the
    ``seed(1337)`` example; centred, the same data give 0.54540).

    Parameters
    ----------
    X : array-like (n, d_x)
        One row per token (a store layer's fp16 memmap is fine: it is read in float64 chunks).
    Y : array-like (n, d_y)
        The same n tokens in the other representation.
    center : subtract each column's mean first.

    Returns
    -------
    float
        In [0, 1].
    """
    if center:
        cx, cy = _pair(X, Y)
    else:
        cx, cy = _pair(_Centred(X, "X", center=False), _Centred(Y, "Y", center=False))
    rho, _ = _canonical(cx, cy)
    return float(np.sum(rho**2) / len(rho))


def svcca(X: Any, Y: Any, keep: float = 0.99) -> float:
    """SVCCA: mean canonical correlation between the principal subspaces of X and Y that explain
    ``keep`` (default 99 %) of each one's variance.

    Parameters
    ----------
    X : array-like (n, d_x)
        One row per token (a store layer's fp16 memmap is fine: it is read in float64 chunks).
    Y : array-like (n, d_y)
        The same n tokens in the other representation.
    keep : share of variance kept on each side, in (0, 1].

    Returns
    -------
    float
        In [0, 1].
    """
    if not 0 < keep <= 1:
        raise InputError(f"svcca: keep must be in (0, 1], got {keep!r}")
    cx, cy = _pair(X, Y)
    rho, _ = _canonical(cx, cy, keep)
    return float(np.mean(rho))


def pwcca(X: Any, Y: Any, *, reference: bool = True) -> float:
    """Projection-weighted CCA of X (n, d_x) against Y (n, d_y): the canonical correlations rho_i, averaged
    with weights ``alpha_i = sum_j |<p_i, x_j>|``, the projections of X's neurons x_j on unit vectors p_i
    of token space that stand for X's i-th canonical direction. Weighted by X, so not symmetric.

    ``reference=True`` (the default) is google/svcca's ``compute_pwcca(X.T, Y.T)``, the code behind the
    published PWCCA numbers (Morcos et al. 2018 and the papers that reuse it), so a value can be set next
    to theirs. Its p_i are not the canonical variates: it takes u_i, the i-th left singular vector of the
    symmetrically whitened cross-covariance ``Sxx^-1/2 Sxy Syy^-1/2``, applies it to the *unwhitened*
    centred activations (``Xc u_i``, no ``Sxx^-1/2``), adds back the mean of neuron i (the i-th column's
    mean, unrotated), orthonormalises these d_x vectors by QR in order of decreasing rho, and projects the
    *uncentred* neurons x_j on them. It weights whichever side has fewer neurons (X on a tie); with
    d_x > d_y this function returns ``pwcca(Y, X, reference=True)``, which is what that code's second
    branch computes once its indexing error (it indexes X's activations with Y's neuron mask) is fixed.
    With a rank-deficient X its value depends on an arbitrary basis of the null directions (their rho
    is 0 but their weights enter the normaliser); here that basis is the constant direction first.
    Because the means are added unrotated, google's value depends on the signs LAPACK gives the singular
    vectors u_i: on some inputs another BLAS kernel or numpy version moves it by up to 0.013 (3-4 of 90
    random pairs measured; one 16 x 24 pair by 0.005), so this function matches it to 1e-6 only where
    those signs are stable; the reference test draws its unequal-width pairs with seed 1, stable on both.

    ``reference=False`` is the paper's definition: p_i = h_i, the i-th canonical variate ``Xc Wx a_i``
    (unit norm), projected on the *centred* neurons, always weighted by X. The two give the same canonical
    correlations but different weights: 0.886 vs 0.909 (paper vs reference) for layers 1 and 2 of the
    bundled model on demo-ud test (13,340 tokens), and they differ even on centred inputs of equal width.

    Parameters
    ----------
    X : array-like (n, d_x)
        Its neurons weight the average (under ``reference=True``, the narrower side's do; X on a tie).
    Y : array-like (n, d_y)
        The same n tokens in the other representation.
    reference : google/svcca's weights (True) or the paper's (False).

    Returns
    -------
    float
        In [0, 1].
    """
    cx, cy = _pair(X, Y)
    return _pwcca_reference(cx, cy) if reference else _pwcca(cx, cy)


def _pwcca(cx: _Centred, cy: _Centred, cross: np.ndarray | None = None) -> float:
    """The paper's PWCCA (see :func:`pwcca`, ``reference=False``)."""
    rho, a = _canonical(cx, cy, cross=cross)
    alpha = np.abs(cx.gram @ a).sum(axis=0)  # <X a_i, x_j> = (X^T X a_i)_j, and ||X a_i|| = 1
    return float(alpha @ rho / alpha.sum())


def _pwcca_reference(cx: _Centred, cy: _Centred, cross: np.ndarray | None = None) -> float:
    """google/svcca's ``compute_pwcca`` (see :func:`pwcca`) in feature space.

    Its n-vectors ``d_i = Xc u_i + mean_i 1`` and the uncentred neurons all lie in the span of the basis
    [Xc v / sqrt(w), 1/sqrt(n)] (v, w: eigenvectors and eigenvalues of Xc^T Xc; Xc is orthogonal to 1). In
    that basis (coordinates, shape (r_x + 1, d_x)) the QR of the (n, d_x) matrix [d_i] is the QR of the
    coordinates, so nothing n x d is built. The mean is added unrotated, so flipping the sign of u_i
    changes the value: u is taken, as there, from the SVD of the neuron-space matrix
    ``Sxx^-1/2 Sxy Syy^-1/2`` (the symmetric whitener ``v diag(w^-1/2) v^T``), not of a rotated copy."""
    if cx.x.shape[1] > cy.x.shape[1]:
        return _pwcca_reference(cy, cx, None if cross is None else cross.T)
    _, m = _whitened_cross(cx, cy, None, cross)
    vx, vy = cx.eig[1], cy.eig[1]
    u, rho, _ = _svd(vx @ m @ vy.T)  # u (d_x, d_x); rho: d_x values, zeros past min(r_x, r_y)
    sv = np.sqrt(cx.eig[0])
    coords = np.vstack([sv[:, None] * (vx.T @ u), np.sqrt(cx.n) * cx.mean[None, :]])
    neurons = np.vstack([sv[:, None] * vx.T, np.sqrt(cx.n) * cx.mean[None, :]])
    q, _ = np.linalg.qr(coords)  # columns past r_x + 1 depend on earlier ones: their weight is 0 there too
    weights = np.abs(q.T @ neurons).sum(axis=1)
    return float(weights @ rho[: len(weights)] / weights.sum())


# ----------------------------------------------------------------------------- many layers


def _measure(m: str, cx: _Centred, cy: _Centred, cross: np.ndarray) -> float:
    """Measure ``m`` of a pair with its cross-product ``cross = cx.x.T @ cy.x`` computed once."""
    if m in ("linear_cka", "debiased_cka"):
        return _linear_cka(cx, cy, m == "debiased_cka", cross)
    if m == "pwcca":
        return _pwcca_reference(cx, cy, cross)
    if m == "pwcca_paper":
        return _pwcca(cx, cy, cross)
    rho, _ = _canonical(cx, cy, 0.99 if m == "svcca" else None, cross)
    return float(np.mean(rho)) if m == "svcca" else float(np.sum(rho**2) / len(rho))


_SYMMETRIC = {"linear_cka", "debiased_cka", "rbf_cka", "cca", "svcca"}


def _layers_of(name: str, source: Any) -> tuple[dict[str, Any], int, Any]:
    """(layer name -> (n, d) array-like, n_tokens, words or None) for a Store, a mapping or an array."""
    if hasattr(source, "layer_names") and hasattr(source, "layer"):
        words = source.tokens["word"].to_numpy() if hasattr(source, "tokens") else None
        return {str(k): (lambda k=k: source.layer(k)) for k in source.layer_names}, len(source), words
    if isinstance(source, Mapping):
        layers = {str(k): v for k, v in source.items()}
    else:
        layers = {"0": source}
    if not layers:
        raise InputError(f"encoder {name!r}: no layers")
    ns = {}
    for k, v in layers.items():
        a = _as_2d(v, f"encoder {name!r} layer {k!r}")
        ns[k] = a.shape[0]
    if len(set(ns.values())) != 1:
        raise InputError(f"encoder {name!r}: layers have different numbers of rows {ns}")
    return {k: (lambda v=v: v) for k, v in layers.items()}, next(iter(ns.values())), None


def layer_similarity(
    encoders: Mapping[str, Any],
    *,
    measures: Sequence[str] = ("linear_cka", "debiased_cka", "svcca", "pwcca"),
    max_tokens: int | None = 20_000,
    seed: int = 0,
    layers: Mapping[str, Iterable[str]] | None = None,
    rbf_threshold: float = 0.5,
    progress: bool = False,
) -> pd.DataFrame:
    """Every measure between every pair of layers of ``encoders`` (name -> store or arrays).

    An encoder is a :class:`probing.store.Store` (its ``layer_names``), a mapping layer name -> (n, d)
    array, or one (n, d) array (layer ``"0"``). All must hold the same n tokens in the same order
    (stores: the same ``word`` column). ``max_tokens`` rows are drawn once, without replacement, with
    ``seed`` (None: all); only those rows are read. ``layers`` optionally restricts an encoder's layers.
    ``rbf_cka`` is capped at ``RBF_MAX_TOKENS`` rows (a ``ValueError`` otherwise).

    Returns one row per ordered pair (a, b) and measure, diagonal included, with columns
    :data:`SIMILARITY_COLUMNS`; symmetric measures are computed once per unordered pair. The ``measure``
    column names the variant: ``"pwcca"`` is google/svcca's weighting, ``"pwcca_paper"`` the paper's (:func:`pwcca`).
    """
    unknown = [m for m in measures if m not in MEASURES]
    if unknown or not measures:
        raise InputError(f"layer_similarity: unknown measures {unknown}; choose from {MEASURES}")
    if not encoders:
        raise InputError("layer_similarity: no encoders given")
    if max_tokens is not None and (not isinstance(max_tokens, (int, np.integer)) or max_tokens < 4):
        raise InputError(f"layer_similarity: max_tokens must be an int >= 4 or None, got {max_tokens!r}")
    sources, n_ref, words_ref, ref_name = {}, None, None, None
    for name, source in encoders.items():
        lay, n, words = _layers_of(name, source)
        if layers is not None and name in layers:
            wanted = [str(k) for k in layers[name]]
            missing = [k for k in wanted if k not in lay]
            if missing:
                raise InputError(f"encoder {name!r} has no layers {missing}; it has {list(lay)}")
            lay = {k: lay[k] for k in wanted}
        if n_ref is None:
            n_ref, ref_name = n, name
        elif n != n_ref:
            raise InputError(f"encoder {name!r} has {n} tokens but {ref_name!r} has {n_ref}: they must be the same")
        if words is not None:
            if words_ref is None:
                words_ref = words
            elif len(words) != len(words_ref) or not np.array_equal(words, words_ref):
                raise InputError(f"encoder {name!r}: its store's tokens differ from {ref_name!r}'s (other corpus?)")
        sources[name] = lay
    assert n_ref is not None
    if max_tokens is None or n_ref <= max_tokens:
        rows = None
        n = n_ref
    else:
        rows = np.sort(np.random.default_rng(seed).choice(n_ref, size=int(max_tokens), replace=False))
        n = int(max_tokens)
    if "rbf_cka" in measures and n > RBF_MAX_TOKENS:
        raise InputError(
            f"layer_similarity: rbf_cka needs n x n kernels; {n} tokens is over RBF_MAX_TOKENS={RBF_MAX_TOKENS}: "
            f"set max_tokens <= {RBF_MAX_TOKENS} or drop rbf_cka"
        )

    keys, data = [], {}
    for name, lay in sources.items():
        for k, get in lay.items():
            a = get()
            part = a[rows] if rows is not None else a
            data[(name, k)] = _Centred(part, f"encoder {name!r} layer {k!r}")
            keys.append((name, k))
    from tqdm.auto import tqdm

    out = []
    linear = [m for m in measures if m != "rbf_cka"]
    pairs = [(i, j) for i in range(len(keys)) for j in range(i, len(keys))]
    kernels: dict[int, np.ndarray] = {}
    for i, j in tqdm(pairs, desc="layer similarity", disable=not progress):
        a, b = keys[i], keys[j]
        ca, cb = data[a], data[b]
        cross = ca.x.T @ cb.x if linear else np.empty((0, 0))
        for m in measures:
            if m == "rbf_cka":
                if i not in kernels:  # only row i's kernel is kept: memory stays at about three n x n arrays
                    kernels = {i: _centre_gram(_rbf_gram(ca.x, rbf_threshold), False)}
                Ka = kernels[i]
                Kb = Ka if j == i else _centre_gram(_rbf_gram(cb.x, rbf_threshold), False)
                values = [_ratio(float(np.vdot(Ka, Kb)), float(np.vdot(Ka, Ka)), float(np.vdot(Kb, Kb)))] * 2
            elif m in _SYMMETRIC:
                values = [_measure(m, ca, cb, cross)] * 2
            else:
                values = [_measure(m, ca, cb, cross), _measure(m, cb, ca, cross.T)]
            out.append((a[0], a[1], b[0], b[1], m, values[0], n))
            if j > i:
                out.append((b[0], b[1], a[0], a[1], m, values[1], n))
    frame = pd.DataFrame(out, columns=SIMILARITY_COLUMNS)
    order = {key: i for i, key in enumerate(keys)}
    frame["_a"] = [order[(e, k)] for e, k in zip(frame.encoder_a, frame.layer_a)]
    frame["_b"] = [order[(e, k)] for e, k in zip(frame.encoder_b, frame.layer_b)]
    frame["_m"] = frame.measure.map({m: i for i, m in enumerate(measures)})
    return frame.sort_values(["_m", "_a", "_b"]).drop(columns=["_a", "_b", "_m"]).reset_index(drop=True)
