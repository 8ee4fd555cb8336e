"""One declarative probing experiment: a TOML file (or dict) in, a tidy results table and its side tables out.

:mod:`~probing.experiment.spec` reads and checks the file, :mod:`~probing.experiment.runner` runs it
(:func:`~probing.experiment.planning.plan` lists its jobs, :func:`~probing.experiment.planning.resolve` gives
each what it reads and its key, an :mod:`~probing.experiment.execute` executor runs them,
:func:`~probing.experiment.assembly.assemble` writes the tables), and :mod:`~probing.experiment.jobs` keeps
finished jobs and their finished steps so runs resume. Task kinds live in
:data:`probing.tasks.TASK_KINDS`.
"""

import importlib
from typing import TYPE_CHECKING, Any

from probing._toml import ExperimentError

if TYPE_CHECKING:
    from probing.experiment.assembly import JobResult, Results, assemble
    from probing.experiment.execute import Executor, LocalExecutor, RayExecutor
    from probing.experiment.extract import extract_activations
    from probing.experiment.helpers import fit_layer_probes, probe_layers
    from probing.experiment.jobs import JOBS_DIR, JobCache, probe_code_digest
    from probing.experiment.planning import Plan, PlannedJob, ResolvedJob, job_inputs, plan, resolve
    from probing.experiment.runner import run_experiment
    from probing.experiment.spec import (
        CorpusRef,
        DataRef,
        EncoderSpec,
        Experiment,
        SimilaritySpec,
        TaskSpec,
        bundled_experiments,
        load_experiment,
        parse_experiment,
    )

_HOMES = {
    "JOBS_DIR": "jobs",
    "JobCache": "jobs",
    "probe_code_digest": "jobs",
    "Results": "assembly",
    "JobResult": "assembly",
    "assemble": "assembly",
    "Executor": "execute",
    "LocalExecutor": "execute",
    "RayExecutor": "execute",
    "Plan": "planning",
    "PlannedJob": "planning",
    "plan": "planning",
    "ResolvedJob": "planning",
    "job_inputs": "planning",
    "resolve": "planning",
    "run_experiment": "runner",
    "extract_activations": "extract",
    "probe_layers": "helpers",
    "fit_layer_probes": "helpers",
    **dict.fromkeys(
        [
            "CorpusRef",
            "DataRef",
            "EncoderSpec",
            "Experiment",
            "SimilaritySpec",
            "TaskSpec",
            "bundled_experiments",
            "load_experiment",
            "parse_experiment",
        ],
        "spec",
    ),
}


def __getattr__(name: str) -> Any:
    """Import on first use (PEP 562): ``probing extract`` needs none of the probe code the runner imports."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"probing.experiment.{_HOMES[name]}"), name)


__all__ = [
    "JOBS_DIR",
    "CorpusRef",
    "DataRef",
    "EncoderSpec",
    "Executor",
    "Experiment",
    "ExperimentError",
    "JobCache",
    "JobResult",
    "LocalExecutor",
    "Plan",
    "PlannedJob",
    "RayExecutor",
    "ResolvedJob",
    "Results",
    "SimilaritySpec",
    "TaskSpec",
    "assemble",
    "bundled_experiments",
    "extract_activations",
    "fit_layer_probes",
    "job_inputs",
    "load_experiment",
    "parse_experiment",
    "plan",
    "probe_code_digest",
    "probe_layers",
    "resolve",
    "run_experiment",
]
