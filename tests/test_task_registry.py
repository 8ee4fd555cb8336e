"""A task kind owns everything kind-specific (its metrics and headline, the headline's direction, its
figures, its code's identity) and is one module plus one registration: toy kinds registered here run from an
experiment file through the runner, the summary, the CLI and the report without any other module knowing
them; a WSD task named "senses" keeps its F1 headline. A task option is one module plus one registration too:
``tests/toy_option.py``'s option, offered by the lower-is-better toy kind, adds its side table and its figure
through ``probing run`` and ``probing report``; the built-in options' part of the job keys is as it was."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pytest

from probing import cli
from probing import figures as fg
from probing._toml import ExperimentError
from probing.errors import InputError
from probing.experiment import parse_experiment, run_experiment
from probing.report import figure_title, summary_table
from probing.results import (
    METRICS,
    SIDE_TABLES,
    Metric,
    layer_sort_key,
    make_row,
    read_results,
    register_metric,
)
from probing.store import Store
from probing.tasks import (
    TASK_KINDS,
    TASK_OPTIONS,
    Job,
    TaskKind,
    TaskOutput,
    headline_metric,
    headline_metrics,
    register_task_kind,
    register_task_option,
)
from tests import toy_option

N = 12

ENCODER = """
[[encoders]]
name = "elmo"
kind = "elmo"
options = "model/options.json"
weights = "model/weights.hdf5"
"""


def _norms(job: Job) -> TaskOutput:
    """The toy kind: the mean L2 norm of each layer's test vectors (no probe at all)."""
    out = TaskOutput()
    for part in job.tests:
        for layer in part.store.layer_names:
            norms = np.linalg.norm(part.store.layer(layer, dtype=np.float64), axis=1)
            out.rows.append(make_row(job.task, part.dataset, part.split, job.encoder, layer, "mean-norm", norms.mean()))
    return out


MEAN_NORM = Metric("mean-norm", "mean L2 norm")


@dataclass(frozen=True)
class NormOptions:
    """The toy kind's own keys, typed: read through ``Table`` by ``parse_options``."""

    scale: float = 1.0


@pytest.fixture
def registries():
    """Kinds, options, metrics and side tables registered by a test are unregistered after it."""
    saved = [(registry, dict(registry)) for registry in (TASK_KINDS, TASK_OPTIONS, METRICS, SIDE_TABLES)]
    yield
    for registry, before in saved:
        registry.clear()
        registry.update(before)


@pytest.fixture
def toy_kind(registries):
    kind = TaskKind("toy-norm", run=_norms, metrics=(MEAN_NORM,), headline="mean-norm", options=NormOptions)
    return register_task_kind(kind)


@pytest.fixture
def folder(elmo_folder):
    return elmo_folder


def test_a_toy_kind_registered_in_one_place_runs_end_to_end(toy_kind, folder):
    exp = parse_experiment(
        f"""
        [experiment]
        max_sentences = {N}
        {ENCODER}
        [[tasks]]
        name = "norms"
        kind = "toy-norm"
        scale = 2.5
        train = "demo-ud:train"
        test = ["demo-ud:test"]
        """,
        base=folder,
    )
    assert exp.tasks[0].options == {"scale": 2.5}  # the kind's own key, read from its options dataclass
    res = run_experiment(exp, folder / "out", progress=False)
    store = res.store("elmo", "demo-ud", "test")
    expected = [np.linalg.norm(store.layer(k, dtype=np.float64), axis=1).mean() for k in ("0", "1", "2")]
    rows = res.results.set_index("layer")
    np.testing.assert_allclose(rows.loc[["0", "1", "2"], "value"], expected, rtol=1e-12)
    assert res.provenance["headlines"] == {"norms": "mean-norm"}
    # the summary and the figures take the headline from the registry: not a percentage, not dropped
    summary = res.summary()
    np.testing.assert_allclose(
        summary.loc[("norms", "demo-ud", "test", "elmo"), ["0", "1", "2"]], np.round(expected, 1)
    )
    assert headline_metrics(res.results)["norms"] == "mean-norm"
    fg.layer_scores(res.results, "norms", "mean-norm")  # draws the headline it is handed, without the kind
    # a malformed or unknown key of the toy kind is an error naming it, like any other task key
    with pytest.raises(ExperimentError, match=r"tasks\[0\]\.scale: expected a positive finite number, got 'x'"):
        parse_experiment(
            f'{ENCODER}\n[[tasks]]\nkind = "toy-norm"\nscale = "x"\ntrain = "demo-ud:train"\ntest = "demo-ud:test"',
            base=folder,
        )
    with pytest.raises(ExperimentError, match=r"tasks\[0\]: unknown key\(s\) 'nope'"):
        parse_experiment(
            f'{ENCODER}\n[[tasks]]\nkind = "toy-norm"\nnope = 1\ntrain = "demo-ud:train"\ntest = "demo-ud:test"',
            base=folder,
        )


def test_register_task_kind_refuses_to_shadow_a_kind_silently():
    with pytest.raises(ValueError, match="'tagging' is already registered"):
        register_task_kind(replace(TASK_KINDS["tagging"], allows_dev=False))


def test_a_kind_without_exactly_one_headline_among_its_metrics_is_refused_when_made():
    # at once, not after every job ran: the kind cannot even be constructed
    with pytest.raises(InputError, match=r"'toy' needs exactly one headline among its metrics \['mean-norm'\]"):
        TaskKind("toy", run=_norms, metrics=(MEAN_NORM,), headline="")
    with pytest.raises(InputError, match="exactly one headline"):
        TaskKind("toy", run=_norms, metrics=(MEAN_NORM,), headline="accuracy")
    with pytest.raises(InputError, match="listed twice"):
        TaskKind("toy", run=_norms, metrics=(MEAN_NORM, MEAN_NORM), headline="mean-norm")
    with pytest.raises(InputError, match=r"beside names metrics it does not emit: \['dspr'\]"):
        TaskKind("toy", run=_norms, metrics=(MEAN_NORM,), headline="mean-norm", beside=("dspr",))
    with pytest.raises(TypeError):
        TaskKind("toy", run=_norms)  # type: ignore[call-arg]  # metrics and headline are required


def test_a_wsd_task_named_senses_keeps_its_f1_headline(folder):
    exp = parse_experiment(
        f"""
        [experiment]
        max_sentences = {N}
        bootstrap = 50
        {ENCODER}
        [[tasks]]
        name = "senses"
        kind = "wsd-1nn"
        wordnet = "bundled"
        baselines = ["wn-first-sense"]
        train = "demo-semcor:train"
        test = ["demo-semcor:test"]
        """,
        base=folder,
    )
    res = run_experiment(exp, folder / "out", progress=False)
    assert set(res.results["metric"]) == {"f1", "best-layer-margin"}
    summary = res.summary()
    f1 = res.results[res.results.metric == "f1"].set_index(["encoder", "layer"])["value"]
    # F1 in percent for every layer and the baseline: the task's name plays no part
    assert summary.loc[("senses", "demo-semcor", "test", "elmo"), "2"] == round(f1[("elmo", "2")] * 100, 1)
    assert summary.loc[("senses", "demo-semcor", "test", "baseline"), "wn-first-sense"] == round(
        f1[("baseline", "wn-first-sense")] * 100, 1
    )
    # without provenance too (a results.csv read back): F1 is the headline of a kind, found by metric
    assert headline_metrics(res.results) == {"senses": "f1"}


def test_headline_per_kind_and_layer_order():
    assert headline_metric("wsd-1nn") == "f1" and headline_metric("tagging") == "accuracy"
    assert headline_metric("structural-depth") == "root_acc"
    results = pd.DataFrame({"task": ["a", "a", "b"], "metric": ["control-accuracy", "accuracy", "selectivity"]})
    with pytest.raises(ValueError, match="task 'b' has no headline metric"):
        headline_metrics(results)
    assert headline_metrics(results.iloc[:2]) == {"a": "accuracy"}
    layers = ["concat", "glove", "10", "2", "mix", "1b", "1f", "1", "0"]
    assert sorted(layers, key=layer_sort_key) == ["0", "1", "1b", "1f", "2", "10", "mix", "concat", "glove"]
    with pytest.raises(ValueError, match="already registered differently"):
        register_metric(Metric("f1", "something else"))


def test_probe_warnings_name_grid_edges_and_unconverged_fits():
    from probing.experiment.assembly import probe_warnings

    probes = [
        {"task": "upos", "encoder": "elmo", "layer": "0", "C": 100.0, "converged": True},
        {"task": "upos", "encoder": "elmo", "layer": "1", "C": 10.0, "converged": False},
        {"task": "upos", "encoder": "glove", "layer": "glove", "C": 1.0, "converged": True},
    ]
    msgs = probe_warnings(probes, (1.0, 10.0, 100.0))
    # one message per end of the grid that was chosen, and one for the fit that hit max_iter
    assert len(msgs) == 3
    assert "chose the smallest C" in msgs[0] and "upos/glove/glove" in msgs[0] and "smaller" in msgs[0]
    assert "chose the largest C" in msgs[1] and "upos/elmo/0" in msgs[1]
    assert "stopped at max_iter" in msgs[2] and "upos/elmo/1" in msgs[2]
    assert probe_warnings(probes, (10.0,)) == [msgs[2]]  # a single C is the user's choice, not a grid edge


def test_margin_rows_compare_the_best_single_layer_with_the_next_paired_by_item():
    from probing.tasks.common import Part, margin_rows

    part = Part("d", "test", store=None)  # margin_rows reads only the part's names
    groups = np.array(["s1", "s1", "s2", "s2", "s3", "s3"])
    per_layer = {
        "0": [(part, np.array([1, 0, 0, 0, 1, 0.0]), groups)],  # 2/6
        "1": [(part, np.array([1, 1, 1, 0, 1, 1.0]), groups)],  # 5/6: best
        "2": [(part, np.array([1, 1, 0, 1, 1, 0.0]), groups)],  # 4/6: next
    }
    (row,) = margin_rows("upos", "elmo", per_layer, seed=0, n_boot=200)
    # layer 1 minus layer 2, item by item: (0, 0, 1, -1, 0, 1) -> mean 1/6
    assert (row["layer"], row["metric"]) == ("1", "best-layer-margin")
    assert row["value"] == pytest.approx(1 / 6)
    assert row["ci_low"] <= row["value"] <= row["ci_high"]
    tie = {"0": per_layer["1"], "1": per_layer["1"]}
    assert margin_rows("t", "e", tie, 0, 50)[0]["layer"] == "0"  # ties go to the earlier layer, margin 0
    assert margin_rows("t", "e", {"glove": per_layer["0"]}, 0, 50) == []  # one layer: nothing to compare


# ---------------------------------------------------------------- a lower-is-better kind from outside


DISTANCE = Metric("centroid-distance", "mean distance to the layer's centroid", higher_is_better=False)


def _distances(job: Job) -> TaskOutput:
    """Lower is better: each layer's mean Euclidean distance of its test vectors to their centroid."""
    out = TaskOutput()
    for part in job.tests:
        for layer in part.store.layer_names:
            x = part.store.layer(layer, dtype=np.float64)
            value = np.linalg.norm(x - x.mean(axis=0), axis=1).mean()
            out.rows.append(make_row(job.task, part.dataset, part.split, job.encoder, layer, DISTANCE.name, value))
    return out


def _distances_halved(job: Job) -> TaskOutput:
    """The same kind after an edit of its code: half the distances."""
    out = _distances(job)
    for row in out.rows:
        row["value"] /= 2
        row["ci_low"] /= 2
        row["ci_high"] /= 2
    return out


def _spread_figure(results: pd.DataFrame, task: str, dataset: str, split: str):
    """The kind's own figure: a bar per layer."""
    from matplotlib.figure import Figure

    rows = results[(results["task"] == task) & (results["dataset"] == dataset) & (results["split"] == split)]
    fig = Figure()
    fig.subplots().bar(rows["layer"].astype(str), rows["value"])
    return {"spread": fig}


SPREAD = f"""
[experiment]
max_sentences = {N}
{ENCODER}
[[tasks]]
name = "spread"
kind = "toy-spread"
train = "demo-ud:train"
test = ["demo-ud:test"]
"""


def _spread_kind(run) -> TaskKind:
    return TaskKind("toy-spread", run=run, metrics=(DISTANCE,), headline=DISTANCE.name, figures=_spread_figure)


def test_a_lower_is_better_kind_from_outside_runs_through_the_cli_and_the_report(registries, folder, capsys):
    register_task_kind(_spread_kind(_distances))
    toml = folder / "spread.toml"
    toml.write_text(SPREAD)
    out = folder / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    results = read_results(out)
    values = results.set_index("layer")["value"]
    lowest = str(values.idxmin())
    assert values[lowest] < values.drop(lowest).min()  # one clear lowest layer
    # the best layer is the LOWEST value, and it is shown as a plain number, not a percentage
    (row,) = summary_table(results, {"spread": "toy-spread"}).to_dict("records")
    assert (row["metric"], row["best layer"], row["score"]) == (DISTANCE.name, lowest, f"{values[lowest]:.4g}")
    assert cli.main(["report", str(out)]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    # the kind's own figure (its hook) and the layer figure are in the report; no overview (not asked for)
    assert 'alt="spread_spread"' in html and f'alt="{figure_title("layer_scores_spread")}"' in html
    assert 'id="fig-overview"' not in html
    assert (out / "figures" / "spread_spread.png").is_file()

    # the same kind again is served from the job cache; an edit of its run function is not
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["provenance"]["cached_jobs"] == ["spread/elmo"]
    register_task_kind(_spread_kind(_distances_halved), replace=True)
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["provenance"]["cached_jobs"] == []
    np.testing.assert_allclose(read_results(out).set_index("layer")["value"], values / 2, rtol=1e-12)
    # a process that does not know the kind still writes the report, without the kind's figures
    del TASK_KINDS["toy-spread"]
    assert cli.main(["report", str(out)]) == 0
    assert 'alt="spread_spread"' not in (out / "report.html").read_text(encoding="utf-8")
    capsys.readouterr()


def test_margins_and_best_layers_follow_a_lower_is_better_headline():
    from probing.tasks.common import Part, margin_rows

    part = Part("d", "test", store=None)
    groups = np.array(["s1", "s1", "s2", "s2"])
    per_layer = {
        "0": [(part, np.array([3.0, 3.0, 2.0, 2.0]), groups)],  # mean 2.5: the worst
        "1": [(part, np.array([1.0, 1.0, 2.0, 0.0]), groups)],  # mean 1.0: the best when lower is better
        "2": [(part, np.array([2.0, 1.0, 2.0, 1.0]), groups)],  # mean 1.5: next
    }
    (row,) = margin_rows("t", "e", per_layer, seed=0, n_boot=100, higher_is_better=False)
    # the improvement of layer 1 over layer 2, item by item: (1, 0, 0, 1) -> mean 0.5, positive = better
    assert (row["layer"], row["value"]) == ("1", pytest.approx(0.5))
    (up,) = margin_rows("t", "e", per_layer, seed=0, n_boot=100)
    assert (up["layer"], up["value"]) == ("0", pytest.approx(1.0))  # higher is better: layer 0 over layer 2


# ---------------------------------------------------------------- a task option from outside


def _norms_doubled(job: Job, options) -> TaskOutput:
    """The toy option after an edit of its code: twice the norms."""
    out = toy_option.norm_rows(job, options)
    for row in out.tables["layer_norms"]:
        row["mean_norm"] *= 2
    return out


def test_a_task_option_from_outside_adds_its_side_table_and_figure_through_the_cli_and_the_report(
    registries, folder, capsys
):
    register_task_option(toy_option.NORMS)  # the one registration line
    register_task_kind(replace(_spread_kind(_distances), task_options=("norms",)))  # a kind that offers it
    text = SPREAD
    toml = folder / "norms.toml"
    toml.write_text(text + "norms = { scale = 2.0 }\n")
    out = folder / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    norms = pd.read_csv(out / "layer_norms.csv", dtype={"layer": str})
    prov = json.loads((out / "results.json").read_text())["provenance"]
    store = Store.open(prov["stores"]["elmo/demo-ud:test"]["path"])
    expected = [2.0 * np.linalg.norm(store.layer(k, dtype=np.float64), axis=1).mean() for k in ("0", "1", "2")]
    assert norms["layer"].tolist() == ["0", "1", "2"] and set(norms["task"]) == {"spread"}
    np.testing.assert_allclose(norms["mean_norm"], expected, rtol=1e-12)
    assert prov["experiment"]["tasks"][0]["norms"] == {"scale": 2.0}  # the option's part of the job key
    results = read_results(out)
    assert set(results["metric"]) == {DISTANCE.name}  # no result rows of its own: a side table
    assert cli.main(["report", str(out)]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'alt="layer_norms_spread"' in html and (out / "figures" / "layer_norms_spread.png").is_file()

    # served from the job cache with its side table; an edit of its code is not (its code is in the job key)
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["provenance"]["cached_jobs"] == ["spread/elmo"]
    pd.testing.assert_frame_equal(pd.read_csv(out / "layer_norms.csv", dtype={"layer": str}), norms)
    register_task_option(replace(toy_option.NORMS, rows=_norms_doubled), replace=True)
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["provenance"]["cached_jobs"] == []
    doubled = pd.read_csv(out / "layer_norms.csv", dtype={"layer": str})
    np.testing.assert_allclose(doubled["mean_norm"], 2 * norms["mean_norm"], rtol=1e-12)
    # without the option the stale table goes, and the rows stay
    toml.write_text(text)
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    assert not (out / "layer_norms.csv").exists()
    pd.testing.assert_frame_equal(read_results(out), results)

    # its keys are checked like any key, and a kind that does not offer it does not read them
    with pytest.raises(ExperimentError, match=r"tasks\[0\]\.norms: unknown key\(s\) 'scal'"):
        parse_experiment(text + "norms = { scal = 2.0 }\n", base=folder)
    with pytest.raises(ExperimentError, match=r"tasks\[0\]\.norms\.scale: expected a positive finite number"):
        parse_experiment(text + 'norms = { scale = "x" }\n', base=folder)
    tagging = text.replace('kind = "toy-spread"', 'kind = "tagging"\nlabel = "upos"')
    with pytest.raises(ExperimentError, match=r"tasks\[0\]: unknown key\(s\) 'norms'"):
        parse_experiment(tagging + "norms = { scale = 2.0 }\n", base=folder)
    with pytest.raises(InputError, match="offers options that are not registered: \\['nope'\\]"):
        register_task_kind(replace(_spread_kind(_distances), name="toy-nope", task_options=("nope",)))
    capsys.readouterr()


def test_an_options_code_enters_the_job_key_only_where_it_names_some():
    """The built-in options add nothing to a job's key (their code is the tasks' code, already in it); an option
    that names an analysis module in ``code`` adds that module's code identity, renewed by its ``version``; an
    option from outside adds its own module's code."""
    from probing.experiment.jobs import option_identity

    assert [option_identity(TASK_OPTIONS[name]) for name in ("mdl", "learning_curve", "erase")] == [None] * 3
    analysis = replace(TASK_OPTIONS["erase"], code=("probing.analysis.erasure",))
    keyed = option_identity(analysis)
    assert keyed is not None and keyed != option_identity(replace(analysis, version=2))
    outside = option_identity(toy_option.NORMS)
    assert outside is not None and outside != option_identity(replace(toy_option.NORMS, rows=_norms_doubled))


# the job-key part of a task with each form of the built-in options, recorded before they became TaskOptions
# (issue 38): digest(TaskSpec.to_dict()), byte for byte the same, so their cached jobs keep their keys
OPTION_KEYS = {
    'kind = "tagging"\nlabel = "upos"': "c667fef3225aa70a5fdee3540c4f4550d7809dd42684a829a222b21a8aaa8f59",
    'kind = "tagging"\nlabel = "upos"\ndirections = true\noov_split = true': (
        "53e75a9dcf4f31a57d50d9695ac95375dbefad99e61503edf310a8a91f3ec0c5"
    ),
    'kind = "tagging"\nlabel = "upos"\nmdl = true': "2e21fd4b9f01e1d81dfb57f76a82c4faa59de8a0c1fc927c7423979e4489503b",
    'kind = "tagging"\nlabel = "xpos"\nmdl = true\nmdl_probe = "mlp"\nmdl_seeds = 2': (
        "c825c2a60c5c90a068b29ebdc0194450548c75ec71734b94a27f85eb55cd9443"
    ),
    'kind = "tagging"\nlabel = "upos"\nmdl = true\nmdl_probe = "mlp"\nmdl_hidden_layers = 2\nmdl_width = 64': (
        "a5f4f731a776813bd187faa961d985a7c2c3392c652dd2cfd1ee246b956aa62a"
    ),
    'kind = "tagging"\nlabel = "upos"\nmdl = true\nmdl_epsilon = 0.5': (
        "3559aceae4405963494cd0f2deba35f02241c5618f16919592b75b159d1fe2ea"
    ),
    'kind = "tagging"\nlabel = "upos"\nmdl = true\nmdl_epsilon = 0.25\nmdl_seeds = 3': (
        "b44b7cd809d6e0a8583d219634f155456cd43581bdb79d69c00fd176e52fd94e"
    ),
    'kind = "tagging"\nlabel = "upos"\nlearning_curve = [1.0, 0.1, 0.01]': (
        "6574d8df1cf5c3feea649a2bbb586919797b32780cb2b6d06ed1929521edd86f"
    ),
    'kind = "tagging"\nlabel = "upos"\nlearning_curve = [0.5, 1]\nlearning_curve_seeds = 2': (
        "32cb5b219291bd67329dde1c7cbaea298299931b21b7165b36eb32aed408ea7f"
    ),
    'kind = "tagging"\nlabel = "upos"\nmdl = true\nlearning_curve = [0.5, 1.0]': (
        "02d4672e74874d82c5fa34f0f31c1bde0c849a5b6c4f6977b70583bb108363e6"
    ),
    'kind = "tagging"\nlabel = "upos"\nerase = { label = "upos" }': (
        "de3f606fe74f2d3245f1bd0714f8a1af5f595fa47f056aab4377c76fa72329b0"
    ),
    'kind = "tagging"\nlabel = "upos"\nerase = [{ label = "upos", method = "inlp" }, { label = "xpos", method = "random" }]': (
        "288d71f2e5d6510851f732e3413b7eba514bb10ac83c8390a8a09a1220eaab11"
    ),
    'kind = "tagging"\nlabel = "upos"\nerase = { label = "upos", method = "leace" }\nlearning_curve = [1.0]': (
        "aade0a90b120b467fca7643fb5b1292535d7d6e7817626c6b3139ddb66f622af"
    ),
    'kind = "supersense"\nmdl = true\nlearning_curve = [0.5, 1.0]': (
        "72cf4be1b7e6981d5a9548af9bb49c17f6c471b70346f025eb3c9ce51d79fc09"
    ),
    'kind = "wsd-1nn"\nlearning_curve = [0.5, 1.0]\nerase = { label = "upos" }': (
        "fa6e4a7ad164f6dd1b6cfb41c4d3af5e3afb40aecf0f9b0466068f2603a06259"
    ),
    'kind = "structural-distance"\nerase = { label = "upos" }\nrank = 8': (
        "509dc147880d91aa3439fdeefb6582c82d0aa742285a234f9453ecfd63f33aa7"
    ),
}


@pytest.mark.parametrize("body", list(OPTION_KEYS))
def test_the_built_in_options_keep_their_part_of_the_job_key(body):
    from probing.identity import digest

    data = 'train = "demo-ud:train"\ntest = ["demo-ud:test"]'
    if "supersense" in body or "wsd" in body:
        data = data.replace("demo-ud", "demo-semcor")
    exp = parse_experiment(f'[[encoders]]\nname = "elmo"\nkind = "elmo"\n[[tasks]]\nname = "t"\n{body}\n{data}\n')
    assert digest(exp.tasks[0].to_dict()) == OPTION_KEYS[body]
