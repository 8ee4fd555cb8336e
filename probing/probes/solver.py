"""What the probes' solvers share: label and parameter checks, the objectives with written-out gradients,
full-batch L-BFGS, and the warm-started path over inverse L2 strengths C."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import expit, logsumexp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

from probing.errors import InputError
from probing.probes.design import _Design, _StreamedDesign

_HISTORY = 10  # L-BFGS memory, scipy's default ``maxcor`` (what sklearn uses)
DEFAULT_CS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
"""The C grid of ``LinearProbeCV`` and ``ScalarMixProbeCV``."""


def _check_label_types(y, name: str) -> None:
    """InputError if ``y`` mixes strings and numbers: numpy would turn ``["a", 1]`` into the strings
    ``"a", "1"`` (predictions then differ in type from the labels given) and cannot sort an object array of both."""
    if isinstance(y, np.ndarray) and y.dtype != object:
        return
    first: dict[str, Any] = {}
    for v in np.asarray(y, dtype=object).ravel().tolist():
        first.setdefault("str" if isinstance(v, str) else type(v).__name__, v)
    kinds = {"str" if k == "str" else "number" for k in first}
    if len(kinds) > 1:
        shown = ", ".join(f"{k} ({v!r})" for k, v in first.items())
        raise InputError(f"{name}: y mixes label types {shown}; give labels of one type (e.g. all str)")


def _encode_labels(y, name: str) -> tuple[np.ndarray, np.ndarray]:
    _check_label_types(y, name)
    check_classification_targets(y)
    classes, y_idx = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise InputError(f"{name} needs samples of at least 2 classes in y; got 1 class ({classes[0]!r})")
    return classes, y_idx.astype(np.int64)


def _index_labels(y, classes: np.ndarray) -> np.ndarray:
    """Map labels onto indices of ``classes``; labels unseen in training map to -1 (always wrong)."""
    lookup = {c: i for i, c in enumerate(classes.tolist())}
    values = column_or_1d(np.asarray(y), warn=True).tolist()
    return np.fromiter((lookup.get(v, -1) for v in values), dtype=np.int64, count=len(values))


def _check_C(C: float, name: str) -> float:
    if isinstance(C, bool) or not isinstance(C, (int, float, np.integer, np.floating)) or not C > 0:
        raise InputError(f"{name}: C must be a positive number (or inf), got {C!r}")
    return float(C)


def _check_Cs(Cs: Sequence[float], name: str) -> list[float]:
    """The C grid of a CV probe, sorted from the strongest penalty; InputError if empty or not positive."""
    if isinstance(Cs, (str, bytes)) or not hasattr(Cs, "__len__") or not len(Cs):
        raise InputError(f"{name}: Cs must be a non-empty sequence of positive numbers, got {Cs!r}")
    return sorted(_check_C(c, name) for c in Cs)


def _holdout_rows(n: int, holdout: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, dev rows) of a CV probe fit without dev data: every ``holdout``-th row is dev data."""
    if isinstance(holdout, bool) or not isinstance(holdout, (int, np.integer)) or holdout < 2:
        raise InputError(f"{name}: holdout must be an integer >= 2, got {holdout!r}")
    if n < holdout:
        raise InputError(f"{name}: without X_dev, y_dev it needs at least holdout={holdout} samples, got {n}")
    is_dev = np.arange(n) % holdout == holdout - 1
    return np.flatnonzero(~is_dev), np.flatnonzero(is_dev)


def _torch_generator(random_state: int | None) -> torch.Generator:
    """A torch generator seeded from ``random_state`` (None: a fresh random seed) through numpy."""
    return torch.Generator().manual_seed(int(np.random.default_rng(random_state).integers(2**62)))


def _check_common(est, int_fields: Sequence[str]) -> None:
    """Positive-integer fields and a non-negative ``tol``; errors name the estimator and field."""
    name = type(est).__name__
    for field in int_fields:
        v = getattr(est, field)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{name}: {field} must be a positive integer, got {v!r}")
    if isinstance(est.tol, bool) or not isinstance(est.tol, (int, float)) or est.tol < 0:
        raise InputError(f"{name}: tol must be a non-negative number, got {est.tol!r}")


def _penalty_strength(C: float, n: int) -> float:
    """sklearn's ``C * sum(loss) + ||W||^2/2``, divided by ``C n`` to use a mean loss."""
    return 0.0 if math.isinf(C) else 1.0 / (C * n)


def _nll(logits: torch.Tensor, target: torch.Tensor, binary: bool) -> torch.Tensor:
    """Mean negative log-likelihood; a binary problem has one logit (class 1 against class 0)."""
    if binary:
        return F.binary_cross_entropy_with_logits(logits[:, 0], target)
    return F.cross_entropy(logits, target)


_SUM_BLOCK = 8192  # elements per partial sum: below torch's parallel grain (32768), so one thread adds each


def _ordered_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum over the first axis of ``t`` (n, ...) -> (...), in fixed blocks of rows added in order.

    torch splits a long reduction across its threads, so its rounding depends on the thread count; the
    loss and gradient the L-BFGS line search compares then differ in the last bits and the fitted probe
    by more. Fixed blocks give the same bits for any thread count.
    """
    rows = max(1, _SUM_BLOCK // max(1, t[0].numel())) if len(t) else 1
    if len(t) <= rows:
        return t.sum(0)
    return torch.stack([t[i : i + rows].sum(0) for i in range(0, len(t), rows)]).cumsum(0)[-1]


def _xent_and_grad(z: torch.Tensor, target: torch.Tensor, binary: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``_nll`` of float64 logits ``z`` (n, k) and its gradient with respect to ``z``, in one pass.

    Written out rather than left to autograd: L-BFGS evaluates it hundreds of times per probe, and the
    fused form makes fewer passes over the (n, k) float64 logits (the same values up to rounding).
    """
    n = z.shape[0]
    if binary:
        z0 = z[:, 0]
        loss = _ordered_sum(F.softplus(z0) - target * z0) / n
        return loss, ((torch.sigmoid(z0) - target) / n).unsqueeze(1)
    m = z.max(dim=1, keepdim=True).values
    p = torch.exp(z - m)
    total = p.sum(dim=1, keepdim=True)
    lse = total.log() + m
    loss = _ordered_sum(lse[:, 0] - z.gather(1, target.unsqueeze(1))[:, 0]) / n
    p.div_(total)
    p.scatter_add_(1, target.unsqueeze(1), torch.full((n, 1), -1.0, dtype=p.dtype, device=p.device))
    return loss, p.div_(n)


_PASS_ROWS = 2048  # rows per block of an in-memory objective evaluation: one block stays in cache for both products


def _linear_objective(
    x: torch.Tensor, target: torch.Tensor, binary: bool, penalty: torch.Tensor, theta: torch.Tensor, b: torch.Tensor
):
    """The probe's objective at the current (theta, b): ``_nll(x theta^T + b) + sum(penalty theta^2) / 2``
    with x fp32 (n, d), theta (k, d) and b (k,) float64; returns (loss, [d/dtheta, d/db]).

    One pass over x in blocks of :data:`_PASS_ROWS` rows: each block's logits, loss and gradient, then its
    share of ``dz^T x`` while the block is still in cache (on a 52k x 512 design with 17 classes, 43 ms instead of 51
    at 2 threads, 78 instead of 82 at one). Blocks are added in row order, so the bits do not depend on the thread count."""
    n = x.shape[0]

    def objective():
        w = theta.float()
        loss = torch.zeros((), dtype=torch.float64, device=x.device)
        g_theta, g_b = torch.zeros_like(theta), torch.zeros_like(b)
        for start in range(0, n, _PASS_ROWS):
            xc = x[start : start + _PASS_ROWS]
            m = xc.shape[0]
            part, dz = _xent_and_grad((xc @ w.T).double() + b, target[start : start + m], binary)
            dz.mul_(m / n)
            loss += part * (m / n)
            g_theta += (dz.float().T @ xc).double()
            g_b += _ordered_sum(dz)
        penalty_term = 0.5 * _ordered_sum((penalty * theta**2).reshape(-1))
        return loss + penalty_term, [g_theta + penalty * theta, g_b]

    return objective


def _streamed_objective(
    design: _StreamedDesign,
    target: torch.Tensor,
    binary: bool,
    penalty: torch.Tensor,
    theta: torch.Tensor,
    b: torch.Tensor,
):
    """:func:`_linear_objective` over a design streamed from X in row chunks (:class:`_StreamedDesign`):
    the same objective in the same coordinates, with ``x theta^T = (X - mean) W^T`` for
    ``W = theta @ transform.T`` and ``dL/dtheta = (dz^T (X - mean)) @ transform``. The chunks' losses and
    gradients are added in row order (the same bits for any thread count)."""
    n = design.shape[0]

    def objective():
        T = design.transform()
        W = theta @ T.T if T.dim() == 2 else theta * T
        loss = torch.zeros((), dtype=torch.float64)
        G, g_b = torch.zeros_like(theta), torch.zeros_like(b)
        for start, xc in design.chunks():
            m = xc.shape[0]
            part, dz = _xent_and_grad(xc @ W.T + b, target[start : start + m], binary)
            dz.mul_(m / n)
            loss += part * (m / n)
            G += dz.T @ xc
            g_b += _ordered_sum(dz)
        g_theta = (G @ T if T.dim() == 2 else G * T) + penalty * theta
        return loss + 0.5 * _ordered_sum((penalty * theta**2).reshape(-1)), [g_theta, g_b]

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
        loss = loss + 0.5 * _ordered_sum((penalty * theta**2).reshape(-1)) + 0.5 * mix_l2 * (s**2).sum()
        return loss, [g_s, g_theta, _ordered_sum(dz)]

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


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run the block with ``n`` torch threads. L-BFGS's own vector arithmetic (dot products of length
    k d) runs on one: a BLAS dot splits long vectors across threads, so its rounding, and with it the
    fitted probe, would depend on the thread count. The objective's matrix products keep every thread."""
    old = torch.get_num_threads()
    if n == old:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


INTERCEPT_SCALE = 4.0
"""The solvers search over ``b / INTERCEPT_SCALE`` rather than the intercept ``b``: in the whitened coordinates a
weight's curvature is bounded by about 1 and an intercept's by 1/4 or less, and L-BFGS converges fastest when
the two are of one size (on the bundled model's layer 1, 20k tokens, C=1: 287 passes to within 1e-5 of the
optimum instead of 583; benchmarks/bench_probe_stage.py --solvers). An exact change of variables."""


_STALL_EVALS = 20
"""L-BFGS stops once the best objective of the last ``_STALL_EVALS`` evaluations is within ``tol`` (relative) of
the best before them (:func:`_run_lbfgs`)."""


class _Stalled(Exception):
    """Raised inside the L-BFGS closure when the objective has stopped falling."""


def _run_lbfgs(
    objective, params: list[torch.Tensor], max_iter: int, tol: float, scales: Sequence[float] | None = None
) -> tuple[int, float]:
    """Minimise over ``params`` with L-BFGS; ``objective()`` returns (loss, one gradient per param).

    ``scales`` (one per param, default 1) changes variables: L-BFGS moves ``param / scale`` and sees
    ``gradient * scale``. Stops at the first of: the best objective of the last :data:`_STALL_EVALS`
    evaluations no more than ``tol`` (relative) below the best before them; fp32 unable to lower the loss;
    ``max_iter`` iterations. No gradient test: on an ill-conditioned probe (weak penalty, nearly separable
    classes) the gradient is small long before the objective is near its minimum (C=1 on the bundled model's
    layer 1: max |gradient| 1e-5 at 1.2e-4 above the optimum), and its size depends on the loss's (a
    separable problem's loss of 5e-4 has gradients of 1e-6 at 2.5e-4 above its optimum), while a stall over
    20 evaluations ends within ~1e-6 of the optimum at tol = 1e-6 on both. Leaves ``params`` at the best point
    evaluated. Returns (iterations, max |gradient| there, in the searched variables).
    """
    factors = [1.0] * len(params) if scales is None else [float(f) for f in scales]
    search = [p.detach() / f for p, f in zip(params, factors)]
    opt = torch.optim.LBFGS(
        search,
        lr=1.0,
        max_iter=max_iter,
        max_eval=max(2 * max_iter, 10),
        tolerance_grad=0.0,
        tolerance_change=1e-12,
        history_size=_HISTORY,
        line_search_fn="strong_wolfe",
    )
    threads = torch.get_num_threads()
    best: list[float] = []  # the best objective after each evaluation
    best_point = [u.clone() for u in search]

    def closure():
        for p, u, f in zip(params, search, factors):
            p.copy_(u * f if f != 1.0 else u)
        with torch.no_grad(), _torch_threads(threads):
            loss, grads = objective()
        value = float(loss)
        if not best or value < best[-1]:
            for kept, u in zip(best_point, search):
                kept.copy_(u)
        best.append(min(value, best[-1]) if best else value)
        if len(best) > _STALL_EVALS and best[-1 - _STALL_EVALS] - best[-1] <= tol * abs(best[-1]):
            raise _Stalled
        for u, g, f in zip(search, grads, factors):
            u.grad = g * f if f != 1.0 else g
        return loss

    with _torch_threads(1), contextlib.suppress(_Stalled):
        opt.step(closure)
    n_iter = int(opt.state[search[0]].get("n_iter", 0))
    for u, kept in zip(search, best_point):
        u.copy_(kept)
    best.clear()  # the final evaluation below only reads the gradient at the best point
    closure()
    gmax = max(float(u.grad.abs().max()) for u in search if u.grad is not None and u.numel())
    return max(n_iter, 1), gmax


def _warn_not_converged(name: str, n_iter: int, max_iter: int, gmax: float, tol: float) -> None:
    if n_iter >= max_iter:
        warnings.warn(
            f"{name}: L-BFGS stopped after max_iter={max_iter} iterations with the objective still falling by "
            f"more than tol={tol:g} (relative) per {_STALL_EVALS} evaluations (max |gradient| {gmax:.2e}); "
            "increase max_iter.",
            ConvergenceWarning,
            stacklevel=3,
        )


def _warm_l2_path(
    Cs: Sequence[float],
    n: int,
    design: _Design | _StreamedDesign,
    chunk_rows: int,
    fit: Callable[[float, Any], tuple[Any, int]],
    rescale: Callable[[Any, torch.Tensor], Any],
    dev_accuracy: Callable[[], float],
    snapshot: Callable[[], Any],
    patience: int | None = None,
) -> tuple[tuple[float, float, Any], list[dict]]:
    """The one C search of the L-BFGS probes: visit ``Cs`` (sorted, strongest penalty first) on one
    preconditioned ``design``, adjusting only its whitening scale to each C and warm-starting each fit from
    the previous solution (``rescale`` maps that solution into the new scale).

    ``fit(C, init) -> (solution, n_iter)`` fits the estimator in place; ``snapshot()`` copies what the
    caller keeps of a fit. Returns ``(dev accuracy, C, snapshot)`` of the best C (ties to the smaller C,
    the simpler probe) and the path: one dict per C with ``C``, ``dev_accuracy`` and ``n_iter``.

    With ``patience``, the path ends once that many C values in a row have not beaten the best dev accuracy
    (the weak penalties it skips are the slowest fits); None visits every C.
    """
    path: list[dict] = []
    best: tuple[float, float, Any] | None = None
    best_at = 0
    init = None
    for C in Cs:
        factor = design.set_penalty(_penalty_strength(C, n), chunk_rows)
        if init is not None:
            init = rescale(init, torch.from_numpy(factor).to(design.device))
        init, n_iter = fit(C, init)
        acc = dev_accuracy()
        path.append({"C": C, "dev_accuracy": acc, "n_iter": n_iter})
        if best is None or acc > best[0]:
            best, best_at = (acc, C, snapshot()), len(path)
        elif patience is not None and len(path) - best_at >= patience:
            break
    assert best is not None  # Cs is never empty here
    return best, path
