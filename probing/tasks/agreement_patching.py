"""Agreement, patched (issue 39, item 2): where does the biLM keep the subject's number, and does it use it there?

``kind = "agreement-patching"`` with ``data`` a CoNLL-U treebank (``conllu:PATH`` or a registered name, with
``split``, default ``test``) whose subject-verb agreement items become base/source pairs
(:func:`probing.analysis.patching.agreement_pairs`: the source's subject has the other number and its verb
the other form), or ``pairs:PATH`` (:func:`probing.analysis.patching.read_patch_pairs`); ``max_pairs`` (the
first N pairs whose two verb forms the LM head knows), ``batch_size``. Like ``minimal-pairs`` it reads the
encoder's model (an ELMo with an LM head), not stores.

Per position class (``split``: ``subject``, ``attractor``, ``before-verb``, each pair aligned by role) and per
site (``layer``: ``forward-<k>``/``backward-<k>``, k = 0 the token layer, then each biLSTM layer;
``forward-all``/``backward-all``: every layer at once; not ``<k>f``, which names a stored layer's half), metrics, each with a 95 % bootstrap CI over pairs:

* ``interchange-accuracy`` (the headline): the share of pairs whose LM, with the site's full state (h and c)
  taken from the source, prefers the source's verb form;
* ``interchange-accuracy-probe``: only the number probe's direction of h replaced (rank 1);
* ``interchange-accuracy-random``: a random direction of h of the same rank (the control);
* ``number-probe-accuracy``: a linear probe (C = 1) predicting the base subject's number from the same state
  ("decodable there"), two-fold over pairs (fit on even pairs, scored on odd, and back);
* ``unpatched-follows-source``: the share of pairs whose unpatched base already prefers the source's form (no
  effect), so a row of IIA reads against it.

Forward sites change the forward LM's decision at the verb; backward sites at these positions (all before the
verb) cannot change the backward LM's, which reads only the words after the verb: their interchange accuracy
is the unpatched share, exactly.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.results import Metric, make_row
from probing.tasks.common import Job, TaskError, TaskKind, TaskOutput

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing._toml import Table

KIND = "agreement-patching"
PATCH_VERSION = 1  # bump when the rows change for a reason the code does not show
IIA = "interchange-accuracy"
IIA_PROBE = "interchange-accuracy-probe"
IIA_RANDOM = "interchange-accuracy-random"
PROBE = "number-probe-accuracy"
NO_EFFECT = "unpatched-follows-source"
METRICS = (
    Metric(IIA, "Interchange accuracy (full state)", percent=True, bounds=(0.0, 1.0)),
    Metric(IIA_PROBE, "Interchange accuracy (probe direction)", percent=True, bounds=(0.0, 1.0)),
    Metric(IIA_RANDOM, "Interchange accuracy (random direction)", percent=True, bounds=(0.0, 1.0)),
    Metric(PROBE, "Number probe accuracy at the site", percent=True, bounds=(0.0, 1.0)),
    Metric(NO_EFFECT, "Unpatched base follows the source", percent=True, bounds=(0.0, 1.0)),
)


@dataclass(frozen=True)
class AgreementPatchingOptions:
    """The kind's own keys: ``data`` (``conllu:PATH`` made absolute, a registered corpus name, or
    ``pairs:PATH``), ``split`` (of a registered corpus), ``max_pairs`` (None: all), ``batch_size``."""

    data: str = ""
    split: str = "test"
    max_pairs: int | None = None
    batch_size: int = 64


def _parse(t: Table) -> dict[str, Any]:
    data = t.string("data", None)
    if data is None or not data:
        raise t.fail("data", "'conllu:PATH', a registered treebank name, or 'pairs:PATH'", data)
    for prefix in ("pairs:", "conllu:"):
        if data.startswith(prefix):
            path = Path(data.removeprefix(prefix)).expanduser()
            path = path if path.is_absolute() else (t.base / path)
            if not path.is_file():
                raise t.fail("data", f"'{prefix}PATH' naming an existing file (relative to the experiment file)", data)
            data = f"{prefix}{path.resolve()}"
    opts = AgreementPatchingOptions(
        data=data,
        split=t.string("split", "test"),
        max_pairs=t.integer("max_pairs", None, minimum=1),
        batch_size=t.integer("batch_size", 64, minimum=1),
    )
    return asdict(opts)


def _identity(task: str, encoder: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The biLM's fingerprint, the LM head, the data (file sha256 or corpus fingerprint) and the code."""
    from probing._io import sha256_file
    from probing.elmo import hub
    from probing.identity import code_identity
    from probing.tasks.minimal_pairs import _checkpoint

    opts = AgreementPatchingOptions(**options)
    if opts.data.startswith("pairs:"):
        data = sha256_file(Path(opts.data.removeprefix("pairs:")))
    else:
        data = _corpus(opts).fingerprint()
    checkpoint = _checkpoint(task, encoder)
    entry = hub.get(checkpoint)
    head = entry.head and {"file": sha256_file(hub.resolve_head(checkpoint)[0])}
    return {
        "model": encoder.fingerprint,
        "checkpoint": checkpoint,
        "head": head or {"softmax": entry.softmax_url, "vocab": entry.vocab_url},
        "data": data,
        "code": code_identity(PATCH_VERSION, ["probing.lm", "probing.analysis.patching", "probing.probes.linear"]),
    }


def _corpus(opts: AgreementPatchingOptions) -> Any:
    from probing.corpora.registry import load

    return load(opts.data, opts.split)


def load_pairs(task: str, opts: AgreementPatchingOptions, head: Any) -> tuple[str, pd.DataFrame, int]:
    """(dataset name, the pairs whose two forms the head knows, the first ``max_pairs``; pairs left out)."""
    from probing.analysis.patching import agreement_pairs, read_patch_pairs

    if opts.data.startswith("pairs:"):
        path = Path(opts.data.removeprefix("pairs:"))
        dataset, pairs = path.stem, read_patch_pairs(path)
    else:
        corpus = _corpus(opts)
        dataset, pairs = corpus.name, agreement_pairs(corpus)
    if pairs.empty:
        raise TaskError(f"task {task!r}: {opts.data} gives no base/source pairs")
    known = np.array([bool(head.ids(list(c))[1].all()) for c in pairs.candidates])
    kept = pairs[known]
    if opts.max_pairs is not None:
        kept = kept.head(opts.max_pairs)
    if kept.empty:
        raise TaskError(f"task {task!r}: no pair of {opts.data} has both verb forms in the LM head's vocabulary")
    return dataset, kept.reset_index(drop=True).assign(pair=lambda f: np.arange(len(f))), int((~known).sum())


def probe_accuracy(states: np.ndarray, labels: np.ndarray, seed: int) -> tuple[np.ndarray, Any]:
    """Two-fold number probe (fit on even pairs, score odd ones, and back) and a probe fitted on all pairs.

    Parameters
    ----------
    states : ndarray (m, d)
        The site's state per pair.
    labels : ndarray (m,)
        The base subject's number (or form) per pair.
    seed : the probes' seed.

    Returns
    -------
    right : ndarray (m,), float64
        1.0 where the probe of the other fold is right, 0.0 where wrong, NaN where that fold's training half
        has one class only.
    probe : LinearProbe or None
        Fitted on all pairs (its direction is the probe subspace); None with one class.
    """
    from probing.probes.linear import LinearProbe

    right = np.zeros(len(labels), dtype=np.float64)
    folds = np.arange(len(labels)) % 2
    for k in (0, 1):
        train, test = folds != k, folds == k
        if len(set(labels[train])) < 2 or not test.any():
            right[test] = np.nan
            continue
        probe = LinearProbe(C=1.0, random_state=seed).fit(states[train], labels[train])
        right[test] = probe.predict(states[test]) == labels[test]
    full = LinearProbe(C=1.0, random_state=seed).fit(states, labels) if len(set(labels)) > 1 else None
    return right, full


def _probe_basis(probe: Any) -> np.ndarray | None:
    """The probe's directions, or None for no probe or one whose weights are all zero (nothing to patch)."""
    from probing.analysis.patching import probe_subspace

    if probe is None or not np.any(probe.coef_):
        return None
    return probe_subspace(probe)


def site_frames(
    elmo: Any, pairs: pd.DataFrame, role: str, *, seed: int = 0, batch_size: int = 64
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], dict[str, np.ndarray]]:
    """One position class's pairs, patched at every site, and the number probe at each site.

    Returns
    -------
    pairs : DataFrame (m rows)
        The pairs that have the role in both sentences (:func:`~probing.analysis.patching.role_positions`).
    frames : dict of str to DataFrame (m rows)
        :func:`~probing.analysis.patching.patch`'s frames keyed ``"<metric>|<direction>-<layer>"`` (full state,
        probe direction, random direction; ``<direction>-all``: every layer's full state).
    probe_right : dict of str to ndarray (m,)
        The two-fold probe's per-pair correctness (:func:`~probing.tasks.agreement_patching.probe_accuracy`) keyed ``"<direction>-<layer>"``.
    """
    from probing.analysis.patching import Site, patch_many, random_subspace, role_positions, site_states

    rows_idx, base_pos, source_pos = role_positions(pairs, role)
    sub = pairs.iloc[rows_idx].reset_index(drop=True)
    if len(rows_idx) == 0:
        return sub, {}, {}
    n_layers, width = elmo.options.n_layers, elmo.options.projection_dim
    labels = (sub.number if "number" in sub and (sub.number != "").all() else sub.candidates.str[0]).to_numpy()
    positions = tuple(int(b) for b in base_pos)
    sets: dict[str, list[Site]] = {}
    probe_right: dict[str, np.ndarray] = {}
    for d in ("forward", "backward"):
        states = site_states(elmo, list(sub.base), d, positions, batch_size=batch_size)
        for layer in range(n_layers + 1):
            right, probe = probe_accuracy(states[layer], labels, seed)
            probe_right[f"{d}-{layer}"] = right
            sets[f"{IIA}|{d}-{layer}"] = [Site(layer, d, positions)]
            basis = _probe_basis(probe)
            if basis is not None:
                sets[f"{IIA_PROBE}|{d}-{layer}"] = [Site(layer, d, positions, "h", basis)]
            rank = 1 if basis is None else basis.shape[1]
            sets[f"{IIA_RANDOM}|{d}-{layer}"] = [
                Site(layer, d, positions, "h", random_subspace(width, rank, seed + layer))
            ]
        sets[f"{IIA}|{d}-all"] = [Site(layer, d, positions) for layer in range(n_layers + 1)]
    frames = patch_many(
        elmo,
        list(sub.base),
        list(sub.source),
        sets,
        candidates=list(sub.candidates),
        position=sub.position.tolist(),
        source_position=sub.source_position.tolist(),
        align=[{int(b): int(s)} for b, s in zip(base_pos, source_pos)],
        batch_size=batch_size,
    )
    return sub, frames, probe_right


def role_rows(job: Job, elmo: Any, pairs: pd.DataFrame, role: str, dataset: str) -> list[dict]:
    """The rows of one position class: every layer and direction, full state, probe and random directions."""
    from probing.analysis.patching import interchange_accuracy
    from probing.probes.stats import bootstrap_ci

    seed, n_boot = job.settings.seeds[0], job.settings.n_boot
    _, frames, probe_right = site_frames(elmo, pairs, role, seed=seed, batch_size=job.options["batch_size"])
    out = []

    def row(site: str, metric: str, value: float, low: float, high: float) -> dict:
        return make_row(job.task, dataset, role, job.encoder, site, metric, value, low, high, seed)

    for name, frame in frames.items():
        metric, site = name.split("|")
        out.append(row(site, metric, *interchange_accuracy(frame, n_boot=n_boot, seed=seed)))
        if metric == IIA:
            none = frame.logprob_diff_base.to_numpy() < 0
            value = float(none.mean())
            low, high = bootstrap_ci(none.astype(np.float64), None, n_boot=n_boot, seed=seed)
            out.append(row(site, NO_EFFECT, value, min(low, value), max(high, value)))
    for site, right in probe_right.items():
        ok = right[np.isfinite(right)]
        if ok.size:
            value = float(ok.mean())
            low, high = bootstrap_ci(ok, None, n_boot=n_boot, seed=seed)
            out.append(row(site, PROBE, value, min(low, value), max(high, value)))
    return out


def _run(job: Job) -> TaskOutput:
    from probing.analysis.patching import POSITION_CLASSES
    from probing.lm.score import load_model
    from probing.tasks.minimal_pairs import _checkpoint

    opts = AgreementPatchingOptions(**job.options)
    _checkpoint(job.task, job.model)
    t0 = time.time()
    elmo, head = load_model(job.model.model)
    dataset, pairs, dropped = load_pairs(job.task, opts, head)
    job.progress(f"{job.task} {job.encoder}: {len(pairs)} pairs")
    out = TaskOutput(rows=[])
    for role in POSITION_CLASSES:
        out.rows += role_rows(job, elmo, pairs, role, dataset)
    out.probes.append(
        {
            "task": job.task,
            "encoder": job.encoder,
            "kind": KIND,
            "data": opts.data,
            "n_pairs": len(pairs),
            "pairs_out_of_vocabulary": dropped,
            "seconds": round(time.time() - t0, 3),
        }
    )
    return out


def _figures(results: pd.DataFrame, task: str, dataset: str, split: str) -> dict[str, Figure]:
    """The IIA heat map (layer x position class, per direction, the probe's accuracy beside), drawn once."""
    if split != "before-verb":
        return {}
    from probing.figures.patching import iia_heatmap

    return {"iia": iia_heatmap(results, task, dataset=dataset)}


AGREEMENT_PATCHING = TaskKind(
    KIND,
    run=_run,
    metrics=METRICS,
    headline=IIA,
    parse=_parse,
    options=AgreementPatchingOptions,
    allows_dev=False,
    figures=_figures,
    layer_figures=False,
    model_identity=_identity,
)
