"""The runner's three stages (issue #28 item 4): ``plan(exp)`` lists the jobs, an executor runs them, and
``assemble`` writes the tables; the ``[similarity]`` table is a cached job; per-layer steps are kept so an
interrupted run resumes at the layer (issue #34 item 2); a ``Corpus`` goes straight into an experiment."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import probing.tasks.tagging as tagging
from probing.corpora import load
from probing.experiment import (
    JOBS_DIR,
    CorpusRef,
    LocalExecutor,
    parse_experiment,
    plan,
    run_experiment,
)
from probing.experiment.execute import Pending
from probing.experiment.planning import JOB_STEP
from probing.results import METRICS, Metric, make_row
from probing.tasks import TASK_KINDS, Job, ProbeSettings, TaskKind, TaskOutput

FIX = Path(__file__).parent / "fixtures"

TWO_TASKS = f"""
[experiment]
seeds = [0]
[probe]
C = [0.1, 1.0]
max_iter = 30
mix_max_iter = 90
[[encoders]]
name = "elmo"
kind = "elmo"
options = "{FIX / "elmo_allennlp" / "options.json"}"
weights = "{FIX / "elmo_allennlp" / "lm_weights.hdf5"}"
[[encoders]]
name = "glove"
kind = "glove"
vectors = "{FIX / "glove" / "tiny.glove.txt"}"
[[tasks]]
name = "upos"
kind = "tagging"
label = "upos"
train = "demo-ud:train"
dev = "demo-ud:dev"
test = ["demo-ud:test"]
erase = {{ label = "upos", method = "leace" }}
[[tasks]]
name = "senses"
kind = "wsd-1nn"
train = "demo-semcor:train"
test = ["demo-semcor:test"]
encoders = ["elmo"]
wordnet = "bundled"
[similarity]
dataset = "demo-ud:dev"
measures = ["linear_cka"]
"""


def test_plan_of_a_two_task_experiment_lists_its_jobs_and_units():
    """Per task, per encoder: the unerased job, then its erase runs (leace and its random control); the first
    encoder's unerased job alone adds the baselines; the stores are listed once each, in first-use order."""
    the_plan = plan(parse_experiment(TWO_TASKS))
    assert [j.label for j in the_plan.jobs] == [
        "upos/elmo",
        "upos/elmo/erase:upos:leace",
        "upos/elmo/erase:upos:random",
        "upos/glove",
        "upos/glove/erase:upos:leace",
        "upos/glove/erase:upos:random",
        "senses/elmo",
    ]
    assert [j.with_baselines for j in the_plan.jobs] == [True, False, False, False, False, False, True]
    assert [(e, str(r)) for e, r in the_plan.stores()] == [
        ("elmo", "demo-ud:train"),
        ("elmo", "demo-ud:dev"),
        ("elmo", "demo-ud:test"),
        ("glove", "demo-ud:train"),
        ("glove", "demo-ud:dev"),
        ("glove", "demo-ud:test"),
        ("elmo", "demo-semcor:train"),
        ("elmo", "demo-semcor:test"),
    ]  # the similarity table's demo-ud:dev stores are the tagging task's
    layers = {"elmo": ["0", "1", "2"], "glove": ["glove"]}
    settings = parse_experiment(TWO_TASKS).probe
    units = the_plan.units(settings, layers)
    # a layer: 2 values of C x 1 probe seed + 1 control fit = 3 units; the mix: 3 layers x (2 Cs + 0 refits)
    # x mix_max_iter / max_iter (90 / 30) = 18; glove has one layer (no mix, no concat)
    elmo = {"layer 0": 3, "layer 1": 3, "layer 2": 3, "mix": 18, "concat": 6}
    assert units[0] == elmo
    # the erase runs probe the layers only: the mix and concatenation cost as much as the layers together
    assert units[1] == units[2] == {"layer 0": 3, "layer 1": 3, "layer 2": 3}
    assert units[3] == {"layer glove": 3}
    assert units[6] == {JOB_STEP: 1}  # wsd-1nn states no work of its own: one unit
    # one measure over the 4 layers of both encoders: 4 x 5 / 2 layer pairs (with themselves)
    assert the_plan.similarity_units(layers) == 10


def test_an_erase_table_brings_back_the_mix_and_concatenation_of_its_runs():
    """``mix = true`` / ``concat = true`` in the erase table give its runs the plain job's settings (and change
    their job keys, since they run different probes); without them the runs' settings drop both."""
    exp = parse_experiment(TWO_TASKS.replace('method = "leace" }', 'method = "leace", mix = true, concat = true }'))
    jobs = plan(exp).jobs
    assert all(j.settings(exp.probe).mix and j.settings(exp.probe).concat for j in jobs[:3])
    plain = parse_experiment(TWO_TASKS)
    dropped = plan(plain).jobs[1].settings(plain.probe)
    assert (dropped.mix, dropped.concat) == (False, False)
    assert plan(plain).jobs[0].settings(plain.probe) == plain.probe.for_encoder("elmo")


def test_the_local_executor_runs_each_job_as_a_direct_call_would():
    """The executor interface: ``done(i, output, seconds)`` per pending job, with the output the kind's run
    gives for that job."""
    kind = TaskKind("toy-echo", run=_echo, metrics=(_TOY,), headline=_TOY.name, parse=lambda t: {})
    jobs = [Job(task=f"t{i}", encoder="e", train=None, dev=None, tests=[], settings=ProbeSettings()) for i in range(3)]  # type: ignore[arg-type]
    seen: dict[int, TaskOutput] = {}
    LocalExecutor().run([Pending(kind, j) for j in jobs], lambda i, out, s: seen.__setitem__(i, out))
    assert sorted(seen) == [0, 1, 2]
    assert [seen[i].rows for i in range(3)] == [_echo(j).rows for j in jobs]


_TOY = Metric("toy-score", "toy score")


def _echo(job: Job) -> TaskOutput:
    out = TaskOutput()
    out.rows.append(make_row(job.task, "demo-ud", "test", job.encoder, "0", _TOY.name, 0.5))
    return out


def test_a_corpus_object_goes_straight_into_an_experiment():
    """A dict experiment may give a Corpus where a file names data: the task reads it through a CorpusRef named
    after the corpus (no placeholder spec swapped in afterwards), and the experiment's text names it."""
    train, test = load("demo-ud", "train").head(5), load("demo-ud", "test").head(5)
    spec = {
        "encoders": [{"name": "glove", "kind": "glove", "vectors": str(FIX / "glove" / "tiny.glove.txt")}],
        "tasks": [{"name": "upos", "kind": "tagging", "label": "upos", "train": train, "test": [test]}],
    }
    exp = parse_experiment(spec)
    task = exp.tasks[0]
    assert '"train": "Corpus(demo-ud:train)"' in exp.text  # recorded by name, not by memory address
    assert isinstance(task.train, CorpusRef) and task.train.corpus is train
    assert (task.train.dataset, task.train.split) == ("demo-ud", "train")
    assert task.test[0].load() is test


def test_probe_defaults_are_the_settings_dataclass_defaults():
    """The parser reads every [probe] default from ProbeSettings (written once): a file without [probe]
    gets ProbeSettings() exactly."""
    spec = {
        "encoders": [{"name": "glove", "kind": "glove", "vectors": str(FIX / "glove" / "tiny.glove.txt")}],
        "tasks": [
            {"name": "upos", "kind": "tagging", "label": "upos", "train": "demo-ud:train", "test": "demo-ud:test"}
        ],
    }
    exp = parse_experiment(spec)
    assert exp.probe == ProbeSettings()


RESUME = """
[experiment]
seeds = [0]
bootstrap = 50
max_sentences = 20
[probe]
C = [0.1, 1.0]
max_iter = 30
mix_max_iter = 30
concat = false
[[encoders]]
name = "elmo"
kind = "elmo"
options = "model/options.json"
weights = "model/weights.hdf5"
[[tasks]]
name = "upos"
kind = "tagging"
label = "upos"
train = "demo-ud:train"
dev = "demo-ud:dev"
test = ["demo-ud:test"]
"""


def test_an_interrupted_run_resumes_at_the_layer(elmo_folder, isolated_cache, monkeypatch):
    """Ctrl-C while layer 2 is fitted: the rerun fits layer 2 (and the mix) only, its progress bar starts at
    the two kept layers' units, and every table equals the uninterrupted run's."""
    exp = parse_experiment(RESUME, base=elmo_folder)
    whole = run_experiment(exp, elmo_folder / "whole", progress=False)
    jobs = isolated_cache / JOBS_DIR
    for f in jobs.glob("*.json"):
        f.unlink()  # forget the finished job; the stores stay

    fitted: list[int] = []
    interrupt = {"at": 3}  # the third per-layer fit raises, as Ctrl-C would
    real_fit = tagging.fit_probe

    def counted(*args, **kwargs):
        fitted.append(1)
        if len(fitted) == interrupt["at"]:
            raise KeyboardInterrupt
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(tagging, "fit_probe", counted)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, elmo_folder / "again", progress=False)
    assert len(fitted) == 3  # layers 0 and 1 finished, layer 2 interrupted
    assert len(list(jobs.glob("*.steps/*.json"))) == 2  # the two finished layers are kept

    fitted.clear()
    interrupt["at"] = 0
    bars = _record_bars(monkeypatch)
    again = run_experiment(exp, elmo_folder / "again", progress=True)
    assert len(fitted) == 1  # layer 2 only
    # units: 3 per layer (2 Cs + 1 control), the mix 3 layers x 2 Cs x 30/30 = 6: 15 in all, 6 of them kept
    bar = bars[-1]
    assert (bar.initial, bar.n, bar.total) == (6, 15, 15)
    assert not list(jobs.glob("*.steps"))  # the finished job replaces its steps
    for name in ("results", "mix_weights", "per_tag"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(whole, name))
    for name in ("results.csv", "mix_weights.csv", "per_tag.csv"):
        assert (elmo_folder / "again" / name).read_bytes() == (elmo_folder / "whole" / name).read_bytes()


def test_progress_counts_fits_and_stays_below_its_total_until_the_end(elmo_folder, monkeypatch):
    """The bar counts units of work (fits across C values and layers): it moves with each layer, is below
    its total while any fit is running, and reaches it at the end."""
    bars = _record_bars(monkeypatch)
    seen: list[tuple[int, int]] = []
    real_fit, real_mix = tagging.fit_probe, tagging._fit_mix

    def fit(*args, **kwargs):
        seen.append((bars[-1].n, bars[-1].total))
        return real_fit(*args, **kwargs)

    def mix(*args, **kwargs):
        seen.append((bars[-1].n, bars[-1].total))
        return real_mix(*args, **kwargs)

    monkeypatch.setattr(tagging, "fit_probe", fit)
    monkeypatch.setattr(tagging, "_fit_mix", mix)
    run_experiment(parse_experiment(RESUME, base=elmo_folder), elmo_folder / "out", progress=True)
    assert seen == [(0, 15), (3, 15), (6, 15), (9, 15)]  # layers 0, 1, 2, then the mix
    assert (bars[-1].n, bars[-1].total) == (15, 15)


def test_the_similarity_table_is_a_cached_job(elmo_folder, monkeypatch):
    """A second run reuses the [similarity] table (listed under cached_jobs) without computing it."""
    text = RESUME.replace('kind = "tagging"', 'kind = "toy-none"').replace('label = "upos"\n', "")
    text += '[similarity]\ndataset = "demo-ud:dev"\nmeasures = ["linear_cka"]\n'
    kind = TaskKind("toy-none", run=_echo, metrics=(_TOY,), headline=_TOY.name, parse=lambda t: {})
    monkeypatch.setitem(TASK_KINDS, "toy-none", kind)
    monkeypatch.setitem(METRICS, _TOY.name, _TOY)
    exp = parse_experiment(text, base=elmo_folder)
    first = run_experiment(exp, elmo_folder / "one", progress=False)
    assert len(first.similarity) == 9  # linear CKA for every ordered pair of ELMo's 3 layers

    import probing.analysis.similarity

    def boom(*args, **kwargs):
        raise AssertionError("the similarity table was computed again")

    monkeypatch.setattr(probing.analysis.similarity, "layer_similarity", boom)
    second = run_experiment(exp, elmo_folder / "two", progress=False)
    assert "similarity demo-ud:dev" in second.provenance["cached_jobs"]
    pd.testing.assert_frame_equal(second.similarity, first.similarity)


def _record_bars(monkeypatch) -> list:
    """Every tqdm bar the runner makes from now on (the probing bar is the last one made)."""
    import tqdm.auto

    made: list = []

    class Recorded(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if kwargs.get("desc", "").startswith("probing"):
                made.append(self)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    return made


def test_a_tagging_job_runs_exactly_the_steps_its_work_names(elmo_folder, monkeypatch):
    """Progress counts steps by name: with every optional part on (halves, learning curve, mix, concat) the
    steps a tagging job runs are the keys of its planned units, each once: the kind's (layers, halves, mix,
    concat, in that order) and the learning-curve option's (``curve <layer>``)."""
    from probing.experiment.jobs import Checkpoints

    text = RESUME.replace("concat = false", "concat = true").replace(
        'test = ["demo-ud:test"]', 'test = ["demo-ud:test"]\ndirections = true\nlearning_curve = [0.5, 1.0]'
    )
    exp = parse_experiment(text, base=elmo_folder)
    ran: list[str] = []
    real_step = Checkpoints.__call__

    def recorded(self, name, compute):
        ran.append(name)
        return real_step(self, name, compute)

    monkeypatch.setattr(Checkpoints, "__call__", recorded)
    run_experiment(exp, elmo_folder / "out", progress=False)
    planned = plan(exp).units(exp.probe, {"elmo": ["0", "1", "2"]})[0]
    assert sorted(ran) == sorted(planned) and len(set(ran)) == len(ran)
    assert [n for n in ran if not n.startswith("curve")] == [n for n in planned if not n.startswith("curve")]
    assert {"curve 0", "curve 1", "curve 2"} <= set(ran)
    assert ran == [
        *("layer 0", "layer 1", "layer 2", "layer 1f", "layer 1b", "layer 2f", "layer 2b"),
        *("curve 0", "curve 1", "curve 2", "mix", "concat"),
    ]
    # the halves: 2 Cs, no control; a curve point: 2 Cs x 2 fractions x 1 sentence order
    assert [planned[k] for k in ("layer 0", "layer 1f", "curve 0", "concat")] == [3, 2, 4, 6]
