"""The run's progress bar counts a job when it has finished (issue #34: a one-job run showed ``100% 1/1``
while its layers were still being fitted)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tqdm.auto

from probing.experiment import parse_experiment, run_experiment
from probing.results import METRICS, Metric, make_row
from probing.tasks import TASK_KINDS, Job, TaskKind, TaskOutput

FIX = Path(__file__).parent / "fixtures"


class _Recorded(tqdm.auto.tqdm):
    """tqdm that keeps every bar it makes, so the test can read the runner's bar while a job runs."""

    made: list[tqdm.auto.tqdm] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _Recorded.made.append(self)


def test_a_job_is_counted_when_it_has_finished(tmp_path, monkeypatch):
    (tmp_path / "model").mkdir()
    shutil.copy(FIX / "elmo_allennlp" / "options.json", tmp_path / "model" / "options.json")
    shutil.copy(FIX / "elmo_allennlp" / "lm_weights.hdf5", tmp_path / "model" / "weights.hdf5")
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROBING_DATA", raising=False)
    monkeypatch.setattr(tqdm.auto, "tqdm", _Recorded)
    seen: list[tuple[int, float]] = []

    def run(job: Job) -> TaskOutput:
        bar = next(b for b in _Recorded.made if b.desc == "probing")
        seen.append((bar.n, bar.total))
        out = TaskOutput()
        out.rows.append(make_row(job.task, "demo-ud", "test", job.encoder, "0", "toy-score", 0.5))
        return out

    metric = Metric("toy-score", "toy score")
    monkeypatch.setitem(METRICS, metric.name, metric)
    kind = TaskKind("toy-wait", run=run, metrics=(metric,), headline=metric.name, parse=lambda t: {})
    monkeypatch.setitem(TASK_KINDS, "toy-wait", kind)
    exp = parse_experiment(
        """
        [experiment]
        max_sentences = 3
        [[encoders]]
        name = "elmo"
        kind = "elmo"
        options = "model/options.json"
        weights = "model/weights.hdf5"
        [[tasks]]
        name = "toy"
        kind = "toy-wait"
        train = "demo-ud:train"
        test = ["demo-ud:test"]
        """,
        base=tmp_path,
    )
    run_experiment(exp, tmp_path / "out", progress=True)
    bar = next(b for b in _Recorded.made if b.desc == "probing")
    assert seen == [(0, 1)]  # while the only job ran, the bar stood at 0 of 1
    assert bar.n == 1


@pytest.fixture(autouse=True)
def _forget_bars():
    yield
    _Recorded.made.clear()
