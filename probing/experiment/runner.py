"""Running an experiment: activations extracted once into the store (cached), every task's jobs run through
its registered kind (finished jobs cached), and the results table with its side tables written.

Data flows corpus -> encoder -> store -> probes -> results: a second run is a cache hit everywhere and loads
no model.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import html
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from probing._toml import ExperimentError
from probing.encoders import Encoder
from probing.experiment.jobs import JOBS_DIR, JobCache, kind_identity
from probing.experiment.spec import DataRef, Experiment, TaskSpec
from probing.results import (
    DATA_EFFICIENCY_COLUMNS,
    DATA_EFFICIENCY_NAME,
    INTERVENTION,
    LEARNING_CURVE_COLUMNS,
    LEARNING_CURVE_NAME,
    MIX_COLUMNS,
    PER_TAG_COLUMNS,
    RESULT_COLUMNS,
    SIMILARITY_COLUMNS,
    SIMILARITY_NAME,
    metric,
    sort_layers,
    write_results,
    write_side_table,
)
from probing.results import provenance as run_provenance
from probing.results.efficiency import data_efficiency
from probing.store.reader import Store
from probing.tasks import TASK_KINDS, Job, Part, TaskOutput, headline_metrics


@dataclass
class Results:
    """What :func:`run_experiment` produced: the tidy results table, the scalar-mix weights, per-tag
    accuracies, provenance, the stores it read (see :meth:`store`), the layer-similarity table of the
    ``[similarity]`` table (columns ``SIMILARITY_COLUMNS``; empty when the experiment has none), and the
    learning curves and data-efficiency rows of tasks with ``learning_curve`` or ``mdl`` (``learning_curve.csv``,
    ``data_efficiency.csv``; empty without)."""

    results: pd.DataFrame
    mix_weights: pd.DataFrame
    per_tag: pd.DataFrame
    provenance: dict
    stores: dict[tuple[str, str, str], Store]
    out_dir: Path
    similarity: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SIMILARITY_COLUMNS))
    learning_curve: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LEARNING_CURVE_COLUMNS))
    data_efficiency: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DATA_EFFICIENCY_COLUMNS))

    def store(self, encoder: str, dataset: str, split: str) -> Store:
        """The store of ``encoder``'s activations on ``dataset``/``split`` that the run read."""
        try:
            return self.stores[(encoder, dataset, split)]
        except KeyError:
            known = ", ".join(f"({e!r}, {d!r}, {s!r})" for e, d, s in self.stores)
            raise KeyError(f"no store for ({encoder!r}, {dataset!r}, {split!r}); the run read: {known}") from None

    @property
    def headlines(self) -> dict[str, str]:
        """The headline metric of each task (from its kind, as recorded in provenance)."""
        return headline_metrics(self.results, self.provenance.get("headlines"))

    def summary(self) -> pd.DataFrame:
        """Headline score (per task kind: F1 for WSD, accuracy for tagging, ...) in percent where the metric
        is a fraction, mean over seeds: one row per task, dataset, split and encoder, one column per layer
        (baselines under their own names)."""
        df = self.results
        if df.empty:
            return pd.DataFrame()
        heads = self.headlines
        headline = df[df["metric"] == df["task"].map(heads)]
        keys = ["task", "dataset", "split", "encoder", "layer"]
        if (df[INTERVENTION] != "").any():  # erase runs: one row per intervention beside the unerased one
            keys.insert(4, INTERVENTION)
        table = headline.groupby(keys, sort=False)["value"].mean()
        scale = np.array([metric(heads[t]).scale for t in table.index.get_level_values("task")])
        wide = (table * scale).round(1).unstack("layer")
        return wide[sort_layers(wide.columns)]

    def __repr__(self) -> str:
        head = (
            f"Results({len(self.results)} rows, {self.results['task'].nunique()} tasks, "
            f"{len(self.stores)} stores, written to {str(self.out_dir)!r})"
        )
        return f"{head}\n{self.summary().to_string(na_rep='')}"

    def _repr_html_(self) -> str:
        table = self.summary().to_html(na_rep="", float_format="{:.1f}".format)
        return (
            f"<p><b>Probing results</b>: {len(self.results)} rows in {html.escape(str(self.out_dir))} "
            f"(scores in percent, mean over seeds)</p>{table}"
        )


class _Run:
    """State of one run: encoders (lazy), corpora, stores, timings and what was skipped."""

    def __init__(self, exp: Experiment, progress: bool):
        self.exp, self.progress = exp, progress
        self.encoders: dict[str, Encoder] = {spec.name: spec.build(exp.cache_dir) for spec in exp.encoders}
        self.corpora: dict[DataRef, Any] = {}
        self.parts: dict[tuple[str, DataRef], Part] = {}
        self.stores: dict[tuple[str, DataRef], Store] = {}
        self.store_info: dict[str, dict] = {}
        self.skipped: list[dict] = []
        self.warnings: list[str] = []
        self.timings: dict[str, float] = {}
        self.overlaps_checked: set[tuple[str, str, str, str]] = set()

    def log(self, msg: str) -> None:
        if self.progress:
            print(msg, file=sys.stderr, flush=True)

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)
            warnings.warn(msg, UserWarning, stacklevel=3)

    def corpus(self, ref: DataRef):
        if ref not in self.corpora:
            self.corpora[ref] = ref.load(self.exp.max_sentences)
        return self.corpora[ref]

    def part(self, encoder: str, ref: DataRef) -> Part:
        key = (encoder, ref)
        if key not in self.parts:
            from probing.store import extract

            t0 = time.time()
            self.log(f"activations: {encoder} on {ref}")
            store = extract(
                self.encoders[encoder], self.corpus(ref), cache_dir=self.exp.cache_dir, progress=self.progress
            )
            self.add_store(encoder, ref, store, time.time() - t0)
        return self.parts[key]

    def add_store(self, encoder: str, ref: DataRef, store: Store, elapsed: float, **info: Any) -> None:
        self.store_info[f"{encoder}/{ref}"] = {
            "path": str(store.path),
            "key": store.key,
            "cache_hit": bool(store.cache_hit),
            "seconds": round(elapsed, 3),
            "n_sentences": store.n_sentences,
            "n_tokens": len(store),
            "corpus_fingerprint": store.manifest.get("corpus", {}).get("fingerprint"),
            **info,
        }
        self.timings[f"extract {encoder}/{ref}"] = round(elapsed, 3)
        self.parts[(encoder, ref)] = Part(ref.dataset, ref.split, store)
        self.stores[(encoder, ref)] = store

    def extract_on_ray(
        self, needed: list[tuple[str, DataRef]], address: str, shards: int | None, device: str | None
    ) -> None:
        """Extract the ``needed`` (encoder, data) stores as Ray tasks, up to ``shards`` per store (default:
        the CPUs Ray reports), all submitted at once and merged on the driver (:func:`extract_ray_many`).
        Stores in the cache start no task; data that is not found is left to :meth:`tests` to report."""
        from probing.corpora.registry import DatasetNotFound
        from probing.experiment.extract import gpus_for, init_ray
        from probing.store.distributed import extract_ray_many

        todo = []
        for enc, ref in dict.fromkeys(needed):
            try:
                self.corpus(ref)
            except DatasetNotFound:
                continue
            todo.append((enc, ref))
        if not todo:
            return
        init_ray(address)
        import ray

        n = shards if shards is not None else max(1, int(ray.cluster_resources().get("CPU", 2)))
        specs = {spec.name: spec for spec in self.exp.encoders}
        self.log(f"activations: {len(todo)} stores on Ray ({address}), up to {n} shard tasks each")
        t0 = time.time()
        stores = extract_ray_many(
            [
                (
                    functools.partial(specs[enc].build, self.exp.cache_dir),
                    functools.partial(ref.load, self.exp.max_sentences),
                    n,
                )
                for enc, ref in todo
            ],
            cache_dir=self.exp.cache_dir,
            num_gpus=gpus_for(device),
            device=device,
            progress=self.progress,
        )
        elapsed = time.time() - t0
        for (enc, ref), store in zip(todo, stores):
            written = 0 if store.cache_hit else len(store.manifest.get("merged_from") or [])
            self.add_store(enc, ref, store, elapsed, ray_shards=written)

    def tests(self, task: TaskSpec, encoder: str) -> list[Part]:
        """The task's test parts; with ``skip_missing``, sets that are not found are skipped (once noted)."""
        from probing.corpora.registry import DatasetNotFound

        parts = []
        for ref in task.test:
            try:
                parts.append(self.part(encoder, ref))
            except DatasetNotFound as e:
                if not task.skip_missing:
                    raise
                note = {"task": task.name, "data": str(ref), "reason": str(e).splitlines()[0]}
                if note not in self.skipped:
                    self.skipped.append(note)
                    self.log(f"skipped {ref} for task {task.name}: not found")
        return parts

    def check_overlap(self, train: Part, dev: Part | None, tests: list[Part]) -> None:
        """State how many dev and test sentences also occur in training, once per pair of splits: a warning
        where that can matter (:data:`probing.experiment.overlap.WARN_SHARE` or more, or the same split), a
        log line otherwise."""
        from probing.experiment.overlap import new_overlaps

        evaluated = ([("dev", dev)] if dev is not None else []) + [("test", p) for p in tests]
        for found in new_overlaps(train, evaluated, self.overlaps_checked):
            if found.matters:
                self.warn(found.describe())
            elif found.shared:
                self.log(found.describe())


def probe_warnings(probes: list[dict], Cs: tuple[float, ...]) -> list[str]:
    """Plain-language warnings about the fitted probes' notes: a C chosen at an end of a grid of several
    values (the best C may lie beyond it: extend the grid that way), and fits that stopped at max_iter."""
    out = []
    edges = {min(Cs): "smallest", max(Cs): "largest"} if len(Cs) > 1 else {}
    at_edge = [p for p in probes if p.get("C") in edges]
    for side in ("smallest", "largest"):
        hit = [p for p in at_edge if edges[p["C"]] == side]
        if hit:
            what = ", ".join(f"{p['task']}/{p['encoder']}/{p['layer']}" for p in hit[:6])
            more = f" and {len(hit) - 6} more" if len(hit) > 6 else ""
            direction = "smaller" if side == "smallest" else "larger"
            out.append(
                f"{len(hit)} probe(s) chose the {side} C of the grid {list(Cs)} ({what}{more}): the best C may be "
                f"{direction}; extend [probe] C that way (results.json lists each probe's dev accuracy per C)"
            )
    stuck = [p for p in probes if p.get("converged") is False]
    if stuck:
        what = ", ".join(f"{p['task']}/{p['encoder']}/{p['layer']}" for p in stuck[:6])
        more = f" and {len(stuck) - 6} more" if len(stuck) > 6 else ""
        out.append(
            f"{len(stuck)} probe fit(s) stopped at max_iter before converging ({what}{more}): raise "
            "[probe] max_iter (or mix_max_iter for the scalar mix) or loosen tol"
        )
    return out


def _job_inputs(exp: Experiment, task: TaskSpec, enc: str, parts: list[Part], with_baselines: bool, inventory) -> dict:
    """Everything a job reads: a finished job is reused only if all of it matches."""
    return {
        "task": task.to_dict(),
        "encoder": enc,
        "baselines": with_baselines,
        "stores": [p.store.key for p in parts],
        "settings": exp.probe.for_encoder(enc).to_dict(),
        "wordnet": None if inventory is None else inventory.fingerprint(),
        "kind_code": kind_identity(TASK_KINDS[task.kind]),
    }


def _model_job(
    exp: Experiment, task: TaskSpec, enc: str, first: bool, run: _Run, cache: JobCache, cached: list[str], tell
) -> TaskOutput:
    """The output of a job whose kind reads the encoder's model itself (``TaskKind.model_identity``), from the
    job cache when everything it reads (model, LM head, data, code: the kind's ``model_identity``) is unchanged.
    Such jobs run in this process (also with the Ray backend): they read no stores to distribute."""
    kind = TASK_KINDS[task.kind]
    assert kind.model_identity is not None
    encoder = run.encoders[enc]
    inputs = {
        "task": task.to_dict(),
        "encoder": enc,
        "baselines": first,
        "model": kind.model_identity(task.name, encoder, task.options),
        "settings": exp.probe.for_encoder(enc).to_dict(),
        "kind_code": kind_identity(kind),
    }
    key = cache.key(inputs)
    label = f"{task.name}/{enc}"
    out = cache.get(key)
    if out is not None:
        cached.append(label)
        return out
    job = Job(
        task=task.name,
        encoder=enc,
        train=None,
        dev=None,
        tests=[],
        settings=exp.probe.for_encoder(enc),
        options=task.options,
        with_baselines=first,
        progress=tell,
        model=encoder,
    )
    out, seconds = _run_job(kind, job)
    run.timings[f"task {label}"] = round(seconds, 3)
    cache.put(key, out)
    return out


def _erased_variants(
    task: TaskSpec, train: Part, dev: Part | None, tests: list[Part]
) -> list[tuple[str, tuple[Part, Part | None, list[Part]]]]:
    """The task's ``erase`` runs: (intervention, its parts seen through erasers fitted on the training store)."""
    from probing.erasure import ErasedStore, fit_layer_erasers

    out = []
    for spec in task.erase:
        fitted: dict | None = None
        for tag in spec.interventions():
            method = tag.rsplit(":", 1)[1]
            ranks: dict[str, int] | None = None if fitted is None else {k: e.rank_ for k, e in fitted.items()}
            erasers = fit_layer_erasers(train.store, spec.label, method, ranks=ranks)
            fitted = fitted or erasers

            def seen(p: Part, erasers: dict = erasers, tag: str = tag) -> Part:
                return Part(p.dataset, p.split, ErasedStore(p.store, erasers, tag))

            out.append((tag, (seen(train), None if dev is None else seen(dev), [seen(p) for p in tests])))
    return out


def _tagged(out: TaskOutput, intervention: str, erased: bool) -> TaskOutput:
    """``out``'s rows with their ``intervention``; an erase run keeps no mix weights or per-tag rows (those side
    tables have no intervention column, and its rows share the encoder name of the unerased ones)."""
    if not intervention:
        return out
    rows = [{**r, "intervention": intervention} for r in out.rows]
    return TaskOutput(rows=rows, probes=out.probes) if erased else dataclasses.replace(out, rows=rows)


def run_experiment(
    exp: Experiment,
    out_dir: str | os.PathLike,
    *,
    progress: bool = True,
    device: str | None = None,
    ray: str | None = None,
    shards: int | None = None,
) -> Results:
    """Extract activations (cached), run every task's probes and baselines, and write into ``out_dir``:
    ``results.csv`` + ``results.json`` (with provenance), ``mix_weights.csv`` and ``per_tag.csv``, and with a
    ``[similarity]`` table ``similarity.csv`` (every layer pair of its encoders on its dataset's tokens,
    computed after the tasks from the same cached stores).

    Each finished (task, encoder) job is kept in the cache (``<cache>/jobs``), keyed by everything it read
    (stores, task, settings, WordNet inventory, probe code): an interrupted run resumes from its finished
    jobs, and a repeated run only reassembles the tables. Provenance lists the reused jobs under
    ``cached_jobs``, each task's headline metric under ``headlines`` and warnings (5 % or more of a dev or
    test split's sentences also in training, once per pair of splits; a C chosen at an end of the grid, a fit
    that hit max_iter) under ``warnings``; they are also issued as ``UserWarning``s.

    ``device`` runs every model and probe there (:func:`probing.devices.use_device`; default CUDA when
    available, else CPU); provenance records it under ``device``. It is in no cache key: results on every
    device agree within DESIGN.md's tolerance.

    ``ray`` (a Ray address, or ``"local"`` for a Ray started for the run), or ``[run] backend = "ray"`` in the
    file (with ``address``), first extracts the stores that are not cached as Ray tasks, up to ``shards`` per
    store (default ``[run] shards``, else the CPUs Ray reports;
    :func:`probing.store.distributed.extract_ray_many`), then runs the probe jobs that are not cached as Ray
    tasks, in parallel. A probe job runs the local code with the same seeds and stores, on one thread (Ray's
    default), so its rows are the local run's as far as the fits do not depend on the thread count; a store
    extracted in shards batches sentences differently, so its values match a single-process store within
    one fp16 step. Provenance records per store ``ray_shards`` (the shard
    tasks that wrote it in this run, 0 for a cache hit; its ``seconds`` are those of the whole Ray
    extraction). Shards and finished jobs are cached as they finish, so a killed driver resumes; Ray retries a task
    whose worker died. On a cluster the cache must be on a filesystem every node mounts at the same path.

    Examples
    --------
    A one-task experiment given as a dict (the structure of an experiment file) on 40 sentences per split:

    >>> import os, tempfile
    >>> from probing.experiment import parse_experiment
    >>> exp = parse_experiment(
    ...     {
    ...         "experiment": {"name": "tiny", "max_sentences": 40, "bootstrap": 10},
    ...         "probe": {"C": [1.0], "max_iter": 500, "control": False, "mix": False, "concat": False},
    ...         "encoders": [{"name": "elmo", "kind": "elmo"}],
    ...         "tasks": [{"name": "upos", "kind": "tagging", "label": "upos", "train": "demo-ud:train", "test": ["demo-ud:test"]}],
    ...     },
    ...     source="example",
    ... )
    >>> out = tempfile.mkdtemp()
    >>> results = run_experiment(exp, out, progress=False)
    >>> sorted(os.listdir(out))
    ['mix_weights.csv', 'per_tag.csv', 'results.csv', 'results.json']
    >>> results.results.query("encoder == 'elmo' and metric == 'accuracy'").layer.tolist()
    ['0', '1', '2']
    """
    from probing.devices import use_device

    address = ray if ray is not None else exp.ray_address if exp.backend == "ray" else None
    if shards is not None:
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise ExperimentError(f"shards must be a positive integer, got {shards!r}")
        if address is None:
            raise ExperimentError(
                'shards needs the Ray backend: probing run --ray [ADDRESS] --shards N, or [run] backend = "ray"'
            )
    with use_device(device):
        return _run_experiment(exp, out_dir, progress, address, shards or exp.shards, device)


def _quiet(_msg: str) -> None:
    """A job's progress callback inside a Ray task (the driver shows progress per finished job)."""


def _run_job(kind: Any, job: Job) -> tuple[TaskOutput, float]:
    """One probe job, timed."""
    t0 = time.time()
    return kind.run(job), time.time() - t0


def _run_ray_job(kind: Any, job: Job, wordnet: str | None, fingerprint: str | None) -> tuple[TaskOutput, float]:
    """The body of a Ray task: a job that uses WordNet gets the worker's own inventory ``wordnet`` (NLTK's
    reader cannot be pickled), which must have the ``fingerprint`` the driver keyed the job with."""
    if wordnet is not None:
        from probing.wordnet import inventory

        inv = inventory(wordnet)
        if inv.fingerprint() != fingerprint:
            raise ExperimentError(
                f"task {job.task!r}: WordNet {wordnet!r} on this Ray worker is {type(inv).__name__} with "
                f"fingerprint {inv.fingerprint()[:12]}, the driver's is {str(fingerprint)[:12]}: give every node "
                'the same NLTK WordNet data (NLTK_DATA), or set the task\'s wordnet = "bundled"'
            )
        job = dataclasses.replace(job, inventory=inv)
    return _run_job(kind, job)


def _run_on_ray(address: str, pending: list[tuple[Any, Job, str | None, str | None]], done: Any) -> None:
    """Run ``pending`` (kind, job, wordnet, its fingerprint) as Ray tasks (:func:`_run_ray_job`);
    ``done(index, output, seconds)`` as each returns."""
    from probing.experiment.extract import init_ray

    init_ray(address)
    import ray

    task = ray.remote(_run_ray_job).options(max_retries=2)
    refs = {task.remote(*args): i for i, args in enumerate(pending)}
    waiting = list(refs)
    while waiting:
        ready, waiting = ray.wait(waiting, num_returns=1)
        out, seconds = ray.get(ready[0])
        done(refs[ready[0]], out, seconds)


def _run_experiment(
    exp: Experiment,
    out_dir: str | os.PathLike,
    progress: bool,
    ray_address: str | None,
    shards: int | None,
    device: str | None,
) -> Results:
    from tqdm.auto import tqdm

    from probing.devices import describe, resolve_device
    from probing.paths import cache_dir

    t_start = time.time()
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExperimentError(f"output folder {out_dir} exists and is not a folder")
    run = _Run(exp, progress)
    total = TaskOutput()
    jobs_root = (exp.cache_dir or cache_dir()) / JOBS_DIR
    for folder in (jobs_root.parent, jobs_root):
        if folder.exists() and not folder.is_dir():
            raise ExperimentError(f"cache folder {folder} exists and is not a folder (point cache_dir elsewhere)")
    cache = JobCache(jobs_root)
    cached: list[str] = []
    inventories: dict[str, Any] = {}
    jobs = [(t, e, i == 0) for t in exp.tasks for i, e in enumerate(t.encoders or run.encoders)]
    if ray_address is not None:
        needed = [(e, r) for t, e, _ in jobs for r in (t.train, t.dev, *t.test) if r is not None]
        if exp.similarity is not None:
            needed += [(e, exp.similarity.dataset) for e in exp.similarity.encoders]
        run.extract_on_ray(needed, ray_address, shards, device)
    bar = tqdm(total=len(jobs), desc="probing", unit="job", disable=not progress)

    def tell(msg: str) -> None:
        bar.set_postfix_str(msg, refresh=True)

    outputs: list[TaskOutput | None] = []
    tags: list[tuple[str, bool]] = []  # each output's intervention ("" for none), and whether it is an erase run
    pending: list[tuple[Any, Job, tuple[str, str] | None, int, str, str]] = []
    # (kind, job, (WordNet, fingerprint) or None, output slot, cache key, label)
    for task, enc, first in jobs:
        kind = TASK_KINDS[task.kind]
        if kind.model_identity is not None:  # reads the model itself (minimal-pairs): no stores, run here
            outputs.append(_model_job(exp, task, enc, first, run, cache, cached, tell))
            tags.append((getattr(run.encoders[enc], "intervention", ""), False))
            bar.update(1)
            continue
        assert task.train is not None  # a kind that reads stores always has training data (the parser)
        train = run.part(enc, task.train)
        dev = run.part(enc, task.dev) if task.dev else None
        tests = run.tests(task, enc)
        if not tests:
            bar.update(1)
            continue
        if first:
            run.check_overlap(train, dev, tests)
        inventory = None
        if kind.uses_wordnet:
            from probing.wordnet import inventory as resolve

            inventory = inventories.setdefault(task.wordnet or "auto", resolve(task.wordnet or "auto"))
        encoder_tag = getattr(run.encoders[enc], "intervention", "")
        for tag, (v_train, v_dev, v_tests) in [("", (train, dev, tests)), *_erased_variants(task, train, dev, tests)]:
            with_baselines = first and not tag
            parts = [v_train, v_dev, *v_tests] if v_dev else [v_train, *v_tests]
            inputs = _job_inputs(exp, task, enc, parts, with_baselines, inventory)
            key = cache.key({**inputs, "intervention": tag} if tag else inputs)
            label = f"{task.name}/{enc}" + (f"/{tag}" if tag else "")
            tags.append((tag or encoder_tag, bool(tag)))
            out = cache.get(key)
            if out is not None:
                cached.append(label)
            else:
                job = Job(
                    task=task.name,
                    encoder=enc,
                    train=v_train,
                    dev=v_dev,
                    tests=v_tests,
                    settings=exp.probe.for_encoder(enc),
                    options=task.options,
                    baselines=task.baselines,
                    with_baselines=with_baselines,
                    inventory=inventory if ray_address is None else None,
                    progress=tell if ray_address is None else _quiet,
                )
                if ray_address is not None:
                    wordnet = (
                        None if inventory is None else (inventory.provenance()["inventory"], inventory.fingerprint())
                    )
                    pending.append((kind, job, wordnet, len(outputs), key, label))
                    outputs.append(None)
                    continue
                out, seconds = _run_job(kind, job)
                run.timings[f"task {label}"] = round(seconds, 3)
                cache.put(key, out)
            outputs.append(out)
        bar.update(1)  # counted when finished: a one-job run shows 0/1 while its layers are fitted
    if pending:
        bar.reset(total=len(pending))
        bar.set_description(f"probing on Ray ({ray_address})")

        def finished(i: int, out: TaskOutput, seconds: float) -> None:
            _, _, _, slot, key, label = pending[i]
            run.timings[f"task {label}"] = round(seconds, 3)
            cache.put(key, out)
            outputs[slot] = out
            bar.update(1)

        _run_on_ray(ray_address or "local", [(k, j, *(w or (None, None))) for k, j, w, *_ in pending], finished)
    for out, (tag, erased) in zip(outputs, tags):
        assert out is not None  # every pending job was filled in by finished()
        total.extend(_tagged(out, tag, erased))
    bar.close()

    similarity = pd.DataFrame(columns=SIMILARITY_COLUMNS)
    sim = exp.similarity
    if sim is not None:
        from probing.similarity import layer_similarity

        stores = {enc: run.part(enc, sim.dataset).store for enc in sim.encoders}
        run.log(f"layer similarity on {sim.dataset}: {', '.join(sim.measures)}")
        t0 = time.time()
        similarity = layer_similarity(
            stores, measures=sim.measures, max_tokens=sim.max_tokens, seed=sim.seed, progress=progress
        )
        run.timings[f"similarity {sim.dataset}"] = round(time.time() - t0, 3)

    for msg in probe_warnings(total.probes, exp.probe.Cs):
        run.warn(msg)
    results = pd.DataFrame(total.rows, columns=RESULT_COLUMNS)
    mix = pd.DataFrame(total.mix_weights, columns=MIX_COLUMNS)
    per_tag = pd.DataFrame(total.per_tag, columns=PER_TAG_COLUMNS)
    curves = pd.DataFrame(total.learning_curve, columns=LEARNING_CURVE_COLUMNS)
    efficiency = pd.concat(
        [df for df in (data_efficiency(curves), pd.DataFrame(total.data_efficiency)) if not df.empty]
        or [pd.DataFrame(columns=DATA_EFFICIENCY_COLUMNS)],
        ignore_index=True,
    )[DATA_EFFICIENCY_COLUMNS]
    run.timings["total"] = round(time.time() - t_start, 3)
    prov = run_provenance(
        experiment=exp.to_dict(),
        experiment_sha256=hashlib.sha256(exp.text.encode()).hexdigest(),
        experiment_toml=exp.text,
        encoders={
            name: {
                "kind": spec.kind,
                "fingerprint": run.encoders[name].fingerprint,
                "layer_names": list(run.encoders[name].layer_names),
                "dim": int(run.encoders[name].dim),
                "source": getattr(run.encoders[name], "source", None),
            }
            for name, spec in ((s.name, s) for s in exp.encoders)
        },
        stores=run.store_info,
        probe=exp.probe.to_dict(),
        seeds=list(exp.probe.seeds),
        headlines={t.name: TASK_KINDS[t.kind].headline for t in exp.tasks},
        kinds={t.name: t.kind for t in exp.tasks},
        wordnet={name: inv.provenance() | {"fingerprint": inv.fingerprint()} for name, inv in inventories.items()},
        probes=total.probes,
        skipped=run.skipped,
        warnings=run.warnings,
        cached_jobs=cached,
        timings=run.timings,
        device=describe(resolve_device()),
    )
    write_results(results, out_dir, prov)
    write_side_table(mix, out_dir, "mix_weights")
    write_side_table(per_tag, out_dir, "per_tag")
    if sim is not None:
        write_side_table(similarity, out_dir, "similarity")
    else:
        (out_dir / SIMILARITY_NAME).unlink(missing_ok=True)  # a stale map from an earlier run of this folder
    for name, table, file in (
        ("learning_curve", curves, LEARNING_CURVE_NAME),
        ("data_efficiency", efficiency, DATA_EFFICIENCY_NAME),
    ):
        if table.empty:
            (out_dir / file).unlink(missing_ok=True)
        else:
            write_side_table(table, out_dir, name)
    res = Results(
        results=results,
        mix_weights=mix,
        per_tag=per_tag,
        provenance=prov,
        stores={(enc, ref.dataset, ref.split): run.stores[(enc, ref)] for (enc, ref) in run.parts},
        out_dir=out_dir,
        similarity=similarity,
        learning_curve=curves,
        data_efficiency=efficiency,
    )
    if progress:
        hits = sum(s["cache_hit"] for s in run.store_info.values())
        run.log(
            f"{len(results)} result rows ({hits}/{len(run.store_info)} stores from the cache) in "
            f"{run.timings['total']:.1f} s -> {out_dir}"
        )
    return res
