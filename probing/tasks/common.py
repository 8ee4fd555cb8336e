"""What every probing task shares: settings, the data it reads (stores), a job and its outputs, the
description of a task kind, and scoring helpers."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from probing._toml import parse_options
from probing.errors import InputError, ProbingError
from probing.probes.solver import DEFAULT_CS
from probing.probes.stats import bootstrap_ci
from probing.protocols import StoreLike
from probing.results import Metric, make_row

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from probing._toml import Table
    from probing.wordnet import SenseInventory

SOLVERS = ("lbfgs", "adam")
DEV_EVERY = 10  # without a dev split, every DEV_EVERY-th training sentence is held out for choosing C


class TaskError(ProbingError, ValueError):
    """A task cannot run on the data it was given; the message names the task, encoder and data."""


@dataclass(frozen=True)
class ProbeSettings:
    """Probe hyperparameters and statistics shared by all tasks.

    ``Cs``: inverse L2 strengths tried (chosen on dev accuracy), from the strongest penalty until ``patience``
    values in a row have not beaten the best dev accuracy (None: every C); ``max_iter``/``tol``: the linear
    probe's solver limits (:class:`~probing.probes.linear.LinearProbe`); ``mix_max_iter``: the scalar-mix probe's. ``solver="lbfgs"`` is deterministic, so a
    probe is fit once (its rows carry ``seeds[0]``); ``"adam"`` is fit once per seed. Control tasks are
    drawn once per seed. ``n_boot`` bootstrap replicates over sentences give the 95 % CIs.
    ``control``, ``mix`` and ``concat`` switch those probes on or off; ``mix`` and ``concat`` may also name
    the encoders that get them (e.g. not a random baseline, whose combined layers cost the most and say the
    least; :meth:`for_encoder` resolves the names). ``mix_refits``: refit the scalar mix on that many
    bootstrap resamples of the training sentences, to show its weights' spread.
    """

    Cs: tuple[float, ...] = DEFAULT_CS
    max_iter: int = 1000
    mix_max_iter: int = 1000
    tol: float = 1e-6
    patience: int | None = 2
    solver: str = "lbfgs"
    seeds: tuple[int, ...] = (0, 1, 2)
    n_boot: int = 1000
    control: bool = True
    mix: bool | tuple[str, ...] = True
    concat: bool | tuple[str, ...] = True
    mix_refits: int = 0

    def __post_init__(self) -> None:
        if not self.Cs or any(not (isinstance(c, (int, float)) and c > 0) for c in self.Cs):
            raise InputError(f"Cs must be a non-empty list of positive numbers, got {list(self.Cs)}")
        if self.solver not in SOLVERS:
            raise InputError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise InputError(f"seeds must be a non-empty list of distinct integers, got {list(self.seeds)}")
        for name in ("max_iter", "mix_max_iter", "n_boot"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.patience is not None and self.patience < 1:
            raise InputError(f"patience must be None or a positive integer, got {self.patience}")
        if self.mix_refits < 0:
            raise InputError(f"mix_refits must be 0 or a positive integer, got {self.mix_refits}")

    def for_encoder(self, encoder: str) -> ProbeSettings:
        """The settings one encoder's probes run with: ``mix`` and ``concat`` given as encoder names become
        true or false for ``encoder``."""
        return replace(
            self,
            mix=self.mix if isinstance(self.mix, bool) else encoder in self.mix,
            concat=self.concat if isinstance(self.concat, bool) else encoder in self.concat,
        )

    @property
    def probe_seeds(self) -> tuple[int, ...]:
        """Seeds a trained probe is fit with: all of them for Adam, the first for deterministic L-BFGS."""
        return self.seeds if self.solver == "adam" else self.seeds[:1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "Cs": list(self.Cs),
            "max_iter": self.max_iter,
            "mix_max_iter": self.mix_max_iter,
            "tol": self.tol,
            "patience": self.patience,
            "solver": self.solver,
            "seeds": list(self.seeds),
            "n_boot": self.n_boot,
            "control": self.control,
            "mix": self.mix if isinstance(self.mix, bool) else list(self.mix),
            "concat": self.concat if isinstance(self.concat, bool) else list(self.concat),
            **({"mix_refits": self.mix_refits} if self.mix_refits else {}),
        }


@dataclass(frozen=True)
class Part:
    """One split of one dataset as seen by one encoder: the store holding its activations."""

    dataset: str
    split: str
    store: StoreLike


@dataclass
class TaskOutput:
    """Rows for the results table, notes on each probe, and the rows of side tables by name (each registered
    with its columns in :data:`probing.results.schema.SIDE_TABLES`: the scalar-mix weights, per-tag accuracies,
    learning curves and data-efficiency rows of the built-in kinds and options, and the task options' own)."""

    rows: list[dict] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)
    tables: dict[str, list[dict]] = field(default_factory=dict)

    def table(self, name: str) -> list[dict]:
        """The rows of side table ``name``, to extend (an empty list the first time)."""
        return self.tables.setdefault(name, [])

    def extend(self, other: TaskOutput) -> TaskOutput:
        self.rows += other.rows
        self.probes += other.probes
        for name, rows in other.tables.items():
            self.table(name).extend(rows)
        return self


StepResult = tuple[TaskOutput, list[np.ndarray]]
"""One step of a job: its rows, and the arrays later steps of the job read (e.g. a layer's per-item
correctness, which the best-layer margin compares)."""
Step = Callable[[str, Callable[[], StepResult]], StepResult]


def compute_step(name: str, compute: Callable[[], StepResult]) -> StepResult:
    """A step computed in place (a :class:`Job` outside the runner: nothing kept, nothing counted)."""
    return compute()


@dataclass
class Job:
    """One encoder's work on one task: the stores it reads, the kind's options and the shared settings.

    ``with_baselines`` is true for the task's first encoder only, so baselines (which read only the token
    table) are computed once per task; ``inventory`` is the resolved WordNet for kinds that use one;
    ``progress`` takes a short description before each probe. A kind that reads the model itself
    (``TaskKind.model_identity``, e.g. ``minimal-pairs``) gets no stores (``train`` None, ``tests`` empty)
    and the encoder object as ``model``. ``step(name, compute)`` runs one named part of the job (a layer's
    probes): the runner keeps its result under the job's key, so an interrupted job resumes after its last
    finished step, and counts its units of work (:attr:`TaskKind.work`). A step must depend only on the job,
    and ``compute`` must return JSON-able rows.
    """

    task: str
    encoder: str
    train: Part | None
    dev: Part | None
    tests: list[Part]
    settings: ProbeSettings
    options: Mapping[str, Any] = field(default_factory=dict)
    baselines: tuple[str, ...] = ()
    with_baselines: bool = True
    inventory: SenseInventory | None = None
    progress: Callable[[str], None] = lambda _msg: None
    model: Any = None
    step: Step = compute_step

    def train_part(self) -> Part:
        """The training part of a kind that reads stores (every kind without ``model_identity``)."""
        if self.train is None:
            raise TaskError(f"task {self.task!r}, encoder {self.encoder!r}: the job has no training data")
        return self.train


Work = Callable[[ProbeSettings, Sequence[str], Mapping[str, Any]], Mapping[str, int]]
"""A kind's units of work per job: (settings, layer names, options) -> {step name: units}."""
FigureHook = Callable[[pd.DataFrame, str, str, str], Mapping[str, "Figure"]]


@dataclass(frozen=True)
class TaskKind:
    """A kind of task (``kind = "..."`` in an experiment's ``[[tasks]]`` table): everything kind-specific.

    ``run`` turns a :class:`Job` into rows; ``options``, a dataclass, types the kind's own keys: without
    a ``parse`` of its own, the kind reads them from its checked TOML table with :func:`parse_options`
    (``job.options`` is then that dataclass's ``asdict``; ``run`` may rebuild it with ``options(**job.options)``);
    ``parse`` reads them by hand and returns plain values. Either way they are part of the job's cache key. ``metrics`` are the
    metrics the kind emits (registered with the kind) and ``headline`` names the one among them that the
    summary, the best layer, the report and the figures use; its ``higher_is_better`` decides which layer is
    best. ``beside``: metrics drawn beside the headline in the kind's layer figure (e.g. a structural
    probe's Spearman correlation); ``overview``: the kind's first task is a panel of the report's overview
    figure; ``figures(results, task, dataset, split) -> {stem: Figure}``: the kind's own figures, which the
    report draws after the layer figure of each of its (task, dataset, split) groups (``layer_figures=False``:
    without the layer figure, for kinds whose groups are many, e.g. BLiMP's 80). ``model_identity(task,
    encoder, options)``: the kind reads the encoder's model itself, not stores: its table has no
    train/dev/test keys, its job gets the encoder as ``job.model``, and this returns the JSON-able identity of
    everything the job reads (model, LM head, data, their code), which keys its cached job. ``baselines`` are the
    baseline names the kind knows (all run by default); ``uses_wordnet`` adds the ``wordnet`` key and
    resolves the inventory (whose fingerprint then keys cached jobs); ``allows_dev`` is false for kinds with
    no hyperparameter to choose. ``work(settings, layer_names, options) -> {step: units}`` states a job's
    units of work (fits of one layer's probe) per :attr:`Job.step` before it runs: the run's progress and
    ETA count them; without it a job is one unit. ``task_options`` names the registered
    :class:`~probing.tasks.options.TaskOption` s the kind offers (their keys are read from its tables, their
    values are ``job.options[name]``). A kind without exactly one headline among its metrics is refused when it
    is made.
    """

    name: str
    run: Callable[[Job], TaskOutput]
    metrics: tuple[Metric, ...]
    headline: str
    parse: Callable[[Table], dict[str, Any]] | None = None
    options: type | None = None
    baselines: tuple[str, ...] = ()
    uses_wordnet: bool = False
    allows_dev: bool = True
    beside: tuple[str, ...] = ()
    overview: bool = False
    figures: FigureHook | None = None
    layer_figures: bool = True
    model_identity: Callable[[str, Any, Mapping[str, Any]], Any] | None = None
    work: Work | None = None
    task_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise InputError(f"task kind {self.name!r}: metrics listed twice: {sorted(names)}")
        if names.count(self.headline) != 1:
            raise InputError(
                f"task kind {self.name!r} needs exactly one headline among its metrics {names}, "
                f"got headline {self.headline!r}"
            )
        unknown = [b for b in self.beside if b not in names]
        if unknown:
            raise InputError(f"task kind {self.name!r}: beside names metrics it does not emit: {unknown}")
        if self.options is not None and not is_dataclass(self.options):
            raise InputError(f"task kind {self.name!r}: options must be a dataclass, got {self.options!r}")

    def read_options(self, table: Table) -> dict[str, Any]:
        """The kind's own keys from its ``[[tasks]]`` table: ``parse(table)``, else the ``options``
        dataclass read by :func:`parse_options` (as a dict), else none."""
        if self.parse is not None:
            return self.parse(table)
        if self.options is not None:
            return asdict(parse_options(self.options, table))
        return {}

    @property
    def headline_metric(self) -> Metric:
        return next(m for m in self.metrics if m.name == self.headline)


def fraction_row(
    task: str,
    part: Part,
    encoder: str,
    layer: str,
    metric: str,
    scores: np.ndarray,
    groups: np.ndarray,
    seed: int,
    n_boot: int,
    value: float | None = None,
) -> dict:
    """A result row whose value is the mean of per-item ``scores`` (or ``value``, which must equal it up to
    rounding), with a 95 % percentile cluster-bootstrap CI over ``groups`` (sentence ids).

    The results contract needs ``ci_low <= value <= ci_high``; a percentile interval can miss its own point
    estimate by float rounding (every resample equal) or, with a few very unequal sentences, by more. The
    interval is then extended to the value.

    Parameters
    ----------
    task, part, encoder, layer, metric : the row's identity (``part`` gives its dataset and split).
    scores : ndarray (n,)
        One score per test item (0/1 correctness or any per-item score); read as float64.
    groups : ndarray (n,)
        The sentence id of each item: the clusters the bootstrap resamples.
    seed : the row's ``seed`` column (the bootstrap itself always uses seed 0).
    n_boot : bootstrap replicates.
    value : float, optional
        The row's value; ``None``: the mean of ``scores``.

    Returns
    -------
    dict
        One results row (:func:`probing.results.make_row`).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        raise TaskError(f"task {task!r}, {part.dataset}/{part.split}: no items to score")
    mean = float(scores.mean())
    value = mean if value is None else float(value)
    if abs(value - mean) > 1e-9:
        raise AssertionError(f"row value {value} differs from the mean of its item scores {mean}")
    lo, hi = bootstrap_ci(scores, groups, n_boot=n_boot, seed=0)
    lo, hi = min(lo, value), max(hi, value)
    return make_row(
        task=task,
        dataset=part.dataset,
        split=part.split,
        encoder=encoder,
        layer=layer,
        metric=metric,
        value=value,
        ci_low=lo,
        ci_high=hi,
        seed=seed,
    )


def margin_rows(
    task: str,
    encoder: str,
    per_layer: Mapping[str, Sequence[tuple[Part, np.ndarray, np.ndarray]]],
    seed: int,
    n_boot: int,
    higher_is_better: bool = True,
) -> list[dict]:
    """For each test part, the best single layer's margin over the next best (metric ``best-layer-margin``,
    layer = the best layer): the mean of the paired per-item improvements (best minus next; next minus best
    when lower scores are better), with a cluster-bootstrap CI over sentences. A CI above zero says the best
    layer is significantly better than the runner-up.

    ``per_layer`` maps each single layer to ``(part, per-item scores, sentence ids)`` per test part, in the
    same order for every layer. Ties go to the earlier layer.

    Parameters
    ----------
    task, encoder : the rows' task and encoder.
    per_layer : mapping of layer name to a sequence of (Part, ndarray (n_p,), ndarray (n_p,))
        Per test part: the part, the per-item scores and the items' sentence ids; ``n_p`` items in part p, the
        same items in every layer.
    seed, n_boot : the rows' ``seed`` column and the bootstrap replicates.
    higher_is_better : whether a higher score is better (``False`` for losses, distances).

    Returns
    -------
    list of dict
        One ``best-layer-margin`` row per test part; empty with fewer than two layers.
    """
    names = list(per_layer)
    if len(names) < 2:
        return []
    rows = []
    for i in range(len(per_layer[names[0]])):
        sign = 1.0 if higher_is_better else -1.0
        means = [(sign * float(np.mean(per_layer[n][i][1])), -k, n) for k, n in enumerate(names)]
        (_, _, best), (_, _, nxt) = sorted(means, reverse=True)[:2]
        part, best_scores, groups = per_layer[best][i]
        diff = np.asarray(best_scores, dtype=np.float64) - np.asarray(per_layer[nxt][i][1], dtype=np.float64)
        diff = diff if higher_is_better else -diff
        rows.append(fraction_row(task, part, encoder, best, "best-layer-margin", diff, groups, seed, n_boot))
    return rows


def per_tag_rows(
    task: str, part: Part, encoder: str, layer: str, gold: np.ndarray, correct: np.ndarray, seed: int
) -> list[dict]:
    """Accuracy of one probe on each gold tag: ``task, dataset, split, encoder, layer, tag, n, accuracy, seed``.

    Parameters
    ----------
    task, part, encoder, layer, seed : the rows' identity (``part`` gives their dataset and split).
    gold : ndarray (n,)
        The gold tag of each test item.
    correct : ndarray (n,) of bool
        Whether the probe's prediction for each item is right (0/1 also works).

    Returns
    -------
    list of dict
        One row per distinct gold tag, tags in sorted order.
    """
    df = pd.DataFrame({"tag": gold, "correct": correct.astype(np.float64)})
    g = df.groupby("tag", sort=True)["correct"].agg(["size", "mean"])
    return [
        {
            "task": task,
            "dataset": part.dataset,
            "split": part.split,
            "encoder": encoder,
            "layer": layer,
            "tag": str(tag),
            "n": int(r["size"]),
            "accuracy": float(r["mean"]),
            "seed": seed,
        }
        for tag, r in g.iterrows()
    ]


def sentence_groups(store: StoreLike, rows: np.ndarray) -> np.ndarray:
    """The sentence id of each of ``rows`` (the clusters of the bootstrap).

    Parameters
    ----------
    store : the store whose token table holds ``sentence_id``.
    rows : ndarray (m,) of int
        Store rows (token indices).

    Returns
    -------
    ndarray (m,)
        The ``sentence_id`` of each row (the token table's values, str).
    """
    return store.tokens["sentence_id"].to_numpy()[rows]


def holdout_dev(store: StoreLike, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split training ``rows`` into (train, dev): every ``DEV_EVERY``-th sentence (index 9, 19, ...) is dev.

    With fewer than ``DEV_EVERY`` sentences the last sentence is dev, so there is always some dev data.

    Parameters
    ----------
    store : the store that ``rows`` index; its ``offsets`` (n_sentences + 1,) give each row's sentence index.
    rows : ndarray (m,) of int
        Training store rows (token indices).

    Returns
    -------
    train : ndarray (m_train,) of int
        The rows outside the dev sentences, in their order in ``rows``.
    dev : ndarray (m - m_train,) of int
        The rows in the dev sentences, in their order in ``rows``.
    """
    offsets = np.asarray(store.offsets)
    sentence = np.searchsorted(offsets, rows, side="right") - 1
    n_sent = len(offsets) - 1
    is_dev = (sentence % DEV_EVERY == DEV_EVERY - 1) if n_sent >= DEV_EVERY else sentence == n_sent - 1
    train, dev = rows[~is_dev], rows[is_dev]
    if len(train) == 0 or len(dev) == 0:
        raise TaskError(f"{store}: too little training data to hold out a dev set ({len(rows)} items)")
    return train, dev


def quiet_fit(fit, *args, **kwargs) -> tuple[Any, bool]:
    """Call ``fit`` and return (its result, converged); convergence warnings are recorded, not printed."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        out = fit(*args, **kwargs)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    for w in caught:
        if not issubclass(w.category, ConvergenceWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out, converged


def layer_rows(store: StoreLike, layer: str, rows: np.ndarray) -> np.ndarray:
    """Layer ``layer`` at ``rows`` as an fp16 array; the memmap itself when ``rows`` is every row in order.

    Parameters
    ----------
    store : the store to read.
    layer : a layer name of the store, or a half name (``"1f"``).
    rows : ndarray (m,) of int
        Store rows (token indices).

    Returns
    -------
    ndarray (m, dim), float16
        Row i is token ``rows[i]``; ``(m, dim // 2)`` for a half name. A read-only memmap when ``rows`` is
        ``0, 1, ..., len(store) - 1``, else an array in memory.
    """
    if len(rows) == len(store) and (len(rows) == 0 or (rows[0] == 0 and np.all(np.diff(rows) == 1))):
        return store.layer(layer)
    return store.layer(layer, rows=rows)


def check_layers(task: str, encoder: str, parts: Sequence[Part]) -> list[str]:
    """The layer names shared by all ``parts`` (one encoder's stores); TaskError if they differ."""
    names = list(parts[0].store.layer_names)
    for p in parts[1:]:
        if list(p.store.layer_names) != names:
            raise TaskError(
                f"task {task!r}, encoder {encoder!r}: {p.dataset}/{p.split} has layers "
                f"{list(p.store.layer_names)}, {parts[0].dataset}/{parts[0].split} has {names}"
            )
    return names
