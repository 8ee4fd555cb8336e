"""An experiment's plan: the jobs it runs and their units of work, then each job resolved to what it reads.

:func:`plan` turns an :class:`~probing.experiment.spec.Experiment` into its jobs before any store is
extracted, in the order their rows appear in the results: for each task, each of its encoders, the plain
job, then one per intervention of its options' extra runs (``erase``); then the ``[similarity]`` table.
:meth:`Plan.units` states each job's units of work from its kind's :attr:`~probing.tasks.TaskKind.work` and
its options' (:attr:`~probing.tasks.TaskOption.work`) and its encoder's layer names (read from the model's
options, no weights loaded), so the run's progress counts fits from the start.

:func:`resolve` then gives every planned job what it reads (its stores, or its encoder's model), its inputs
(:func:`job_inputs`, the one description of a job's inputs, for store and model jobs alike), its key in the
job cache, and either its cached output or the :class:`~probing.experiment.execute.Pending` job to run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from probing.experiment.execute import Pending
from probing.experiment.jobs import JobCache, kind_identity, option_identity
from probing.experiment.spec import WORDNET_DEFAULT, DataRef, Experiment, SimilaritySpec, TaskSpec
from probing.experiment.state import RunState
from probing.results import Intervention
from probing.tasks import TASK_KINDS, Job, Part, ProbeSettings, TaskOutput, task_option
from probing.tasks.options import Parts, set_options

JOB_STEP = "job"  # the one step of a job whose kind states no work of its own


@dataclass(frozen=True)
class PlannedJob:
    """One (task, encoder) job, or an extra run of it by one of its options (``intervention``: an
    :class:`~probing.results.Intervention` such as ``erase:upos:leace``; ``option``: the option's name).

    ``first``: the task's first encoder, whose plain job adds the baselines and checks the overlap of the
    task's splits."""

    task: TaskSpec
    encoder: str
    first: bool
    intervention: Intervention | None = None
    option: str = ""

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

    def settings(self, probe: ProbeSettings) -> ProbeSettings:
        """The probe settings this job runs with: the experiment's ``probe`` resolved for its encoder, then, for
        an option's extra run, as the option sets them (:attr:`~probing.tasks.TaskOption.variant_settings`)."""
        settings = probe.for_encoder(self.encoder)
        if self.intervention is None:
            return settings
        option = task_option(self.option)
        if option.variant_settings is None:
            return settings
        return option.variant_settings(self.task.options[self.option], self.intervention, settings)

    def work(self, settings: ProbeSettings, layer_names: Sequence[str]) -> dict[str, int]:
        """Units of work per step: the kind's (:attr:`~probing.tasks.TaskKind.work`), with those of the options
        the task sets (:attr:`~probing.tasks.TaskOption.work`); one unit if the kind states none."""
        kind = TASK_KINDS[self.task.kind]
        if kind.work is None:
            return {JOB_STEP: 1}
        work = dict(kind.work(settings, list(layer_names), self.task.options))
        for option, value in set_options(self.task.options):
            if option.work is not None:
                work.update(option.work(settings, list(layer_names), value))
        return {k: int(v) for k, v in work.items()}


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
        return [j.work(j.settings(settings), layer_names[j.encoder]) for j in self.jobs]

    def similarity_units(self, layer_names: Mapping[str, Sequence[str]]) -> int:
        """The ``[similarity]`` table's units: one per measure and pair of layers (0 without the table)."""
        sim = self.similarity
        if sim is None:
            return 0
        n = sum(len(layer_names[e]) for e in sim.encoders)
        return len(sim.measures) * n * (n + 1) // 2


def plan(exp: Experiment) -> Plan:
    """The jobs of ``exp``: per task, per encoder (the task's, else all), the plain job, then one per
    intervention of each set option with extra runs (:attr:`~probing.tasks.TaskOption.variants`)."""
    names = [e.name for e in exp.encoders]
    jobs = []
    for task in exp.tasks:
        extra = [
            (option.name, iv)
            for option, value in set_options(task.options)
            if option.variants is not None
            for iv in option.variants(value)
        ]
        for i, enc in enumerate(task.encoders or names):
            jobs.append(PlannedJob(task, enc, i == 0))
            jobs += [PlannedJob(task, enc, i == 0, iv, name) for name, iv in extra]
    return Plan(tuple(jobs), exp.similarity)


def job_inputs(
    exp: Experiment,
    job: PlannedJob,
    *,
    parts: Sequence[Part] = (),
    inventory: Any = None,
    model: Any = None,
) -> dict[str, Any]:
    """Everything a job reads, hashed into its key: a finished job is reused only if all of it matches. The
    task, encoder, settings and the kind's code; then the stores' keys and the WordNet fingerprint (a kind that
    reads stores) or the identity of the model it reads (``model``: :attr:`~probing.tasks.TaskKind.model_identity`);
    the code of the set options defined outside the package (:func:`~probing.experiment.jobs.option_identity`),
    if any; an option's extra run adds its intervention."""
    kind = TASK_KINDS[job.task.kind]
    codes = {o.name: option_identity(o) for o, _ in set_options(job.task.options)}
    outside = {name: code for name, code in codes.items() if code is not None}
    reads: dict[str, Any] = (
        {"model": model}
        if kind.model_identity is not None
        else {
            "stores": [p.store.key for p in parts],
            "wordnet": None if inventory is None else inventory.fingerprint(),
        }
    )
    return {
        "task": job.task.to_dict(),
        "encoder": job.encoder,
        "baselines": job.with_baselines,
        **reads,
        "settings": job.settings(exp.probe).to_dict(),
        "kind_code": kind_identity(kind),
        **({"option_code": outside} if outside else {}),
        **({"intervention": str(job.intervention)} if job.intervention else {}),
    }


@dataclass
class ResolvedJob:
    """A planned job with what it reads resolved: its ``key`` in the job cache, the ``intervention`` its rows
    carry (``""`` for none; an intervened encoder's own, else its option's run's), whether it is an option's
    extra run (``extra``: its rows keep no side tables), and its cached ``output`` or the job to run."""

    planned: PlannedJob
    key: str
    intervention: str
    extra: bool
    output: TaskOutput | None = None
    pending: Pending | None = None

    @property
    def label(self) -> str:
        return self.planned.label


def resolve(
    the_plan: Plan,
    state: RunState,
    cache: JobCache,
    *,
    local: bool,
    on_step: Callable[[int], Callable[[str], None] | None],
    progress: Callable[[str], None],
) -> list[ResolvedJob | None]:
    """Each planned job resolved, in plan order (None for a job whose test data is all skipped,
    ``skip_missing``). Reading its stores extracts those not extracted yet. ``local``: the jobs run in this
    process (a Ray worker resolves its own WordNet and counts no steps). ``on_step(i)``: job ``i``'s step
    callback (:class:`~probing.experiment.jobs.Checkpoints`); ``progress``: the jobs' progress messages."""
    out: list[ResolvedJob | None] = []
    views: dict[tuple[str, str, str], dict[Intervention, Parts]] = {}
    for i, job in enumerate(the_plan.jobs):
        task, encoder = job.task, state.encoders[job.encoder]
        kind = TASK_KINDS[task.kind]
        train: Part | None
        dev: Part | None
        tests: list[Part]
        inventory = None
        if kind.model_identity is not None:  # reads the model itself (minimal-pairs): no stores
            train, dev, tests = None, None, []
            inputs = job_inputs(state.exp, job, model=kind.model_identity(task.name, encoder, task.options))
        else:
            found = _store_parts(job, state, views)
            if found is None:
                out.append(None)
                continue
            (train, dev, tests), inventory = found
            inputs = job_inputs(state.exp, job, parts=[train, *([dev] if dev else []), *tests], inventory=inventory)
        key = cache.key(inputs)
        intervention = str(job.intervention) if job.intervention else getattr(encoder, "intervention", "")
        resolved = ResolvedJob(job, key, intervention, job.intervention is not None, cache.get(key))
        if resolved.output is None:
            in_driver = kind.model_identity is not None
            runnable = Job(
                task=task.name,
                encoder=job.encoder,
                train=train,
                dev=dev,
                tests=tests,
                settings=job.settings(state.exp.probe),
                options=task.options,
                baselines=task.baselines,
                with_baselines=job.with_baselines,
                inventory=inventory if local else None,
                progress=progress,
                model=encoder if in_driver else None,
                step=cache.checkpoints(key, on_step(i)),
            )
            wordnet = (
                None if inventory is None or local else (inventory.provenance()["inventory"], inventory.fingerprint())
            )
            options = tuple(o for o, _ in set_options(task.options) if o.rows is not None)
            resolved.pending = Pending(kind, runnable, wordnet, options, in_driver)
        out.append(resolved)
    return out


def _store_parts(
    job: PlannedJob, state: RunState, views: dict[tuple[str, str, str], dict[Intervention, Parts]]
) -> tuple[Parts, Any] | None:
    """The parts a store job reads (through its option's view for an extra run, fitted once per task, encoder
    and option in ``views``) and its WordNet inventory; None when its test data is all skipped. The task's
    first plain job states the overlap of its splits."""
    task, enc = job.task, job.encoder
    assert task.train is not None  # a kind that reads stores always has training data (the parser)
    parts: Parts = (
        state.part(enc, task.train),
        state.part(enc, task.dev) if task.dev else None,
        state.tests(task, enc),
    )
    if not parts[2]:
        return None
    if job.first and job.intervention is None:
        state.check_overlap(*parts)
    inventory = None
    if TASK_KINDS[task.kind].uses_wordnet:
        from probing.wordnet import inventory as resolve_inventory

        name = task.wordnet or WORDNET_DEFAULT
        inventory = state.inventories.setdefault(name, resolve_inventory(name))
    if job.intervention is not None:
        option = task_option(job.option)
        seen = views.setdefault((task.name, enc, job.option), {})
        if not seen:
            assert option.views is not None  # an option with variants has views (TaskOption)
            seen.update(option.views(task.options[job.option], parts))
        parts = seen[job.intervention]
    return parts, inventory
