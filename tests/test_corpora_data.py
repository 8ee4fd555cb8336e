"""Full datasets under $PROBING_DATA (laid out like shared/data): counts against their READMEs.

Skipped when $PROBING_DATA is unset; slow (about a minute on one core).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nltk.data
import pytest

from probing.corpora import load

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("PROBING_DATA"), reason="needs $PROBING_DATA laid out like shared/data"),
]


def counts(corpus) -> tuple[int, int, int]:
    """(sentences, tokens, annotated instances)."""
    sents = tokens = instances = 0
    for s in corpus:
        sents += 1
        tokens += len(s.words)
        instances += sum(i is not None for i in s.instance_ids) if s.instance_ids else 0
    return sents, tokens, instances


@pytest.mark.parametrize(
    "split,sentences,words", [("train", 12_544, 204_577), ("dev", 2_001, 25_147), ("test", 2_077, 25_094)]
)
def test_ud_ewt_counts(split, sentences, words):
    # shared/data/ud/en_ewt/README.md (= the repo's stats.xml): syntactic words
    assert counts(load("ud-ewt", split))[:2] == (sentences, words)


@pytest.mark.parametrize(
    "name,sentences,tokens,instances",
    [
        ("semcor", 37_176, 778_587, 226_036),
        ("senseval2", 238, 5_589, 2_314),
        ("senseval3", 300, 5_511, 1_937),
        ("semeval2007", 128, 3_238, 454),
        ("semeval2013", 306, 8_142, 1_644),
        ("wsd-all", 972, 22_480, 6_349),
    ],
)
def test_wsd_counts(name, sentences, tokens, instances):
    # shared/data/wsd/README.md, Statistics table
    assert counts(load(name)) == (sentences, tokens, instances)


def test_semcor_document_split_adds_up():
    test_sentences = list(load("semcor", "test"))
    test_docs = {s.doc_id for s in test_sentences}
    test, train = counts(test_sentences), counts(load("semcor", "train"))
    assert tuple(a + b for a, b in zip(train, test)) == (37_176, 778_587, 226_036)
    assert len(test_docs) == 70, "documents 4, 9, ..., 349 of 352"


@pytest.mark.parametrize(
    "name,split,sentences,tokens",
    [
        # shared/data/nltk_data/README.md counts NLTK's tokens; ours drop 6,592 -NONE- traces from treebank
        # (100,676 - 6,592 = 94,084) and 22 empty words from masc_tagged (592,536 - 22 = 592,514)
        ("ptb-sample", "train", 3_396, 81_793),
        ("ptb-sample", "dev", 273, 6_327),
        ("ptb-sample", "test", 245, 5_964),
        ("brown", "all", 57_340, 1_161_192),
        ("conll2000", "train", 8_936, 211_727),
        ("conll2000", "test", 2_012, 47_377),
        ("masc", "all", 34_534, 592_514),
    ],
)
def test_nltk_counts(name, split, sentences, tokens):
    assert counts(load(name, split))[:2] == (sentences, tokens)


def test_ptb_sample_splits_cover_the_treebank():
    sizes = [counts(load("ptb-sample", split))[:2] for split in ("train", "dev", "test")]
    assert tuple(map(sum, zip(*sizes))) == (3_914, 94_084)


def test_universal_tags_equal_nltk_map_tag(monkeypatch):
    """The bundled maps give what nltk.tag.map_tag gives with NLTK's own universal_tagset package."""
    from nltk.tag.mapping import map_tag

    monkeypatch.setattr(nltk.data, "path", [str(Path(os.environ["PROBING_DATA"]) / "nltk_data")])
    for name, source in (("ptb-sample", "en-ptb"), ("brown", "en-brown"), ("masc", "en-ptb")):
        split = "train" if name == "ptb-sample" else "all"
        for s in load(name, split).head(3000):
            assert s.upos == [map_tag(source, "universal", t) if t else "" for t in s.xpos], s.id


def test_demo_data_regenerates_byte_identically():
    script = Path(__file__).parents[1] / "scripts" / "make_demo_data.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
