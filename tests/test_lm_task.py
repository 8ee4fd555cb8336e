"""The ``minimal-pairs`` task kind end to end through ``probing run`` (issue 29), on a small committed pairs file
and a two-paradigm BLiMP-layout archive, with the bundled model and its fitted LM head."""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from probing import cli
from probing._toml import ExperimentError
from probing.experiment import parse_experiment, run_experiment
from probing.lm import load_model, sentence_scores
from probing.lm.pairs import read_models_summary
from probing.paths import resources_dir
from probing.results import read_provenance, read_results
from probing.tasks import TaskError
from probing.tokenize import tokenize

PAIRS = Path(__file__).parent / "fixtures" / "lm" / "pairs_small.csv"


def experiment(tmp_path: Path, task: str, encoder: str = 'kind = "elmo"\nmodel = "default"') -> Path:
    toml = tmp_path / "grammar.toml"
    toml.write_text(
        f'[experiment]\nname = "grammar"\nbootstrap = 200\ncache_dir = "{tmp_path / "cache"}"\n\n'
        f'[[encoders]]\nname = "lm"\n{encoder}\n\n[[tasks]]\nname = "grammar"\nkind = "minimal-pairs"\n{task}\n'
    )
    return toml


def expected_outcomes(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per pair, from lm.sentence_scores (independently of the kind): good strictly above bad per direction,
    and coverage from the head's vocabulary (the multiset difference of the two token lists)."""
    good = sentence_scores(list(pairs.good))
    bad = sentence_scores(list(pairs.bad))
    _, head = load_model("default")
    out = pairs[["group"]].copy()
    for d in ("forward", "backward", "both"):
        out[d] = good[f"logprob_{d}"].to_numpy() > bad[f"logprob_{d}"].to_numpy()
    covered = []
    for g, b in zip(pairs.good, pairs.bad):
        cg, cb = Counter(tokenize(g)), Counter(tokenize(b))
        covered.append(all(w in head.index for w in ((cg - cb) + (cb - cg)).elements()))
    out["covered"] = covered
    return out


def test_pairs_file_through_probing_run_matches_sentence_scores(tmp_path):
    toml = experiment(tmp_path, 'data = "pairs:' + str(PAIRS) + '"')
    out = tmp_path / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    rows = read_results(out)
    assert set(rows.dataset) == {"pairs_small"} and set(rows.encoder) == {"lm"}
    assert set(rows.layer) == {"forward", "backward", "both"}
    groups = ["agreement", "gaps", "irregular"]
    # user pairs have no phenomenon
    assert set(rows.split) == {"overall", "mean-over-groups", *(f"paradigm:{g}" for g in groups)}
    want = expected_outcomes(pd.read_csv(PAIRS))
    assert not want.covered.all()  # the fixture has a pair with a made-up word ("zxqv"), so coverage < 1
    value = rows.set_index(["split", "layer", "metric"]).value
    for d in ("forward", "backward", "both"):
        per_group = want.groupby("group")[d].mean()
        cov = want.groupby("group").covered.mean()
        for g in groups:
            assert value[(f"paradigm:{g}", d, "accuracy")] == pytest.approx(per_group[g])
            assert value[(f"paradigm:{g}", d, "coverage")] == pytest.approx(cov[g])
            on_covered = want[(want.group == g) & want.covered][d]
            assert value[(f"paradigm:{g}", d, "accuracy_covered")] == pytest.approx(on_covered.mean())
        # overall: the share of all pairs; mean-over-groups: the BLiMP authors' mean over groups
        assert value[("overall", d, "accuracy")] == pytest.approx(want[d].mean())
        assert value[("mean-over-groups", d, "accuracy")] == pytest.approx(per_group.mean())
    assert (rows.ci_low <= rows.value).all() and (rows.value <= rows.ci_high).all()
    prov = read_provenance(out)
    assert prov["kinds"] == {"grammar": "minimal-pairs"} and prov["headlines"] == {"grammar": "accuracy"}
    note = prov["probes"][0]
    assert note["n_pairs"] == len(want) and note["n_groups"] == 3
    # a second run reuses the finished job (the scores are cached by the job cache's identity rule)
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    assert read_provenance(out)["cached_jobs"] == ["grammar/lm"]
    pd.testing.assert_frame_equal(read_results(out), rows)


def test_the_cache_key_follows_the_pairs_file_content(tmp_path):
    pairs = tmp_path / "mine.csv"
    pairs.write_text("good,bad\nThe cat sleeps .,The cat sleep .\n")
    toml = experiment(tmp_path, 'data = "pairs:mine.csv"')  # relative to the experiment file
    exp = parse_experiment(toml.read_text(), source=str(toml), base=tmp_path)
    first = run_experiment(exp, tmp_path / "a", progress=False)
    pairs.write_text("good,bad\nThe cat sleeps .,The cat sleep .\nThe cats sleep .,The cats sleeps .\n")
    second = run_experiment(exp, tmp_path / "b", progress=False)
    assert second.provenance["cached_jobs"] == []  # same options, new content: recomputed
    assert first.provenance["probes"][0]["n_pairs"] == 1 and second.provenance["probes"][0]["n_pairs"] == 2


def blimp_zip(path: Path) -> Path:
    """Two real BLiMP paradigms (their UIDs and phenomena), three pairs each, in the archive's layout."""
    paradigms = {
        ("regular_plural_subject_verb_agreement_1", "subject_verb_agreement"): [
            ("The dogs run .", "The dogs runs ."),
            ("A girl sings .", "A girl sing ."),
            ("The men eat .", "The men eats ."),
        ],
        ("determiner_noun_agreement_1", "determiner_noun_agreement"): [
            ("This cat sleeps .", "These cat sleeps ."),
            ("Those books fell .", "That books fell ."),
            ("These houses are old .", "This houses are old ."),
        ],
    }
    with zipfile.ZipFile(path, "w") as z:
        for (uid, term), pairs in paradigms.items():
            lines = [
                json.dumps({"sentence_good": g, "sentence_bad": b, "UID": uid, "linguistics_term": term})
                for g, b in pairs
            ]
            z.writestr(f"data/{uid}.jsonl", "\n".join(lines) + "\n")
    return path


def test_blimp_rows_per_paradigm_phenomenon_and_overall_with_the_authors_references(tmp_path, monkeypatch):
    (tmp_path / "data" / "blimp").mkdir(parents=True)
    blimp_zip(tmp_path / "data" / "blimp" / "BLiMP.zip")
    monkeypatch.setenv("PROBING_DATA", str(tmp_path / "data"))
    toml = experiment(tmp_path, 'data = "blimp"\nmax_pairs = 2')
    exp = parse_experiment(toml.read_text(), source=str(toml), base=tmp_path)
    res = run_experiment(exp, tmp_path / "out", progress=False)
    rows = res.results
    assert res.provenance["probes"][0]["n_pairs"] == 4  # max_pairs: the first 2 of each paradigm
    uids = ["regular_plural_subject_verb_agreement_1", "determiner_noun_agreement_1"]
    splits = {"overall", "mean-over-groups", *(f"paradigm:{u}" for u in uids)}
    splits |= {"phenomenon:subject_verb_agreement", "phenomenon:determiner_noun_agreement"}
    model = rows[rows.encoder == "lm"]
    assert set(model.split) == splits
    # the references: the authors' per-paradigm values of the same two paradigms, aggregated the same way
    ref = rows[rows.encoder == "reference"].set_index(["split", "layer"]).value
    assert set(rows[rows.encoder == "reference"].layer) == {"5-gram", "lstm", "txl", "gpt2", "human"}
    per_paradigm, _ = read_models_summary(resources_dir() / "blimp" / "models_summary.jsonl")
    for key, layer in (("ngram", "5-gram"), ("gpt2", "gpt2")):
        assert ref[(f"paradigm:{uids[0]}", layer)] == per_paradigm[uids[0]][key]
        for split in ("overall", "mean-over-groups"):  # BLiMP's paradigms are all 1,000 pairs
            assert ref[(split, layer)] == pytest.approx(np.mean([per_paradigm[u][key] for u in uids]))
    # one paradigm per phenomenon here, so each phenomenon equals its paradigm
    acc = model[model.metric == "accuracy"].set_index(["split", "layer"]).value
    for d in ("forward", "backward", "both"):
        assert acc[("phenomenon:subject_verb_agreement", d)] == acc[(f"paradigm:{uids[0]}", d)]
    # the report draws the kind's figure once (no 80 layer figures) and no layer_scores figure
    from probing.report import draw_figures

    figs = draw_figures(rows, kinds={"grammar": "minimal-pairs"})
    assert list(figs) == ["minimal_pairs_grammar_blimp_overall"]


def test_a_model_without_an_lm_head_is_a_clear_error_naming_the_encoder(tmp_path):
    toml = experiment(tmp_path, 'data = "pairs:' + str(PAIRS) + '"', encoder='kind = "random-elmo"\nmodel = "default"')
    exp = parse_experiment(toml.read_text(), source=str(toml), base=tmp_path)
    with pytest.raises(TaskError, match=r"encoder 'lm' \(RandomElmoEncoder.*has no LM head"):
        run_experiment(exp, tmp_path / "out", progress=False)


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ('data = "wikipedia"', r"tasks\[0\]\.data.*'blimp' or 'pairs:PATH'"),
        ('data = "pairs:missing.csv"', r"tasks\[0\]\.data.*existing file"),
        ('data = "blimp"\ntrain = "demo-ud:train"', r"tasks\[0\].*train"),
        ('data = "blimp"\nmax_pairs = 0', r"max_pairs"),
    ],
)
def test_bad_task_tables_name_the_key(tmp_path, task, message):
    toml = experiment(tmp_path, task)
    with pytest.raises(ExperimentError, match=message):
        parse_experiment(toml.read_text(), source=str(toml), base=tmp_path)


def test_the_bundled_blimp_sample_is_twelve_paradigms_one_per_phenomenon():
    """blimp_sample.csv (notebook 08's quick data): 20 pairs of one paradigm per phenomenon, read by the pairs
    reader with its phenomenon column; each (paradigm, phenomenon) as in the authors' results file, and the
    pairs the first 20 of BLiMP's own where BLiMP is at hand."""
    from probing.lm.pairs import find_blimp, read_blimp, read_pairs

    sample = read_pairs(resources_dir() / "blimp" / "blimp_sample.csv")
    assert len(sample) == 240 and sample.group.value_counts().eq(20).all()
    _, phenomenon = read_models_summary(resources_dir() / "blimp" / "models_summary.jsonl")
    pairs = dict(zip(sample.group, sample.phenomenon))
    assert len(pairs) == 12 and len(set(pairs.values())) == 12
    assert all(phenomenon[g] == p for g, p in pairs.items())
    try:
        blimp = read_blimp(find_blimp(), paradigms=list(pairs))
    except FileNotFoundError:
        pytest.skip("BLiMP.zip not found: the pairs are not compared with the archive")
    first = blimp.groupby("group", sort=False).head(20).reset_index(drop=True)
    pd.testing.assert_frame_equal(first, sample)
