"""probing.cli's messages in a student's first hour (issue #34, item 5): messages that name the command-line
option, corpora without lemmas, over-long and ambiguous ``--sentence`` queries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from probing import tokenize
from probing.cli import build_parser, main
from probing.corpora import load
from probing.encoders import get_encoder
from probing.errors import InputError
from probing.experiment import extract_activations
from probing.views.neighbors import neighbors

FIX = Path(__file__).parent / "fixtures"
ELMO = FIX / "elmo_allennlp"
SEMCOR = ["--model", ELMO, "--corpus", "demo-semcor", "--split", "train", "--max-sentences", 215, "-q"]


@pytest.fixture(autouse=True)
def env(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path_factory.getbasetemp() / "first-hour-cache"))
    monkeypatch.delenv("PROBING_DATA", raising=False)


def cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def user_error(capsys, *argv) -> str:
    """The one-line error of a command that must fail with status 2."""
    rc, _, err = cli(capsys, *argv)
    assert rc == 2 and "Traceback" not in err, err
    return err


def test_a_missing_split_names_the_command_line_option(capsys):
    err = user_error(capsys, "extract", "--model", ELMO, "--corpus", "demo-ud", "-q")
    assert "demo-ud has splits train, dev, test: name one (split= in Python, --split on the command line)" in err
    with pytest.raises(InputError, match="split= in Python"):
        load("demo-ud")
    # --help no longer offers "all" for every dataset: demo-ud refuses it
    split = next(a for a in build_parser()._actions[1].choices["extract"]._actions if "--split" in a.option_strings)
    assert "all" not in split.help and "probing data list" in split.help
    assert "no split 'all'" in user_error(capsys, "extract", "--model", ELMO, "--corpus", "demo-ud", "--split", "all")


def test_lemma_on_a_corpus_without_lemmas_says_so(tmp_path, capsys):
    rows = [
        "1\tThe\t_\tDET\t_\t_\t2\tdet\t_\t_",
        "2\tbank\t_\tNOUN\t_\t_\t0\troot\t_\t_",
        "3\tcloses\t_\tVERB\t_\t_\t2\tdep\t_\t_",
    ]
    other = ["1\tA\t_\tDET\t_\t_\t2\tdet\t_\t_", "2\tbank\t_\tNOUN\t_\t_\t0\troot\t_\t_"]
    path = tmp_path / "nolemma.conllu"
    path.write_text("\n".join(rows) + "\n\n" + "\n".join(other) + "\n\n")  # the query's own sentence is skipped
    corpus = ["--model", ELMO, "--corpus", f"conllu:{path}", "-q"]
    err = user_error(capsys, "neighbors", "bank", *corpus, "--lemma", "bank")
    assert "nolemma.conllu has no lemma annotation (its column is empty or '_'): --lemma cannot select" in err
    # the POS column is filled, so --pos still filters (and finds the noun)
    rc, out, _ = cli(capsys, "neighbors", "bank", *corpus, "--pos", "NOUN", "--layer", "0")
    assert rc == 0 and "bank" in out.split("layer 0:")[1]


def test_sentence_longer_than_a_text_line_is_refused():
    assert tokenize.MAX_TOKENS == 1000  # the text-file limit (probing.corpora.text)
    assert len(tokenize.as_words(" ".join(["a"] * 1000), "--sentence", max_tokens=1000)) == 1000
    with pytest.raises(InputError, match="--sentence has 1,001 tokens; at most 1,000 are taken"):
        tokenize.as_words(" ".join(["a"] * 1001), "--sentence", max_tokens=1000)


def test_cli_refuses_an_over_long_sentence(capsys):
    err = user_error(capsys, "neighbors", "play", *SEMCOR, "--sentence", "play " * 2000)
    assert "--sentence has 2,000 tokens; at most 1,000" in err and len(err) < 300  # not echoed back


def test_a_word_twice_in_the_sentence_is_named_and_position_picks_one(capsys):
    sentence = "I play chess and you play football ."
    rc, out, err = cli(capsys, "neighbors", "play", *SEMCOR, "--layer", 2, "-k", 1, "--sentence", sentence)
    assert rc == 0
    assert "'play' occurs 2 times in --sentence (words 2, 6, counting from 1); the query is word 2" in err
    rc, out6, err6 = cli(
        capsys, "neighbors", "play", *SEMCOR, "--layer", 2, "-k", 1, "--sentence", sentence, "--position", 6
    )
    assert rc == 0 and "occurs" not in err6
    store = extract_activations(str(ELMO), "demo-semcor", "train", max_sentences=215, progress=False)
    encoder = get_encoder(str(ELMO), seed=0)  # what the command line builds from --model
    for text, position in ((out, 1), (out6, 5)):
        want = neighbors("play", sentence=sentence, position=position, layer=2, store=store, encoder=encoder, k=1)
        cosine = float(text.split("layer 2:")[1].strip().splitlines()[3].split()[1])  # title, header, rule, row
        assert cosine == pytest.approx(float(want["cosine"].iloc[0]), abs=5e-4)
    # the two occurrences differ at layer 2 (context), so the test tells them apart
    w1, w5 = (
        neighbors("play", sentence=sentence, position=p, layer=2, store=store, encoder=encoder, k=1)["cosine"].iloc[0]
        for p in (1, 5)
    )
    assert not np.isclose(w1, w5, atol=1e-3)
    err = user_error(capsys, "neighbors", "play", *SEMCOR, "--sentence", sentence, "--position", 3)
    assert "--position 3: word 3 of --sentence is 'chess', not 'play'" in err
    assert "give --sentence too" in user_error(capsys, "neighbors", "play", *SEMCOR, "--position", 2)


def test_readme_cli_table_names_every_report_option():
    """README's CLI table omitted ``probing report --formats`` (issue #34): its row names every option."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `probing report "))
    report = build_parser()._actions[1].choices["report"]
    options = [o for a in report._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    assert options == ["--out", "--figures", "--formats"]
    assert [o for o in options if o not in row] == []
    neighbours = next(line for line in readme.splitlines() if line.startswith("| `probing neighbors "))
    assert "--sentence TEXT [--position N]" in neighbours


def test_long_steps_say_what_they_do(tmp_path, capsys):
    """``explore`` and ``--glosses`` were silent for minutes (issue #34): each says what it is doing on stderr,
    and ``-q`` keeps it quiet."""
    pytest.importorskip("bokeh", reason="the explorer needs the explore extra")
    args = ["neighbors", "play", *SEMCOR, "--layer", 0, "-k", 1, "--glosses"]
    rc, _, err = cli(capsys, *args)
    assert rc == 0 and "--glosses: looking up the WordNet gloss of each neighbour's sense" not in err  # -q in SEMCOR
    rc, _, err = cli(capsys, *[a for a in args if a != "-q"])
    assert rc == 0 and "--glosses: looking up the WordNet gloss of each neighbour's sense" in err
    store = [a for a in SEMCOR if a != "-q"]
    out = tmp_path / "play.html"
    rc, _, err = cli(capsys, "explore", *store, "--lemma", "play", "--layers", "0,2", "--method", "pca", "--out", out)
    assert rc == 0 and out.is_file()
    assert "explore: play in demo-semcor: PCA maps of 2 layer(s), WordNet glosses for the hover" in err
