"""Reading times (issue 40): the Natural Stories reader on a synthetic fixture in the corpus's layout (the corpus
is CC BY-NC-SA: never in the package or the tests), its download against a local HTTP server, the ΔLogLik and
Pearson r against independent numpy computations, and the ``reading-times`` task kind through ``probing run``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("statsmodels")  # a declared dependency; the regressions are its OLS

from fixtures.download.fileserver import FileServer

from probing import cli, download
from probing.errors import InputError
from probing.lm import score
from probing.lm.reading_times import (
    NATURALSTORIES_FILES,
    delta_loglik_per_word,
    get_naturalstories,
    metrics,
    read_corpus,
    score_words,
)
from probing.lm.score import load_model
from probing.results import read_results

FIXTURE = Path(__file__).parent / "fixtures" / "naturalstories"


def test_the_reader_joins_by_zone_numbers_sentences_and_reads_the_predictors():
    words = read_corpus(FIXTURE)
    assert len(words) == 25 + 20 + 21 and list(words.story.unique()) == [1, 2, 3]
    story1 = words[words.story == 1]
    # sentences end at "river." and "wheat."; '"Bread,"' (a comma before the quote) ends none, 'need."' does
    assert story1.sentence.tolist() == [0] * 7 + [1] * 11 + [2] * 7
    assert story1.first_in_sentence.sum() == 3 and story1.word.iloc[18] == '"Bread,"'
    # length without surrounding punctuation: "Bread" has 5 characters
    assert story1.length.iloc[18] == 5
    # RTs by (story, zone) from processed_wordinfo.tsv
    rts = pd.read_csv(FIXTURE / "naturalstories_RTS" / "processed_wordinfo.tsv", sep="\t", quoting=3)
    want = rts.set_index(["item", "zone"]).meanItemRT
    assert words.rt.tolist() == [want[(s, z)] for s, z in zip(words.story, words.zone)]
    # "Mr." has no .word code (as in the real corpus): its whole token's count is used
    freqs = pd.read_csv(FIXTURE / "freqs" / "freqs-1.tsv", sep="\t", header=None, quoting=3).set_index(0)[3]
    mr = words[(words.story == 3) & (words.zone == 1)]
    assert mr.log_frequency.item() == pytest.approx(math.log(freqs["3.1.whole"] + 1))
    assert mr.surprisal_unigram.item() == pytest.approx(-math.log2(freqs["3.1.whole"] + 1))


def test_gpt3_word_surprisal_sums_its_pieces():
    words = read_corpus(FIXTURE)
    gpt = pd.read_csv(FIXTURE / "probs" / "all_stories_gpt3.csv", keep_default_na=False)
    story1 = gpt[gpt.story == 0].reset_index(drop=True)
    # "miller" (6 letters) is one piece; "morning," (8) is two: " morn" + "ing,"
    i = story1.index[story1.token == " morn"][0]
    assert story1.token[i + 1] == "ing,"
    want = -(float(story1.logprob[i]) + float(story1.logprob[i + 1])) / math.log(2)
    assert words[(words.story == 1) & (words.word == "morning,")].surprisal_gpt3.item() == pytest.approx(want)
    # each story's first word has no log-probability
    assert words[words.zone == 1].surprisal_gpt3.isna().all()


def copy_fixture(tmp_path: Path) -> Path:
    dest = tmp_path / "ns"
    for f in NATURALSTORIES_FILES:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        (dest / f).write_bytes((FIXTURE / f).read_bytes())
    return dest


def test_rows_in_any_order_join_by_zone_and_a_missing_or_doubled_zone_is_named(tmp_path):
    root = copy_fixture(tmp_path)
    path = root / "naturalstories_RTS" / "processed_wordinfo.tsv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")  # sorted otherwise, like the real file
    assert read_corpus(root).rt.tolist() == read_corpus(FIXTURE).rt.tolist()
    path.write_text("\n".join([lines[0], *lines[2:]]) + "\n")  # story 1, zone 1 lost
    with pytest.raises(InputError, match="no reading time for story 1, zone 1"):
        read_corpus(root)
    path.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(InputError, match="story 1, zone 1 has 2 rows"):
        read_corpus(root)


def test_word_surprisal_attaches_punctuation_to_its_word():
    words = read_corpus(FIXTURE)
    model, head = load_model("default")
    fw, bw = score_words(words, model, head)
    # independently: the first sentence's tokens scored alone; "river." is "river" + "."
    tokens = ["The", "old", "miller", "lived", "by", "the", "river", "."]
    scored = score([tokens], model="default")
    bits_f = -scored.logprob_forward.to_numpy() / math.log(2)
    bits_b = -scored.logprob_backward.to_numpy() / math.log(2)
    assert fw[6] == pytest.approx(bits_f[6] + bits_f[7], rel=1e-6)
    assert bw[6] == pytest.approx(bits_b[6] + bits_b[7], rel=1e-6)
    assert fw[:6] == pytest.approx(bits_f[:6], rel=1e-6)


def synthetic(n_stories: int = 4, per_story: int = 60, effect: float = 25.0, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, n_stories + 1):
        for z in range(1, per_story + 1):
            length, freq, surprisal = rng.integers(1, 10), rng.uniform(10, 20), rng.uniform(0, 15)
            rows.append((s, z, length, freq, surprisal, z % 10 == 1))
    words = pd.DataFrame(rows, columns=["story", "zone", "length", "log_frequency", "surprisal", "first_in_sentence"])
    words["rt"] = 250 + 8 * words.length - 3 * words.log_frequency + effect * words.surprisal
    words["rt"] += rng.normal(0, 20, len(words))
    return words


def numpy_gain(words: pd.DataFrame, spillover: int, folds: int) -> np.ndarray:
    """The same held-out comparison by least squares: sigma = sqrt(SSR / (n - p)), R's sigma(model)."""
    cols = {}
    for c in ("length", "log_frequency", "surprisal"):
        for lag in range(spillover + 1):
            cols[(c, lag)] = words.groupby("story")[c].shift(lag).to_numpy()
    keep = np.all([np.isfinite(v) for v in cols.values()], axis=0)
    y = words.rt.to_numpy()[keep]
    base = np.column_stack([np.ones(keep.sum())] + [v[keep] for (c, _), v in cols.items() if c != "surprisal"])
    full = np.column_stack([base] + [v[keep] for (c, _), v in cols.items() if c == "surprisal"])
    fold = (words.story.to_numpy()[keep] - 1) % folds
    gain = np.zeros(keep.sum())
    for k in set(fold):
        te, tr = fold == k, fold != k
        ll = []
        for x in (full, base):
            beta, *_ = np.linalg.lstsq(x[tr], y[tr], rcond=None)
            sigma = math.sqrt(((y[tr] - x[tr] @ beta) ** 2).sum() / (tr.sum() - x.shape[1]))
            r = y[te] - x[te] @ beta
            ll.append(-0.5 * np.log(2 * np.pi * sigma**2) - r**2 / (2 * sigma**2))
        gain[te] = ll[0] - ll[1]
    return gain


def test_delta_loglik_is_the_held_out_gain_of_the_numpy_fit():
    words = synthetic()
    gain, rows = delta_loglik_per_word(words, "surprisal", spillover=2, folds=4)
    # the first 2 words of each of the 4 stories have no spillover predictors
    assert len(rows) == 4 * 58
    assert gain == pytest.approx(numpy_gain(words, 2, 4), abs=1e-9)
    assert gain.mean() > 0.5  # rt depends strongly on surprisal: a large gain per word
    # surprisal that has nothing to do with the reading times adds (nearly) nothing and may cost
    words["noise"] = np.random.default_rng(9).uniform(0, 15, len(words))
    noise, _ = delta_loglik_per_word(words, "noise", spillover=2, folds=4)
    assert abs(noise.mean()) < 0.05


def test_metrics_pearson_is_over_words_not_first_in_their_sentence():
    words = synthetic()
    found = metrics(words, "surprisal", spillover=1, folds=2, n_boot=200, seed=0)
    keep = ~words.first_in_sentence
    want = np.corrcoef(words.surprisal[keep], words.rt[keep])[0, 1]
    r, low, high, n = found["pearson-r"]
    assert r == pytest.approx(want) and n == keep.sum() and low <= r <= high
    value, low, high, n = found["delta-loglik"]
    assert value == pytest.approx(numpy_gain(words, 1, 2).mean()) and low <= value <= high and n == 4 * 59
    with pytest.raises(InputError, match="at least 2 folds"):
        delta_loglik_per_word(words[words.story == 1], "surprisal", folds=10)


# ---------------------------------------------------------------- download


@pytest.fixture
def served(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROBING_OFFLINE", raising=False)
    monkeypatch.setattr(download, "RETRY_WAIT_S", 0.0)
    srv = FileServer({f"/ns/{f}": (FIXTURE / f).read_bytes() for f in NATURALSTORIES_FILES})
    yield srv
    srv.stop()


def test_download_resumes_checks_content_and_records_the_first_hash(served, tmp_path):
    big = "/ns/naturalstories_RTS/processed_wordinfo.tsv"
    served.drop_after[big] = 500  # the first transfer breaks after 500 bytes: resumed with a Range request
    folder = get_naturalstories(served.url("/ns/{path}"), progress=False)
    assert folder == tmp_path / "cache" / "data" / "naturalstories"
    for f in NATURALSTORIES_FILES:
        assert (folder / f).read_bytes() == (FIXTURE / f).read_bytes()
    assert any(r.path == big and r.range == "bytes=500-" for r in served.requests)
    ledger = json.loads((tmp_path / "cache" / "downloads" / "ledger.json").read_text())
    assert len(ledger) == len(NATURALSTORIES_FILES)
    # a second call uses the copies, re-hashed against the ledger, with no request
    n = len(served.requests)
    get_naturalstories(served.url("/ns/{path}"), progress=False)
    assert len(served.requests) == n
    assert read_corpus(folder).rt.tolist() == read_corpus(FIXTURE).rt.tolist()


def test_a_file_that_is_not_the_expected_table_is_refused(served, tmp_path):
    served.files["/ns/naturalstories_RTS/all_stories.tok"] = b"item\tword\n1\tThe\n"
    with pytest.raises(InputError, match=r"all_stories\.tok: expected a file starting with 'word\\tzone\\titem'"):
        get_naturalstories(served.url("/ns/{path}"), dest=tmp_path / "d", progress=False)


def test_probing_data_get_naturalstories(served, monkeypatch, capsys):
    from probing.lm import reading_times

    monkeypatch.setattr(reading_times, "NATURALSTORIES_URL", served.url("/ns/{path}"))
    assert cli.main(["data", "get", "naturalstories"]) == 0
    assert "CC BY-NC-SA 4.0" in capsys.readouterr().out


# ---------------------------------------------------------------- the task kind


def test_reading_times_through_probing_run(tmp_path):
    toml = tmp_path / "rt.toml"
    toml.write_text(
        f'[experiment]\nname = "rt"\nbootstrap = 100\ncache_dir = "{tmp_path / "cache"}"\n\n'
        '[[encoders]]\nname = "lm"\nkind = "elmo"\nmodel = "default"\n\n'
        f'[[tasks]]\nname = "rt"\nkind = "reading-times"\ndata = "rt:{FIXTURE}"\nspillover = 1\nfolds = 3\n'
    )
    out = tmp_path / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    rows = read_results(out).set_index(["encoder", "layer", "metric"])
    assert set(rows.index) == {
        *(("lm", d, m) for d in ("forward", "backward", "both") for m in ("delta-loglik", "pearson-r")),
        ("reference", "gpt-3", "delta-loglik"),
        ("reference", "gpt-3", "pearson-r"),
        ("reference", "unigram", "pearson-r"),  # unigram surprisal is the baseline's frequency: no ΔLogLik
    }
    # the forward row is metrics() on the model's forward surprisal
    words = read_corpus(FIXTURE)
    model, head = load_model("default")
    fw, _ = score_words(words, model, head)
    want = metrics(words.assign(s=fw), "s", spillover=1, folds=3, n_boot=100, seed=0)
    assert rows.loc[("lm", "forward", "pearson-r")].value == pytest.approx(want["pearson-r"][0], rel=1e-6)
    assert rows.loc[("lm", "forward", "delta-loglik")].value == pytest.approx(want["delta-loglik"][0], rel=1e-5)
    assert (rows.ci_low <= rows.value).all() and (rows.value <= rows.ci_high).all()


@pytest.mark.parametrize(
    ("task", "says"),
    [('data = "blimp"', "'naturalstories' or 'rt:PATH'"), ("folds = 1", "folds"), ('data = "rt:nowhere"', "folder")],
)
def test_bad_options_name_the_key(tmp_path, task, says):
    from probing._toml import ExperimentError
    from probing.experiment import parse_experiment

    text = f'[experiment]\nname = "rt"\n[[encoders]]\nname = "lm"\nkind = "elmo"\nmodel = "default"\n[[tasks]]\nname = "rt"\nkind = "reading-times"\n{task}\n'
    with pytest.raises(ExperimentError, match=say_re(says)):
        parse_experiment(text, base=tmp_path)


def say_re(text: str) -> str:
    import re

    return re.escape(text)


def test_reading_time_figure_bins_by_surprisal_and_draws_the_fit():
    from matplotlib.container import ErrorbarContainer

    from probing.figures.reading_times import reading_time_figure

    words = synthetic().rename(columns={"surprisal": "surprisal_forward"})
    words["surprisal_backward"] = words.surprisal_forward[::-1].to_numpy()
    fig = reading_time_figure(words, bins=4)
    ax = fig.axes[0]
    (bins,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    x, y = bins.lines[0].get_data()
    order = np.argsort(words.surprisal_forward.to_numpy(), kind="stable")
    quarters = np.array_split(order, 4)
    # each point: the mean surprisal and the mean RT of a quarter of the words, in order of surprisal
    assert np.allclose(x, [words.surprisal_forward.to_numpy()[q].mean() for q in quarters])
    assert np.allclose(y, [words.rt.to_numpy()[q].mean() for q in quarters])
    slope = np.polyfit(words.surprisal_forward, words.rt, 1)[0]
    assert any(f"{slope:.1f} ms/bit" in t.get_text() for t in ax.get_legend().get_texts())
    with pytest.raises(InputError, match="bins must be >= 2"):
        reading_time_figure(words, bins=1)
