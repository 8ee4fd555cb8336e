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

fp32 logits resolve the objective to about 1e-9; along nearly flat directions (almost separable
classes under a weak penalty) coefficients can differ from sklearn's float64 solution by up to
~1e-2 (relative) while the predictions agree.

``ScalarMixProbe`` learns the scalar mix of Peters et al. (2018, Eq. 1) jointly with the classifier.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import expit, logsumexp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

CHUNK_ROWS = 8192
_HISTORY = 10  # L-BFGS memory, scipy's default ``maxcor`` (what sklearn uses)
_SOLVERS = ("lbfgs", "adam")
_PRECONDITIONERS = ("whiten", "standardize")


# ----------------------------------------------------------------------------- data preparation


class _Moments:
    """Per-feature count, mean and sum of squared deviations, merged chunk by chunk (Chan et al.)."""

    def __init__(self, dim: int):
        self.n = 0
        self.mean = np.zeros(dim)
        self.m2 = np.zeros(dim)

    def add(self, chunk: torch.Tensor) -> None:
        c = chunk.double()
        k = c.shape[0]
        if k == 0:
            return
        mean_c = c.mean(0)
        m2_c = ((c - mean_c) ** 2).sum(0)
        mean_c, m2_c = mean_c.numpy(), m2_c.numpy()
        n = self.n + k
        delta = mean_c - self.mean
        self.mean = self.mean + delta * (k / n)
        self.m2 = self.m2 + m2_c + delta**2 * (self.n * k / n)
        self.n = n

    @property
    def var(self) -> np.ndarray:
        return self.m2 / max(self.n, 1)


def _safe_scale(var: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Standard deviation, with 1 for features that are constant at fp32 precision."""
    scale = np.sqrt(var)
    const = scale <= 10 * np.finfo(np.float32).eps * np.maximum(np.abs(mean), 1.0)
    scale[const] = 1.0
    return scale


def _check_finite_chunk(chunk: torch.Tensor | np.ndarray, start: int, what: str) -> None:
    finite = torch.isfinite(chunk) if isinstance(chunk, torch.Tensor) else np.isfinite(chunk)
    if not bool(finite.all()):
        bad = np.argwhere(~np.asarray(finite))[0]
        raise ValueError(f"{what} contains NaN or infinity (row {start + int(bad[0])}, column {int(bad[1])})")


def _load_f32(X: np.ndarray, out: torch.Tensor, chunk_rows: int, what: str) -> _Moments:
    """Copy ``X`` (any numeric dtype, memmaps included) into the fp32 tensor ``out`` chunk by chunk.

    Returns the per-feature moments; the only full-size allocation is ``out`` itself.
    """
    out_np = out.numpy()
    moments = _Moments(X.shape[1])
    for start in range(0, X.shape[0], chunk_rows):
        stop = min(start + chunk_rows, X.shape[0])
        out_np[start:stop] = X[start:stop]
        chunk = out[start:stop]
        _check_finite_chunk(chunk, start, what)
        moments.add(chunk)
    return moments


def _center_scale_(t: torch.Tensor, mean: np.ndarray, scale: np.ndarray, chunk_rows: int) -> None:
    """In place: ``t = (t - mean) / scale`` (row chunks, float64 arithmetic for the shift)."""
    m = torch.from_numpy(mean)
    inv = torch.from_numpy(1.0 / scale)
    for start in range(0, t.shape[0], chunk_rows):
        block = t[start : start + chunk_rows]
        block.copy_((block.double() - m) * inv)


_BOHNING = 0.25  # curvature bound of the logistic loss: sigma'(z) <= 1/4 (Böhning 1992)


def _whitening_scale(eig: np.ndarray, lam: float) -> np.ndarray:
    """Per-eigendirection scale D with D^2 = eig/4 + lam, the diagonal of an upper bound on the
    objective's Hessian in the covariance eigenbasis; floored so that D > 0 when lam = 0."""
    d2 = _BOHNING * eig + lam
    top = float(d2.max())
    return np.sqrt(np.maximum(d2, 1e-10 * top if top > 0 else 1.0))


@dataclass
class _Design:
    """fp32 copy of X in preconditioned coordinates, ``x = (X - mean) @ basis / scale`` (for the
    scalar mix, a stack of layers, each centred on its own mean: ``x`` (n, L, d), ``mean`` (L, d)).

    The raw weights are ``W = (theta / scale) @ basis.T``; with an orthogonal basis,
    ``||W||^2 = sum(theta^2 / scale^2)``, so the penalty stays diagonal and fitting ``theta`` is
    an exact reparametrisation of the raw problem. ``basis=None`` means the identity
    (standardisation); ``eig`` holds the covariance eigenvalues when whitening.
    """

    x: torch.Tensor
    mean: np.ndarray
    scale: np.ndarray
    basis: np.ndarray | None = None
    eig: np.ndarray | None = None

    def raw(self, theta: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        coef = theta / self.scale
        if self.basis is not None:
            coef = coef @ self.basis.T
        return coef, b - coef @ self.mean

    def set_penalty(self, lam: float, chunk_rows: int) -> np.ndarray:
        """Re-fit a whitening scale to penalty ``lam`` (features of x rescaled in place).

        Returns the factor by which theta must be multiplied to keep the same raw weights.
        """
        if self.eig is None:
            return np.ones_like(self.scale)
        new = _whitening_scale(self.eig, lam)
        ratio = torch.from_numpy(self.scale / new).float()
        for block in self.x.view(-1, self.x.shape[-1]).split(chunk_rows):
            block *= ratio
        factor = new / self.scale
        self.scale = new
        return factor


def _standardized(X: np.ndarray, chunk_rows: int, center: bool) -> _Design:
    x = torch.empty(X.shape, dtype=torch.float32)
    mom = _load_f32(X, x, chunk_rows, "X")
    mean = mom.mean if center else np.zeros(X.shape[1])
    scale = _safe_scale(mom.var + (0.0 if center else mom.mean**2), mean)
    _center_scale_(x, mean, scale, chunk_rows)
    return _Design(x, mean, scale)


def _whitened(X: np.ndarray, chunk_rows: int, center: bool, lam: float) -> _Design:
    """Rotate centred X onto its covariance eigenbasis and scale each direction by the Hessian
    bound, so that L-BFGS sees a problem whose curvature is close to the identity."""
    n, d = X.shape
    x = torch.empty(X.shape, dtype=torch.float32)
    mom = _load_f32(X, x, chunk_rows, "X")
    mean = mom.mean if center else np.zeros(d)
    m32 = torch.from_numpy(mean).float()
    cov = torch.zeros((d, d), dtype=torch.float64)
    for start in range(0, n, chunk_rows):
        c = x[start : start + chunk_rows] - m32
        cov += (c.T @ c).double()
    eig, basis = np.linalg.eigh(cov.numpy() / n)
    eig = np.clip(eig, 0.0, None)
    scale = _whitening_scale(eig, lam)
    transform = torch.from_numpy(basis / scale).float()
    for start in range(0, n, chunk_rows):
        block = x[start : start + chunk_rows]
        block.copy_((block - m32) @ transform)
    return _Design(x, mean, scale, basis, eig)


def _whitened_layers(layers: Sequence[np.ndarray], chunk_rows: int, lam: float) -> _Design:
    """Centre each layer on its own mean and whiten all with one rotation and scale, from their
    pooled covariance: any mix ``sum_j a_j h_j`` then lives in one preconditioned coordinate system,
    in which the weights' penalty stays diagonal (see :class:`_Design`). ``x`` is (n, L, d)."""
    L, (n, d) = len(layers), layers[0].shape
    h = torch.empty((n, L, d), dtype=torch.float32)
    means = np.stack([_load_f32(layer, h[:, j], chunk_rows, f"X layer {j}").mean for j, layer in enumerate(layers)])
    cov = torch.zeros((d, d), dtype=torch.float64)
    for j in range(L):
        m32 = torch.from_numpy(means[j]).float()
        for block in h[:, j].split(chunk_rows):
            c = block - m32
            cov += (c.T @ c).double()
    eig, basis = np.linalg.eigh(cov.numpy() / (L * n))
    eig = np.clip(eig, 0.0, None)
    scale = _whitening_scale(eig, lam)
    transform = torch.from_numpy(basis / scale).float()
    for j in range(L):
        m32 = torch.from_numpy(means[j]).float()
        for block in h[:, j].split(chunk_rows):
            block.copy_((block - m32) @ transform)
    return _Design(h, means, scale, basis, eig)


def _linear_scores(X: np.ndarray, coef: np.ndarray, intercept: np.ndarray, chunk_rows: int) -> np.ndarray:
    """``X @ coef.T + intercept`` in float64, row chunk by row chunk (fp16 memmaps stay on disk)."""
    out = np.empty((X.shape[0], coef.shape[0]))
    for start in range(0, X.shape[0], chunk_rows):
        chunk = np.asarray(X[start : start + chunk_rows], dtype=np.float64)
        _check_finite_chunk(chunk, start, "X")
        out[start : start + chunk_rows] = chunk @ coef.T + intercept
    return out


def _encode_labels(y, name: str) -> tuple[np.ndarray, np.ndarray]:
    check_classification_targets(y)
    classes, y_idx = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValueError(f"{name} needs samples of at least 2 classes in y; got 1 class ({classes[0]!r})")
    return classes, y_idx.astype(np.int64)


def _index_labels(y, classes: np.ndarray) -> np.ndarray:
    """Map labels onto indices of ``classes``; labels unseen in training map to -1 (always wrong)."""
    lookup = {c: i for i, c in enumerate(classes.tolist())}
    values = column_or_1d(np.asarray(y), warn=True).tolist()
    return np.fromiter((lookup.get(v, -1) for v in values), dtype=np.int64, count=len(values))


def _check_C(C: float, name: str) -> float:
    if isinstance(C, bool) or not isinstance(C, (int, float, np.integer, np.floating)) or not C > 0:
        raise ValueError(f"{name}: C must be a positive number (or inf), got {C!r}")
    return float(C)


def _check_common(est, int_fields: Sequence[str]) -> None:
    """Positive-integer fields and a non-negative ``tol``; errors name the estimator and field."""
    name = type(est).__name__
    for field in int_fields:
        v = getattr(est, field)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}: {field} must be a positive integer, got {v!r}")
    if isinstance(est.tol, bool) or not isinstance(est.tol, (int, float)) or est.tol < 0:
        raise ValueError(f"{name}: tol must be a non-negative number, got {est.tol!r}")


def _penalty_strength(C: float, n: int) -> float:
    """sklearn's ``C * sum(loss) + ||W||^2/2``, divided by ``C n`` to use a mean loss."""
    return 0.0 if math.isinf(C) else 1.0 / (C * n)


def _nll(logits: torch.Tensor, target: torch.Tensor, binary: bool) -> torch.Tensor:
    """Mean negative log-likelihood; a binary problem has one logit (class 1 against class 0)."""
    if binary:
        return F.binary_cross_entropy_with_logits(logits[:, 0], target)
    return F.cross_entropy(logits, target)


def _xent_and_grad(z: torch.Tensor, target: torch.Tensor, binary: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``_nll`` of float64 logits ``z`` (n, k) and its gradient with respect to ``z``, in one pass.

    Written out rather than left to autograd: L-BFGS evaluates it hundreds of times per probe, and the
    fused form makes fewer passes over the (n, k) float64 logits (the same values up to rounding).
    """
    n = z.shape[0]
    if binary:
        z0 = z[:, 0]
        loss = (F.softplus(z0) - target * z0).sum() / n
        return loss, ((torch.sigmoid(z0) - target) / n).unsqueeze(1)
    m = z.max(dim=1, keepdim=True).values
    p = torch.exp(z - m)
    total = p.sum(dim=1, keepdim=True)
    lse = total.log() + m
    loss = (lse.sum() - z.gather(1, target.unsqueeze(1)).sum()) / n
    p.div_(total)
    p.scatter_add_(1, target.unsqueeze(1), torch.full((n, 1), -1.0, dtype=p.dtype))
    return loss, p.div_(n)


def _linear_objective(
    x: torch.Tensor, target: torch.Tensor, binary: bool, penalty: torch.Tensor, theta: torch.Tensor, b: torch.Tensor
):
    """The probe's objective at the current (theta, b): ``_nll(x theta^T + b) + sum(penalty theta^2) / 2``
    with x fp32 (n, d), theta (k, d) and b (k,) float64; returns (loss, [d/dtheta, d/db])."""

    def objective():
        loss, dz = _xent_and_grad((x @ theta.float().T).double() + b, target, binary)
        return loss + 0.5 * (penalty * theta**2).sum(), [(dz.float().T @ x).double() + penalty * theta, dz.sum(0)]

    return objective


def _mix_objective(
    h: torch.Tensor,
    target: torch.Tensor,
    binary: bool,
    penalty: torch.Tensor,
    mix_l2: float,
    s: torch.Tensor,
    theta: torch.Tensor,
    b: torch.Tensor,
):
    """The scalar-mix objective at the current (s, theta, b): ``_linear_objective`` of the mixed
    features ``sum_j softmax(s)_j h_j`` plus ``mix_l2 / 2 * ||s||^2``; returns (loss, [d/ds, d/dtheta, d/db]).

    h is fp32 (n, L, d). The mix is never formed: the logits are one product of the rows (n, L d) with
    the per-layer weights ``a_j theta`` side by side, and one product back gives every layer's weight
    gradient ``G_j``, from which d/da_j = <G_j, theta> and d/dtheta = sum_j a_j G_j. That is two matrix
    products per evaluation and no extra pass over the layers (1.5x faster than mixing first).
    """
    n, L, d = h.shape
    rows = h.view(n, L * d)

    def objective():
        a = torch.softmax(s, 0)
        weights = (a.float()[:, None, None] * theta.float()).transpose(0, 1).reshape(-1, L * d)
        loss, dz = _xent_and_grad((rows @ weights.T).double() + b, target, binary)
        G = (dz.float().T @ rows).view(-1, L, d).double()
        g_a = torch.einsum("kld,kd->l", G, theta)
        g_s = a * (g_a - (a * g_a).sum()) + mix_l2 * s
        g_theta = torch.einsum("kld,l->kd", G, a) + penalty * theta
        loss = loss + 0.5 * (penalty * theta**2).sum() + 0.5 * mix_l2 * (s**2).sum()
        return loss, [g_s, g_theta, dz.sum(0)]

    return objective


def _dev_log_loss(scores: np.ndarray, y_idx: np.ndarray) -> float:
    """Mean negative log-likelihood of held-out labels (labels unseen in training are skipped)."""
    if scores.shape[1] == 1:
        scores = np.column_stack([np.zeros(len(scores)), scores[:, 0]])
    seen = y_idx >= 0
    z = scores[seen]
    return float(np.mean(logsumexp(z, axis=1) - z[np.arange(len(z)), y_idx[seen]])) if len(z) else math.inf


def _softmax_proba(scores: np.ndarray) -> np.ndarray:
    if scores.shape[1] == 1:
        p1 = expit(scores[:, 0])
        return np.column_stack([1.0 - p1, p1])
    z = scores - scores.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    return z


# ----------------------------------------------------------------------------- optimisation


def _run_lbfgs(objective, params: list[torch.Tensor], max_iter: int, tol: float) -> tuple[int, float]:
    """Minimise over ``params`` with L-BFGS; ``objective()`` returns (loss, one gradient per param).

    Returns (iterations, max |gradient|). Stops when max |gradient| <= tol (scipy's ``gtol``
    criterion, as sklearn uses), when fp32 can no longer decrease the loss, or after ``max_iter``
    iterations.
    """
    opt = torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=max_iter,
        max_eval=max(2 * max_iter, 10),
        tolerance_grad=tol,
        tolerance_change=1e-12,
        history_size=_HISTORY,
        line_search_fn="strong_wolfe",
    )

    def closure():
        with torch.no_grad():
            loss, grads = objective()
        for p, g in zip(params, grads):
            p.grad = g
        return loss

    opt.step(closure)
    n_iter = int(opt.state[params[0]].get("n_iter", 0))
    closure()
    gmax = max(float(p.grad.abs().max()) for p in params if p.grad is not None and p.numel())
    return max(n_iter, 1), gmax


def _warn_not_converged(name: str, n_iter: int, max_iter: int, gmax: float, tol: float) -> None:
    if n_iter >= max_iter and gmax > tol:
        warnings.warn(
            f"{name}: L-BFGS stopped after max_iter={max_iter} iterations with max |gradient| "
            f"{gmax:.2e} > tol={tol:g}; increase max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )


# ----------------------------------------------------------------------------- LinearProbe


class LinearProbe(ClassifierMixin, BaseEstimator):
    """Multinomial logistic regression on frozen features, sklearn-compatible, fit in torch.

    Parameters
    ----------
    C : inverse L2 strength, exactly as in ``sklearn.linear_model.LogisticRegression``.
    fit_intercept : learn an unpenalised per-class intercept.
    max_iter : L-BFGS iterations, or Adam epochs.
    tol : L-BFGS stops when max |gradient| <= tol, measured in the preconditioned coordinates
        (where the Hessian is bounded by about the identity, so tol bounds the distance to the
        optimum more uniformly than sklearn's raw-coordinate gradient does);
        Adam stops when the dev log-loss has not improved by more than ``tol`` for
        ``n_iter_no_change`` epochs, and keeps the epoch with the lowest dev log-loss.
    solver : ``"lbfgs"`` (full batch, holds an fp32 copy of X) or ``"adam"`` (streams row blocks
        of X, e.g. an fp16 memmap, and needs ``X_dev``/``y_dev`` for early stopping).
    precondition : ``"whiten"`` (default; costs two O(n d^2) passes and a d x d eigensolve) or
        ``"standardize"`` (per-feature; also what Adam always uses).
    batch_size, learning_rate, n_iter_no_change : Adam only.
    random_state : seeds Adam's shuffling (L-BFGS starts from zero and is deterministic).
    chunk_rows : rows converted to fp32/float64 at a time.

    Attributes: ``classes_``, ``coef_`` (1 or n_classes rows, raw feature scale), ``intercept_``,
    ``n_features_in_``, ``n_iter_``, ``dev_score_`` (accuracy on ``X_dev`` when given, else None).
    """

    def __init__(
        self,
        C: float = 1.0,
        *,
        fit_intercept: bool = True,
        max_iter: int = 100,
        tol: float = 1e-4,
        solver: str = "lbfgs",
        precondition: str = "whiten",
        batch_size: int = 512,
        learning_rate: float = 1e-2,
        n_iter_no_change: int = 5,
        random_state: int | None = None,
        chunk_rows: int = CHUNK_ROWS,
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

    # -- fitting

    def _validate_params_(self) -> float:
        name = type(self).__name__
        if self.solver not in _SOLVERS:
            raise ValueError(f"{name}: solver must be one of {_SOLVERS}, got {self.solver!r}")
        if self.precondition not in _PRECONDITIONERS:
            raise ValueError(f"{name}: precondition must be one of {_PRECONDITIONERS}, got {self.precondition!r}")
        _check_common(self, ("max_iter", "batch_size", "n_iter_no_change", "chunk_rows"))
        return _check_C(self.C, name)

    _CHECK = dict(dtype="numeric", ensure_all_finite=False, order=None, copy=False)

    def _check_X(self, X, *, reset: bool):
        """Validate X without copying it; finiteness is checked chunk by chunk where it is read."""
        return validate_data(self, X, reset=reset, **self._CHECK)

    def _check_Xy(self, X, y):
        return validate_data(self, X, y, reset=True, **self._CHECK)

    def fit(self, X, y, X_dev=None, y_dev=None) -> LinearProbe:
        """Fit on ``X`` (n, d) and labels ``y`` (any hashable, e.g. strings).

        ``X_dev``/``y_dev`` are optional held-out data: Adam early-stops on them; both solvers
        report their accuracy as ``dev_score_``.
        """
        C = self._validate_params_()
        X, y = self._check_Xy(X, y)
        self.classes_, y_idx = _encode_labels(y, type(self).__name__)
        if (X_dev is None) != (y_dev is None):
            raise ValueError("LinearProbe.fit: pass both X_dev and y_dev, or neither")
        if self.solver == "adam":
            if X_dev is None:
                raise ValueError("LinearProbe(solver='adam') needs X_dev and y_dev for early stopping")
            self._fit_adam(X, y_idx, C, X_dev, y_dev)
        else:
            design = self._design(X, C)
            self._fit_design(design, y_idx, C)
        self.dev_score_ = None if X_dev is None else float(self.score(X_dev, y_dev))
        return self

    def _design(self, X, C: float) -> _Design:
        if self.precondition == "whiten":
            return _whitened(X, self.chunk_rows, self.fit_intercept, _penalty_strength(C, X.shape[0]))
        return _standardized(X, self.chunk_rows, self.fit_intercept)

    def _n_out(self) -> int:
        return 1 if len(self.classes_) == 2 else len(self.classes_)

    def _fit_design(self, design: _Design, y_idx: np.ndarray, C: float, init=None):
        """L-BFGS on a preconditioned design; ``init`` = (theta, b) warm start in that space.

        Returns the solution (theta, b) in that space, for the next warm start.
        """
        n, d = design.x.shape
        k = self._n_out()
        binary = k == 1
        lam = _penalty_strength(C, n)
        theta = torch.zeros((k, d), dtype=torch.float64)
        b = torch.zeros(k, dtype=torch.float64)
        if init is not None:
            theta.copy_(torch.as_tensor(init[0]))
            b.copy_(torch.as_tensor(init[1]))
        target = torch.from_numpy(y_idx).double() if binary else torch.from_numpy(y_idx)
        penalty = lam * torch.from_numpy(1.0 / design.scale) ** 2
        objective = _linear_objective(design.x, target, binary, penalty, theta, b)
        params = [theta, b] if self.fit_intercept else [theta]
        n_iter, gmax = _run_lbfgs(objective, params, self.max_iter, self.tol)
        _warn_not_converged(type(self).__name__, n_iter, self.max_iter, gmax, self.tol)
        self._set_solution(theta.detach().double().numpy(), b.detach().double().numpy(), design)
        self.n_iter_ = n_iter
        return theta.detach().clone(), b.detach().clone()

    def _set_solution(self, theta: np.ndarray, b: np.ndarray, design: _Design) -> None:
        """Map preconditioned-space parameters back to raw features."""
        self.coef_, self.intercept_ = design.raw(theta, b)

    def _fit_adam(self, X, y_idx: np.ndarray, C: float, X_dev, y_dev) -> None:
        """Minibatch Adam on the same objective (penalty scaled by the full n), streaming row blocks
        of X in random order and shuffling rows within a block; early stopping on dev log-loss."""
        name = type(self).__name__
        X_dev = self._check_X(X_dev, reset=False)
        dev_idx = _index_labels(y_dev, self.classes_)
        if len(dev_idx) != X_dev.shape[0]:
            raise ValueError(f"{name}: X_dev has {X_dev.shape[0]} rows but y_dev has {len(dev_idx)}")
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
        gen = torch.Generator().manual_seed(int(np.random.default_rng(self.random_state).integers(2**62)))
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
            loss = _dev_log_loss(_linear_scores(X_dev, self.coef_, self.intercept_, self.chunk_rows), dev_idx)
            if loss < best_loss - self.tol:
                best_loss, best, stale = loss, (self.coef_.copy(), self.intercept_.copy()), 0
            else:
                stale += 1
                if stale >= self.n_iter_no_change:
                    break
        self.coef_, self.intercept_ = best
        self.n_iter_ = epochs

    # -- prediction

    def decision_function(self, X) -> np.ndarray:
        """Logits in float64: shape (n,) for binary problems, (n, n_classes) otherwise."""
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        scores = _linear_scores(X, self.coef_, self.intercept_, self.chunk_rows)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        return _softmax_proba(_linear_scores(X, self.coef_, self.intercept_, self.chunk_rows))

    def predict_log_proba(self, X) -> np.ndarray:
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
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        return self.classes_[self._predict_index(X)]


def select_l2(
    X,
    y,
    X_dev,
    y_dev,
    Cs: Sequence[float] = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0),
    **probe_params,
) -> LinearProbe:
    """Fit ``LinearProbe`` for each ``C`` and keep the one with the best dev accuracy.

    X is copied and preconditioned once (only the per-direction whitening scale, which depends on
    C, is adjusted in place); Cs are visited from the strongest penalty to the weakest, each fit
    warm-started from the previous solution. Ties go to the smaller C (the simpler probe). The
    returned probe is fitted with the chosen C and carries ``l2_path_``: one dict per C with
    ``C``, ``dev_accuracy`` and ``n_iter``.
    """
    if not len(Cs):
        raise ValueError("select_l2: Cs is empty")
    probe = LinearProbe(**probe_params)
    if probe.solver != "lbfgs":
        raise ValueError("select_l2 warm-starts L-BFGS; use solver='lbfgs'")
    Cs = sorted(_check_C(c, "select_l2") for c in Cs)
    probe.set_params(C=Cs[0])
    probe._validate_params_()
    X, y = probe._check_Xy(X, y)
    probe.classes_, y_idx = _encode_labels(y, "select_l2")
    X_dev = probe._check_X(X_dev, reset=False)
    dev_idx = _index_labels(y_dev, probe.classes_)
    if len(dev_idx) != X_dev.shape[0]:
        raise ValueError(f"select_l2: X_dev has {X_dev.shape[0]} rows but y_dev has {len(dev_idx)}")
    design = probe._design(X, Cs[0])

    path, best, init = [], None, None
    for C in Cs:
        factor = design.set_penalty(_penalty_strength(C, X.shape[0]), probe.chunk_rows)
        if init is not None:
            init = (init[0] * torch.from_numpy(factor), init[1])
        init = probe._fit_design(design, y_idx, C, init=init)
        acc = float(np.mean(probe._predict_index(X_dev) == dev_idx))
        path.append({"C": C, "dev_accuracy": acc, "n_iter": probe.n_iter_})
        if best is None or acc > best[0]:
            best = (acc, C, probe.coef_.copy(), probe.intercept_.copy(), probe.n_iter_)
    acc, C, probe.coef_, probe.intercept_, probe.n_iter_ = best
    probe.set_params(C=C)
    probe.dev_score_ = acc
    probe.l2_path_ = path
    return probe


# ----------------------------------------------------------------------------- layer combinations


def concat_layers(layers: Sequence[np.ndarray]) -> np.ndarray:
    """Concatenate per-layer features (n, d_k) along features; the dtype (e.g. fp16) is kept.

    The "concat" probe is ``LinearProbe().fit(concat_layers([...]), y)``.
    """
    layers = [np.asarray(a) for a in layers]
    if not layers:
        raise ValueError("concat_layers: no layers given")
    n = {a.shape[0] for a in layers}
    if any(a.ndim != 2 for a in layers) or len(n) != 1:
        shapes = [a.shape for a in layers]
        raise ValueError(f"concat_layers: expected 2-D arrays with the same number of rows, got {shapes}")
    return np.concatenate(layers, axis=1)


def _as_layers(X, name: str) -> list[np.ndarray]:
    """(n, L, d) array, or a list of L arrays (n, d), as a list of 2-D numeric arrays (no copy)."""
    if isinstance(X, (list, tuple)):
        layers = [np.asarray(a) for a in X]
    else:
        X = np.asarray(X)
        if X.ndim != 3:
            raise ValueError(
                f"{name}: X must have shape (n_samples, n_layers, dim) or be a list of "
                f"(n_samples, dim) arrays; got an array of shape {X.shape}"
            )
        layers = [X[:, j, :] for j in range(X.shape[1])]
    if not layers:
        raise ValueError(f"{name}: X has no layers")
    for j, a in enumerate(layers):
        if a.ndim != 2 or a.shape != layers[0].shape:
            raise ValueError(f"{name}: layer {j} has shape {a.shape}, expected {layers[0].shape} like layer 0")
        if a.dtype.kind not in "biuf":
            raise ValueError(f"{name}: layer {j} has dtype {a.dtype}, expected a numeric dtype")
    if layers[0].shape[0] == 0:
        raise ValueError(f"{name}: X has 0 samples")
    return layers


class ScalarMixProbe(ClassifierMixin, BaseEstimator):
    """Learned scalar mix of layers feeding a linear softmax classifier (Peters et al. 2018, Eq. 1).

    logits = (gamma * sum_j softmax(s)_j h_j) W^T + b, all trained jointly with L-BFGS on
    mean cross-entropy + ||gamma W||_F^2 / (2 C n) (the ``LinearProbe`` objective on the mixed
    features). Under an L2 penalty gamma and the scale of W are not separately identifiable
    (gamma -> inf, W -> 0 would remove any penalty on W alone), so gamma is folded into the
    classifier: ``coef_`` is gamma W, and ``gamma_ = ||coef_||_F`` (the gauge ||W||_F = 1).
    ``mix_l2`` optionally adds ``mix_l2 / 2 * ||s||^2`` (Peters et al.'s regulariser on s).

    X: an array (n, n_layers, dim) or a list of n_layers arrays (n, dim), e.g. fp16 memmaps.
    Attributes: ``classes_``, ``mix_weights_`` (softmax(s)), ``gamma_``, ``coef_``,
    ``intercept_``, ``n_layers_``, ``n_features_in_`` (dim), ``n_iter_``.
    """

    def __init__(
        self,
        C: float = 1.0,
        *,
        mix_l2: float = 0.0,
        max_iter: int = 300,
        tol: float = 1e-4,
        chunk_rows: int = CHUNK_ROWS,
    ):
        self.C = C
        self.mix_l2 = mix_l2
        self.max_iter = max_iter
        self.tol = tol
        self.chunk_rows = chunk_rows

    def _prepare(self, X, y, C: float) -> tuple[list[np.ndarray], np.ndarray, _Design]:
        """Validate, encode labels and build the whitened layer stack for penalty ``C``."""
        name = type(self).__name__
        _check_common(self, ("max_iter", "chunk_rows"))
        if not (isinstance(self.mix_l2, (int, float)) and self.mix_l2 >= 0):
            raise ValueError(f"{name}: mix_l2 must be a non-negative number, got {self.mix_l2!r}")
        layers = _as_layers(X, name)
        y = column_or_1d(np.asarray(y), warn=True)
        n = layers[0].shape[0]
        if len(y) != n:
            raise ValueError(f"{name}: X has {n} samples but y has {len(y)}")
        self.classes_, y_idx = _encode_labels(y, name)
        return layers, y_idx, _whitened_layers(layers, self.chunk_rows, _penalty_strength(C, n))

    def fit(self, X, y) -> ScalarMixProbe:
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
        s = torch.zeros(L, dtype=torch.float64)
        theta = torch.zeros((k, d), dtype=torch.float64)
        b = torch.zeros(k, dtype=torch.float64)
        if init is not None:
            for t, v in zip((s, theta, b), init):
                t.copy_(torch.as_tensor(v))
        target = torch.from_numpy(y_idx).double() if binary else torch.from_numpy(y_idx)
        penalty = lam * torch.from_numpy(1.0 / design.scale) ** 2
        objective = _mix_objective(design.x, target, binary, penalty, self.mix_l2, s, theta, b)
        n_iter, gmax = _run_lbfgs(objective, [s, theta, b], self.max_iter, self.tol)
        _warn_not_converged(type(self).__name__, n_iter, self.max_iter, gmax, self.tol)
        a = torch.softmax(s, 0).numpy()
        coef = (theta.numpy() / design.scale) @ design.basis.T
        self.mix_weights_ = a
        self.coef_ = coef
        self.intercept_ = b.numpy() - coef @ (a @ design.mean)
        self.gamma_ = float(np.linalg.norm(coef))
        self.n_layers_ = L
        self.n_features_in_ = d
        self.n_iter_ = n_iter
        return s.clone(), theta.clone(), b.clone()

    def _scores(self, X) -> np.ndarray:
        check_is_fitted(self)
        name = type(self).__name__
        layers = _as_layers(X, name)
        if len(layers) != self.n_layers_ or layers[0].shape[1] != self.n_features_in_:
            raise ValueError(
                f"{name}: X has {len(layers)} layers of dim {layers[0].shape[1]}, but the probe "
                f"was fit on {self.n_layers_} layers of dim {self.n_features_in_}"
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
        scores = self._scores(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict_proba(self, X) -> np.ndarray:
        return _softmax_proba(self._scores(X))

    def _predict_index(self, X) -> np.ndarray:
        scores = self._scores(X)
        return (scores[:, 0] > 0).astype(np.int64) if scores.shape[1] == 1 else scores.argmax(axis=1)

    def predict(self, X) -> np.ndarray:
        return self.classes_[self._predict_index(X)]


def select_mix_l2(
    X, y, X_dev, y_dev, Cs: Sequence[float] = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0), **probe_params
) -> ScalarMixProbe:
    """``select_l2`` for the scalar mix: fit ``ScalarMixProbe`` for each ``C`` (weakening penalties,
    each warm-started from the previous solution on one whitened copy of the layers) and keep the one
    with the best dev accuracy (ties to the smaller C). The probe carries ``l2_path_`` like
    ``select_l2``'s. The scalar mix makes the problem non-convex, so the warm start can also steer
    which local optimum a C ends in; it is deterministic either way.
    """
    if not len(Cs):
        raise ValueError("select_mix_l2: Cs is empty")
    Cs = sorted(_check_C(c, "select_mix_l2") for c in Cs)
    probe = ScalarMixProbe(**probe_params)
    _, y_idx, design = probe._prepare(X, y, Cs[0])
    dev_idx = _index_labels(y_dev, probe.classes_)
    fitted = ("mix_weights_", "coef_", "intercept_", "gamma_", "n_iter_")
    path, best, init = [], None, None
    for C in Cs:
        factor = design.set_penalty(_penalty_strength(C, len(y_idx)), probe.chunk_rows)
        if init is not None:
            init = (init[0], init[1] * torch.from_numpy(factor), init[2])
        init = probe._fit_design(design, y_idx, C, init=init)
        acc = float(np.mean(probe._predict_index(X_dev) == dev_idx))
        path.append({"C": C, "dev_accuracy": acc, "n_iter": probe.n_iter_})
        if best is None or acc > best[0]:
            best = (acc, C, {a: getattr(probe, a) for a in fitted})
    acc, C, attrs = best
    for a, v in attrs.items():
        setattr(probe, a, v)
    probe.set_params(C=C)
    probe.dev_score_ = acc
    probe.l2_path_ = path
    return probe
