"""Preconditioned fp32 copies of probe inputs (the design): centring, whitening on the covariance's
eigenbasis with Böhning's curvature bound, and chunked conversions that leave fp16 memmaps on disk.

See :mod:`probing.probes.linear` for why the preconditioning is an exact reparametrisation."""

from __future__ import annotations

import mmap
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from probing.errors import InputError

CHUNK_ROWS = 8192

MAX_DESIGN_BYTES = 4 << 30
"""Default budget of the L-BFGS probes' fp32 design copy (4 GiB: 1M tokens x 1024 dims); a larger design is
streamed from X (:class:`_StreamedDesign`). ``$PROBING_MAX_DESIGN_BYTES`` or ``max_design_bytes=`` change it."""

_BUDGET_ENV = "PROBING_MAX_DESIGN_BYTES"


def design_budget(max_design_bytes: int | None = None) -> int:
    """Bytes the fp32 design copy may take: ``max_design_bytes`` if given, else ``$PROBING_MAX_DESIGN_BYTES``,
    else :data:`MAX_DESIGN_BYTES`. A fixed number rather than a share of the RAM, so that a probe's numbers
    do not depend on the machine that fits it."""
    if max_design_bytes is None:
        env = os.environ.get(_BUDGET_ENV, "").strip()
        if not env:
            return MAX_DESIGN_BYTES
        try:
            max_design_bytes = int(float(env))
        except ValueError:
            raise InputError(f"${_BUDGET_ENV} must be a number of bytes (e.g. 4e9), got {env!r}") from None
    if (
        isinstance(max_design_bytes, bool)
        or not isinstance(max_design_bytes, (int, np.integer))
        or max_design_bytes < 0
    ):
        raise InputError(f"max_design_bytes must be a non-negative int (bytes), got {max_design_bytes!r}")
    return int(max_design_bytes)


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


def _f32_rows(X: np.ndarray, start: int, stop: int) -> torch.Tensor:
    """Rows ``start:stop`` of ``X`` as an fp32 tensor, to be read only (it is ``X``'s memory when ``X`` is
    C-contiguous fp32); torch casts fp16 ~15x faster than numpy."""
    block = np.ascontiguousarray(X[start:stop])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a read-only memmap: torch only reads it here
        t = torch.from_numpy(block)
    return t.float()


def _page_release(X: np.ndarray) -> Callable[[int, int], None] | None:
    """For ``X`` in a shared memory map (``np.memmap`` mode r/r+/w+, as ``Store.layer`` gives), a function
    that unmaps rows ``[a, b)`` from this process once read (``MADV_DONTNEED``: the file's pages stay in the
    page cache, and a later read maps them again). Without it a pass over a big memmap leaves it all resident
    and counted in the process's RSS. None for anything else (a copy-on-write map would lose its edits)."""
    obj: object = X
    mode = None
    while obj is not None and not isinstance(obj, mmap.mmap):
        if isinstance(obj, np.memmap):
            mode = obj.mode
        obj = getattr(obj, "base", None)
    if obj is None or mode not in ("r", "r+", "w+") or not hasattr(mmap, "MADV_DONTNEED") or X.strides[0] <= 0:
        return None
    mm = obj
    origin = X.ctypes.data - np.frombuffer(mm, np.uint8).ctypes.data
    row, page = X.strides[0], mmap.PAGESIZE

    def release(a: int, b: int) -> None:
        lo = (origin + a * row) // page * page
        hi = min(len(mm), origin + b * row)
        if hi > lo:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    return release


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


class _Coordinates:
    """The preconditioned coordinates ``x = (X - mean) @ basis / scale`` and the way back to raw weights."""

    mean: np.ndarray
    scale: np.ndarray
    basis: np.ndarray | None

    def raw_coef(self, theta: np.ndarray) -> np.ndarray:
        """Raw weights (k, d) of the preconditioned ``theta`` (k, d): ``(theta / scale) @ basis.T``.

        On one BLAS thread: a threaded product splits its sums by thread count on some BLAS kernels
        (OpenBLAS with ``OPENBLAS_CORETYPE=Haswell`` does), and the weights would differ in the last bit."""
        coef = theta / self.scale
        if self.basis is not None:
            with threadpool_limits(limits=1):
                coef = coef @ self.basis.T
        return coef

    def raw(self, theta: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw ``(coef, intercept)`` of the preconditioned ``theta`` (k, d) and ``b`` (k,)."""
        coef = self.raw_coef(theta)
        with threadpool_limits(limits=1):
            return coef, b - coef @ self.mean


@dataclass
class _Design(_Coordinates):
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

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.x.shape)

    @property
    def device(self) -> torch.device:
        return self.x.device

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


class _StreamedDesign(_Coordinates):
    """The coordinates of a :class:`_Design` without its copy: ``X`` stays where it is (an fp16 memmap of a
    store) and :func:`probing.probes.solver._streamed_objective` reads it in row chunks at every evaluation,
    applying the preconditioning to the weights, ``x theta^T = (X - mean) (theta @ transform.T)^T``, rather
    than to the rows (O(k d^2) instead of O(n d^2) per evaluation). Those products are float64: folding
    ``transform`` into the weights sums terms far larger than the logits (the whitening undoes a wide
    spread of variances), which fp32 would round to ~1e-4. Peak memory: a few (chunk_rows, d) float64
    blocks, the (n,) labels and the (chunk_rows, k) logits; the fit runs on the CPU.

    ``mean``, ``scale``, ``basis`` and ``eig`` are those the in-memory design would have (the same fp32
    passes in the same chunks), so both minimise the same objective in the same coordinates.
    """

    device = torch.device("cpu")

    def __init__(
        self,
        X: np.ndarray,
        mean: np.ndarray,
        scale: np.ndarray,
        basis: np.ndarray | None,
        eig: np.ndarray | None,
        chunk_rows: int,
    ):
        self.X, self.mean, self.scale, self.basis, self.eig = X, mean, scale, basis, eig
        self.chunk_rows = chunk_rows
        self.shape = X.shape

    def to(self, device: str | None) -> _StreamedDesign:
        """This design (streamed fits run on the CPU, whatever ``device`` says)."""
        return self

    def set_penalty(self, lam: float, chunk_rows: int) -> np.ndarray:
        """As :meth:`_Design.set_penalty`; only the scale changes (there is no copy to rescale)."""
        if self.eig is None:
            return np.ones_like(self.scale)
        new = _whitening_scale(self.eig, lam)
        factor = new / self.scale
        self.scale = new
        return factor

    def transform(self) -> torch.Tensor:
        """float64 ``basis / scale`` (d, d), or ``1 / scale`` (d,) when standardising."""
        if self.basis is None:
            return torch.from_numpy(1.0 / self.scale)
        return torch.from_numpy(self.basis / self.scale)

    def chunks(self) -> Iterator[tuple[int, torch.Tensor]]:
        """``(first row, X[rows] - mean)`` in float64, chunk by chunk in row order."""
        release = _page_release(self.X)
        mean = torch.from_numpy(self.mean)
        n = self.shape[0]
        for start in range(0, n, self.chunk_rows):
            stop = min(start + self.chunk_rows, n)
            yield start, _f32_rows(self.X, start, stop).double().sub_(mean)
            if release is not None:
                release(start, stop)


def _streamed(X: np.ndarray, chunk_rows: int, center: bool, lam: float, whiten: bool) -> _StreamedDesign:
    """The :func:`_whitened` (or, without ``whiten``, :func:`_standardized`) preconditioning of ``X`` in two
    passes over its row chunks (moments, then covariance); ``X`` itself is not copied."""
    n, d = X.shape
    release = _page_release(X)
    moments = _Moments(d)
    for start in range(0, n, chunk_rows):
        stop = min(start + chunk_rows, n)
        chunk = _f32_rows(X, start, stop)
        _check_finite_chunk(chunk, start, "X")
        moments.add(chunk)
        if release is not None:
            release(start, stop)
    if not whiten:
        mean = moments.mean if center else np.zeros(d)
        scale = _safe_scale(moments.var + (0.0 if center else moments.mean**2), mean)
        return _StreamedDesign(X, mean, scale, None, None, chunk_rows)
    mean = moments.mean if center else np.zeros(d)
    m32 = torch.from_numpy(mean).float()
    cov = torch.zeros((d, d), dtype=torch.float64)
    for start in range(0, n, chunk_rows):
        stop = min(start + chunk_rows, n)
        c = _f32_rows(X, start, stop) - m32
        cov += (c.T @ c).double()
        if release is not None:
            release(start, stop)
    with threadpool_limits(limits=1):  # a threaded LAPACK rotates near-degenerate eigenvectors by thread count
        eig, basis = np.linalg.eigh(cov.numpy() / n)
    eig = np.clip(eig, 0.0, None)
    return _StreamedDesign(X, mean, _whitening_scale(eig, lam), basis, eig, chunk_rows)


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
