"""Preconditioned fp32 copies of probe inputs (the design): centring, whitening on the covariance's
eigenbasis with Böhning's curvature bound, and chunked conversions that leave fp16 memmaps on disk.

See :mod:`probing.probes.linear` for why the preconditioning is an exact reparametrisation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from probing.errors import InputError

CHUNK_ROWS = 8192

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
        mean_t = c.mean(0)
        mean_c, m2_c = mean_t.numpy(), ((c - mean_t) ** 2).sum(0).numpy()
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


MAX_ABS = 1e15  # larger features overflow the float32 products and covariances of the fit


def _check_finite_chunk(chunk: torch.Tensor | np.ndarray, start: int, what: str) -> None:
    """Refuse NaN, infinity and magnitudes above :data:`MAX_ABS`, naming the first offending cell."""
    a = chunk.numpy() if isinstance(chunk, torch.Tensor) else np.asarray(chunk)
    finite = np.isfinite(a)
    if not bool(finite.all()):
        bad = np.argwhere(~finite)[0]
        raise InputError(f"{what} contains NaN or infinity (row {start + int(bad[0])}, column {int(bad[1])})")
    big = np.abs(a) > MAX_ABS
    if bool(big.any()):
        bad = np.argwhere(big)[0]
        value = float(a[tuple(bad)])
        raise InputError(
            f"{what} has a value of {value:.3g} (row {start + int(bad[0])}, column {int(bad[1])}), beyond "
            f"{MAX_ABS:g} in magnitude, which overflows float32 arithmetic: rescale or standardise the features"
        )


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
            with threadpool_limits(limits=1):  # a small product; one thread rounds the same on every machine
                coef = coef @ self.basis.T
        return coef, b - coef @ self.mean

    def to(self, device: str | None) -> _Design:
        """This design with ``x`` on ``device`` (:func:`probing.devices.resolve_device`; None = the default);
        the solver then runs there. ``x`` is built on the CPU chunk by chunk, then moved once."""
        from probing.devices import torch_device

        self.x = self.x.to(torch_device(device))
        return self

    def set_penalty(self, lam: float, chunk_rows: int) -> np.ndarray:
        """Re-fit a whitening scale to penalty ``lam`` (features of x rescaled in place).

        Returns the factor by which theta must be multiplied to keep the same raw weights.
        """
        if self.eig is None:
            return np.ones_like(self.scale)
        new = _whitening_scale(self.eig, lam)
        ratio = torch.from_numpy(self.scale / new).float().to(self.x.device)
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
    """Rotate (centred) X onto its covariance eigenbasis and scale each direction by the Hessian bound, so
    that L-BFGS sees a problem whose curvature is close to the identity: the one-layer case of
    :func:`_whitened_layers`, with ``x`` (n, d) and ``mean`` (d,)."""
    design = _whitened_layers([X], chunk_rows, lam, center=center)
    return _Design(design.x[:, 0], design.mean[0], design.scale, design.basis, design.eig)


def _whitened_layers(layers: Sequence[np.ndarray], chunk_rows: int, lam: float, center: bool = True) -> _Design:
    """Centre each layer on its own mean (``center``) and whiten all with one rotation and scale, from their
    pooled covariance: any mix ``sum_j a_j h_j`` then lives in one preconditioned coordinate system,
    in which the weights' penalty stays diagonal (see :class:`_Design`). ``x`` is (n, L, d)."""
    L, (n, d) = len(layers), layers[0].shape
    h = torch.empty((n, L, d), dtype=torch.float32)
    what = ["X"] if L == 1 else [f"X layer {j}" for j in range(L)]
    means = np.stack([_load_f32(layer, h[:, j], chunk_rows, what[j]).mean for j, layer in enumerate(layers)])
    if not center:
        means = np.zeros_like(means)
    cov = torch.zeros((d, d), dtype=torch.float64)
    for j in range(L):
        m32 = torch.from_numpy(means[j]).float()
        for block in h[:, j].split(chunk_rows):
            c = block - m32
            cov += (c.T @ c).double()
    with threadpool_limits(limits=1):  # a threaded LAPACK rotates near-degenerate eigenvectors by thread count
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
