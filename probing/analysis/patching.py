"""Interchange interventions (activation patching) inside ELMo's biLSTM (issue 39).

Run the biLM on a *base* and a *source* sentence; at chosen sites put the source's state into the base's run
and let the recurrence go on from the patched state. A :class:`~probing.analysis.patching.Site` is (layer, direction, position, state):
``layer`` 0 is the token layer (the character CNN's vector of the word, as the direction's first LSTM layer
reads it), ``layer`` k >= 1 the k-th LSTM layer of that direction, whose step at the word hands ``(h, c)`` to
the next step and ``h`` (plus the skip connection from layer 2 on) to the layer above. ``state`` ``"h"``
replaces the projected output, ``"c"`` the memory cell, ``"both"`` the full recurrent state. A ``subspace``
``(width, k)`` restricts the replacement to its span: ``base + (source - base) Q Q^T`` with ``Q`` an
orthonormal basis of the columns (a probe's weight rows, :func:`~probing.analysis.patching.probe_subspace`; an eraser's subspace,
:func:`~probing.analysis.patching.eraser_subspace`; a random one of the same rank, :func:`~probing.analysis.patching.random_subspace`, the control).

Positions are 0-based word indices of the base sentence; the source's position for each is the identity, or
the row's ``align`` map (base word -> source word), so that pairs of different lengths are aligned by role
(the subject, an attractor, the word before the verb; :func:`~probing.analysis.patching.agreement_pairs` builds such maps).

The output is the LM's preference between two candidate words at the decision position: ``log p(first) -
log p(second)`` under the forward LM (every site forward: the top forward output at the word before the
decision position) or the backward LM (every site backward: the top backward output at the word after it).
The first candidate is the base's form, the second the source's; a pair *follows the source* when the
patched model prefers the second (``logprob_diff_patched < 0``). :func:`~probing.analysis.patching.interchange_accuracy` is the share
of such pairs with a percentile bootstrap CI over pairs (pyvene's interchange intervention accuracy).

The recurrence here is the model's own cell (gate order i, j, f, o, cell and projection clipping, skip
connections), stepped in float32 over a padded batch; ``tests/test_patching.py`` ties its unpatched outputs
to :class:`probing.elmo.model.BiLM` and its patched ones to a float64 hand-stepped reference.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.errors import InputError, check_count

if TYPE_CHECKING:
    import pandas as pd
    from torch import Tensor

    from probing.corpora.base import Sentence
    from probing.elmo import Elmo
    from probing.elmo.model import LstmDirection
    from probing.lm.head import LmHead

DIRECTIONS = ("forward", "backward")
STATES = ("h", "c", "both")
PATCH_COLUMNS = ("pair", "logprob_diff_base", "logprob_diff_source", "logprob_diff_patched", "follows_source")
POSITION_CLASSES = ("subject", "attractor", "before-verb")
"""The roles :func:`~probing.analysis.patching.agreement_pairs` aligns: the subject, the attractor nearest the verb, the word before the verb."""


def orthonormal(basis: Any, field: str = "subspace") -> np.ndarray:
    """An orthonormal basis ``(width, k)`` of the columns of ``basis`` (float64); InputError naming ``field``
    when it is not a finite 2-D array of full column rank with 1 <= k <= width.

    Parameters
    ----------
    basis : array (width, k)
        Columns spanning the subspace.
    field : the name the error gives.

    Returns
    -------
    ndarray (width, k), float64
        ``Q`` of the QR decomposition: orthonormal columns with the same span.
    """
    a = np.asarray(basis, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] < 1 or a.shape[1] > a.shape[0]:
        raise InputError(f"{field}: expected a (width, k) array with 1 <= k <= width, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise InputError(f"{field}: the basis has non-finite values")
    q, r = np.linalg.qr(a)
    diag = np.abs(np.diag(r))
    if diag.min() <= 1e-10 * max(diag.max(), 1e-300):
        raise InputError(f"{field}: the {a.shape[1]} columns are linearly dependent (rank below {a.shape[1]})")
    return q


def random_subspace(width: int, rank: int, seed: int = 0) -> np.ndarray:
    """A random subspace of ``rank`` dimensions in ``width`` (Gaussian columns, orthonormalised): the control.

    Returns
    -------
    ndarray (width, rank), float64
        Orthonormal columns, the same for the same ``seed``.
    """
    check_count(width, "width")
    check_count(rank, "rank", 1, width)
    return orthonormal(np.random.default_rng(seed).standard_normal((width, rank)))


def probe_subspace(probe: Any) -> np.ndarray:
    """The span of a fitted linear probe's weight rows (``coef_`` ``(n_classes or 1, d)``), orthonormal.

    Returns
    -------
    ndarray (d, k), float64
        k = the rows of ``coef_`` (1 for two classes).
    """
    coef = getattr(probe, "coef_", None)
    if coef is None:
        raise InputError(f"probe: {type(probe).__name__} has no coef_ (fit a linear probe first)")
    return orthonormal(np.asarray(coef, dtype=np.float64).T, "probe.coef_")


def eraser_subspace(eraser: Any) -> np.ndarray:
    """The subspace a fitted eraser removes (the columns of ``proj_left_`` ``(d, rank_)``), orthonormal.

    Returns
    -------
    ndarray (d, rank), float64
        rank = the eraser's ``rank_``.
    """
    left = getattr(eraser, "proj_left_", None)
    if left is None:
        raise InputError(f"eraser: {type(eraser).__name__} has no proj_left_ (fit it first)")
    return orthonormal(left, "eraser.proj_left_")


@dataclass(frozen=True, eq=False)
class Site:
    """Where to patch: ``layer`` (0 = token layer, k = the k-th biLSTM layer), ``direction`` (``"forward"`` or
    ``"backward"``), ``position`` (0-based word index in the base sentence: one int, or one per pair),
    ``state`` (``"h"``, ``"c"`` or ``"both"``) and ``subspace`` (``(width, k)`` columns; None: all of it).
    A subspace needs ``state`` ``"h"`` (width ``projection_dim``) or ``"c"`` (width ``lstm_dim``); layer 0 has
    only ``"h"`` (``"both"`` means it too)."""

    layer: int
    direction: str
    position: int | tuple[int, ...]
    state: str = "both"
    subspace: np.ndarray | None = None

    def __post_init__(self) -> None:
        if isinstance(self.layer, bool) or not isinstance(self.layer, (int, np.integer)) or self.layer < 0:
            raise InputError(f"Site.layer: expected an int >= 0 (0 = the token layer), got {self.layer!r}")
        object.__setattr__(self, "layer", int(self.layer))
        if self.direction not in DIRECTIONS:
            raise InputError(f"Site.direction: expected 'forward' or 'backward', got {self.direction!r}")
        if self.state not in STATES:
            raise InputError(f"Site.state: expected 'h', 'c' or 'both', got {self.state!r}")
        if self.layer == 0 and self.state == "c":
            raise InputError("Site.state: layer 0 (the token layer) has no memory cell; use 'h' or 'both'")
        pos = self.position
        values = list(pos) if isinstance(pos, (list, tuple, np.ndarray)) else [pos]
        if not values or any(isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 0 for p in values):
            raise InputError(f"Site.position: expected a word index >= 0 or one per pair, got {pos!r}")
        fixed: int | tuple[int, ...] = (
            tuple(int(p) for p in values) if isinstance(pos, (list, tuple, np.ndarray)) else int(values[0])
        )
        object.__setattr__(self, "position", fixed)
        if self.subspace is not None:
            if self.state == "both" and self.layer > 0:
                raise InputError("Site.subspace: a subspace needs state 'h' or 'c' (h and c differ in width)")
            object.__setattr__(self, "subspace", orthonormal(self.subspace, "Site.subspace"))

    def positions(self, n: int) -> np.ndarray:
        """The site's base word index per pair ``(n,)``; InputError when a per-pair tuple has another length.

        Returns
        -------
        ndarray (n,) of int64
        """
        if isinstance(self.position, tuple):
            if len(self.position) != n:
                raise InputError(f"Site.position: {len(self.position)} positions for {n} pairs")
            return np.asarray(self.position, dtype=np.int64)
        return np.full(n, self.position, dtype=np.int64)

    def describe(self) -> str:
        rank = "" if self.subspace is None else f", rank {self.subspace.shape[1]}"
        where = self.position if isinstance(self.position, int) else "per pair"
        return f"layer {self.layer} {self.direction} at {where} ({self.state}{rank})"


def resolve_model(model: Elmo | str | Path | None) -> tuple[Elmo, LmHead]:
    """The biLM and its LM head from a registered name, a model folder (``options.json``, ``weights.hdf5`` and
    an ``lm_head.npz``) or a loaded :class:`~probing.elmo.Elmo` (its own or its checkpoint's head)."""
    from probing.elmo import Elmo
    from probing.lm.head import AdaptiveHead
    from probing.lm.score import load_model

    if isinstance(model, (str, Path)) and Path(model).is_dir():
        folder = Path(model)
        elmo = Elmo.from_files(folder / "options.json", folder / "weights.hdf5")
        if (folder / "lm_head.npz").is_file():
            elmo.lm_head = AdaptiveHead.load(folder / "lm_head.npz")
        return load_model(elmo)
    return load_model(str(model) if isinstance(model, Path) else model)


@dataclass
class _Patch:
    """One site's replacements in one batch: direction-time steps of the base rows, and the source values."""

    layer: int
    rows: Tensor  # (m,) batch rows
    steps: Tensor  # (m,) step index in the direction's time order
    h: Tensor | None  # (m, P) source values, or None
    c: Tensor | None  # (m, C)
    basis_h: Tensor | None  # (P, k) or None
    basis_c: Tensor | None


def _mix(current: Tensor, source: Tensor, basis: Tensor | None) -> Tensor:
    if basis is None:
        return source
    return current + ((source - current) @ basis) @ basis.T


def run_direction(
    lstm: LstmDirection, x: Tensor, mask: Tensor, patches: Sequence[_Patch] = ()
) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
    """One direction's LSTM layers over ``x`` (time in the direction's order), stepped by hand with patches.

    Parameters
    ----------
    lstm : LstmDirection
        The direction's weights (``model.bilm.forward_lstm`` or ``backward_lstm``).
    x : Tensor (B, T, P)
        Token vectors in the direction's time order (reversed within each row for the backward direction).
    mask : Tensor (B, T) of bool
        True at valid steps, which come first.
    patches : the replacements; a layer-0 patch replaces ``x`` at its steps.

    Returns
    -------
    outputs : list (n_layers,) of Tensor (B, T, P)
        Each layer's output (skip connection included from layer 2 on), zero at padding.
    hs, cs : list (n_layers,) of Tensor (B, T, P) and (B, T, C)
        Each layer's state after each step, the patched one where a patch applies.
    """
    import torch

    opts = lstm.opts
    cell_clip = opts.cell_clip if opts.cell_clip else math.inf
    proj_clip = opts.proj_clip if opts.proj_clip else math.inf
    b, t, p = x.shape
    width_c = opts.lstm_dim
    x = x.clone()
    for pt in patches:
        if pt.layer == 0 and pt.h is not None:
            x[pt.rows, pt.steps] = _mix(x[pt.rows, pt.steps], pt.h, pt.basis_h)
    m_all = mask.unsqueeze(-1)
    x = x * m_all
    outputs, hs, cs = [], [], []
    for layer in range(opts.n_layers):
        w, bias, proj = lstm.weight[layer], lstm.bias[layer], lstm.proj[layer]
        gates_x = torch.addmm(bias, x.reshape(b * t, p), w[:p]).view(b, t, -1)
        at: dict[int, list[tuple[_Patch, Tensor]]] = {}
        for pt in patches:
            if pt.layer == layer + 1:
                for s in torch.unique(pt.steps).tolist():
                    at.setdefault(int(s), []).append((pt, (pt.steps == s).nonzero().squeeze(1)))
        h, c = x.new_zeros(b, p), x.new_zeros(b, width_c)
        hh, cc = x.new_zeros(b, t, p), x.new_zeros(b, t, width_c)
        for s in range(t):
            i, j, f, o = torch.addmm(gates_x[:, s], h, w[p:]).chunk(4, 1)
            c_new = torch.clamp(torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j), -cell_clip, cell_clip)
            h_new = torch.clamp(torch.mm(torch.sigmoid(o) * torch.tanh(c_new), proj), -proj_clip, proj_clip)
            m = m_all[:, s]
            c, h = torch.where(m, c_new, c), torch.where(m, h_new, h)
            for pt, sel in at.get(s, ()):
                rows = pt.rows[sel]
                if pt.h is not None:
                    h[rows] = _mix(h[rows], pt.h[sel], pt.basis_h)
                if pt.c is not None:
                    c[rows] = _mix(c[rows], pt.c[sel], pt.basis_c)
            hh[:, s], cc[:, s] = h * m, c * m
        out = hh
        if opts.use_skip_connections and layer > 0:
            out = out + x
        outputs.append(out)
        hs.append(hh)
        cs.append(cc)
        x = out
    return outputs, hs, cs


def step_index(direction: str, word: np.ndarray, n_words: np.ndarray) -> np.ndarray:
    """The direction-time step of a word's slot (``<S>`` is slot 0): forward ``word + 1``, backward
    ``n_words - word`` (the sequence ``<S>``, the words, ``</S>`` reversed).

    Parameters
    ----------
    direction : ``"forward"`` or ``"backward"``.
    word : ndarray (n,) of int
        0-based word indices (-1 names ``<S>``, ``n_words`` names ``</S>``).
    n_words : ndarray (n,) of int
        Words per sentence.

    Returns
    -------
    ndarray (n,) of int64
    """
    return np.asarray(word + 1 if direction == "forward" else n_words - word, dtype=np.int64)


def _per_row(value: Any, n: int, field: str) -> np.ndarray:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return np.full(n, int(value), dtype=np.int64)
    values = list(value)
    if len(values) != n or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in values):
        raise InputError(f"{field}: expected one int or one per pair ({n} pairs), got {value!r}")
    return np.asarray(values, dtype=np.int64)


def _candidates(candidates: Any, n: int) -> list[tuple[str, str]]:
    if isinstance(candidates, tuple) and len(candidates) == 2 and all(isinstance(c, str) for c in candidates):
        return [candidates] * n
    rows = [tuple(c) for c in candidates]
    if len(rows) != n or any(len(r) != 2 or not all(isinstance(w, str) for w in r) for r in rows):
        raise InputError(f"candidates: expected a pair of words, or one pair per pair of sentences ({n})")
    return [(str(r[0]), str(r[1])) for r in rows]


def _check_words(sentences: Sequence[Sequence[str]], field: str) -> list[list[str]]:
    from probing.elmo.chars import check_sentences

    try:
        return check_sentences(sentences)
    except InputError as e:
        raise InputError(f"{field}: {e}") from None


def patch(
    model: Elmo | str | Path,
    base: Sequence[Sequence[str]],
    source: Sequence[Sequence[str]],
    sites: Sequence[Site],
    *,
    candidates: tuple[str, str] | Sequence[tuple[str, str]],
    position: int | Sequence[int],
    source_position: int | Sequence[int] | None = None,
    align: Sequence[Mapping[int, int]] | None = None,
    batch_size: int = 64,
) -> pd.DataFrame:
    """Interchange interventions: the base run with ``sites`` taken from the source run, one row per pair.

    ``candidates``: (base's form, source's form), one pair or one per row; ``position``: the 0-based index of
    the predicted word in the base (one int or one per row); ``source_position``: the same in the source
    (default: ``align``'s image of ``position``, else ``position``); ``align``: per row, base word -> source
    word for the site positions (default: the same index). Columns ``pair``, ``logprob_diff_base``,
    ``logprob_diff_source``, ``logprob_diff_patched`` (``log p(first) - log p(second)``, natural log) and
    ``follows_source`` (``logprob_diff_patched < 0``).
    """
    return patch_many(
        model,
        base,
        source,
        {"patched": sites},
        candidates=candidates,
        position=position,
        source_position=source_position,
        align=align,
        batch_size=batch_size,
    )["patched"]


def patch_many(
    model: Elmo | str | Path,
    base: Sequence[Sequence[str]],
    source: Sequence[Sequence[str]],
    site_sets: Mapping[str, Sequence[Site]],
    *,
    candidates: tuple[str, str] | Sequence[tuple[str, str]],
    position: int | Sequence[int],
    source_position: int | Sequence[int] | None = None,
    align: Sequence[Mapping[int, int]] | None = None,
    batch_size: int = 64,
) -> dict[str, pd.DataFrame]:
    """:func:`~probing.analysis.patching.patch` for several sets of sites over the same pairs, running base and source once per batch."""
    import pandas as pd
    import torch

    elmo, head = resolve_model(model)
    base_w, source_w = _check_words(base, "base"), _check_words(source, "source")
    n = len(base_w)
    if len(source_w) != n:
        raise InputError(f"source: {len(source_w)} sentences for {n} base sentences")
    if not site_sets or any(not list(s) for s in site_sets.values()):
        raise InputError("sites: give at least one Site")
    check_count(batch_size, "batch_size")
    if align is not None and len(align) != n:
        raise InputError(f"align: {len(align)} maps for {n} pairs")
    nb = np.array([len(s) for s in base_w], dtype=np.int64)
    ns = np.array([len(s) for s in source_w], dtype=np.int64)
    pos = _per_row(position, n, "position")
    bad = np.flatnonzero((pos < 0) | (pos >= nb))
    if bad.size:
        raise InputError(f"position: pair {bad[0]} predicts word {pos[bad[0]]} of a {nb[bad[0]]}-word base")
    spos = _source_positions(pos, source_position, align, n)
    bad = np.flatnonzero((spos < 0) | (spos >= ns))
    if bad.size:
        raise InputError(f"source_position: pair {bad[0]}: word {spos[bad[0]]} of a {ns[bad[0]]}-word source")
    cands = _candidates(candidates, n)
    ids = [head.ids(list(c)) for c in cands]
    oov = [i for i, (_, known) in enumerate(ids) if not known.all()]
    if oov:
        raise InputError(f"candidates: pair {oov[0]}'s {cands[oov[0]]} are not all in the LM head's vocabulary")
    targets = np.stack([i for i, _ in ids])  # (n, 2)
    plans = {name: _plan(list(sites), elmo, n, nb, ns, align) for name, sites in site_sets.items()}
    directions = {name: plan[0] for name, plan in plans.items()}
    out: dict[str, list[np.ndarray]] = {name: [] for name in site_sets}
    base_diff: dict[str, list[np.ndarray]] = {d: [] for d in set(directions.values())}
    source_diff: dict[str, list[np.ndarray]] = {d: [] for d in set(directions.values())}
    with torch.no_grad():
        for start in range(0, n, batch_size):
            rows = np.arange(start, min(start + batch_size, n))
            diffs = _batch(elmo, head, base_w, source_w, rows, plans, nb, ns, pos, spos, targets)
            for d in base_diff:
                base_diff[d].append(diffs[("base", d)])
                source_diff[d].append(diffs[("source", d)])
            for name in site_sets:
                out[name].append(diffs[("patched", name)])
    frames = {}
    for name, d in directions.items():
        patched = np.concatenate(out[name])
        frames[name] = pd.DataFrame(
            {
                "pair": np.arange(n),
                "logprob_diff_base": np.concatenate(base_diff[d]),
                "logprob_diff_source": np.concatenate(source_diff[d]),
                "logprob_diff_patched": patched,
                "follows_source": patched < 0,
            },
            columns=list(PATCH_COLUMNS),
        )
    return frames


def _source_positions(
    pos: np.ndarray, source_position: Any, align: Sequence[Mapping[int, int]] | None, n: int
) -> np.ndarray:
    if source_position is not None:
        return _per_row(source_position, n, "source_position")
    if align is None:
        return pos.copy()
    out = []
    for i, (p, mapping) in enumerate(zip(pos.tolist(), align)):
        if p not in mapping:
            raise InputError(f"source_position: pair {i}'s align map has no image of the predicted word {p}")
        out.append(int(mapping[p]))
    return np.asarray(out, dtype=np.int64)


def _plan(
    sites: list[Site], elmo: Elmo, n: int, nb: np.ndarray, ns: np.ndarray, align: Sequence[Mapping[int, int]] | None
) -> tuple[str, list[tuple[Site, np.ndarray, np.ndarray]]]:
    """(the LM direction, [(site, base word per pair, source word per pair)]), every field checked."""
    directions = {s.direction for s in sites}
    if len(directions) != 1:
        raise InputError("sites: mix no directions in one set (the forward LM reads forward sites only)")
    opts = elmo.options
    widths = {"h": opts.projection_dim, "c": opts.lstm_dim}
    out = []
    for s in sites:
        if not isinstance(s, Site):
            raise InputError(f"sites: expected Site objects, got {type(s).__name__}")
        if s.layer > opts.n_layers:
            raise InputError(f"Site.layer: {s.layer}, but the model has layers 0..{opts.n_layers}")
        if s.subspace is not None:
            state = "h" if s.layer == 0 else s.state
            if s.subspace.shape[0] != widths[state]:
                raise InputError(
                    f"Site.subspace: {s.subspace.shape[0]} rows, but layer {s.layer}'s {state} is {widths[state]} wide"
                )
        where = s.positions(n)
        bad = np.flatnonzero(where >= nb)
        if bad.size:
            raise InputError(f"Site.position: pair {bad[0]}: word {where[bad[0]]} of a {nb[bad[0]]}-word base")
        if align is None:
            there = where.copy()
        else:
            missing = [i for i, (p, m) in enumerate(zip(where.tolist(), align)) if p not in m]
            if missing:
                i = missing[0]
                raise InputError(f"align: pair {i} maps no source word to base word {where[i]} ({s.describe()})")
            there = np.asarray([m[p] for p, m in zip(where.tolist(), align)], dtype=np.int64)
        bad = np.flatnonzero((there < 0) | (there >= ns))
        if bad.size:
            raise InputError(f"align: pair {bad[0]}: source word {there[bad[0]]} of a {ns[bad[0]]}-word source")
        out.append((s, where, there))
    return directions.pop(), out


def _embedded(elmo: Elmo, sentences: list[list[str]]) -> tuple[Tensor, Tensor, Tensor]:
    """Token vectors ``(B, T, P)`` (zero at padding), the mask ``(B, T)`` and lengths ``(B,)`` with boundaries."""
    import torch

    from probing.elmo.chars import batch_char_ids

    ids = torch.from_numpy(batch_char_ids(sentences, elmo.options.max_characters_per_token)).to(elmo.device)
    mask = (ids > 0).any(dim=-1)
    tokens = elmo.bilm.token_embeddings(ids) * mask.unsqueeze(-1)
    return tokens, mask, mask.sum(dim=1)


def _in_direction(direction: str, tokens: Tensor, lengths: Tensor) -> Tensor:
    from probing.elmo.model import reverse_padded

    return tokens if direction == "forward" else reverse_padded(tokens, lengths)


def _batch(
    elmo: Elmo,
    head: LmHead,
    base_w: list[list[str]],
    source_w: list[list[str]],
    rows: np.ndarray,
    plans: Mapping[str, tuple[str, list[tuple[Site, np.ndarray, np.ndarray]]]],
    nb: np.ndarray,
    ns: np.ndarray,
    pos: np.ndarray,
    spos: np.ndarray,
    targets: np.ndarray,
) -> dict[tuple[str, str], np.ndarray]:
    """The logprob differences of one batch: ``("base"|"source", direction)`` and ``("patched", name)``."""
    import torch

    tok_b, mask_b, len_b = _embedded(elmo, [base_w[i] for i in rows])
    tok_s, mask_s, len_s = _embedded(elmo, [source_w[i] for i in rows])
    device = tok_b.device
    tgt = torch.from_numpy(targets[rows]).to(device)
    out: dict[tuple[str, str], np.ndarray] = {}

    def diff(top: Tensor, step: np.ndarray) -> np.ndarray:
        hidden = top[torch.arange(len(rows), device=device), torch.from_numpy(step).to(device)]
        first = head.log_probs(hidden, tgt[:, 0]).double()
        second = head.log_probs(hidden, tgt[:, 1]).double()
        return (first - second).cpu().numpy()

    def decision(direction: str, predicted: np.ndarray, n_words: np.ndarray) -> np.ndarray:
        # forward: the top output at the word before predicts it; backward: at the word after
        return step_index(direction, predicted - 1 if direction == "forward" else predicted + 1, n_words)

    runs: dict[str, tuple[list[Tensor], list[Tensor], list[Tensor], Tensor]] = {}
    for direction in {d for d, _ in plans.values()}:
        lstm = elmo.bilm.forward_lstm if direction == "forward" else elmo.bilm.backward_lstm
        x_s = _in_direction(direction, tok_s, len_s)
        src_out, src_h, src_c = run_direction(lstm, x_s, mask_s)
        base_out, _, _ = run_direction(lstm, _in_direction(direction, tok_b, len_b), mask_b)
        runs[direction] = (src_out, src_h, src_c, x_s)
        out[("source", direction)] = diff(src_out[-1], decision(direction, spos[rows], ns[rows]))
        out[("base", direction)] = diff(base_out[-1], decision(direction, pos[rows], nb[rows]))
    for name, (direction, sites) in plans.items():
        src_out, src_h, src_c, x_s = runs[direction]
        lstm = elmo.bilm.forward_lstm if direction == "forward" else elmo.bilm.backward_lstm
        patches = []
        batch_rows = torch.arange(len(rows), device=device)
        for site, where, there in sites:
            steps_b = torch.from_numpy(step_index(direction, where[rows], nb[rows])).to(device)
            steps_s = torch.from_numpy(step_index(direction, there[rows], ns[rows])).to(device)
            basis = None if site.subspace is None else torch.as_tensor(site.subspace, dtype=tok_b.dtype, device=device)
            if site.layer == 0:
                patches.append(_Patch(0, batch_rows, steps_b, x_s[batch_rows, steps_s], None, basis, None))
                continue
            h = src_h[site.layer - 1][batch_rows, steps_s] if site.state in ("h", "both") else None
            c = src_c[site.layer - 1][batch_rows, steps_s] if site.state in ("c", "both") else None
            patches.append(
                _Patch(
                    site.layer,
                    batch_rows,
                    steps_b,
                    h,
                    c,
                    basis if site.state == "h" else None,
                    basis if site.state == "c" else None,
                )
            )
        patched_out, _, _ = run_direction(lstm, _in_direction(direction, tok_b, len_b), mask_b, patches)
        out[("patched", name)] = diff(patched_out[-1], decision(direction, pos[rows], nb[rows]))
    return out


def interchange_accuracy(
    frame: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float, float]:
    """(share of pairs whose patched model prefers the source's form, ci_low, ci_high): a percentile bootstrap
    over pairs (``n_boot`` replicates, level ``1 - alpha``); InputError naming ``follows_source`` when the
    frame lacks it or is empty."""
    from probing.probes.stats import bootstrap_ci

    if "follows_source" not in frame.columns or len(frame) == 0:
        raise InputError("frame: needs a non-empty follows_source column (the output of patch)")
    follows = frame["follows_source"].to_numpy(dtype=np.float64)
    value = float(follows.mean())
    low, high = bootstrap_ci(follows, None, n_boot=n_boot, alpha=alpha, seed=seed)
    return value, min(float(low), value), max(float(high), value)


def _roles(sent: Sentence, verb: int) -> tuple[int, list[int]] | None:
    """(subject position, attractor positions) of the agreement item at ``verb`` (as in
    :func:`probing.lm.agreement.sentence_items`), None when the sentence lacks the annotations."""
    from probing.lm.agreement import NOUNS, SUBJECTS, number_of

    if sent.heads is None or sent.deprels is None or sent.feats is None or sent.upos is None:
        return None
    anchor = sent.heads[verb] - 1 if sent.deprels[verb] in ("cop", "aux", "aux:pass") else verb
    subjects = [i for i, h in enumerate(sent.heads) if h - 1 == anchor and sent.deprels[i] in SUBJECTS]
    if len(subjects) != 1:
        return None
    s = subjects[0]
    number = number_of(sent.feats[s])
    attractors = [
        k for k in range(s + 1, verb) if sent.upos[k] in NOUNS and number_of(sent.feats[k]) not in (None, number)
    ]
    return s, attractors


def agreement_pairs(sentences: Sequence[Sentence] | Any, *, max_pairs: int | None = None) -> pd.DataFrame:
    """Base/source pairs from a treebank's subject-verb agreement items (:func:`probing.lm.agreement.agreement_items`):
    each item (the base, in order) with the next item, cyclically, whose subject has the other number, whose
    verb alternates between the same two forms (``is``/``are``, ``walks``/``walk``) and which comes from
    another sentence; items with the verb first are left out. Columns ``pair``, ``base``, ``source`` (word
    lists), ``candidates`` (the base's verb form, the source's), ``position``/``source_position`` (the verbs),
    ``subject``/``source_subject``, ``attractor``/``source_attractor`` (the attractor nearest the verb, -1:
    none), ``attractors`` (the base's count), ``group`` (``attractors=0`` .. ``attractors=3+``), ``number``
    (the base subject's)."""
    import pandas as pd

    from probing.lm.agreement import sentence_items

    items: list[dict[str, Any]] = []
    for sent in sentences:
        found, _ = sentence_items(sent)
        for item in found:
            v = int(item["verb_position"])
            roles = _roles(sent, v)
            if roles is None or v < 1:
                continue
            verb = str(item["verb"])
            other = item["bad"].split(" ")[v]
            items.append(
                {
                    "words": list(sent.words),
                    "verb": verb,
                    "other": other,
                    "key": frozenset((verb.lower(), other.lower())),
                    "number": item["number"],
                    "position": v,
                    "subject": roles[0],
                    "attractor": roles[1][-1] if roles[1] else -1,
                    "attractors": int(item["attractors"]),
                    "group": item["group"],
                    "sentence": sent.id,
                }
            )
    rows: list[dict[str, Any]] = []
    for i, it in enumerate(items):
        for k in range(1, len(items)):
            src = items[(i + k) % len(items)]
            if src["key"] == it["key"] and src["number"] != it["number"] and src["sentence"] != it["sentence"]:
                break
        else:
            continue
        rows.append(
            {
                "pair": len(rows),
                "base": it["words"],
                "source": src["words"],
                "candidates": (it["verb"], it["other"]),
                "position": it["position"],
                "source_position": src["position"],
                "subject": it["subject"],
                "source_subject": src["subject"],
                "attractor": it["attractor"],
                "source_attractor": src["attractor"],
                "attractors": it["attractors"],
                "group": it["group"],
                "number": it["number"],
            }
        )
        if max_pairs is not None and len(rows) >= max_pairs:
            break
    return pd.DataFrame(rows)


def role_positions(pairs: pd.DataFrame, role: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows that have the role in both sentences, base word, source word) of a position class
    (:data:`~probing.analysis.patching.POSITION_CLASSES`) in :func:`~probing.analysis.patching.agreement_pairs`' table.

    Returns
    -------
    rows : ndarray (m,) of int64
        Pair rows that have the role in both sentences (and, for the subject, apart from the word before
        the verb, which is its own class).
    base, source : ndarray (m,) of int64
        The role's word in the base and in the source.
    """
    if role == "before-verb":
        base, source = pairs.position.to_numpy() - 1, pairs.source_position.to_numpy() - 1
        keep = np.ones(len(pairs), dtype=bool)
    elif role == "subject":
        base, source = pairs.subject.to_numpy(), pairs.source_subject.to_numpy()
        keep = (base != pairs.position.to_numpy() - 1) & (source != pairs.source_position.to_numpy() - 1)
    elif role == "attractor":
        base, source = pairs.attractor.to_numpy(), pairs.source_attractor.to_numpy()
        keep = (base >= 0) & (source >= 0)
    else:
        raise InputError(f"role: expected one of {', '.join(POSITION_CLASSES)}, got {role!r}")
    rows = np.flatnonzero(keep)
    return rows.astype(np.int64), base[rows].astype(np.int64), source[rows].astype(np.int64)


PAIR_FILE_COLUMNS = ("base", "source", "base_form", "source_form", "position", "source_position")
ROLE_COLUMNS = ("subject", "source_subject", "attractor", "source_attractor")


def _index(record: Mapping[str, Any], column: str, words: list[str], where: str, optional: bool = False) -> int:
    text = (record.get(column) or "").strip()
    if optional and text in ("", "-1"):
        return -1
    if not text.isdigit() or not int(text) < len(words):
        raise InputError(f"{where}, {column}: expected a word index in 0..{len(words) - 1}, got {text!r}")
    return int(text)


def read_patch_pairs(path: str | Path) -> pd.DataFrame:
    """Your own base/source pairs: a CSV with ``base``, ``source`` (sentences, tokens split at spaces),
    ``base_form``, ``source_form`` (the two candidate words), ``position``, ``source_position`` (0-based index
    of the predicted word in each), optional role columns ``subject``, ``source_subject``, ``attractor``,
    ``source_attractor`` (word indices; -1 or empty: none) and ``group``. Returns :func:`~probing.analysis.patching.agreement_pairs`'
    columns (``number`` empty); every malformed value is an InputError naming the file, line and column."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InputError(f"pairs file not found: {path}")
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in PAIR_FILE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: the header lacks {', '.join(missing)} (needs {', '.join(PAIR_FILE_COLUMNS)})")
        records = list(enumerate(reader, start=2))
    rows: list[dict[str, Any]] = []
    for line, r in records:
        base, source = (r.get("base") or "").split(), (r.get("source") or "").split()
        if not base or not source:
            raise InputError(f"{path}, line {line}: base and source must be non-empty sentences")
        forms = (r.get("base_form") or "").strip(), (r.get("source_form") or "").strip()
        if not all(forms):
            raise InputError(f"{path}, line {line}, base_form/source_form: expected two candidate words")
        rows.append(
            {
                "pair": len(rows),
                "base": base,
                "source": source,
                "candidates": forms,
                "position": _index(r, "position", base, f"{path}, line {line}"),
                "source_position": _index(r, "source_position", source, f"{path}, line {line}"),
                **{
                    c: _index(r, c, source if c.startswith("source") else base, f"{path}, line {line}", True)
                    for c in ROLE_COLUMNS
                },
                "attractors": int(_index(r, "attractor", base, f"{path}, line {line}", True) >= 0),
                "group": (r.get("group") or "all").strip() or "all",
                "number": "",
            }
        )
    if not rows:
        raise InputError(f"{path}: no pairs")
    return pd.DataFrame(rows)


def site_states(
    model: Elmo, sentences: Sequence[Sequence[str]], direction: str, positions: Sequence[int], *, batch_size: int = 64
) -> list[np.ndarray]:
    """Per layer (0 = the token vector, k = layer k's ``h``) the state at each sentence's word ``positions[i]``
    in ``direction``: what a site reads, for a probe at the same site.

    Parameters
    ----------
    model : Elmo
    sentences : sequence (n,) of word lists
    direction : ``"forward"`` or ``"backward"``.
    positions : sequence (n,) of int
        A 0-based word index per sentence.
    batch_size : sentences per biLSTM batch.

    Returns
    -------
    list (n_layers + 1,) of ndarray (n, P), float32
        P = ``projection_dim``.
    """
    import torch

    words = _check_words(sentences, "sentences")
    where = np.asarray(positions, dtype=np.int64)
    lengths = np.array([len(s) for s in words], dtype=np.int64)
    if len(where) != len(words) or ((where < 0) | (where >= lengths)).any():
        raise InputError("positions: expected one word index inside each sentence")
    lstm = model.bilm.forward_lstm if direction == "forward" else model.bilm.backward_lstm
    out: list[list[np.ndarray]] = [[] for _ in range(model.options.n_layers + 1)]
    with torch.no_grad():
        for start in range(0, len(words), batch_size):
            rows = np.arange(start, min(start + batch_size, len(words)))
            tokens, mask, lens = _embedded(model, [words[i] for i in rows])
            x = _in_direction(direction, tokens, lens)
            _, hs, _ = run_direction(lstm, x, mask)
            r = torch.arange(len(rows), device=x.device)
            steps = torch.from_numpy(step_index(direction, where[rows], lengths[rows])).to(x.device)
            for k, layer in enumerate([x, *hs]):
                out[k].append(layer[r, steps].float().cpu().numpy())
    return [np.concatenate(chunks) for chunks in out]
