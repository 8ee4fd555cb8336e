"""One declarative probing experiment: a TOML file (or dict) in, a tidy results table and its side tables out.

:mod:`~probing.experiment.spec` reads and checks the file, :mod:`~probing.experiment.runner` runs it, and
:mod:`~probing.experiment.jobs` keeps finished jobs so runs resume. Task kinds live in
:data:`probing.tasks.TASK_KINDS`.
"""

from probing._toml import ExperimentError
from probing.experiment.jobs import JOBS_DIR, JobCache, probe_code_digest
from probing.experiment.runner import Results, extract_activations, run_experiment
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
    "load_experiment",
    "parse_experiment",
    "probe_code_digest",
    "run_experiment",
]
