"""``ScalarMixProbe``: the scalar mix of Peters et al. (2018, Eq. 1) learned jointly with a linear classifier,
and ``ScalarMixProbeCV``, the same with C chosen on dev data."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data
from threadpoolctl import threadpool_limits

from probing.errors import InputError
from probing.probes.design import CHUNK_ROWS, _check_finite_chunk, _Design, _whitened_layers
from probing.probes.solver import (
    DEFAULT_CS,
    INTERCEPT_SCALE,
    _check_C,
    _check_common,
    _check_Cs,
    _encode_labels,
    _holdout_rows,
    _index_labels,
    _mix_objective,
    _penalty_strength,
    _run_lbfgs,
    _softmax_proba,
    _warm_l2_path,
    _warn_not_converged,
)


def _as_layers(X, name: str, n_layers: int | None = None) -> list[np.ndarray]:
    """(n, L, d) array, a list of L arrays (n, d), or a 2-D (n, L * d) array cut into ``n_layers`` (default
    1) equal column blocks, as a list of 2-D numeric arrays (no copy)."""
    if isinstance(X, (list, tuple)):
        layers = [np.asarray(a) for a in X]
    else:
        X = np.asarray(X)
        if X.ndim == 3:
            layers = [X[:, j, :] for j in range(X.shape[1])]
        elif X.ndim == 2:
            L = n_layers or 1
            if X.shape[1] % L:
                raise InputError(f"{name}: X has {X.shape[1]} columns, which do not split into n_layers={L} layers")
            d = X.shape[1] // L
            layers = [X[:, j * d : (j + 1) * d] for j in range(L)]
        else:
            raise InputError(
                f"{name}: X must have shape (n_samples, n_layers, dim), (n_samples, n_layers * dim) or be a list "
                f"of (n_samples, dim) arrays; got an array of shape {X.shape}"
            )
    if not layers:
        raise InputError(f"{name}: X has no layers")
    if n_layers is not None and len(layers) != n_layers:
        raise InputError(f"{name}: X has {len(layers)} layers, n_layers is {n_layers}")
    for j, a in enumerate(layers):
        if a.ndim != 2 or a.shape != layers[0].shape:
            raise InputError(f"{name}: layer {j} has shape {a.shape}, expected {layers[0].shape} like layer 0")
        if a.dtype.kind not in "biuf":
            raise InputError(f"{name}: layer {j} has dtype {a.dtype}, expected a numeric dtype")
    if layers[0].shape[0] == 0:
        raise InputError(f"{name}: X has 0 samples")
    return layers


_CHECK = dict(dtype="numeric", ensure_all_finite=False, order=None, copy=False)


def _is_table(X) -> bool:
    """A single 2-D array-like (what scikit-learn passes), as opposed to a list of layers or an (n, L, d) array."""
    if isinstance(X, (list, tuple)):
        return bool(X) and np.asarray(X[0]).ndim <= 1
    return np.asarray(X).ndim <= 2  # 1-D too, so that validate_data explains how to reshape it


class ScalarMixProbe(ClassifierMixin, BaseEstimator):
    """Learned scalar mix of layers feeding a linear softmax classifier (Peters et al. 2018, Eq. 1).

    logits = (gamma * sum_j softmax(s)_j h_j) W^T + b, all trained jointly with L-BFGS on
    mean cross-entropy + ||gamma W||_F^2 / (2 C n) (the ``LinearProbe`` objective on the mixed
    features). Under an L2 penalty gamma and the scale of W are not separately identifiable
    (gamma -> inf, W -> 0 would remove any penalty on W alone), so gamma is folded into the
    classifier: ``coef_`` is gamma W, and ``gamma_ = ||coef_||_F`` (the gauge ||W||_F = 1).
    ``mix_l2`` optionally adds ``mix_l2 / 2 * ||s||^2`` (Peters et al.'s regulariser on s).

    X: an array (n, n_layers, dim), a list of n_layers arrays (n, dim) (e.g. fp16 memmaps), or a 2-D
    array (n, n_layers * dim) whose column blocks are the layers (``n_layers``, default 1: the form in
    which scikit-learn's tools pass data).
    ``device``: where L-BFGS runs with the whitened fp32 stack (as ``LinearProbe``'s).
    Attributes: ``classes_``, ``mix_weights_`` (softmax(s)), ``gamma_``, ``coef_``,
    ``intercept_``, ``n_layers_``, ``dim_``, ``n_features_in_`` (n_layers * dim), ``n_iter_``.
    """

    def __init__(
        self,
        C: float = 1.0,
        *,
        n_layers: int | None = None,
        mix_l2: float = 0.0,
        max_iter: int = 1000,
        tol: float = 1e-6,
        chunk_rows: int = CHUNK_ROWS,
        device: str | None = None,
    ):
        self.C = C
        self.n_layers = n_layers
        self.mix_l2 = mix_l2
        self.max_iter = max_iter
        self.tol = tol
        self.chunk_rows = chunk_rows
        self.device = device

    def _layers_labels(self, X, y) -> tuple[list[np.ndarray], np.ndarray]:
        """Validate the parameters and the data; the layers (each (n, dim)) and the label indices (n,)."""
        name = type(self).__name__
        _check_common(self, ("max_iter", "chunk_rows"))
        if not (isinstance(self.mix_l2, (int, float)) and self.mix_l2 >= 0):
            raise InputError(f"{name}: mix_l2 must be a non-negative number, got {self.mix_l2!r}")
        if self.n_layers is not None and (
            isinstance(self.n_layers, bool) or not isinstance(self.n_layers, int) or self.n_layers < 1
        ):
            raise InputError(f"{name}: n_layers must be a positive integer or None, got {self.n_layers!r}")
        if _is_table(X):
            X, y = validate_data(self, X, y, reset=True, **_CHECK)
        layers = _as_layers(X, name, self.n_layers)
        y = column_or_1d(np.asarray(y), warn=True)
        n = layers[0].shape[0]
        if len(y) != n:
            raise InputError(f"{name}: X has {n} samples but y has {len(y)}")
        self.classes_, y_idx = _encode_labels(y, name)
        return layers, y_idx

    def _design(self, layers: list[np.ndarray], C: float) -> _Design:
        """The whitened layer stack (n, L, dim) for penalty ``C``."""
        return _whitened_layers(layers, self.chunk_rows, _penalty_strength(C, layers[0].shape[0])).to(self.device)

    def _prepare(self, X, y, C: float) -> tuple[list[np.ndarray], np.ndarray, _Design]:
        """Validate, encode labels and build the whitened layer stack for penalty ``C``."""
        layers, y_idx = self._layers_labels(X, y)
        return layers, y_idx, self._design(layers, C)

    def fit(self, X, y) -> ScalarMixProbe:
        """Fit the mix weights and the probe jointly.

        Parameters
        ----------
        X : array-like (n, L, d), or a sequence of L arrays (n, d)
            The same n tokens in each of the L layers.
        y : array-like (n,)
            One label per token.

        Returns
        -------
        ScalarMixProbe
            ``self``, fitted.
        """
        C = _check_C(self.C, type(self).__name__)
        _, y_idx, design = self._prepare(X, y, C)
        self._fit_design(design, y_idx, C)
        return self

    def _fit_design(self, design: _Design, y_idx: np.ndarray, C: float, init=None):
        """L-BFGS over (s, theta, b) on the whitened stack; ``init`` = a previous (s, theta, b).

        Each layer is centred, so the mix ``sum_j a_j h~_j`` has mean zero whatever the weights
        a = softmax(s): the intercept b of the centred problem absorbs ``(a @ means) @ W^T``, which
        is an exact reparametrisation (raw intercept = b - (a @ means) @ W^T) that keeps the mix
        weights from trading off against the intercept. Returns the solution, for a warm start.
        """
        n, L, d = design.x.shape
        k = 1 if len(self.classes_) == 2 else len(self.classes_)
        binary = k == 1
        lam = _penalty_strength(C, n)
        dev = design.x.device
        s = torch.zeros(L, dtype=torch.float64, device=dev)
        theta = torch.zeros((k, d), dtype=torch.float64, device=dev)
        b = torch.zeros(k, dtype=torch.float64, device=dev)
        if init is not None:
            for t, v in zip((s, theta, b), init):
                t.copy_(torch.as_tensor(v))
        target = (torch.from_numpy(y_idx).double() if binary else torch.from_numpy(y_idx)).to(dev)
        penalty = lam * torch.from_numpy(1.0 / design.scale).to(dev) ** 2
        objective = _mix_objective(design.x, target, binary, penalty, self.mix_l2, s, theta, b)
        n_iter, gmax = _run_lbfgs(objective, [s, theta, b], self.max_iter, self.tol, [1.0, 1.0, INTERCEPT_SCALE])
        _warn_not_converged(type(self).__name__, n_iter, self.max_iter, gmax, self.tol)
        a = torch.softmax(s, 0).cpu().numpy()
        coef = design.raw_coef(theta.cpu().numpy())
        self.mix_weights_ = a
        self.coef_ = coef
        with threadpool_limits(limits=1):
            self.intercept_ = b.cpu().numpy() - coef @ (a @ design.mean)
        self.gamma_ = float(np.linalg.norm(coef))
        self.n_layers_ = L
        self.dim_ = d
        self.n_features_in_ = L * d
        self.n_iter_ = n_iter
        return s.clone(), theta.clone(), b.clone()

    def _scores(self, X) -> np.ndarray:
        check_is_fitted(self)
        name = type(self).__name__
        if _is_table(X):
            X = validate_data(self, X, reset=False, **_CHECK)
        layers = _as_layers(X, name, self.n_layers_ if _is_table(X) else None)
        if len(layers) != self.n_layers_ or layers[0].shape[1] != self.dim_:
            raise InputError(
                f"{name}: X has {len(layers)} layers of dim {layers[0].shape[1]}, but the probe "
                f"was fit on {self.n_layers_} layers of dim {self.dim_}"
            )
        n = layers[0].shape[0]
        out = np.empty((n, self.coef_.shape[0]))
        for start in range(0, n, self.chunk_rows):
            stop = min(start + self.chunk_rows, n)
            mixed = sum(w * np.asarray(a[start:stop], dtype=np.float64) for w, a in zip(self.mix_weights_, layers))
            _check_finite_chunk(mixed, start, "X")
            out[start:stop] = mixed @ self.coef_.T + self.intercept_
        return out

    def decision_function(self, X) -> np.ndarray:
        """Logits: (n,) for binary problems, (n, n_classes) otherwise.

        Parameters
        ----------
        X : array-like (n, n_layers, dim), list of n_layers arrays (n, dim), or (n, n_layers * dim)
            The layers of fit, in the same order (a 2-D table is cut into ``n_layers_`` column blocks).

        Returns
        -------
        ndarray (n,) or (n, n_classes), float64
            Binary: the logit of ``classes_[1]``. Otherwise column j is the logit of ``classes_[j]``.
        """
        scores = self._scores(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (n, n_classes).

        Parameters
        ----------
        X : array-like (n, n_layers, dim), list of n_layers arrays (n, dim), or (n, n_layers * dim)
            The layers of fit, in the same order (a 2-D table is cut into ``n_layers_`` column blocks).

        Returns
        -------
        ndarray (n, n_classes), float64
            Column j is the probability of ``classes_[j]``; rows sum to 1 (binary problems too: 2 columns).
        """
        return _softmax_proba(self._scores(X))

    def _predict_index(self, X) -> np.ndarray:
        scores = self._scores(X)
        return (scores[:, 0] > 0).astype(np.int64) if scores.shape[1] == 1 else scores.argmax(axis=1)

    def predict(self, X) -> np.ndarray:
        """The predicted class (n,) of each sample.

        Parameters
        ----------
        X : array-like (n, n_layers, dim), list of n_layers arrays (n, dim), or (n, n_layers * dim)
            The layers of fit, in the same order (a 2-D table is cut into ``n_layers_`` column blocks).

        Returns
        -------
        ndarray (n,)
            Items of ``classes_`` (its dtype): the largest logit's class; binary: ``classes_[1]`` iff its logit > 0.
        """
        check_is_fitted(self)
        return self.classes_[self._predict_index(X)]


class ScalarMixProbeCV(ScalarMixProbe):
    """``ScalarMixProbe`` with C chosen on dev data from a grid, as ``LinearProbeCV`` chooses it: every C of
    ``Cs``, from the strongest penalty, warm-started from the previous solution on one whitened copy of the
    layers; the best dev accuracy is kept (ties to the smaller C). The scalar mix makes the problem
    non-convex, so the warm start can also steer which local optimum a C ends in; it is deterministic
    either way.

    Parameters
    ----------
    Cs : the grid of inverse L2 strengths (any order; visited sorted).
    holdout : without ``X_dev``/``y_dev``, every ``holdout``-th sample is the dev data and the probe is fit
        on the others.
    patience : as ``LinearProbeCV``'s (None: every C).
    The other parameters are ``ScalarMixProbe``'s; X and ``X_dev`` take its forms.

    Attributes
    ----------
    C_, Cs_ (n_Cs,), dev_scores_ (n_Cs,), l2_path_, dev_score_ : as ``LinearProbeCV``'s.
    ``classes_``, ``mix_weights_`` (n_layers,), ``gamma_``, ``coef_``, ``intercept_``, ``n_iter_``: the chosen C's fit.
    """

    def __init__(
        self,
        Cs: Sequence[float] = DEFAULT_CS,
        *,
        holdout: int = 10,
        patience: int | None = None,
        n_layers: int | None = None,
        mix_l2: float = 0.0,
        max_iter: int = 1000,
        tol: float = 1e-6,
        chunk_rows: int = CHUNK_ROWS,
        device: str | None = None,
    ):
        self.Cs = Cs
        self.holdout = holdout
        self.patience = patience
        self.n_layers = n_layers
        self.mix_l2 = mix_l2
        self.max_iter = max_iter
        self.tol = tol
        self.chunk_rows = chunk_rows
        self.device = device

    _FITTED = ("mix_weights_", "coef_", "intercept_", "gamma_", "n_iter_")

    def fit(self, X, y, X_dev=None, y_dev=None) -> ScalarMixProbeCV:
        """Fit every C on ``X`` and ``y``, keep the best on ``X_dev``, ``y_dev``.

        Parameters
        ----------
        X : array-like (n, L, d), or a sequence of L arrays (n, d)
        y : array-like (n,)
        X_dev, y_dev : like ``X`` with n_dev tokens, and (n_dev,), optional
            The dev data that choose C; without them every ``holdout``-th token of ``X`` is.

        Returns
        -------
        ScalarMixProbeCV
            ``self``, refitted at the chosen ``C_``.
        """
        name = type(self).__name__
        Cs = _check_Cs(self.Cs, name)
        if (X_dev is None) != (y_dev is None):
            raise InputError(f"{name}.fit: pass both X_dev and y_dev, or neither")
        layers, y_idx = self._layers_labels(X, y)
        if X_dev is None:
            train, held = _holdout_rows(len(y_idx), self.holdout, name)
            X_dev, dev_idx = [a[held] for a in layers], y_idx[held]
            layers, y_idx = [a[train] for a in layers], y_idx[train]
        else:
            dev_idx = _index_labels(y_dev, self.classes_)
        design = self._design(layers, Cs[0])

        def fit(C: float, init):
            init = self._fit_design(design, y_idx, C, init=init)
            return init, self.n_iter_

        (acc, C, attrs), path = _warm_l2_path(
            Cs,
            len(y_idx),
            design,
            self.chunk_rows,
            fit,
            rescale=lambda init, factor: (init[0], init[1] * factor, init[2]),
            dev_accuracy=lambda: float(np.mean(self._predict_index(X_dev) == dev_idx)),
            snapshot=lambda: {a: getattr(self, a) for a in self._FITTED},
            patience=self.patience,
        )
        for a, v in attrs.items():
            setattr(self, a, v)
        self.C_, self.dev_score_, self.l2_path_ = C, acc, path
        self.Cs_ = np.array([p["C"] for p in path])
        self.dev_scores_ = np.array([p["dev_accuracy"] for p in path])
        return self


def bootstrap_mix_weights(
    probe: ScalarMixProbe, X, y, groups, n_refits: int, random_state: int | None = 0
) -> np.ndarray:
    """Mix weights of the fitted ``probe`` refitted by its own procedure on bootstrap resamples of the training
    sentences (whole sentences drawn with replacement).

    The procedure is the one that made ``probe``: from a uniform mix, along the penalty path it took
    (``l2_path_`` of a :class:`ScalarMixProbeCV`, up to its ``C``; just ``C`` otherwise), each step warm-started
    from the last. The spread of the rows says how much the weights owe to the particular training
    sentences and to the optimisation: the mix is non-convex, and layers that carry the same information
    trade weight freely, so one fit's weights can look like a finding that a resample does not repeat.

    Parameters
    ----------
    probe : a fitted ScalarMixProbe or ScalarMixProbeCV.
    X : (n, L, d) array or L arrays (n, d)
        The training data ``probe`` was fit on.
    y : (n,)
        Its labels.
    groups : (n,)
        Sentence id of each token.
    n_refits : int
        Resamples to refit on.
    random_state : seeds the resampling.

    Returns
    -------
    ndarray (n_refits, L)
        One row of mix weights per refit.
    """
    check_is_fitted(probe)
    if isinstance(n_refits, bool) or not isinstance(n_refits, (int, np.integer)) or n_refits < 1:
        raise InputError(f"bootstrap_mix_weights: n_refits must be a positive integer, got {n_refits!r}")
    C = float(probe.C_ if isinstance(probe, ScalarMixProbeCV) else probe.C)
    path = sorted({float(p["C"]) for p in getattr(probe, "l2_path_", []) if p["C"] <= C} | {C})
    params = {k: v for k, v in probe.get_params().items() if k not in ("C", "Cs", "holdout", "patience")}
    refit = ScalarMixProbe(C=C, **params)
    _, y_idx, design = refit._prepare(X, y, path[0])
    groups = column_or_1d(np.asarray(groups))
    if len(groups) != len(y_idx):
        raise InputError(f"bootstrap_mix_weights: groups has {len(groups)} entries but y has {len(y_idx)}")
    if not np.array_equal(refit.classes_, probe.classes_):
        raise InputError("bootstrap_mix_weights: y has other classes than the probe was fit on")
    _, member = np.unique(groups, return_inverse=True)
    n_groups = int(member.max()) + 1
    rng = np.random.default_rng(random_state)
    out = np.empty((n_refits, probe.n_layers_))
    for r in range(n_refits):
        draws = np.bincount(rng.integers(0, n_groups, n_groups), minlength=n_groups)
        rows = np.repeat(np.arange(len(y_idx)), draws[member])
        sample = _Design(design.x[rows], design.mean, design.scale, design.basis, design.eig)
        init = None
        for c in path:
            factor = sample.set_penalty(_penalty_strength(c, len(rows)), refit.chunk_rows)
            if init is not None:
                init = (init[0], init[1] * torch.from_numpy(factor), init[2])
            init = refit._fit_design(sample, y_idx[rows], c, init=init)
        out[r] = refit.mix_weights_
    return out
