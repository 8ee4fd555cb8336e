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


def _linear_objective(
    x: torch.Tensor, target: torch.Tensor, binary: bool, penalty: torch.Tensor, theta: torch.Tensor, b: torch.Tensor
):
    """The probe's objective at the current (theta, b): ``_nll(x theta^T + b) + sum(penalty theta^2) / 2``
    with x fp32 (n, d), theta (k, d) and b (k,) float64; returns (loss, [d/dtheta, d/db])."""

    def objective():
        loss, dz = _xent_and_grad((x @ theta.float().T).double() + b, target, binary)
        penalty_term = 0.5 * _ordered_sum((penalty * theta**2).reshape(-1))
        return loss + penalty_term, [(dz.float().T @ x).double() + penalty * theta, _ordered_sum(dz)]

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

    threads = torch.get_num_threads()

    def closure():
        with torch.no_grad(), _torch_threads(threads):
            loss, grads = objective()
        for p, g in zip(params, grads):
            p.grad = g
        return loss

    with _torch_threads(1):
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


def _warm_l2_path(
    Cs: Sequence[float],
    n: int,
    design: _Design | _StreamedDesign,
    chunk_rows: int,
    fit: Callable[[float, Any], tuple[Any, int]],
    rescale: Callable[[Any, torch.Tensor], Any],
    dev_accuracy: Callable[[], float],
    snapshot: Callable[[], Any],
) -> tuple[tuple[float, float, Any], list[dict]]:
    """The one C search of the L-BFGS probes: visit ``Cs`` (sorted, strongest penalty first) on one
    preconditioned ``design``, adjusting only its whitening scale to each C and warm-starting each fit from
    the previous solution (``rescale`` maps that solution into the new scale).

    ``fit(C, init) -> (solution, n_iter)`` fits the estimator in place; ``snapshot()`` copies what the
    caller keeps of a fit. Returns ``(dev accuracy, C, snapshot)`` of the best C (ties to the smaller C,
    the simpler probe) and the path: one dict per C with ``C``, ``dev_accuracy`` and ``n_iter``.
    """
    path: list[dict] = []
    best: tuple[float, float, Any] | None = None
    init = None
    for C in Cs:
        factor = design.set_penalty(_penalty_strength(C, n), chunk_rows)
        if init is not None:
            init = rescale(init, torch.from_numpy(factor).to(design.device))
        init, n_iter = fit(C, init)
        acc = dev_accuracy()
        path.append({"C": C, "dev_accuracy": acc, "n_iter": n_iter})
        if best is None or acc > best[0]:
            best = (acc, C, snapshot())
    assert best is not None  # Cs is never empty here
    return best, path
