"""Executors: where an experiment's probe jobs run. One interface, :class:`Executor`, with two
implementations: :class:`LocalExecutor` (this process, one job after another) and :class:`RayExecutor`
(Ray tasks, in parallel, on a local Ray or a cluster).

An executor gets :class:`Pending` jobs and calls ``done(index, output, seconds)`` as each finishes (in any
order); the runner records each output in the job cache as it arrives, so a killed run resumes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from probing._toml import ExperimentError
from probing.tasks import Job, TaskKind, TaskOption, TaskOutput
from probing.tasks.options import run_task

Done = Callable[[int, TaskOutput, float], None]


@dataclass
class Pending:
    """A job to run: its kind, the :class:`~probing.tasks.Job`, for a kind that uses WordNet the inventory's
    name and fingerprint (a Ray worker resolves its own: NLTK's reader cannot be pickled), the task options
    whose rows it adds (:attr:`~probing.tasks.TaskOption.rows`), and whether it runs in the driver (a job that
    reads the encoder's model: a model is not shipped to a worker)."""

    kind: TaskKind
    job: Job
    wordnet: tuple[str, str] | None = None
    options: tuple[TaskOption, ...] = ()
    in_driver: bool = False


class Executor(Protocol):
    """Runs pending jobs; ``done(i, output, seconds)`` for ``pending[i]`` as it finishes."""

    def run(self, pending: Sequence[Pending], done: Done) -> None: ...


def run_job(kind: TaskKind, job: Job, options: Sequence[TaskOption] = ()) -> tuple[TaskOutput, float]:
    """One job (its kind's rows, then its ``options``' rows: :func:`probing.tasks.options.run_task`), timed."""
    t0 = time.time()
    return run_task(kind, job, options), time.time() - t0


class LocalExecutor:
    """Each job in this process, in order."""

    def run(self, pending: Sequence[Pending], done: Done) -> None:
        for i, p in enumerate(pending):
            done(i, *run_job(p.kind, p.job, p.options))


def _run_ray_job(
    kind: TaskKind, job: Job, options: tuple[TaskOption, ...], wordnet: str | None, fingerprint: str | None
) -> tuple[TaskOutput, float]:
    """The body of a Ray task: a job that uses WordNet gets the worker's own inventory ``wordnet``, which
    must have the ``fingerprint`` the driver keyed the job with."""
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
    return run_job(kind, job, options)


@dataclass
class RayExecutor:
    """Every job as a Ray task (retried twice if its worker dies) on the Ray at ``address`` (``"local"``: a
    Ray started for the run). A job's ``progress`` and ``step`` callbacks must be picklable."""

    address: str

    def run(self, pending: Sequence[Pending], done: Done) -> None:
        from probing.experiment.extract import init_ray

        init_ray(self.address)
        import ray

        task = ray.remote(_run_ray_job).options(max_retries=2)
        refs = {task.remote(p.kind, p.job, p.options, *(p.wordnet or (None, None))): i for i, p in enumerate(pending)}
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            out, seconds = ray.get(ready[0])
            done(refs[ready[0]], out, seconds)
