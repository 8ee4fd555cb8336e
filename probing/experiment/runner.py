"""Running an experiment, glue between its stages: :func:`~probing.experiment.planning.plan` lists its jobs and
their units of work, :func:`~probing.experiment.planning.resolve` gives each job what it reads, its key and its
cached output, an :class:`~probing.experiment.execute.Executor` runs the jobs that are not cached (here or on
Ray), and :func:`~probing.experiment.assembly.assemble` writes the results table and its side tables.

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
from pathlib import Path
from typing import Any

import pandas as pd

from probing._toml import ExperimentError
from probing.experiment.assembly import JobResult, Results, assemble, probe_warnings
from probing.experiment.execute import Executor, LocalExecutor, Pending, RayExecutor
from probing.experiment.jobs import JOBS_DIR, JobCache, similarity_key
from probing.experiment.planning import ResolvedJob, plan, resolve
from probing.experiment.spec import Experiment
from probing.experiment.state import RunState
from probing.results import SIMILARITY_COLUMNS
from probing.tasks import TaskOutput

__all__ = ["Results", "probe_warnings", "run_experiment"]


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
    state = RunState(exp, progress)
    jobs_root = (exp.cache_dir or cache_dir()) / JOBS_DIR
    for folder in (jobs_root.parent, jobs_root):
        if folder.exists() and not folder.is_dir():
            raise ExperimentError(f"cache folder {folder} exists and is not a folder (point cache_dir elsewhere)")
    cache = JobCache(jobs_root)
    the_plan = plan(exp)
    layers = {name: list(enc.layer_names) for name, enc in state.encoders.items()}
    units = _Units(the_plan.units(exp.probe, layers))
    local = ray_address is None
    if ray_address is not None:
        state.extract_on_ray(the_plan.stores(), ray_address, shards, device)
    jobs = resolve(
        the_plan,
        state,
        cache,
        local=local,
        on_step=lambda i: units.on_step(i) if local else None,
        progress=units.tell if local else _quiet,
    )
    for i, job in enumerate(jobs):
        if job is None or job.output is not None:  # skipped (no test data) or cached: done
            if job is not None:
                state.cached.append(job.label)
            units.finish(i)
            continue
        kept = cache.checkpoints(job.key)
        for name in units.works[i]:
            if kept.has(name):
                units.step(i, name)
    bar = tqdm(
        total=sum(sum(w.values()) for w in units.works) + the_plan.similarity_units(layers),
        initial=sum(units.counted),
        desc="probing" if local else f"probing on Ray ({ray_address})",
        unit="fit",
        disable=not progress,
    )
    units.bar = bar
    todo = [(i, job) for i, job in enumerate(jobs) if job is not None and job.pending is not None]

    def finished(batch: list[tuple[int, ResolvedJob]], n: int, out: TaskOutput, seconds: float) -> None:
        i, job = batch[n]
        state.timings[f"task {job.label}"] = round(seconds, 3)
        cache.put(job.key, out)
        job.output = out
        units.finish(i)

    # a job that reads the encoder's model runs here, before the Ray tasks; every other job on the backend
    batches: list[tuple[Executor, list[tuple[int, ResolvedJob]]]] = [
        (LocalExecutor(), [t for t in todo if local or _pending(t[1]).in_driver])
    ]
    if ray_address is not None:
        batches.append((RayExecutor(ray_address), [t for t in todo if not _pending(t[1]).in_driver]))
    for executor, batch in batches:
        executor.run([_pending(job) for _, job in batch], functools.partial(finished, batch))
    similarity = _similarity(state, cache)
    bar.update(bar.total - bar.n)
    bar.close()
    done = [JobResult(j.output, j.intervention, j.extra) for j in jobs if j is not None and j.output is not None]
    return assemble(exp, state, done, similarity, out_dir)


def _pending(job: ResolvedJob) -> Pending:
    assert job.pending is not None
    return job.pending


def _similarity(run: RunState, cache: JobCache) -> pd.DataFrame | None:
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
