"""Linear probes on frozen features.

``LinearProbe`` is multinomial logistic regression solved in torch with full-batch L-BFGS and a
strong-Wolfe line search. The data and the big matrix products are fp32; the (tiny) parameters, the
loss reduction and the L-BFGS updates are float64, so that the line search can still see the loss
decrease near the optimum. It minimises exactly scikit-learn's ``LogisticRegression(C=C)`` objective

    mean_i CE(x_i W^T + b, y_i) + ||W||_F^2 / (2 C n)

(sklearn's ``C * sum_i CE + ||W||^2 / 2`` divided by ``C n``), with an unpenalised intercept, one
logit for binary problems and one per class otherwise, so the same ``C`` gives the same solution.

The fit runs in preconditioned coordinates that are an exact reparametrisation of that problem,
never a change of model: X is centred (the intercept absorbs the shift), rotated onto the
eigenbasis of its covariance and each direction scaled by D with D^2 = eigenvalue / 4 + 1/(C n),
the diagonal of Böhning's bound on the objective's Hessian. The penalty on the raw weights,
W = (theta / D) @ basis.T, stays diagonal: sum(theta^2 / D^2). L-BFGS then sees curvature close to
the identity instead of the very uneven scales of contextual activations (a few huge dimensions,
large offsets, strongly correlated features), and needs several times fewer iterations.
``precondition="standardize"`` (per-feature centring and scaling only) avoids the O(n d^2)
covariance and rotation for very wide inputs.

The preconditioned fp32 copy of X is bounded by ``max_design_bytes`` (default 4 GiB,
:func:`~probing.probes.design.design_budget`); a bigger X is not copied but streamed in row chunks at every
evaluation, with the preconditioning folded into the weights (float64 products, same optimum).

fp32 logits resolve the objective to about 1e-9; along nearly flat directions (almost separable
classes under a weak penalty) coefficients can differ from sklearn's float64 solution by up to
~1e-2 (relative) while the predictions agree.

The preconditioning lives in :mod:`probing.probes.design`, the objectives and solver in
:mod:`probing.probes.solver`; :mod:`probing.probes.mix` has ``ScalarMixProbe``, which learns the scalar mix of
Peters et al. (2018, Eq. 1) jointly with the classifier.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from probing.errors import InputError
from probing.probes.design import (
    CHUNK_ROWS,
    _check_finite_chunk,
    _Design,
    _linear_scores,
    _Moments,
    _safe_scale,
    _standardized,
    _streamed,
    _StreamedDesign,
    _whitened,
    design_budget,
)
from probing.probes.solver import (
    DEFAULT_CS,
    INTERCEPT_SCALE,
    _check_C,
    _check_common,
    _check_Cs,
    _check_label_types,
    _dev_log_loss,
    _encode_labels,
    _holdout_rows,
    _index_labels,
    _linear_objective,
    _nll,
    _penalty_strength,
    _run_lbfgs,
    _softmax_proba,
    _streamed_objective,
    _torch_generator,
    _warm_l2_path,
    _warn_not_converged,
)

_SOLVERS = ("lbfgs", "adam")
_PRECONDITIONERS = ("whiten", "standardize")

# ----------------------------------------------------------------------------- LinearProbe


class LinearProbe(ClassifierMixin, BaseEstimator):
    """Multinomial logistic regression on frozen features, sklearn-compatible, fit in torch.

    Parameters
    ----------
    C : inverse L2 strength, exactly as in ``sklearn.linear_model.LogisticRegression``.
    fit_intercept : learn an unpenalised per-class intercept.
    max_iter : L-BFGS iterations, or Adam epochs.
    tol : L-BFGS stops when the objective has fallen by less than ``tol`` (relative) over its last 20
        evaluations: at the default 1e-6 the objective ends within about 1e-6 (relative) of the optimum, at
        most 1e-5, checked against scikit-learn at tol 1e-10 (``tests/test_probe_optimum.py``); a gradient
        test would stop an ill-conditioned probe far earlier (:func:`~probing.probes.solver._run_lbfgs`);
        Adam stops when the dev log-loss has not improved by more than ``tol`` for
        ``n_iter_no_change`` epochs, and keeps the epoch with the lowest dev log-loss.
    solver : ``"lbfgs"`` (full batch, holds an fp32 copy of X up to ``max_design_bytes``) or ``"adam"`` (streams row blocks
        of X, e.g. an fp16 memmap, and needs ``X_dev``/``y_dev`` for early stopping).
    precondition : ``"whiten"`` (default; costs two O(n d^2) passes and a d x d eigensolve) or
        ``"standardize"`` (per-feature; also what Adam always uses).
    batch_size, learning_rate, n_iter_no_change : Adam only.
    random_state : seeds Adam's shuffling (L-BFGS starts from zero and is deterministic).
    chunk_rows : rows converted to fp32/float64 at a time.
    device : where L-BFGS runs with the fp32 design copy: ``"cpu"``, ``"cuda[:N]"``, ``"mps"``, or None (the
        ``probing.devices.use_device`` default, else CUDA when available, else CPU); Adam runs on the CPU.
    max_design_bytes : memory budget of L-BFGS's fp32 design copy (n * d * 4 bytes); None =
        ``$PROBING_MAX_DESIGN_BYTES``, else 4 GiB (:func:`probing.probes.design.design_budget`). Above it X
        is not copied: each evaluation streams its row chunks (e.g. from a store's fp16 memmap) on the CPU
        in float64, which minimises the same objective (same optimum to within the solver's rounding), ~2x
        slower, in memory of a few chunks.

    Attributes
    ----------
    classes_ : ndarray (n_classes,), the labels seen in training, sorted.
    coef_ : ndarray (1, d) for two classes, else (n_classes, d), on the raw feature scale.
    intercept_ : ndarray (1,) or (n_classes,).
    n_features_in_, n_iter_ : int.
    dev_score_ : accuracy on ``X_dev`` when given, else None.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4))  # 300 tokens, 4 features
    >>> y = np.where(X[:, 0] + 0.1 * rng.normal(size=300) > 0, "NOUN", "VERB")
    >>> probe = LinearProbe(C=1.0).fit(X[:200], y[:200])
    >>> probe.classes_.tolist(), probe.coef_.shape
    (['NOUN', 'VERB'], (1, 4))
    >>> bool(probe.score(X[200:], y[200:]) > 0.9)
    True
    """

    def __init__(
        self,
        C: float = 1.0,
        *,
        fit_intercept: bool = True,
        max_iter: int = 1000,
        tol: float = 1e-6,
        solver: str = "lbfgs",
        precondition: str = "whiten",
        batch_size: int = 512,
        learning_rate: float = 1e-2,
        n_iter_no_change: int = 5,
        random_state: int | None = None,
        chunk_rows: int = CHUNK_ROWS,
        device: str | None = None,
        max_design_bytes: int | None = None,
    ):
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.precondition = precondition
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.chunk_rows = chunk_rows
        self.device = device
        self.max_design_bytes = max_design_bytes

    # -- fitting

    def _check_settings(self) -> None:
        """InputError for a bad parameter other than the penalty."""
        name = type(self).__name__
        if self.solver not in _SOLVERS:
            raise InputError(f"{name}: solver must be one of {_SOLVERS}, got {self.solver!r}")
        if self.precondition not in _PRECONDITIONERS:
            raise InputError(f"{name}: precondition must be one of {_PRECONDITIONERS}, got {self.precondition!r}")
        _check_common(self, ("max_iter", "batch_size", "n_iter_no_change", "chunk_rows"))

    _CHECK = dict(dtype="numeric", ensure_all_finite=False, order=None, copy=False)

    def _check_X(self, X, *, reset: bool):
        """Validate X without copying it; finiteness is checked chunk by chunk where it is read."""
        return validate_data(self, X, reset=reset, **self._CHECK)

    def _check_Xy(self, X, y):
        return validate_data(self, X, y, reset=True, **self._CHECK)

    def fit(self, X, y, X_dev=None, y_dev=None) -> LinearProbe:
        """Fit on ``X`` and labels ``y`` (any hashable, e.g. strings).

        Parameters
        ----------
        X : array-like (n, d)
            Any float dtype (a store's fp16 memmap is read in ``chunk_rows`` blocks).
        y : array-like (n,)
            One label per row.
        X_dev, y_dev : array-like (n_dev, d) and (n_dev,), optional
            Held-out data: Adam early-stops on them; both solvers report their accuracy as ``dev_score_``.

        Returns
        -------
        LinearProbe
            ``self``, fitted.
        """
        self._check_settings()
        C = _check_C(self.C, type(self).__name__)
        _check_label_types(y, type(self).__name__)  # before validate_data makes ["a", 1] the strings "a", "1"
        X, y = self._check_Xy(X, y)
        self.classes_, y_idx = _encode_labels(y, type(self).__name__)
        if (X_dev is None) != (y_dev is None):
            raise InputError("LinearProbe.fit: pass both X_dev and y_dev, or neither")
        if self.solver == "adam":
            if X_dev is None:
                raise InputError("LinearProbe(solver='adam') needs X_dev and y_dev for early stopping")
            self._fit_adam(X, y_idx, C, X_dev, y_dev)
        else:
            design = self._design(X, C)
            self._fit_design(design, y_idx, C)
        self.dev_score_ = None if X_dev is None else float(self.score(X_dev, y_dev))
        return self

    def _design(self, X, C: float) -> _Design | _StreamedDesign:
        """The preconditioned design: an fp32 copy of X when it fits ``max_design_bytes``, else streamed."""
        if X.shape[0] * X.shape[1] * 4 > design_budget(self.max_design_bytes):
            lam = _penalty_strength(C, X.shape[0])
            return _streamed(X, self.chunk_rows, self.fit_intercept, lam, self.precondition == "whiten")
        if self.precondition == "whiten":
            design = _whitened(X, self.chunk_rows, self.fit_intercept, _penalty_strength(C, X.shape[0]))
        else:
            design = _standardized(X, self.chunk_rows, self.fit_intercept)
        return design.to(self.device)

    def _n_out(self) -> int:
        return 1 if len(self.classes_) == 2 else len(self.classes_)

    def _fit_design(self, design: _Design | _StreamedDesign, y_idx: np.ndarray, C: float, init=None):
        """L-BFGS on a preconditioned design; ``init`` = (theta, b) warm start in that space.

        Returns the solution (theta, b) in that space, for the next warm start.
        """
        n, d = design.shape
        k = self._n_out()
        binary = k == 1
        lam = _penalty_strength(C, n)
        dev = design.device
        theta = torch.zeros((k, d), dtype=torch.float64, device=dev)
        b = torch.zeros(k, dtype=torch.float64, device=dev)
        if init is not None:
            theta.copy_(torch.as_tensor(init[0]))
            b.copy_(torch.as_tensor(init[1]))
        target = (torch.from_numpy(y_idx).double() if binary else torch.from_numpy(y_idx)).to(dev)
        penalty = lam * torch.from_numpy(1.0 / design.scale).to(dev) ** 2
        if isinstance(design, _StreamedDesign):
            objective = _streamed_objective(design, target, binary, penalty, theta, b)
        else:
            objective = _linear_objective(design.x, target, binary, penalty, theta, b)
        params, scales = ([theta, b], [1.0, INTERCEPT_SCALE]) if self.fit_intercept else ([theta], [1.0])
        n_iter, gmax = _run_lbfgs(objective, params, self.max_iter, self.tol, scales)
        _warn_not_converged(type(self).__name__, n_iter, self.max_iter, gmax, self.tol)
        self._set_solution(theta.detach().double().cpu().numpy(), b.detach().double().cpu().numpy(), design)
        self.n_iter_ = n_iter
        return theta.detach().clone(), b.detach().clone()

    def _set_solution(self, theta: np.ndarray, b: np.ndarray, design: _Design | _StreamedDesign) -> None:
        """Map preconditioned-space parameters back to raw features."""
        self.coef_, self.intercept_ = design.raw(theta, b)

    def _fit_adam(self, X, y_idx: np.ndarray, C: float, X_dev, y_dev) -> None:
        """Minibatch Adam on the same objective (penalty scaled by the full n), streaming row blocks
        of X in random order and shuffling rows within a block; early stopping on dev log-loss."""
        name = type(self).__name__
        X_dev = self._check_X(X_dev, reset=False)
        dev_idx = _index_labels(y_dev, self.classes_)
        if len(dev_idx) != X_dev.shape[0]:
            raise InputError(f"{name}: X_dev has {X_dev.shape[0]} rows but y_dev has {len(dev_idx)}")
        n, d = X.shape
        mom = _Moments(d)
        for start in range(0, n, self.chunk_rows):
            block = torch.from_numpy(np.asarray(X[start : start + self.chunk_rows], dtype=np.float32))
            _check_finite_chunk(block, start, "X")
            mom.add(block)
        mean = mom.mean if self.fit_intercept else np.zeros(d)
        scale = _safe_scale(mom.var + (0.0 if self.fit_intercept else mom.mean**2), mean)
        design = _Design(torch.empty(0), mean, scale)
        mean_t = torch.from_numpy(mean)
        inv_t = torch.from_numpy(1.0 / scale)

        k = self._n_out()
        binary = k == 1
        lam = _penalty_strength(C, n)
        inv_scale = inv_t.float()
        theta = torch.zeros((k, d), requires_grad=True)
        b = torch.zeros(k, requires_grad=self.fit_intercept)
        params = [theta, b] if self.fit_intercept else [theta]
        opt = torch.optim.Adam(params, lr=self.learning_rate)
        gen = _torch_generator(self.random_state)
        starts = torch.arange(0, n, self.chunk_rows)
        y_t = torch.from_numpy(y_idx)

        best_loss, best, stale, epochs = math.inf, None, 0, 0
        for epoch in range(self.max_iter):
            epochs = epoch + 1
            for start in starts[torch.randperm(len(starts), generator=gen)].tolist():
                stop = min(start + self.chunk_rows, n)
                block = torch.from_numpy(np.asarray(X[start:stop], dtype=np.float64))
                block = ((block - mean_t) * inv_t).float()
                yb = y_t[start:stop]
                for idx in torch.randperm(stop - start, generator=gen).split(self.batch_size):
                    target = yb[idx].float() if binary else yb[idx]
                    opt.zero_grad()
                    loss = _nll(torch.addmm(b, block[idx], theta.T), target, binary)
                    if lam:
                        loss = loss + 0.5 * lam * (theta * inv_scale).pow(2).sum()
                    loss.backward()
                    opt.step()
            self._set_solution(theta.detach().double().numpy(), b.detach().double().numpy(), design)
            dev_loss = _dev_log_loss(_linear_scores(X_dev, self.coef_, self.intercept_, self.chunk_rows), dev_idx)
            if dev_loss < best_loss - self.tol:
                best_loss, best, stale = dev_loss, (self.coef_.copy(), self.intercept_.copy()), 0
            else:
                stale += 1
                if stale >= self.n_iter_no_change:
                    break
        if best is None:
            raise InputError(f"{name}: the dev log-loss is not finite after epoch 1 (learning_rate too high?)")
        self.coef_, self.intercept_ = best
        self.n_iter_ = epochs

    # -- prediction

    def decision_function(self, X) -> np.ndarray:
        """Logits in float64: shape (n,) for binary problems, (n, n_classes) otherwise.

        Parameters
        ----------
        X : array-like (n, d)
            Features with the ``d = n_features_in_`` columns of fit; any numeric dtype (fp16 memmaps are read
            in chunks of ``chunk_rows`` rows).

        Returns
        -------
        ndarray (n,) or (n, n_classes), float64
            Binary: the logit of ``classes_[1]``. Otherwise column j is the logit of ``classes_[j]``.
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        scores = _linear_scores(X, self.coef_, self.intercept_, self.chunk_rows)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (n, n_classes) of X (n, d).

        Parameters
        ----------
        X : array-like (n, d)
            Features with the ``d = n_features_in_`` columns of fit; any numeric dtype (fp16 memmaps are read
            in chunks of ``chunk_rows`` rows).

        Returns
        -------
        ndarray (n, n_classes), float64
            Column j is the probability of ``classes_[j]``; rows sum to 1 (binary problems too: 2 columns).
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        return _softmax_proba(_linear_scores(X, self.coef_, self.intercept_, self.chunk_rows))

    def predict_log_proba(self, X) -> np.ndarray:
        """Log class probabilities (n, n_classes) of X (n, d), in float64.

        Parameters
        ----------
        X : array-like (n, d)
            Features with the ``d = n_features_in_`` columns of fit; any numeric dtype (fp16 memmaps are read
            in chunks of ``chunk_rows`` rows).

        Returns
        -------
        ndarray (n, n_classes), float64
            Column j is the log-probability of ``classes_[j]`` (binary problems too: 2 columns).
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        scores = _linear_scores(X, self.coef_, self.intercept_, self.chunk_rows)
        if scores.shape[1] == 1:
            scores = np.column_stack([np.zeros(len(scores)), scores[:, 0]])
        return scores - logsumexp(scores, axis=1, keepdims=True)

    def _predict_index(self, X) -> np.ndarray:
        """Index into ``classes_`` of the predicted class (skips label decoding)."""
        scores = _linear_scores(X, self.coef_, self.intercept_, self.chunk_rows)
        if scores.shape[1] == 1:
            return (scores[:, 0] > 0).astype(np.int64)
        return scores.argmax(axis=1)

    def predict(self, X) -> np.ndarray:
        """The predicted class (n,) of each row of X (n, d).

        Parameters
        ----------
        X : array-like (n, d)
            Features with the ``d = n_features_in_`` columns of fit; any numeric dtype (fp16 memmaps are read
            in chunks of ``chunk_rows`` rows).

        Returns
        -------
        ndarray (n,)
            Items of ``classes_`` (its dtype): the largest logit's class; binary: ``classes_[1]`` iff its logit > 0.
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        return self.classes_[self._predict_index(X)]


class LinearProbeCV(LinearProbe):
    """``LinearProbe`` with its inverse L2 strength chosen on dev data from a grid (like scikit-learn's
    ``LogisticRegressionCV``, with one held-out set instead of folds).

    Every C of ``Cs`` is fitted (or, with ``patience``, those up to where dev accuracy stopped improving), from
    the strongest penalty to the weakest, and the fit with the best dev accuracy is kept (ties to the smaller C, the simpler probe). With L-BFGS, X is copied and preconditioned
    once (only the per-direction whitening scale, which depends on C, is adjusted in place) and each fit is
    warm-started from the previous C's solution (:func:`~probing.probes.solver._warm_l2_path`); Adam fits
    each C from scratch (its early stopping needs the dev data anyway).

    Parameters
    ----------
    Cs : the grid of inverse L2 strengths (any order; visited sorted).
    holdout : without ``X_dev``/``y_dev``, every ``holdout``-th row of X is the dev data and the probe is fit
        on the others.
    patience : stop walking the grid once this many C values in a row have not beaten the best dev accuracy
        (the weakest penalties are the slowest fits, and dev accuracy rarely climbs back after two falls);
        None (default) fits every C, as scikit-learn's ``LogisticRegressionCV`` does.
    The other parameters are ``LinearProbe``'s.

    Attributes
    ----------
    C_ : float, the chosen C.
    Cs_ : ndarray (n_Cs,), the grid as visited (ascending).
    dev_scores_ : ndarray (n_Cs,), the dev accuracy of each C in ``Cs_``.
    l2_path_ : list of dicts, one per C in ``Cs_``: ``C``, ``dev_accuracy``, ``n_iter``.
    dev_score_ : float, the chosen C's dev accuracy.
    ``classes_``, ``coef_``, ``intercept_``, ``n_features_in_``, ``n_iter_``: those of the chosen C's fit.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5))
    >>> y = np.where(X[:, 0] > 0, "pos", "neg")
    >>> probe = LinearProbeCV(Cs=[0.01, 1.0]).fit(X[:150], y[:150], X[150:], y[150:])
    >>> probe.C_ in probe.Cs_, len(probe.l2_path_)
    (True, 2)
    """

    dev_score_: float

    def __init__(
        self,
        Cs: Sequence[float] = DEFAULT_CS,
        *,
        holdout: int = 10,
        patience: int | None = None,
        fit_intercept: bool = True,
        max_iter: int = 1000,
        tol: float = 1e-6,
        solver: str = "lbfgs",
        precondition: str = "whiten",
        batch_size: int = 512,
        learning_rate: float = 1e-2,
        n_iter_no_change: int = 5,
        random_state: int | None = None,
        chunk_rows: int = CHUNK_ROWS,
        device: str | None = None,
        max_design_bytes: int | None = None,
    ):
        self.Cs = Cs
        self.holdout = holdout
        self.patience = patience
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.precondition = precondition
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.n_iter_no_change = n_iter_no_change
        self.random_state = random_state
        self.chunk_rows = chunk_rows
        self.device = device
        self.max_design_bytes = max_design_bytes

    def fit(self, X, y, X_dev=None, y_dev=None) -> LinearProbeCV:
        """Fit every C on ``X`` and ``y``, keep the best on ``X_dev``, ``y_dev``.

        Parameters
        ----------
        X : array-like (n, d)
        y : array-like (n,)
        X_dev, y_dev : array-like (n_dev, d) and (n_dev,), optional
            The dev data that choose C; without them every ``holdout``-th row of ``X`` is.

        Returns
        -------
        LinearProbeCV
            ``self``, refitted at the chosen ``C_``.
        """
        name = type(self).__name__
        Cs = _check_Cs(self.Cs, name)
        self._check_settings()
        _check_label_types(y, name)
        X, y = self._check_Xy(X, y)
        self.classes_, y_idx = _encode_labels(y, name)
        if (X_dev is None) != (y_dev is None):
            raise InputError(f"{name}.fit: pass both X_dev and y_dev, or neither")
        if X_dev is None:
            train, held = _holdout_rows(len(y_idx), self.holdout, name)
            X, y_idx, X_dev, dev_idx = X[train], y_idx[train], X[held], y_idx[held]
            y_dev = self.classes_[dev_idx]
        else:
            X_dev = self._check_X(X_dev, reset=False)
            dev_idx = _index_labels(y_dev, self.classes_)
            if len(dev_idx) != X_dev.shape[0]:
                raise InputError(f"{name}: X_dev has {X_dev.shape[0]} rows but y_dev has {len(dev_idx)}")
        if self.solver == "adam":
            (acc, C, kept), path = self._adam_path(Cs, X, y_idx, X_dev, y_dev, dev_idx)
        else:
            (acc, C, kept), path = self._lbfgs_path(Cs, X, y_idx, X_dev, dev_idx)
        self.coef_, self.intercept_, self.n_iter_ = kept
        self.C_, self.dev_score_, self.l2_path_ = C, acc, path
        self.Cs_ = np.array([p["C"] for p in path])
        self.dev_scores_ = np.array([p["dev_accuracy"] for p in path])
        return self

    def _snapshot(self) -> tuple[np.ndarray, np.ndarray, int]:
        return self.coef_.copy(), self.intercept_.copy(), self.n_iter_

    def _dev_accuracy(self, X_dev, dev_idx: np.ndarray) -> float:
        return float(np.mean(self._predict_index(X_dev) == dev_idx))

    def _lbfgs_path(self, Cs: list[float], X, y_idx: np.ndarray, X_dev, dev_idx: np.ndarray):
        design = self._design(X, Cs[0])

        def fit(C: float, init):
            init = self._fit_design(design, y_idx, C, init=init)
            return init, self.n_iter_

        return _warm_l2_path(
            Cs,
            X.shape[0],
            design,
            self.chunk_rows,
            fit,
            rescale=lambda init, factor: (init[0] * factor, init[1]),
            dev_accuracy=lambda: self._dev_accuracy(X_dev, dev_idx),
            snapshot=self._snapshot,
            patience=self.patience,
        )

    def _adam_path(self, Cs: list[float], X, y_idx: np.ndarray, X_dev, y_dev, dev_idx: np.ndarray):
        """Each C fitted from scratch (same result as ``LinearProbe(C=C, solver="adam").fit``)."""
        best: tuple[float, float, tuple] | None = None
        best_at = 0
        path = []
        for C in Cs:
            self._fit_adam(X, y_idx, C, X_dev, y_dev)
            acc = self._dev_accuracy(X_dev, dev_idx)
            path.append({"C": C, "dev_accuracy": acc, "n_iter": self.n_iter_})
            if best is None or acc > best[0]:
                best, best_at = (acc, C, self._snapshot()), len(path)
            elif self.patience is not None and len(path) - best_at >= self.patience:
                break
        assert best is not None
        return best, path


# ----------------------------------------------------------------------------- layer combinations


def concat_layers(layers: Sequence[np.ndarray]) -> np.ndarray:
    """Concatenate per-layer features along features; the dtype (e.g. fp16) is kept.

    The "concat" probe is ``LinearProbe().fit(concat_layers([...]), y)``.

    Parameters
    ----------
    layers : sequence of (n, d_k) arrays
        The same n tokens in every layer.

    Returns
    -------
    ndarray (n, sum_k d_k)
    """
    layers = [np.asarray(a) for a in layers]
    if not layers:
        raise InputError("concat_layers: no layers given")
    n = {a.shape[0] for a in layers}
    if any(a.ndim != 2 for a in layers) or len(n) != 1:
        shapes = [a.shape for a in layers]
        raise InputError(f"concat_layers: expected 2-D arrays with the same number of rows, got {shapes}")
    return np.concatenate(layers, axis=1)
