"""probing.lm.pairs: the authors' BLiMP aggregation, readers for BLiMP and your own pairs, pair scoring."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_lm import FIXTURES, write_softmax

from probing.elmo import Elmo
from probing.errors import InputError
from probing.lm import sentence_scores
from probing.lm.head import read_vocab
from probing.lm.pairs import (
    BlimpNotFound,
    aggregate,
    differing_words,
    find_blimp,
    load_pairs,
    minimal_pairs,
    read_blimp,
    read_models_summary,
    read_pairs,
    reference_rows,
)

SUMMARY = Path(__file__).parent / "fixtures" / "blimp" / "models_summary.jsonl"


def test_aggregation_reproduces_the_authors_phenomenon_and_overall_rows():
    """models_summary.jsonl: 67 per-paradigm rows and, per model, 12 phenomenon rows and one overall row
    (overall 61.2 / 69.8 / 69.6 / 83.0 %); the latter must follow from the former by the authors' rule: their
    overall is our ``mean-over-groups``, and with 1,000 pairs in every paradigm also our ``overall``."""
    per_paradigm, phenomenon = read_models_summary(SUMMARY)
    assert len(per_paradigm) == 67
    published = [json.loads(line) for line in SUMMARY.read_text().splitlines() if '"UID":"overall"' in line]
    assert len(published) == 13
    for model in ("ngram", "lstm", "txl", "gpt2"):
        agg = aggregate(
            {g: np.array([v[model]]) for g, v in per_paradigm.items()}, phenomenon, dict.fromkeys(per_paradigm, 1000)
        )
        for row in published:
            # the file rounds to 10 digits
            if row["linguistics_term"] == "overall":
                for level in ("overall", "mean-over-groups"):
                    assert agg[(level, level)][0] == pytest.approx(row[model], abs=1e-9), (model, row)
            else:
                assert agg[("phenomenon", row["linguistics_term"])][0] == pytest.approx(row[model], abs=1e-9)
    rows = reference_rows(SUMMARY)
    overall = rows[(rows.level == "overall") & (rows.metric == "accuracy")].set_index("layer").value
    assert overall.round(3).to_dict() == {"5-gram": 0.612, "lstm": 0.698, "txl": 0.696, "gpt2": 0.830}


def test_overall_is_the_share_of_all_pairs_and_mean_over_groups_the_mean_over_paradigms():
    """Paradigms a (1 pair, right), b and c (2 and 7 pairs, wrong; phenomenon y): ``overall`` = 1 right of
    10 pairs = 0.1; ``mean-over-groups`` = (1 + 0 + 0) / 3 (over phenomena it would be 1/2); a phenomenon is the
    mean over its paradigms. A paradigm of size 0 (an undefined rate) adds nothing to ``overall``."""
    values = {"a": np.array([1.0]), "b": np.array([0.0]), "c": np.array([0.0])}
    agg = aggregate(values, {"a": "x", "b": "y", "c": "y"}, {"a": 1, "b": 2, "c": 7})
    assert agg[("phenomenon", "y")][0] == 0.0 and agg[("phenomenon", "x")][0] == 1.0
    assert agg[("overall", "overall")][0] == pytest.approx(0.1)
    assert agg[("mean-over-groups", "mean-over-groups")][0] == pytest.approx(1 / 3)
    nan = aggregate({"a": np.array([0.5, np.nan]), "b": np.array([1.0, 1.0])}, {}, {"a": np.array([2, 0]), "b": 2})
    np.testing.assert_allclose(nan[("overall", "overall")], [0.75, 1.0])  # replicate 2: b's 2 pairs alone


def blimp_zip(path: Path) -> Path:
    """A two-paradigm archive in BLiMP's layout (data/<UID>.jsonl, the authors' fields)."""
    with zipfile.ZipFile(path, "w") as z:
        for uid, term, pairs in (
            ("sv_agr", "subject_verb_agreement", [("The cat sat .", "The cat sit ."), ("A dog runs .", "A dog run .")]),
            ("det_n", "determiner_noun_agreement", [("This cat sat .", "These cat sat .")]),
        ):
            lines = [
                json.dumps(
                    {"sentence_good": g, "sentence_bad": b, "UID": uid, "linguistics_term": term, "pairID": str(i)}
                )
                for i, (g, b) in enumerate(pairs)
            ]
            z.writestr(f"data/{uid}.jsonl", "\n".join(lines) + "\n")
    return path


def test_blimp_reader_and_where_it_is_found(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROBING_DATA", raising=False)
    with pytest.raises(BlimpNotFound, match="probing data get blimp"):
        find_blimp()
    (tmp_path / "data" / "blimp").mkdir(parents=True)
    blimp_zip(tmp_path / "data" / "blimp" / "BLiMP.zip")
    monkeypatch.setenv("PROBING_DATA", str(tmp_path / "data"))
    pairs = read_blimp()
    assert pairs.group.tolist() == ["det_n", "sv_agr", "sv_agr"]  # archive member order, sorted
    assert pairs.phenomenon.tolist()[0] == "determiner_noun_agreement"
    assert pairs.iloc[1].good == "The cat sat ." and pairs.iloc[1].bad == "The cat sit ."
    assert load_pairs("blimp")[0] == "blimp"


def test_own_pairs_csv_and_jsonl(tmp_path):
    (tmp_path / "p.csv").write_text("good,bad,group\nThe cat sat .,The cat sit .,agr\nA dog runs .,A dog run .,\n")
    got = read_pairs(tmp_path / "p.csv")
    assert got.group.tolist() == ["agr", "all"] and got.good.tolist()[1] == "A dog runs ."
    (tmp_path / "p.jsonl").write_text('{"good": "a b", "bad": "b a"}\n\n{"good": "c", "bad": "d", "group": "g"}\n')
    assert read_pairs(tmp_path / "p.jsonl").group.tolist() == ["all", "g"]
    assert load_pairs(f"pairs:{tmp_path / 'p.jsonl'}")[0] == "p"
    (tmp_path / "bad.csv").write_text("sentence,other\nx,y\n")
    with pytest.raises(InputError, match="bad.csv: the header must name good and bad"):
        read_pairs(tmp_path / "bad.csv")
    (tmp_path / "bad.jsonl").write_text('{"good": "a"}\n')
    with pytest.raises(InputError, match="bad.jsonl, line 1: missing bad"):
        read_pairs(tmp_path / "bad.jsonl")
    (tmp_path / "empty.csv").write_text("good,bad\nThe cat,\n")
    with pytest.raises(InputError, match="empty.csv, line 2: good and bad must be non-empty"):
        read_pairs(tmp_path / "empty.csv")
    with pytest.raises(InputError, match="'blimp' or 'pairs:PATH'"):
        load_pairs("nonsense")


def test_differing_words_are_the_multiset_difference():
    assert differing_words("the cat sat".split(), "the cat sit".split()) == ["sat", "sit"]
    assert differing_words("a b a".split(), "a b".split()) == ["a"]
    assert differing_words("a b".split(), "b a".split()) == []


def test_minimal_pairs_against_sentence_scores(tmp_path):
    model = Elmo.from_files(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")
    vocab = FIXTURES / "vocab_test.txt"
    softmax = write_softmax(tmp_path / "softmax.hdf5", read_vocab(vocab), 16, scale=2.0)
    pairs = pd.DataFrame(
        {
            "good": ["Why do we care ?", "The press was good .", "The flu was major .", "Bush cares .", "We care ."],
            "bad": ["Why does we care ?", "The press were good .", "The flu were major .", "Bush care .", "We cares ."],
            "group": ["p1", "p1", "p2", "p2", "p3"],
            "phenomenon": ["agr", "agr", "agr", "agr", "other"],
        }
    )
    rows = minimal_pairs(pairs, model=model, softmax=softmax, vocab=vocab, n_boot=200)
    totals = sentence_scores([*pairs.good, *pairs.bad], model=model, softmax=softmax, vocab=vocab)
    good, bad = totals.iloc[:5].reset_index(drop=True), totals.iloc[5:].reset_index(drop=True)
    words = set(read_vocab(vocab))
    covered = np.array(
        [all(w in words for w in differing_words(g.split(), b.split())) for g, b in zip(pairs.good, pairs.bad)]
    )
    assert covered.tolist() == [False, True, True, False, False]  # "do" and "cares" are outside the vocabulary
    for direction in ("forward", "backward", "both"):
        right = (good[f"logprob_{direction}"] > bad[f"logprob_{direction}"]).to_numpy()
        per_group = {g: right[pairs.group == g].mean() for g in ("p1", "p2", "p3")}
        expected = {
            ("paradigm", "p1"): per_group["p1"],
            ("phenomenon", "agr"): (per_group["p1"] + per_group["p2"]) / 2,
            ("phenomenon", "other"): per_group["p3"],
            # 5 pairs: the share of them that are right, and the mean of the three paradigms' shares
            ("overall", "overall"): right.mean(),
            ("mean-over-groups", "mean-over-groups"): np.mean(list(per_group.values())),
        }
        got = rows[(rows.layer == direction) & (rows.metric == "accuracy")].set_index(["level", "group"]).value
        for key, value in expected.items():
            assert got[key] == pytest.approx(value), (direction, key)
        cov = rows[(rows.layer == direction) & (rows.metric == "coverage")].set_index(["level", "group"]).value
        assert cov[("paradigm", "p1")] == 0.5 and cov[("overall", "overall")] == pytest.approx(2 / 5)
        assert cov[("mean-over-groups", "mean-over-groups")] == pytest.approx((0.5 + 0.5 + 0) / 3)
        acc_cov = (
            rows[(rows.layer == direction) & (rows.metric == "accuracy_covered")].set_index(["level", "group"]).value
        )
        assert acc_cov[("paradigm", "p1")] == float(right[1]) and np.isnan(acc_cov[("paradigm", "p3")])
        # the covered pairs are the 2nd and 3rd: overall is over those two, whatever their paradigms
        assert acc_cov[("overall", "overall")] == pytest.approx(right[[1, 2]].mean())
    acc = rows[rows.metric == "accuracy"]
    assert ((acc.ci_low <= acc.value + 1e-12) & (acc.value <= acc.ci_high + 1e-12)).all()
    assert set(rows.level) == {"paradigm", "phenomenon", "overall", "mean-over-groups"}
    assert (rows.task == "minimal-pairs").all()


def test_data_get_blimp_fetches_the_pinned_archive(tmp_path, monkeypatch, capsys):
    import hashlib

    from fixtures.download.fileserver import FileServer

    from probing import cli, download
    from probing.download import ChecksumError
    from probing.lm import pairs as pairs_module

    data = blimp_zip(tmp_path / "BLiMP.zip").read_bytes()
    server = FileServer({"/blimp/BLiMP.zip": data})
    try:
        monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
        monkeypatch.delenv("PROBING_DATA", raising=False)
        monkeypatch.delenv("PROBING_OFFLINE", raising=False)
        monkeypatch.setattr(download, "RETRY_WAIT_S", 0.0)
        monkeypatch.setattr(pairs_module, "BLIMP_URL", server.url("/blimp/BLiMP.zip"))
        monkeypatch.setattr(pairs_module, "BLIMP_SIZE", len(data))
        monkeypatch.setattr(pairs_module, "BLIMP_SHA256", "0" * 64)
        with pytest.raises(ChecksumError):
            pairs_module.get_blimp()
        monkeypatch.setattr(pairs_module, "BLIMP_SHA256", hashlib.sha256(data).hexdigest())
        assert cli.main(["data", "get", "blimp"]) == 0
        assert "BLiMP" in capsys.readouterr().out
        assert find_blimp() == tmp_path / "cache" / "data" / "blimp" / "BLiMP.zip"
        assert len(read_blimp()) == 3
    finally:
        server.stop()


def test_the_real_blimp_has_67_paradigms_of_1000_pairs_and_the_summary_s_phenomena():
    import os

    root = os.environ.get("PROBING_DATA")
    if not root or not (Path(root) / "blimp" / "BLiMP.zip").is_file():
        pytest.skip("needs $PROBING_DATA/blimp/BLiMP.zip")
    pairs = read_blimp(Path(root) / "blimp" / "BLiMP.zip")
    sizes = pairs.groupby("group").size()
    assert len(sizes) == 67 and (sizes == 1000).all()
    _, phenomenon = read_models_summary(SUMMARY)
    assert dict(zip(pairs.group, pairs.phenomenon)) == phenomenon, "12 phenomena, grouped as in the authors' results"
    assert pairs.phenomenon.nunique() == 12
