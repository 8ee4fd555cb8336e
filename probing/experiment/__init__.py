"""One declarative probing experiment: a TOML file (or dict) in, a tidy results table and its side tables out.

:mod:`~probing.experiment.spec` reads and checks the file, :mod:`~probing.experiment.runner` runs it, and
:mod:`~probing.experiment.jobs` keeps finished jobs so runs resume. Task kinds live in
:data:`probing.tasks.TASK_KINDS`.
"""

import importlib
from typing import TYPE_CHECKING, Any

from probing._toml import ExperimentError

if TYPE_CHECKING:
    from probing.experiment.extract import extract_activations
    from probing.experiment.helpers import fit_layer_probes, probe_layers
    from probing.experiment.jobs import JOBS_DIR, JobCache, probe_code_digest
    from probing.experiment.runner import Results, run_experiment
    from probing.experiment.spec import (
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
    "Results": "runner",
    "run_experiment": "runner",
    "extract_activations": "extract",
    "probe_layers": "helpers",
    "fit_layer_probes": "helpers",
    **dict.fromkeys(
        [
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
    "DataRef",
    "EncoderSpec",
    "Experiment",
    "ExperimentError",
    "JobCache",
    "Results",
    "SimilaritySpec",
    "TaskSpec",
    "bundled_experiments",
    "extract_activations",
    "fit_layer_probes",
    "load_experiment",
    "parse_experiment",
    "probe_code_digest",
    "probe_layers",
    "run_experiment",
]
