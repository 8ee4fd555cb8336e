"""Running an experiment in three stages: :func:`~probing.experiment.planning.plan` lists its jobs and their units
of work, an :class:`~probing.experiment.execute.Executor` runs the jobs that are not cached (here or on Ray),
and :func:`~probing.experiment.assembly.assemble` writes the results table and its side tables.

Activations are extracted once into the store (cached); finished jobs, each finished step of a job (a
layer's probes) and the ``[similarity]`` table are kept in the job cache
(:mod:`probing.experiment.jobs`). Data flows corpus -> encoder -> store -> probes -> results: a second run
is a cache hit everywhere and loads no model.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from probing._toml import ExperimentError
from probing.experiment.assembly import JobResult, Results, RunRecord, assemble, probe_warnings
from probing.experiment.execute import Executor, LocalExecutor, Pending, RayExecutor, run_job
from probing.experiment.jobs import JOBS_DIR, JobCache, kind_identity, similarity_key
from probing.experiment.planning import Plan, plan
from probing.experiment.spec import WORDNET_DEFAULT, DataRef, Experiment, TaskSpec
from probing.results import SIMILARITY_COLUMNS
from probing.store.reader import Store
from probing.tasks import TASK_KINDS, Job, Part, TaskOutput

__all__ = ["Results", "probe_warnings", "run_experiment"]


class _Run(RunRecord):
    """One run's working state beside its record: the experiment, its corpora and the parts (stores) read."""

    def __init__(self, exp: Experiment, progress: bool):
        super().__init__(encoders={spec.name: spec.build(exp.cache_dir) for spec in exp.encoders}, progress=progress)
        self.exp = exp
        self.corpora: dict[DataRef, Any] = {}
        self.parts: dict[tuple[str, DataRef], Part] = {}
        self.overlaps_checked: set[tuple[str, str, str, str]] = set()

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
                self.encoders[encoder],
                self.corpus(ref),
                cache_dir=self.exp.cache_dir,
                progress=self.progress,
                chunk_tokens=self.exp.chunk_tokens,
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
            chunk_tokens=self.exp.chunk_tokens,
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


def _model_job(exp: Experiment, task: TaskSpec, enc: str, first: bool, run: _Run, cache: JobCache) -> _Slot:
    """The slot of a job whose kind reads the encoder's model itself (``TaskKind.model_identity``): its output
    from the job cache when everything it reads (model, LM head, data, code: the kind's ``model_identity``) is
    unchanged, else the job to run. Such jobs run in this process (the Ray backend included): they read no
    stores to distribute."""
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
    slot = _Slot(f"{task.name}/{enc}", cache.key(inputs), getattr(encoder, "intervention", ""), False)
    slot.output = cache.get(slot.key)
    if slot.output is None:
        job = Job(
            task=task.name,
            encoder=enc,
            train=None,
            dev=None,
            tests=[],
            settings=exp.probe.for_encoder(enc),
            options=task.options,
            with_baselines=first,
            model=encoder,
        )
        slot.pending = Pending(kind, job, None)
    return slot


def _erased_variants(
    task: TaskSpec, train: Part, dev: Part | None, tests: list[Part]
) -> list[tuple[str, tuple[Part, Part | None, list[Part]]]]:
    """The task's ``erase`` runs: (intervention, its parts seen through erasers fitted on the training store)."""
    from probing.analysis.erasure import ErasedStore, fit_layer_erasers

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
    (stores, task, settings, WordNet inventory, probe code), and while it runs so is each finished step (a
    layer's probes, the scalar mix: :class:`~probing.experiment.jobs.Checkpoints`, under the job's key): an
    interrupted run resumes at the first unfinished layer, and a repeated run only reassembles the tables;
    the ``[similarity]`` table is cached the same way. The progress bar counts units of work, fits of one
    layer's probe (:meth:`~probing.experiment.planning.Plan.units`, from each kind's ``work``), known before the
    first job runs; it reaches its total when the last job has finished. Provenance lists the reused jobs under
    ``cached_jobs``, each task's headline metric under ``headlines`` and warnings (5 % or more of a dev or
    test split's sentences also in training, once per pair of splits; a C chosen at an end of the grid, a fit
    that hit max_iter) under ``warnings``; they are also issued as ``UserWarning`` warnings.

    ``device`` runs every model and probe there (:func:`probing.devices.use_device`; default CUDA when
    available, else CPU); provenance records it under ``device``. It is in no cache key: results on every
    device agree within DESIGN.md's tolerance.

    ``ray`` (a Ray address, or ``"local"`` for a Ray started for the run), or ``[run] backend = "ray"`` in the
    file (with ``address``), first extracts the stores that are not cached as Ray tasks, up to ``shards`` per
    store (default ``[run] shards``, else the CPUs Ray reports;
    :func:`probing.store.distributed.extract_ray_many`), then runs the probe jobs that are not cached as Ray
    tasks, in parallel. A probe job runs the local code with the same seeds and stores, on one thread (Ray's
    default), so its rows are the local run's (the fits do not depend on the thread count); a store extracted
    in shards is cut into whole chunks of ``[run] chunk_tokens`` tokens, so it equals the single-process store
    bit for bit. Provenance records per store ``ray_shards`` (the shard
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
    """A job's progress callback inside a Ray task (the driver counts each job's units when it returns)."""


class _Units:
    """The run's units of work (:meth:`Plan.units`) done so far: each job's steps count once as they finish
    (kept or computed), a job never beyond its own total, and the rest of a job when it returns. Units
    counted before the bar is shown (cached jobs, kept steps) are its ``initial``, outside its rate."""

    def __init__(self, works: list[dict[str, int]]):
        self.works = works
        self.counted = [0] * len(works)
        self.steps: list[set[str]] = [set() for _ in works]
        self.bar: Any = None

    def add(self, i: int, units: int) -> None:
        units = max(0, min(units, sum(self.works[i].values()) - self.counted[i]))
        self.counted[i] += units
        if self.bar is not None:
            self.bar.update(units)

    def step(self, i: int, name: str) -> None:
        if name not in self.steps[i]:
            self.steps[i].add(name)
            self.add(i, self.works[i].get(name, 0))

    def on_step(self, i: int) -> Callable[[str], None]:
        return functools.partial(self.step, i)

    def finish(self, i: int) -> None:
        self.add(i, sum(self.works[i].values()))

    def tell(self, msg: str) -> None:
        """A job's progress message, shown beside the bar."""
        if self.bar is not None:
            self.bar.set_postfix_str(msg, refresh=True)


@dataclass
class _Slot:
    """One planned job on its way through the run: its label and cache key, the intervention its rows carry
    (``""`` for none) and whether it is an erase run, its output once cached or run, else what to run."""

    label: str
    key: str
    intervention: str
    erased: bool
    output: TaskOutput | None = None
    pending: Pending | None = None


def _run_experiment(
    exp: Experiment,
    out_dir: str | os.PathLike,
    progress: bool,
    ray_address: str | None,
    shards: int | None,
    device: str | None,
) -> Results:
    from tqdm.auto import tqdm

    from probing.paths import cache_dir

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExperimentError(f"output folder {out_dir} exists and is not a folder")
    run = _Run(exp, progress)
    jobs_root = (exp.cache_dir or cache_dir()) / JOBS_DIR
    for folder in (jobs_root.parent, jobs_root):
        if folder.exists() and not folder.is_dir():
            raise ExperimentError(f"cache folder {folder} exists and is not a folder (point cache_dir elsewhere)")
    cache = JobCache(jobs_root)
    the_plan = plan(exp)
    layers = {name: list(enc.layer_names) for name, enc in run.encoders.items()}
    units = _Units(the_plan.units(exp.probe, layers))
    if ray_address is not None:
        run.extract_on_ray(the_plan.stores(), ray_address, shards, device)
    slots = _prepare(run, the_plan, cache, units, local=ray_address is None)
    bar = tqdm(
        total=sum(sum(w.values()) for w in units.works) + the_plan.similarity_units(layers),
        initial=sum(units.counted),
        desc="probing" if ray_address is None else f"probing on Ray ({ray_address})",
        unit="fit",
        disable=not progress,
    )
    units.bar = bar
    todo = [(i, slot, slot.pending) for i, slot in enumerate(slots) if slot is not None and slot.pending is not None]

    def finished(n: int, out: TaskOutput, seconds: float) -> None:
        i, slot, _ = todo[n]
        run.timings[f"task {slot.label}"] = round(seconds, 3)
        cache.put(slot.key, out)
        slot.output = out
        units.finish(i)

    executor: Executor = LocalExecutor() if ray_address is None else RayExecutor(ray_address)
    executor.run([pending for _, _, pending in todo], finished)
    similarity = _similarity(run, cache)
    bar.update(bar.total - bar.n)
    bar.close()
    done = [JobResult(s.output, s.intervention, s.erased) for s in slots if s is not None and s.output is not None]
    return assemble(exp, run, done, similarity, out_dir)


def _prepare(run: _Run, the_plan: Plan, cache: JobCache, units: _Units, *, local: bool) -> list[_Slot | None]:
    """Each planned job's stores, key and cached output, in plan order: a :class:`_Slot` with its output if
    the job is cached, else with the :class:`Pending` job to run (its kept steps counted as done); None for a
    job whose test data is all skipped (``skip_missing``), which counts as done."""
    exp = run.exp
    slots: list[_Slot | None] = []
    variants: dict[tuple[str, str], dict[str, tuple[Part, Part | None, list[Part]]]] = {}
    for i, job in enumerate(the_plan.jobs):
        task, enc, tag = job.task, job.encoder, job.intervention
        kind = TASK_KINDS[task.kind]
        if kind.model_identity is not None:  # reads the model itself (minimal-pairs): no stores
            slot = _model_job(exp, task, enc, job.with_baselines, run, cache)
            slots.append(slot)
            if slot.pending is None:
                run.cached.append(slot.label)
                units.finish(i)
            elif local:
                slot.pending.job.progress = units.tell
            else:  # in this process, before the Ray jobs
                slot.output, seconds = run_job(slot.pending.kind, slot.pending.job)
                run.timings[f"task {slot.label}"] = round(seconds, 3)
                cache.put(slot.key, slot.output)
                slot.pending = None
                units.finish(i)
            continue
        assert task.train is not None  # a kind that reads stores always has training data (the parser)
        train = run.part(enc, task.train)
        dev = run.part(enc, task.dev) if task.dev else None
        tests = run.tests(task, enc)
        if not tests:
            units.finish(i)
            slots.append(None)
            continue
        if job.first and not tag:
            run.check_overlap(train, dev, tests)
        inventory = None
        if kind.uses_wordnet:
            from probing.wordnet import inventory as resolve

            name = task.wordnet or WORDNET_DEFAULT
            inventory = run.inventories.setdefault(name, resolve(name))
        if tag:
            if (task.name, enc) not in variants:
                variants[(task.name, enc)] = dict(_erased_variants(task, train, dev, tests))
            train, dev, tests = variants[(task.name, enc)][tag]
        parts = [train, dev, *tests] if dev else [train, *tests]
        inputs = _job_inputs(exp, task, enc, parts, job.with_baselines, inventory)
        key = cache.key({**inputs, "intervention": tag} if tag else inputs)
        slot = _Slot(job.label, key, tag or getattr(run.encoders[enc], "intervention", ""), bool(tag))
        slots.append(slot)
        slot.output = cache.get(key)
        if slot.output is not None:
            run.cached.append(job.label)
            units.finish(i)
            continue
        steps = cache.checkpoints(key, units.on_step(i) if local else None)
        for name in units.works[i]:
            if steps.has(name):
                units.step(i, name)
        runnable = Job(
            task=task.name,
            encoder=enc,
            train=train,
            dev=dev,
            tests=tests,
            settings=exp.probe.for_encoder(enc),
            options=task.options,
            baselines=task.baselines,
            with_baselines=job.with_baselines,
            inventory=inventory if local else None,
            progress=units.tell if local else _quiet,
            step=steps,
        )
        wordnet = None if inventory is None or local else (inventory.provenance()["inventory"], inventory.fingerprint())
        slot.pending = Pending(kind, runnable, wordnet)
    return slots


def _similarity(run: _Run, cache: JobCache) -> pd.DataFrame | None:
    """The ``[similarity]`` table (None without one), a cached job keyed by its spec and stores
    (:func:`~probing.experiment.jobs.similarity_key`)."""
    sim = run.exp.similarity
    if sim is None:
        return None
    stores = {enc: run.part(enc, sim.dataset).store for enc in sim.encoders}
    key = similarity_key(sim.to_dict(), {enc: store.key for enc, store in stores.items()})
    label = f"similarity {sim.dataset}"
    rows = cache.get_rows(key)
    if rows is not None:
        run.cached.append(label)
        return pd.DataFrame(rows, columns=SIMILARITY_COLUMNS)
    from probing.analysis.similarity import layer_similarity

    run.log(f"layer similarity on {sim.dataset}: {', '.join(sim.measures)}")
    t0 = time.time()
    table = layer_similarity(
        stores, measures=sim.measures, max_tokens=sim.max_tokens, seed=sim.seed, progress=run.progress
    )
    run.timings[label] = round(time.time() - t0, 3)
    cache.put_rows(key, table.to_dict("records"))
    return table
