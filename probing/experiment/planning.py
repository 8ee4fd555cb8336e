"""An experiment's plan: the jobs it runs and their units of work, known before any store is extracted.

:func:`plan` turns an :class:`~probing.experiment.spec.Experiment` into its jobs, in the order their rows
appear in the results: for each task, each of its encoders, the unerased job, then one per ``erase``
intervention; then the ``[similarity]`` table. :meth:`Plan.units` states each job's units of work from its
kind's :attr:`~probing.tasks.TaskKind.work` and its encoder's layer names (read from the model's options,
no weights loaded), so the run's progress counts fits from the start.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from probing.experiment.spec import DataRef, Experiment, SimilaritySpec, TaskSpec
from probing.tasks import TASK_KINDS, ProbeSettings

JOB_STEP = "job"  # the one step of a job whose kind states no work of its own


@dataclass(frozen=True)
class PlannedJob:
    """One (task, encoder) job, or an erase run of it (``intervention`` ``"erase:<label>:<method>"``).

    ``first``: the task's first encoder, whose unerased job adds the baselines and checks the overlap of the
    task's splits."""

    task: TaskSpec
    encoder: str
    first: bool
    intervention: str = ""

    @property
    def label(self) -> str:
        """``task/encoder[/intervention]``: the job's name in progress, timings and provenance."""
        return f"{self.task.name}/{self.encoder}" + (f"/{self.intervention}" if self.intervention else "")

    @property
    def with_baselines(self) -> bool:
        return self.first and not self.intervention

    def data(self) -> list[DataRef]:
        """The splits whose stores the job reads."""
        return [r for r in (self.task.train, self.task.dev, *self.task.test) if r is not None]

    def work(self, settings: ProbeSettings, layer_names: Sequence[str]) -> dict[str, int]:
        """Units of work per step (:attr:`~probing.tasks.TaskKind.work`; one unit if the kind states none)."""
        kind = TASK_KINDS[self.task.kind]
        if kind.work is None:
            return {JOB_STEP: 1}
        return {k: int(v) for k, v in kind.work(settings, list(layer_names), self.task.options).items()}


@dataclass(frozen=True)
class Plan:
    """The jobs of an experiment (:func:`plan`) and its ``[similarity]`` table, if any."""

    jobs: tuple[PlannedJob, ...]
    similarity: SimilaritySpec | None = None

    def stores(self) -> list[tuple[str, DataRef]]:
        """Every (encoder, split) store the plan reads, once each, in first-use order."""
        needed = [(j.encoder, r) for j in self.jobs for r in j.data()]
        if self.similarity is not None:
            needed += [(e, self.similarity.dataset) for e in self.similarity.encoders]
        return list(dict.fromkeys(needed))

    def units(self, settings: ProbeSettings, layer_names: Mapping[str, Sequence[str]]) -> list[dict[str, int]]:
        """Each job's units of work per step (``settings``: the experiment's, resolved per encoder;
        ``layer_names``: encoder -> its layers)."""
        return [j.work(settings.for_encoder(j.encoder), layer_names[j.encoder]) for j in self.jobs]

    def similarity_units(self, layer_names: Mapping[str, Sequence[str]]) -> int:
        """The ``[similarity]`` table's units: one per measure and pair of layers (0 without the table)."""
        sim = self.similarity
        if sim is None:
            return 0
        n = sum(len(layer_names[e]) for e in sim.encoders)
        return len(sim.measures) * n * (n + 1) // 2


def plan(exp: Experiment) -> Plan:
    """The jobs of ``exp``: per task, per encoder (the task's, else all), the unerased job, then one per
    ``erase`` intervention."""
    names = [e.name for e in exp.encoders]
    jobs = [
        PlannedJob(task, enc, i == 0, tag)
        for task in exp.tasks
        for i, enc in enumerate(task.encoders or names)
        for tag in ["", *(t for spec in task.erase for t in spec.interventions())]
    ]
    return Plan(tuple(jobs), exp.similarity)
