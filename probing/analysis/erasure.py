"""Concept erasure: remove what a linear classifier can read of a label from stored activations.

Three erasers, one form. Each is the affine map ``x -> x - ((x - bias) @ R.T) @ L.T`` with ``L``, ``R``
``(d, rank)`` factors of the removed part ``I - P`` and ``bias`` the fitting data's mean (so the mean stays
put and only the label's directions are flattened):

* ``"leace"``: LEACE (Belrose et al. 2023), fitted by the ``concept-erasure`` package's ``LeaceFitter``
  (one-hot labels, float64). It makes the cross-covariance of the erased data with every label zero, so no
  linear classifier beats the constant one on the fitting data. The trace constraint of the package is
  turned off (the mixture it falls back to is not a perfect eraser), and its singular-value cut lowered
  (:data:`_SVD_TOL`) so that rare classes are erased too.
* ``"inlp"``: iterative nullspace projection (Ravfogel et al. 2020): fit a :class:`~probing.probes.LinearProbe`,
  project the span of its weight rows out (less their mean row, which is no label's: k - 1 directions for k
  classes, 1 for two), repeat on the projected data until a probe on held-out rows (a fifth of the data) is no
  better than the majority class (``tol``), or ``max_iter`` probes, or ``rank`` directions.
* ``"random"``: the orthogonal projection out of a random ``rank``-dimensional subspace, Elazar et al.'s
  (2021) control: as much removed, none of it chosen for the label.

:func:`fit_eraser` fits one on arrays; :func:`fit_eraser_on_store` on a store's layer or direction half
(``"1f"``, ``"1b"``) and a token-table column; :func:`fit_layer_erasers` and :class:`ErasedStore` (a store seen
through one eraser per layer) serve a task's ``erase`` option.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from probing.errors import InputError
from probing.identity import code_identity, digest
from probing.layers import resolve
from probing.protocols import StoreLike

if TYPE_CHECKING:
    import pandas as pd

METHODS = ("leace", "inlp", "random")
CHUNK_ROWS = 8192
_DEV_SHARE = 5  # INLP checks each probe on every 5th row of a random permutation
_SVD_TOL = 1e-9
ERASURE_VERSION = 1
"""Bump when an erased layer changes for a reason the code of this module does not show."""
"""LEACE keeps every direction of the whitened cross-covariance above this. The package's default, 0.01,
drops a class with proportion p below about p = 1e-4 even when it is perfectly separable (its singular value
is at most sqrt(p (1 - p))): with it, UPOS on the demo UD dev split in the 16-wide halves of the AllenNLP
test biLM kept rank 10 of 16."""


class Eraser(TransformerMixin, BaseEstimator):
    """A fitted concept eraser, scikit-learn style (``fit(X, y)`` / ``transform(X)``; clone- and Pipeline-safe).

    Parameters
    ----------
    method : ``"leace"``, ``"inlp"`` or ``"random"`` (see the module docstring).
    rank : ``"random"``: the dimension removed (None = n_classes - 1, what LEACE removes for one-hot labels);
        ``"inlp"``: the most directions removed (None = no cap); ``"leace"``: must be None (set by the labels).
    random_state : seeds the random subspace and INLP's held-out split.
    max_iter : INLP's number of probes at most.
    tol : INLP stops once a probe's held-out accuracy is at most the majority class's + ``tol``
        (default 0: a probe no better than the majority class; a looser stop leaves more to a larger probe).
    C : inverse L2 strength of INLP's probes.

    Attributes: ``rank_`` (dimension of the removed subspace), ``proj_left_`` / ``proj_right_`` (``(d, rank_)``
    and ``(rank_, d)``), ``bias_`` ``(d,)``, ``classes_`` (None for a random eraser fitted without labels),
    ``n_features_in_``, ``n_iter_`` (INLP: probes fitted; 1 for the closed-form ones), ``fingerprint``.
    """

    def __init__(
        self,
        method: str = "leace",
        rank: int | None = None,
        random_state: int | None = 0,
        *,
        max_iter: int = 20,
        tol: float = 0.0,
        C: float = 1.0,
    ):
        self.method = method
        self.rank = rank
        self.random_state = random_state
        self.max_iter = max_iter
        self.tol = tol
        self.C = C

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = self.method != "random"
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    # -- fitting

    def _check_params(self) -> None:
        name = type(self).__name__
        if self.method not in METHODS:
            raise InputError(f"{name}: method must be one of {METHODS}, got {self.method!r}")
        if self.rank is not None and (
            isinstance(self.rank, bool) or not isinstance(self.rank, (int, np.integer)) or self.rank < 1
        ):
            raise InputError(f"{name}: rank must be a positive int or None, got {self.rank!r}")
        if self.method == "leace" and self.rank is not None:
            raise InputError(f"{name}: LEACE's rank is set by the labels (n_classes - 1 at most); leave rank=None")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise InputError(f"{name}: max_iter must be a positive int, got {self.max_iter!r}")
        if not isinstance(self.tol, (int, float)) or not 0 <= self.tol < 1:
            raise InputError(f"{name}: tol must be a number in [0, 1), got {self.tol!r}")

    def _validate(self, X, y=None, *, reset: bool):
        """sklearn's checks (2-D numeric finite X, matching y), their ValueErrors re-raised as InputErrors."""
        try:
            if y is None:
                return validate_data(self, X, reset=reset, dtype=[np.float64, np.float32, np.float16])
            return validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32, np.float16])
        except InputError:
            raise
        except ValueError as e:
            raise InputError(f"{type(self).__name__}: {e}") from e

    def fit(self, X, y=None) -> Eraser:
        """Fit the eraser: the subspace (and bias) that removes ``y``'s linear information from ``X``.

        Parameters
        ----------
        X : array-like (n, d), float64, float32 or float16
            The representations to erase from.
        y : array-like (n,), optional
            One label per row (any hashable). Only a ``"random"`` eraser with a ``rank`` may go without.

        Returns
        -------
        Eraser
            ``self``, fitted.
        """
        self._check_params()
        name = type(self).__name__
        if y is None:
            if self.method != "random" or self.rank is None:
                raise InputError(
                    f"{name}(method={self.method!r}) requires y to be passed, but the target y is None "
                    "(only 'random' with a rank needs no labels)"
                )
            X = self._validate(X, reset=True)
            self.classes_: np.ndarray | None = None
            y_idx: np.ndarray | None = None
        else:
            X, y = self._validate(X, y, reset=True)
            self.classes_, y_idx = np.unique(y, return_inverse=True)
            if len(self.classes_) < 2:
                raise InputError(f"{name}: y has one class ({self.classes_[0]!r}); erasing a label needs at least 2")
        if X.shape[0] < 2:
            raise InputError(f"{name}: X has {X.shape[0]} row; fitting needs at least 2")
        self.bias_ = _mean(X)
        self.n_iter_ = 1
        if self.method == "random":
            k = self.rank if self.rank is not None else len(cast(np.ndarray, self.classes_)) - 1
            if k > X.shape[1]:
                raise InputError(f"{name}: rank {k} is more than the {X.shape[1]} features of X")
            basis = _orthonormal(np.random.default_rng(self.random_state).standard_normal((X.shape[1], k)))
            delta = (basis, basis.T)
        elif self.method == "leace":
            assert y_idx is not None and self.classes_ is not None
            delta = _leace_delta(X, y_idx, len(self.classes_))
        else:
            assert y_idx is not None
            basis = self._inlp_basis(X, y_idx)
            delta = (basis, basis.T)
        self.proj_left_, self.proj_right_ = _compact(*delta)
        self.rank_ = int(self.proj_left_.shape[1])
        return self

    def _inlp_basis(self, X, y_idx: np.ndarray) -> np.ndarray:
        """Orthonormal ``(d, r)`` basis of every INLP probe's weight rows."""
        from probing.probes.linear import LinearProbe

        n, d = X.shape
        order = np.random.default_rng(self.random_state).permutation(n)
        is_dev = np.zeros(n, dtype=bool)
        is_dev[order[::_DEV_SHARE]] = True
        train, dev = np.flatnonzero(~is_dev), np.flatnonzero(is_dev)
        counts = np.bincount(y_idx[train], minlength=int(y_idx.max()) + 1)
        majority = float(np.mean(y_idx[dev] == counts.argmax()))
        cap = self.rank if self.rank is not None else d
        basis = np.zeros((d, 0))
        X_train, X_dev = X[train], X[dev]
        self.n_iter_ = 0
        for _ in range(self.max_iter):
            if basis.shape[1] >= cap or len(np.unique(y_idx[train])) < 2:
                break
            probe = LinearProbe(C=self.C, max_iter=200, random_state=self.random_state)
            probe.fit(_project_out(X_train, basis, self.bias_), y_idx[train])
            self.n_iter_ += 1
            if probe.score(_project_out(X_dev, basis, self.bias_), y_idx[dev]) <= majority + self.tol:
                break
            w = _label_rows(probe.coef_).T
            w = w - basis @ (basis.T @ w)
            u, s, _ = np.linalg.svd(w, full_matrices=False)
            new = u[:, s > s.max() * max(w.shape) * np.finfo(float).eps] if s.size and s.max() > 0 else u[:, :0]
            basis = _orthonormal(np.hstack([basis, new[:, : cap - basis.shape[1]]]))
        return basis

    # -- applying

    def transform(self, X) -> np.ndarray:
        """``(n, d)`` -> the erased ``(n, d)``: float64 for float64 input, else float32 (fp16 memmaps are read
        in chunks).

        Parameters
        ----------
        X : array-like (n, d), float64, float32 or float16
            Rows to erase, d = ``n_features_in_`` (an fp16 memmap is fine: it is read ``CHUNK_ROWS`` at a time).

        Returns
        -------
        ndarray (n, d), float64 for float64 input, else float32
            ``X - ((X - bias_) @ proj_right_.T) @ proj_left_.T``, computed in float64.
        """
        check_is_fitted(self, "proj_left_")
        X = self._validate(X, reset=False)
        dtype = np.float64 if X.dtype == np.float64 else np.float32
        out = np.empty(X.shape, dtype=dtype)
        for start in range(0, X.shape[0], CHUNK_ROWS):
            chunk = np.asarray(X[start : start + CHUNK_ROWS], dtype=np.float64)
            out[start : start + CHUNK_ROWS] = chunk - ((chunk - self.bias_) @ self.proj_right_.T) @ self.proj_left_.T
        return out

    def torch_transform(self, x: torch.Tensor) -> torch.Tensor:
        """The same map on a tensor ``(..., d)`` in its dtype and device (the biLM's in-model intervention).

        Parameters
        ----------
        x : Tensor (..., d)
            Any leading shape, d = ``n_features_in_``; floating point.

        Returns
        -------
        Tensor (..., d)
            The erased ``x``, in ``x``'s dtype and on its device (the factors are cast to them).
        """
        check_is_fitted(self, "proj_left_")
        left, right, bias = (
            torch.as_tensor(a, dtype=x.dtype, device=x.device) for a in (self.proj_left_, self.proj_right_, self.bias_)
        )
        return x - ((x - bias) @ right.T) @ left.T

    @property
    def projection_(self) -> np.ndarray:
        """The linear part ``P = I - L R``, float64 ``(d, d)``: ``transform(x) = x @ P.T + (L R) @ bias``.

        Returns
        -------
        ndarray (d, d), float64
        """
        check_is_fitted(self, "proj_left_")
        return np.eye(self.n_features_in_) - self.proj_left_ @ self.proj_right_

    @property
    def fingerprint(self) -> str:
        """sha256 of the method and the fitted map (``P`` and ``bias`` rounded to float32, so factorisation
        signs and last-bit BLAS differences do not change it): the key of whatever is computed from it."""
        check_is_fitted(self, "proj_left_")
        h = hashlib.sha256(f"eraser:{self.method}:{self.n_features_in_}:{self.rank_}".encode())
        h.update(np.ascontiguousarray(self.projection_, dtype=np.float32).tobytes())
        h.update(np.ascontiguousarray(self.bias_, dtype=np.float32).tobytes())
        return h.hexdigest()


def fit_eraser(
    X, y, method: str = "leace", rank: int | None = None, random_state: int | None = 0, **params: Any
) -> Eraser:
    """Fit an :class:`Eraser` in one call.

    Parameters
    ----------
    X : array-like (n, d)
        The representations to erase from.
    y : array-like (n,)
        One label per row (any hashable).
    method, rank, random_state : the :class:`Eraser`'s.
    **params : its other options (``max_iter``, ``tol``, ``C`` for INLP).

    Returns
    -------
    Eraser
        Fitted.
    """
    return Eraser(method, rank, random_state, **params).fit(X, y)


def fit_eraser_on_store(
    store: StoreLike,
    layer: int | str,
    labels: str | Sequence | np.ndarray,
    method: str = "leace",
    rank: int | None = None,
    random_state: int | None = 0,
    *,
    rows: np.ndarray | None = None,
    **params: Any,
) -> Eraser:
    """Fit on a store's layer or direction half (``"1f"``, ``"1b"``) and a label per token.

    ``labels`` is a token-table column (``"upos"``) or an array with one label per store row; ``rows``
    selects rows; rows whose label is empty (``""`` or None: e.g. tokens without a sense) are left out.

    Parameters
    ----------
    store : StoreLike
        The activations, ``(n_tokens, dim)`` per layer.
    layer : int or str
        A stored layer or a direction half (``"1f"``: the ``(n_tokens, dim // 2)`` forward columns).
    labels : str, or sequence / ndarray (n_tokens,)
        A token-table column name, or one label per store row (compared as str).
    method, rank, random_state : the :class:`Eraser`'s.
    rows : ndarray (m,) of int, optional
        Store rows to fit on, or a boolean mask ``(n_tokens,)`` as :meth:`Store.layer` takes; None: every row.
    **params : the :class:`Eraser`'s other options (``max_iter``, ``tol``, ``C`` for INLP).

    Returns
    -------
    Eraser
        Fitted on the labelled rows among ``rows``; its ``n_features_in_`` is the layer's (or half's) width.
    """
    if isinstance(labels, str):
        if labels not in store.tokens.columns:
            raise InputError(
                f"{store.path}: the token table has no column {labels!r}; columns are {list(store.tokens.columns)}"
            )
        values = store.tokens[labels].to_numpy()
    else:
        values = np.asarray(labels, dtype=object)
        if values.shape != (len(store),):
            raise InputError(f"labels: {values.shape[0]} values for a store of {len(store)} tokens ({store.path})")
    idx = np.arange(len(store)) if rows is None else np.asarray(rows)
    if idx.dtype == bool:
        if idx.shape != (len(store),):
            raise InputError(
                f"rows: a boolean mask of shape {idx.shape} for a store of {len(store)} tokens ({store.path})"
            )
        idx = np.flatnonzero(idx)
    idx = idx.astype(np.int64, copy=False)
    idx = idx[np.array([v is not None and v != "" for v in values[idx]], dtype=bool)]
    if not idx.size:
        raise InputError(f"{store.path}: no token has a label in {labels if isinstance(labels, str) else 'labels'}")
    X = store.layer(layer, rows=idx)
    return fit_eraser(X, values[idx].astype(str), method, rank, random_state, **params)


# ----------------------------------------------------------------------------- linear algebra


def _mean(X) -> np.ndarray:
    total = np.zeros(X.shape[1])
    for start in range(0, X.shape[0], CHUNK_ROWS):
        total += np.asarray(X[start : start + CHUNK_ROWS], dtype=np.float64).sum(axis=0)
    return total / X.shape[0]


def _leace_delta(X, y_idx: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """LEACE's ``(L, R)`` from concept-erasure's fitter on one-hot labels, accumulated chunk by chunk in float64."""
    from concept_erasure import LeaceFitter

    fitter = LeaceFitter(X.shape[1], n_classes, dtype=torch.float64, constrain_cov_trace=False, svd_tol=_SVD_TOL)
    eye = torch.eye(n_classes, dtype=torch.float64)
    for start in range(0, X.shape[0], CHUNK_ROWS):
        chunk = torch.from_numpy(np.array(X[start : start + CHUNK_ROWS], dtype=np.float64))  # a writable copy
        fitter.update(chunk, eye[torch.from_numpy(y_idx[start : start + CHUNK_ROWS])])
    eraser = fitter.eraser
    return eraser.proj_left.numpy(), eraser.proj_right.numpy()


def _compact(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``L R`` refactored over its nonzero singular values only: ``(d, r)`` and ``(r, d)`` with r its rank."""
    u, s, vt = np.linalg.svd(left @ right)
    keep = s > (s[0] * len(s) * np.finfo(float).eps if s.size and s[0] > 0 else np.inf)
    return u[:, keep] * s[keep], vt[keep]


def _label_rows(coef: np.ndarray) -> np.ndarray:
    """The part of a probe's weight rows that tells labels apart: a multinomial probe's ``(k, d)`` rows less
    their mean row, which adds the same logit to every class and so changes no prediction (the L2 penalty
    drives it to zero, but only to the solver's tolerance: about 1e-6 of the rows, which an exact rank cut
    keeps as a k-th direction). Rank k - 1, as Ravfogel et al.'s INLP removes; a binary probe's one row is
    returned as it is.

    Parameters
    ----------
    coef : ndarray (k, d)
        ``LinearProbe.coef_``: one row for two classes, else one per class.

    Returns
    -------
    ndarray (k, d), float64
    """
    coef = np.asarray(coef, dtype=np.float64)
    return coef - coef.mean(axis=0) if coef.shape[0] > 1 else coef


def _orthonormal(a: np.ndarray) -> np.ndarray:
    q, _ = np.linalg.qr(a)
    return q


def _project_out(X, basis: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """float32 ``X`` with the span of ``basis`` set to the mean (the data INLP's next probe sees)."""
    out = np.empty(X.shape, dtype=np.float32)
    for start in range(0, X.shape[0], CHUNK_ROWS):
        chunk = np.asarray(X[start : start + CHUNK_ROWS], dtype=np.float64)
        out[start : start + CHUNK_ROWS] = chunk - ((chunk - bias) @ basis) @ basis.T
    return out


# ----------------------------------------------------------------------------- erased stores


def fit_layer_erasers(
    store: StoreLike, labels: str, method: str = "leace", *, ranks: Mapping[str, int] | None = None
) -> dict[str, Eraser]:
    """One eraser per stored layer of ``store`` for the token column ``labels`` (a task's training store);
    ``ranks`` (per layer) sets a random control's rank, e.g. ``{k: e.rank_ for k, e in leace.items()}``."""
    return {
        name: fit_eraser_on_store(store, name, labels, method, None if ranks is None else ranks[name])
        for name in store.layer_names
    }


class ErasedStore:
    """``base`` seen through per-layer erasers (a StoreLike): ``layer(k)`` is the eraser of ``k``'s stored layer
    applied to it (float32; a half ``"1f"`` is cut from the erased layer), everything else is ``base``'s.
    Its ``key`` covers the base key, ``intervention`` and every eraser's fingerprint."""

    def __init__(self, base: StoreLike, erasers: Mapping[str, Eraser], intervention: str):
        self.base, self.erasers, self.intervention = base, dict(erasers), intervention
        self.path, self.manifest = base.path, base.manifest

    @property
    def key(self) -> str:
        """The job-cache name of what is read through this view: the base store's key, the intervention, each
        eraser's fingerprint and the code identity of :mod:`probing.analysis.erasure`, which applies them."""
        return digest(
            {
                "store": self.base.key,
                "intervention": self.intervention,
                "erasers": {name: eraser.fingerprint for name, eraser in self.erasers.items()},
                "code": code_identity(ERASURE_VERSION, [__name__]),
            }
        )

    @property
    def layer_names(self) -> list[str]:
        return self.base.layer_names

    @property
    def dim(self) -> int:
        return self.base.dim

    @property
    def tokens(self) -> pd.DataFrame:
        return self.base.tokens

    @property
    def offsets(self) -> np.ndarray:
        """The base store's int64 ``(n_sentences + 1,)`` row offsets.

        Returns
        -------
        ndarray (n_sentences + 1,), int64
        """
        return self.base.offsets

    def __len__(self) -> int:
        return len(self.base)

    def __getattr__(self, name: str) -> Any:  # n_sentences, rows(), sentence(), ... of the base store
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def layer_index(self, k: int | str) -> int:
        return self.base.layer_index(k)

    def layer(self, k: int | str, rows: Any = None, dtype: Any = None) -> np.ndarray:
        """Layer ``k`` of the base store through its eraser (a half is cut from the erased layer).

        Parameters
        ----------
        k : int or str
            A stored layer or a direction half (``"1f"``, ``"1b"``).
        rows : indices (m,), boolean mask (n_tokens,) or slice, optional
            Rows to read, as the base store's ``layer`` takes them; None: every row.
        dtype : optional
            Convert the result to it.

        Returns
        -------
        ndarray (m, dim), or (m, dim // 2) for a half
            For a layer with an eraser its ``transform`` (float32 from an fp16 store), else the base store's
            array (fp16 for a :class:`~probing.store.Store`); then ``dtype``. m = n_tokens when ``rows`` is None.
        """
        names = self.base.layer_names
        index, columns = resolve(k, names, self.dim) if isinstance(k, str) else (self.layer_index(k), slice(None))
        name = names[index]
        X = self.base.layer(name, rows=rows)
        if name in self.erasers:
            X = self.erasers[name].transform(X)
        X = X[:, columns]
        return X if dtype is None else X.astype(dtype, copy=False)
