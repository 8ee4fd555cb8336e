"""Structural probes as task kinds (Hewitt & Manning 2019): which layer encodes the dependency tree?

``structural-distance``: per layer, a distance probe (squared distances under a learned linear map B
approximate tree distances) scored by UUAS and DSpr.; ``structural-depth``: a depth probe (squared norms
approximate tree depths) scored by Root% (``root_acc``) and NSpr. Probes, training regimen and metrics are
:mod:`probing.probes.structural`'s; one probe per layer, seeded with ``seeds[0]`` (the control trees too).

With ``control`` on, every layer is also probed on the control task: the same sentences with random trees
of the same lengths (:func:`~probing.probes.structural.random_trees`), rows ``control-<metric>``; the
headline's ``selectivity = headline - control headline`` gets a paired cluster-bootstrap CI over sentences.
The ``position`` baseline (``|i - j|`` distances, left-branching depths: word i at depth i) reads only the
trees and is scored once per task (encoder ``baseline``, layer ``position``).

Trees come from the stores' ``head`` column, so the data must be a dependency treebank (CoNLL-U).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.errors import InputError
from probing.probes.control import selectivity
from probing.probes.structural import (
    DepthProbe,
    DistanceProbe,
    StoreSentences,
    position_baseline,
    random_trees,
    root_hits,
    scores_with_ci,
    store_punct,
    store_trees,
    uuas_counts,
)
from probing.results import BASELINE_ENCODER, make_row
from probing.results.metrics import DEPTH_METRICS, DISTANCE_METRICS
from probing.tasks.common import (
    Job,
    Part,
    ProbeSettings,
    Step,
    StepResult,
    TaskError,
    TaskKind,
    TaskOutput,
    check_layers,
    compute_step,
    fraction_row,
    parse_options,
)

if TYPE_CHECKING:
    from probing._toml import Table

STRUCTURAL_BASELINES = ("position",)
HEADLINES = {"structural-distance": "uuas", "structural-depth": "root_acc"}
PROBE_KINDS = {"structural-distance": "distance", "structural-depth": "depth"}  # probing.probes.tree_metrics.KINDS
# the probe's keyword arguments an experiment file may set, with the reference implementation's defaults
PROBE_OPTIONS = {"max_epochs": 40, "batch_size": 20, "lr": 1e-3}


def _trees(task: str, part: Part) -> list[np.ndarray]:
    try:
        return store_trees(part.store)
    except InputError as e:
        raise TaskError(f"task {task!r}, {part.dataset}/{part.split}: {e}") from None


def _rows(
    task: str, part: Part, encoder: str, layer: str, scored: Sequence[tuple[str, float, float, float]], seed: int
) -> list[dict]:
    """Result rows from ``(metric, value, ci_low, ci_high)``; an undefined Spearman (no sentence of length
    5 to 50) gives no row, and a percentile CI that misses its own value is extended to it."""
    out = []
    for name, value, lo, hi in scored:
        if not np.isfinite(value):
            continue
        lo, hi = min(lo, value), max(hi, value)
        out.append(make_row(task, part.dataset, part.split, encoder, layer, name, value, lo, hi, seed))
    return out


def _selectivity_row(
    kind: str,
    task: str,
    part: Part,
    encoder: str,
    layer: str,
    pred: list[np.ndarray],
    control_pred: list[np.ndarray],
    trees: list[np.ndarray],
    control_trees: list[np.ndarray],
    punct: list[np.ndarray],
    settings: ProbeSettings,
) -> dict:
    """Headline minus control headline on the same test sentences, with a paired bootstrap over sentences.

    UUAS pools edges: sentence s carries its ``total_s`` gold edges, each scored ``(correct_s -
    control_correct_s) / total_s``, so the mean of any resample of sentences is its pooled difference.
    Both trees span the same non-punctuation words, so ``total_s`` is the same for both.
    """
    ids = part.store.tokens["sentence_id"].to_numpy()[np.asarray(part.store.offsets)[:-1]]
    if kind == "structural-distance":
        correct, total = uuas_counts(pred, trees, punct)
        c_correct, c_total = uuas_counts(control_pred, control_trees, punct)
        if not np.array_equal(total, c_total):
            raise AssertionError("gold and control trees span different numbers of edges")
        keep = total > 0
        if not keep.any():
            raise TaskError(f"task {task!r}, {part.dataset}/{part.split}: no edge between non-punctuation words")
        per_edge = (correct[keep] - c_correct[keep]) / total[keep]
        scores, groups = np.repeat(per_edge, total[keep]), np.repeat(ids[keep], total[keep])
        value = selectivity(correct.sum() / total.sum(), c_correct.sum() / total.sum())
    else:
        hits = root_hits(pred, trees, punct).astype(np.float64)
        c_hits = root_hits(control_pred, control_trees, punct).astype(np.float64)
        scores, groups, value = hits - c_hits, ids, selectivity(hits.mean(), c_hits.mean())
    seed = settings.seeds[0]
    return fraction_row(task, part, encoder, layer, "selectivity", scores, groups, seed, settings.n_boot, value=value)


def structural_probes(
    task: str,
    kind: str,
    encoder: str,
    train: Part,
    dev: Part | None,
    tests: Sequence[Part],
    settings: ProbeSettings,
    *,
    rank: int | None = None,
    progress=None,
    step: Step = compute_step,
    **probe_params: Any,
) -> TaskOutput:
    """Fit a ``kind`` probe (``structural-distance`` or ``structural-depth``) on every layer of one encoder's
    training store (early stopping on ``dev``, else on a seeded tenth of the training sentences) and score
    each test part: ``uuas``/``dspr`` or ``root_acc``/``nspr`` rows, and with ``settings.control`` the
    control task's ``control-*`` rows and the headline's ``selectivity``. ``probe_params`` go to the probe
    (``max_epochs``, ``batch_size``, ``lr``, ...). ``step`` runs each layer's probes as the step
    ``layer <name>`` (:attr:`~probing.tasks.common.Job.step`: kept by the runner, so a run resumes at the layer)."""
    if kind not in HEADLINES:
        raise TaskError(f"task {task!r}: kind must be one of {list(HEADLINES)}, got {kind!r}")
    tests = list(tests)
    if not tests:
        raise TaskError(f"task {task!r}: no test data")
    layer_names = check_layers(task, encoder, [train] + ([dev] if dev else []) + tests)
    seed = settings.seeds[0]
    train_trees = _trees(task, train)
    dev_trees = _trees(task, dev) if dev else None
    test_trees = [_trees(task, p) for p in tests]
    punct = [store_punct(p.store) for p in tests]
    control: dict[str, Any] = {}
    if settings.control:
        lengths = [[len(h) for h in t] for t in [train_trees, dev_trees or [], *test_trees]]
        drawn = [random_trees(n, seed=seed + 1000 * k) for k, n in enumerate(lengths)]
        control = {"train": drawn[0], "dev": drawn[1] if dev else None, "tests": drawn[2:]}
    probe_cls = DistanceProbe if kind == "structural-distance" else DepthProbe
    probe_kind = PROBE_KINDS[kind]
    tell = progress or (lambda _msg: None)
    note = {
        "task": task,
        "encoder": encoder,
        "kind": kind,
        "rank": rank,
        "train": f"{train.dataset}/{train.split}",
        "dev": f"{dev.dataset}/{dev.split}" if dev else "a tenth of train held out",
        "n_train_sentences": len(train_trees),
        **probe_params,
    }
    out = TaskOutput()

    def fit(layer: str, trees, trees_dev):
        probe = probe_cls(rank=rank, seed=seed, **probe_params)
        t0 = time.time()
        if dev is None:
            probe.fit(StoreSentences(train.store, layer), trees)
        else:
            probe.fit(StoreSentences(train.store, layer), trees, StoreSentences(dev.store, layer), trees_dev)
        info = {
            "n_epochs": probe.n_epochs_,
            "best_epoch": probe.best_epoch_,
            "dev_loss": float(probe.dev_loss_),
            "seconds": round(time.time() - t0, 3),
        }
        return probe, info

    def fit_layer(layer: str) -> StepResult:
        layer_out = TaskOutput()
        tell(f"{task} {encoder} layer {layer}")
        probe, info = fit(layer, train_trees, dev_trees)
        preds = [probe.predict(StoreSentences(p.store, layer)) for p in tests]
        layer_out.probes.append({**note, "layer": layer, "seed": seed, "control": False, **info})
        for part, pred, trees, pm in zip(tests, preds, test_trees, punct):
            scored = scores_with_ci(probe_kind, pred, trees, pm, n_boot=settings.n_boot, seed=seed)
            layer_out.rows += _rows(task, part, encoder, layer, scored, seed)
        if not settings.control:
            return layer_out, []
        tell(f"{task} {encoder} layer {layer}: control task")
        c_probe, c_info = fit(layer, control["train"], control["dev"])
        layer_out.probes.append({**note, "layer": layer, "seed": seed, "control": True, **c_info})
        for part, pred, trees, c_trees, pm in zip(tests, preds, test_trees, control["tests"], punct):
            c_pred = c_probe.predict(StoreSentences(part.store, layer))
            scored = scores_with_ci(probe_kind, c_pred, c_trees, pm, n_boot=settings.n_boot, seed=seed)
            control_scored = [(f"control-{m}", v, lo, hi) for m, v, lo, hi in scored]
            layer_out.rows += _rows(task, part, encoder, layer, control_scored, seed)
            layer_out.rows.append(
                _selectivity_row(kind, task, part, encoder, layer, pred, c_pred, trees, c_trees, pm, settings)
            )
        return layer_out, []

    for layer in layer_names:
        out.extend(step(f"layer {layer}", functools.partial(fit_layer, layer))[0])
    return out


def structural_work(settings: ProbeSettings, layer_names: Sequence[str], options: Mapping[str, Any]) -> dict[str, int]:
    """A structural job's units of work per step of :func:`structural_probes` (:attr:`TaskKind.work`): per
    layer one probe fit, and one more for the control task."""
    return {f"layer {n}": 1 + int(settings.control) for n in layer_names}


def structural_baselines(
    task: str, kind: str, tests: Sequence[Part], settings: ProbeSettings, *, which: Sequence[str] = ("position",)
) -> TaskOutput:
    """The linear-position baseline on each test part: rows with encoder ``baseline``, layer ``position``."""
    unknown = sorted(set(which) - set(STRUCTURAL_BASELINES))
    if unknown:
        raise TaskError(f"task {task!r}: unknown structural baseline(s) {unknown}; known: {STRUCTURAL_BASELINES}")
    out = TaskOutput()
    seed = settings.seeds[0]
    if "position" in which:
        for part in tests:
            _trees(task, part)  # a clear error for data without heads
            scored = position_baseline(part.store, PROBE_KINDS[kind], n_boot=settings.n_boot, seed=seed)
            out.rows += _rows(task, part, BASELINE_ENCODER, "position", scored, seed)
    return out


def _run(job: Job, kind: str) -> TaskOutput:
    opts = StructuralOptions(**job.options)
    out = structural_probes(
        job.task,
        kind,
        job.encoder,
        job.train_part(),
        job.dev,
        job.tests,
        job.settings,
        progress=job.progress,
        step=job.step,
        **asdict(opts),
    )
    if job.with_baselines and job.baselines:
        out.extend(structural_baselines(job.task, kind, job.tests, job.settings, which=job.baselines))
    return out


def _dataset_names(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    names = []
    for v in values:
        if isinstance(v, str):
            names.append(v.partition(":")[0])
        elif isinstance(v, dict) and isinstance(v.get("dataset"), str):
            names.append(v["dataset"])
    return names


@dataclass(frozen=True)
class StructuralOptions:
    """A structural kind's own keys: ``rank`` (default: the layer's dim, full rank) and the probe's training
    settings."""

    rank: int | None = field(default=None, metadata={"minimum": 1})
    max_epochs: int = field(default=int(PROBE_OPTIONS["max_epochs"]), metadata={"minimum": 1})
    batch_size: int = field(default=int(PROBE_OPTIONS["batch_size"]), metadata={"minimum": 1})
    lr: float = PROBE_OPTIONS["lr"]


def _parse(t: Table) -> dict[str, Any]:
    """:class:`StructuralOptions`; the data must be CoNLL-U treebanks (checked here, so that no activations
    are extracted for data without trees)."""
    from probing.corpora.registry import DATASETS, ConllDataset

    for key in ("train", "dev", "test"):
        value = t.data.get(key)
        for name in _dataset_names(value):
            if name in DATASETS and not isinstance(DATASETS[name], ConllDataset):
                conll = ", ".join(n for n, d in DATASETS.items() if isinstance(d, ConllDataset))
                raise t.fail(key, f"a dependency treebank with HEAD columns (a CoNLL-U dataset: {conll})", value)
    return asdict(parse_options(StructuralOptions, t))


STRUCTURAL_DISTANCE = TaskKind(
    "structural-distance",
    run=lambda job: _run(job, "structural-distance"),
    metrics=DISTANCE_METRICS,
    headline="uuas",
    parse=_parse,
    options=StructuralOptions,
    baselines=STRUCTURAL_BASELINES,
    beside=("dspr",),
    task_options=("erase",),
    work=structural_work,
)
STRUCTURAL_DEPTH = TaskKind(
    "structural-depth",
    run=lambda job: _run(job, "structural-depth"),
    metrics=DEPTH_METRICS,
    headline="root_acc",
    parse=_parse,
    options=StructuralOptions,
    baselines=STRUCTURAL_BASELINES,
    beside=("nspr",),
    task_options=("erase",),
    work=structural_work,
)
