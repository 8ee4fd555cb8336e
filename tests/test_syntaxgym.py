"""SyntaxGym suites (issue 40): the prediction-formula parser, regions mapped to the model's tokens, region
surprisals against the LM's own word scores, predictions, aggregation, the authors' reference rows recomputed
exactly as their analysis code does, and the ``syntaxgym`` task kind through ``probing run``."""

from __future__ import annotations

import gzip
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probing import cli
from probing.errors import InputError
from probing.lm import evaluate_predictions, region_surprisal, score
from probing.lm.formula import FormulaError, evaluate, parse_formula
from probing.lm.syntaxgym import (
    aggregate,
    bundled_suites,
    item_outcomes,
    left_to_right_only,
    load_suite,
    reference_table,
    summarize,
    tokens_by_region,
)
from probing.paths import resources_dir
from probing.results import read_results

TINY = Path(__file__).parent / "fixtures" / "syntaxgym" / "tiny_suite.json"
BUNDLED = resources_dir() / "syntaxgym"


# ---------------------------------------------------------------- formulas


def value(formula: str, values: dict) -> bool | float:
    return evaluate(parse_formula(formula, "test"), values)


def test_formulas_compute_what_they_say():
    v = {("a", 1): 3.0, ("b", 1): 5.0, ("a", 2): 1.0, ("b", 2): 0.5}
    assert value("(1;%a%) < (1;%b%)", v) is True  # 3 < 5
    assert value("(1;%a%)>(1;%b%)", v) is False
    # + and - are left-associative: (3 - 5) + 1 = -1, not 3 - (5 + 1) = -3
    assert value("(1;%a%) - (1;%b%) + (2;%a%) = -1", v) is True
    assert value("(1;%a%) - (1;%b%) + (2;%a%) = -3", v) is False
    assert value("[(1;%a%) - (1;%b%) + (2;%a%)] > -1.5 & (2;%a%) > (2;%b%)", v) is True
    # & and | share one precedence, left to right (SyntaxGym's): F | T & F = (F | T) & F = F
    assert value("[(1;%a%) > 9] | [(1;%a%) < 9] & [(1;%a%) > 9]", v) is False
    # grouped the other way it is true
    assert value("[(1;%a%) > 9] | [[(1;%a%) < 9] & [(1;%a%) < 9]]", v) is True
    # = is np.isclose with atol 1e-3, rtol 1e-5
    assert value("(1;%a%) = 3.0009", v) is True
    assert value("(1;%a%) = 3.002", v) is False
    # * sums all regions of a condition: 3 + 1 = 4; the %% around a condition may be left out
    assert value("(*;%a%) = 4", v) is True
    assert value("(1;a) < (1;b)", v) is True
    # round brackets group too
    assert value("((1;%a%) - (1;%b%)) < 0", v) is True


def test_a_nan_region_makes_comparisons_false():
    v = {("a", 1): math.nan, ("b", 1): 1.0}
    assert value("(1;%a%) < (1;%b%)", v) is False
    assert value("(1;%a%) > (1;%b%)", v) is False
    assert value("(1;%a%) = (1;%a%)", v) is False


@pytest.mark.parametrize(
    ("formula", "says"),
    [
        ("[(1;%a%) < (1;%b%)", "is not closed by ']'"),
        ("(1;%a%) < ", "ends where"),
        ("(1;%a%) < (1;%b%) < (1;%c%)", "chain of comparisons"),
        ("(1;%a%) + (1;%b%)", "is a number, not a comparison"),
        ("(1;%a%) & (1;%b%)", "joins truth values"),
        ("[(1;%a%) < (1;%b%)] + 1 > 0", "adds numbers"),
        ("(1;%a%) < (1;%b%)]", "unexpected ']'"),
        ("(1;%a%) << (1;%b%)", "unexpected '<'"),
        ("(1;%a%) < (1;%b%) ; drop", "cannot read"),
        ("__import__('os') < 1", "cannot read"),
        ("", "is empty"),
    ],
)
def test_malformed_formulas_are_input_errors_naming_where_and_formula(formula, says):
    with pytest.raises(FormulaError, match=re.escape(says)) as e:
        parse_formula(formula, "suite 'x', prediction 1")
    assert isinstance(e.value, InputError)
    assert "suite 'x', prediction 1" in str(e.value) and repr(formula) in str(e.value)


def test_every_bundled_formula_parses():
    # the 34 suites of Hu et al., 36 predictions (fgd_hierarchy and nn-nv-rpl have two each)
    suites = [load_suite(s) for s in bundled_suites()]
    assert len(suites) == 34
    assert sum(len(s.predictions) for s in suites) == 36


def write_suite(tmp_path: Path, formula: str, name: str = "bad_suite") -> Path:
    text = TINY.read_text().replace('"tiny_agreement"', f'"{name}"')
    text = text.replace('"(3;%match%) < (3;%mismatch%)"', '"' + formula + '"')
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    return path


def test_a_suite_with_a_malformed_formula_names_suite_and_formula(tmp_path):
    path = write_suite(tmp_path, "[(3;%match%) < (3;%mismatch%)")
    with pytest.raises(InputError, match=r"suite 'bad_suite' .*prediction 1.*\[\(3;%match%\) < \(3;%mismatch%\)"):
        load_suite(path)


def test_a_formula_reading_an_unknown_condition_or_region_is_named(tmp_path):
    with pytest.raises(InputError, match=r"condition 'matchh', which item 1 lacks"):
        load_suite(write_suite(tmp_path, "(3;%matchh%) < (3;%mismatch%)"))
    with pytest.raises(InputError, match=r"region 9 of condition 'match', which item 1 lacks"):
        load_suite(write_suite(tmp_path, "(9;%match%) < (3;%mismatch%)"))


def test_malformed_suite_files_name_file_and_field(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text('{"meta": {"name": "s"}, "predictions": [], "items": [{"conditions": []}]}')
    with pytest.raises(InputError, match=r"s\.json: items\[0\]: missing field 'item_number'"):
        load_suite(bad)
    bad.write_text('{"meta": {"name": "s", "metric": "mode"}, "items": []}')
    with pytest.raises(InputError, match=r"meta\.metric must be one of"):
        load_suite(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not a SyntaxGym JSON file"):
        load_suite(bad)
    with pytest.raises(InputError, match="neither a bundled suite"):
        load_suite("no_such_suite")


# ---------------------------------------------------------------- regions and the model


def test_regions_are_joined_tokenised_and_mapped_back():
    # punctuation and contractions inside regions are split by the model's tokenizer (probing.tokenize),
    # each token staying in its region; an empty region has no token; contents are stripped
    words, owner = tokens_by_region(
        [(1, "The company's boss"), (2, ", who didn't smile ,"), (3, ""), (4, " is"), (5, "tired.")]
    )
    assert words == ["The", "company", "'s", "boss", ",", "who", "did", "n't", "smile", ",", "is", "tired", "."]
    assert owner == [1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 4, 5, 5]


def test_region_surprisal_sums_the_lms_word_surprisals(tmp_path):
    regions = region_surprisal(TINY, model="default")
    assert list(regions.columns) == ["suite", "item", "condition", "region", "surprisal_forward", "surprisal_backward"]
    assert set(regions.item) == {1, 2}  # 1-based, as in the JSON
    assert len(regions) == 2 * 2 * 4
    suite = load_suite(TINY)
    for it in suite.items:
        for cond, regs in it.conditions.items():
            words, owner = tokens_by_region(regs)
            # independently: the per-word scores of the whole sentence alone (probing.lm.score), natural log ->
            # bits; float32 batches of other lengths differ in the 7th digit
            scored = score([words], model="default")
            bits_f = -scored.logprob_forward.to_numpy() / math.log(2)
            bits_b = -scored.logprob_backward.to_numpy() / math.log(2)
            for number, _ in regs:
                row = regions[(regions.item == it.number) & (regions.condition == cond) & (regions.region == number)]
                mask = np.array(owner) == number
                assert row.surprisal_forward.item() == pytest.approx(bits_f[mask].sum(), rel=1e-6, abs=1e-6)
                assert row.surprisal_backward.item() == pytest.approx(bits_b[mask].sum(), rel=1e-6, abs=1e-6)
    # item 2's region 2 is empty: a sum over no word is 0
    empty = regions[(regions.item == 2) & (regions.region == 2)]
    assert (empty.surprisal_forward == 0).all() and (empty.surprisal_backward == 0).all()
    # the word "were"/"was" differs: region 3 differs between conditions, region 1 (before it) does not forward
    r1 = regions[(regions.item == 2) & (regions.region == 1)].surprisal_forward
    assert r1.iloc[0] == r1.iloc[1]


def test_mean_metric_averages_the_words(tmp_path):
    path = tmp_path / "mean.json"
    path.write_text(TINY.read_text().replace('"metric": "sum"', '"metric": "mean"'))
    sums = region_surprisal(TINY).set_index(["item", "condition", "region"])
    means = region_surprisal(path).set_index(["item", "condition", "region"])
    # item 1, region 2 ", who didn't smile ," has 6 tokens; region 3 one; item 2's empty region 2: NaN
    assert means.loc[(1, "match", 2)].surprisal_forward == pytest.approx(
        sums.loc[(1, "match", 2)].surprisal_forward / 6
    )
    assert means.loc[(1, "match", 3)].surprisal_backward == pytest.approx(sums.loc[(1, "match", 3)].surprisal_backward)
    assert math.isnan(means.loc[(2, "match", 2)].surprisal_forward)


def synthetic_regions(fw: dict, bw: dict) -> pd.DataFrame:
    rows = []
    for (item, cond, region), f in fw.items():
        rows.append(("tiny_agreement", item, cond, region, f, bw[(item, cond, region)]))
    return pd.DataFrame(
        rows, columns=["suite", "item", "condition", "region", "surprisal_forward", "surprisal_backward"]
    )


def test_predictions_per_direction_and_both_as_the_mean():
    fw, bw = {}, {}
    for item in (1, 2):
        for cond in ("match", "mismatch"):
            for region in (1, 2, 3, 4):
                fw[(item, cond, region)] = bw[(item, cond, region)] = 1.0
    # item 1: forward right (match verb 2 bits below mismatch), backward wrong by 6: both = mean, wrong
    fw[(1, "match", 3)], fw[(1, "mismatch", 3)] = 2.0, 4.0
    bw[(1, "match", 3)], bw[(1, "mismatch", 3)] = 9.0, 3.0
    # item 2: forward wrong by 1, backward right by 3: both right ((5+1)/2 = 3 < (4+4)/2 = 4)
    fw[(2, "match", 3)], fw[(2, "mismatch", 3)] = 5.0, 4.0
    bw[(2, "match", 3)], bw[(2, "mismatch", 3)] = 1.0, 4.0
    got = evaluate_predictions(synthetic_regions(fw, bw), TINY)
    assert list(got.columns) == ["suite", "item", "prediction", "direction", "correct"]
    first = got[got.prediction == 1].set_index(["item", "direction"]).correct
    assert first.to_dict() == {
        (1, "forward"): True,
        (1, "backward"): False,
        (1, "both"): False,
        (2, "forward"): False,
        (2, "backward"): True,
        (2, "both"): True,
    }
    # prediction 2: [...] < 0 | region 1 equal; region 1 is equal in both conditions, so it always holds
    assert got[got.prediction == 2].correct.all()
    # an item is right when all its predictions hold
    items = item_outcomes(got).set_index(["item", "direction"]).correct
    assert items.to_dict() == first.to_dict()


def test_a_region_table_missing_a_region_is_named():
    table = synthetic_regions({(1, "match", 1): 1.0}, {(1, "match", 1): 1.0})
    with pytest.raises(InputError, match=r"formula '\(3;%match%\) < \(3;%mismatch%\)' reads"):
        evaluate_predictions(table, TINY)


def test_which_predictions_are_defined_for_left_to_right_reading_only():
    # number_src compares is/are at the verb with the same words after it: the backward LM cannot see the
    # subject; center_embed sums the two verb regions, and the second verb differs between conditions
    assert left_to_right_only("number_src") == {1: 1.0}
    assert left_to_right_only("center_embed") == {1: 0.0}
    # mvrr: one item of 28 (27) lacks the continuation in one condition
    assert left_to_right_only("mvrr") == {1: pytest.approx(27 / 28)}


# ---------------------------------------------------------------- aggregation


def test_circuits_and_sg_score_leave_out_the_authors_excluded_suites():
    per_suite = {
        "number_src": np.array([0.5]),
        "number_orc": np.array([1.0]),
        "npz_obj": np.array([0.25]),
        "fgd-embed3": np.array([0.0]),  # excluded by the authors: a suite row only
        "nn-nv-rpl": np.array([0.0]),  # excluded, and no circuit
    }
    agg = {k: float(v[0]) for k, v in aggregate(per_suite).items()}
    assert agg["circuit:Agreement"] == 0.75  # mean of 0.5 and 1.0
    assert agg["circuit:Garden-Path Effects"] == 0.25
    assert "circuit:Long-Distance Dependencies" not in agg
    assert agg["overall"] == pytest.approx((0.5 + 1.0 + 0.25) / 3)  # the mean over suites, not over items
    assert agg["suite:fgd-embed3"] == 0.0 and agg["suite:nn-nv-rpl"] == 0.0


def test_summary_cis_hold_their_points_and_collapse_when_items_agree():
    outcomes = pd.DataFrame(
        [("number_src", i, d, i <= 3) for i in range(1, 5) for d in ("forward", "backward", "both")]
        + [("npz_obj", i, d, True) for i in range(1, 3) for d in ("forward", "backward", "both")],
        columns=["suite", "item", "direction", "correct"],
    )
    table = summarize(outcomes, n_boot=300, seed=0).set_index(["direction", "split"])
    assert table.loc[("forward", "suite:number_src")].value == 0.75
    assert table.loc[("forward", "overall")].value == pytest.approx((0.75 + 1.0) / 2)
    assert table.loc[("forward", "overall")].n_items == 6
    npz = table.loc[("forward", "suite:npz_obj")]
    assert npz.ci_low == npz.ci_high == 1.0  # every item right: every replicate is 1
    assert (table.ci_low <= table.value).all() and (table.value <= table.ci_high).all()


# ---------------------------------------------------------------- the authors' results


def authors_suites_df(paths: list[Path]) -> pd.DataFrame:
    """main.upstream.py's own steps, transcribed: load, split ids, exclusions, n-gram majority vote,
    per-(model, corpus, seed, suite) means (their ``suites_df``)."""
    circuits = {
        "Licensing": ["npi", "reflexive"],
        "Long-Distance Dependencies": ["fgd", "cleft"],
        "Agreement": ["number"],
        "Garden-Path Effects": ["npz", "mvrr"],
        "Gross Syntactic State": ["subordination"],
        "Center Embedding": ["center"],
    }
    tag_to_circuit = {tag: circuit for circuit, tags in circuits.items() for tag in tags}
    results_df = pd.concat([pd.read_csv(f) for f in paths])
    model_ids = results_df.model.str.split("_", expand=True).rename(columns={0: "model_name", 1: "corpus", 2: "seed"})
    results_df = pd.concat([results_df, model_ids], axis=1).drop(columns=["model"])
    results_df["seed"] = results_df.seed.fillna("0").astype(int)
    results_df["tag"] = results_df.suite.transform(lambda s: re.split(r"[-_0-9]", s)[0])
    results_df["circuit"] = results_df.tag.map(tag_to_circuit)
    results_df = results_df[~results_df.suite.str.contains(re.compile(r"^fgd-embed[34]|^gardenpath|^nn-nv"))]
    for ngram_model in ["1gram", "ngram", "ngram-single"]:
        ngram_results_df = (
            results_df[results_df.model_name == ngram_model]
            .copy()
            .groupby(["model_name", "corpus", "suite", "item", "tag", "circuit"])
            .agg({"correct": "mean"})
            > 0.5
        ).reset_index()
        ngram_results_df["seed"] = 0
        results_df = pd.concat([results_df[~(results_df.model_name == ngram_model)], ngram_results_df], sort=True)
    suites_df = results_df.groupby(["model_name", "corpus", "seed", "suite"]).correct.mean().reset_index()
    suites_df["circuit"] = suites_df.suite.transform(lambda s: re.split(r"[-_0-9]", s)[0]).map(tag_to_circuit)
    return suites_df


def test_reference_rows_recompute_the_authors_sg_scores_exactly():
    paths = sorted((BUNDLED / "sg_results").glob("*.csv.gz"))
    assert len(paths) == 10
    suites_df = authors_suites_df(paths)
    ours = reference_table().set_index(["model", "split"]).value
    suites_df["id"] = [m if not c else f"{m}_{c}" for m, c in zip(suites_df.model_name, suites_df.corpus)]
    # SG score: their figure 1 bars, suites_df's rows of a model averaged
    sg = suites_df.groupby("id").correct.mean()
    for model, score_ in sg.items():
        assert ours[(model, "overall")] == score_, model
    # per circuit (their figure 5), and per suite (the mean over seeds of the suite's mean over items)
    for (model, circuit), v in suites_df.groupby(["id", "circuit"]).correct.mean().items():
        assert ours[(model, f"circuit:{circuit}")] == v
    for (model, suite), v in suites_df.groupby(["id", "suite"]).correct.mean().items():
        assert ours[(model, f"suite:{suite}")] == v
    # 31 suites count (34 less fgd-embed3/4 and nn-nv-rpl), which still get suite rows of their own
    assert suites_df.suite.nunique() == 31
    assert (ours.index.get_level_values("split").str.startswith("suite:")).sum() == 10 * 34
    # the published ordering: GPT-2 XL best, the n-gram last; the values as these files give them
    assert sg.idxmax() == "gpt-2-xl-pretrained" and sg.idxmin() == "ngram_bllip-lg"
    assert round(sg["gpt-2-xl-pretrained"], 4) == 0.8424
    assert round(sg["grnn"], 4) == 0.5514 and round(sg["jrnn"], 4) == 0.5627


def test_reference_rows_follow_a_runs_items():
    # the authors count items from 0: the run's items 1-3 are their 0-2
    full = load_suite("number_src")
    raw = pd.read_csv(BUNDLED / "sg_results" / "syntaxgym_results_grnn_.csv.gz")
    want = raw[(raw.suite == "number_src") & (raw.item < 3)].correct.mean()
    got = reference_table(["number_src"], items={"number_src": [it.number for it in full.items[:3]]})
    got = got.set_index(["model", "split"]).value
    assert got[("grnn", "suite:number_src")] == want


@pytest.mark.skipif(
    not (Path(os.environ.get("PROBING_DATA", "/nonexistent")) / "syntaxgym").is_dir(),
    reason="the shared data (PROBING_DATA/syntaxgym) is not here",
)
def test_bundled_files_are_the_shared_originals_byte_for_byte():
    root = Path(os.environ["PROBING_DATA"]) / "syntaxgym"
    for f in (root / "test_suites" / "json").glob("*.json"):
        assert gzip.decompress((BUNDLED / "suites" / f"{f.name}.gz").read_bytes()) == f.read_bytes(), f.name
    for f in (root / "sg_results").glob("*.csv"):
        assert gzip.decompress((BUNDLED / "sg_results" / f"{f.name}.gz").read_bytes()) == f.read_bytes(), f.name
    assert (BUNDLED / "LICENSE").read_bytes() == (root / "LICENSE").read_bytes()


# ---------------------------------------------------------------- the task kind


def experiment(tmp_path: Path, task: str) -> Path:
    toml = tmp_path / "sg.toml"
    toml.write_text(
        f'[experiment]\nname = "sg"\nbootstrap = 200\ncache_dir = "{tmp_path / "cache"}"\n\n'
        '[[encoders]]\nname = "lm"\nkind = "elmo"\nmodel = "default"\n\n'
        f'[[tasks]]\nname = "sg"\nkind = "syntaxgym"\n{task}\n'
    )
    return toml


def test_own_suite_through_probing_run_matches_evaluate_predictions(tmp_path):
    toml = experiment(tmp_path, f'data = "suite:{TINY}"')
    out = tmp_path / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    rows = read_results(out)
    assert set(rows.dataset) == {"tiny_suite"} and set(rows.encoder) == {"lm"}  # no reference rows
    assert set(rows.layer) == {"forward", "backward", "both"}
    assert set(rows.split) == {"suite:tiny_agreement", "overall"}  # its tag is no circuit of the authors'
    want = item_outcomes(evaluate_predictions(region_surprisal(TINY), TINY)).groupby("direction").correct.mean()
    got = rows[rows.split == "overall"].set_index("layer").value
    for d in ("forward", "backward", "both"):
        assert got[d] == want[d]


def test_bundled_suite_with_reference_rows_and_a_figure(tmp_path):
    toml = experiment(tmp_path, 'data = "syntaxgym:number_src"\nmax_items = 3')
    out = tmp_path / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    rows = read_results(out)
    assert set(rows.split) == {"suite:number_src", "circuit:Agreement", "overall"}
    refs = rows[rows.encoder == "reference"].set_index(["layer", "split"]).value
    raw = pd.read_csv(BUNDLED / "sg_results" / "syntaxgym_results_jrnn_.csv.gz")
    assert refs[("jrnn", "overall")] == raw[(raw.suite == "number_src") & (raw.item < 3)].correct.mean()
    assert len(set(rows[rows.encoder == "reference"].layer)) == 10
    assert cli.main(["report", str(out)]) == 0
    assert (out / "figures" / "syntaxgym_sg_syntaxgym_overall.png").is_file()


@pytest.mark.parametrize(
    ("task", "says"),
    [
        ('data = "blimp"', "'syntaxgym', 'syntaxgym:<suite>'"),
        ('data = "syntaxgym:no_such"', "a bundled suite"),
        ('data = "suite:missing.json"', "naming an existing file"),
        ('suites = ["number_src", "number_src"]', "distinct names"),
        ("max_items = 0", "max_items"),
    ],
)
def test_bad_options_name_the_key(tmp_path, task, says):
    from probing._toml import ExperimentError
    from probing.experiment import parse_experiment

    with pytest.raises(ExperimentError, match=re.escape(says)):
        parse_experiment(experiment(tmp_path, task).read_text(), base=tmp_path)
