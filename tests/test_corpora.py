"""Sentence/Corpus contract and the four readers, on committed fixtures (tests/fixtures/corpora)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import nltk.data
import numpy as np
import pytest

from probing.corpora import (
    Corpus,
    CorpusFormatError,
    Sentence,
    read_conllu,
    read_nltk_tagged,
    read_raganato,
    read_text,
)
from probing.corpora.base import TOKEN_COLUMNS
from probing.corpora.nltk_tagged import universal_map

FIXTURES = Path(__file__).parent / "fixtures" / "corpora" / "data"
UD = FIXTURES / "ud" / "en_ewt"
SE2 = FIXTURES / "wsd" / "senseval2"


def private_copy(src: Path, dest: Path) -> Path:
    """Copy a fixture tree with go-w permissions: NLTK refuses data folders other accounts can write to."""
    shutil.copytree(src, dest)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest


@pytest.fixture
def nltk_root(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))  # undo the reader's append after the test
    return private_copy(FIXTURES / "nltk_data", tmp_path / "nltk_data")


def two_sentences() -> list[Sentence]:
    return [
        Sentence(
            "s1",
            "d1",
            ["The", "bank", "closed"],
            upos=["DET", "NOUN", "VERB"],
            lemmas=["the", "bank", "close"],
            senses=[(), ("bank%1:14:00::", "bank%1:14:01::"), ()],
            instance_ids=[None, "d1.s1.t0", None],
        ),
        Sentence("s2", "d1", ["Hi"], upos=["INTJ"]),
    ]


# --- Sentence and Corpus -------------------------------------------------------------------------------


def test_sentence_rejects_annotation_of_wrong_length():
    with pytest.raises(ValueError, match=r"sentence 's1': upos has 1 items but words has 2"):
        Sentence("s1", "d", ["a", "b"], upos=["X"])


@pytest.mark.parametrize("words", [["a", ""], ["a", "  "]])
def test_sentence_rejects_empty_token(words):
    with pytest.raises(ValueError, match=r"sentence 's1': token 1 is empty"):
        Sentence("s1", "d", words)


def test_sentence_rejects_no_words():
    with pytest.raises(ValueError, match="has no words"):
        Sentence("s1", "d", [])


def test_fingerprint_follows_documented_encoding():
    # Reference: the encoding spelled out in Corpus.fingerprint's docstring, computed by hand here.
    h = hashlib.sha256(b"probing-corpus/1\n")
    for rec in (
        [
            "s1",
            "d1",
            ["The", "bank", "closed"],
            ["DET", "NOUN", "VERB"],
            None,
            ["the", "bank", "close"],
            [[], ["bank%1:14:00::", "bank%1:14:01::"], []],
            [None, "d1.s1.t0", None],
        ],
        ["s2", "d1", ["Hi"], ["INTJ"], None, None, None, None],
    ):
        h.update(json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    assert Corpus.from_sentences(two_sentences(), name="x").fingerprint() == h.hexdigest()


def test_the_fingerprinted_copy_hashes_to_the_fingerprint_and_replays_every_sentence(tmp_path):
    corpus = Corpus.from_sentences(two_sentences(), name="x", split="dev")
    copy = tmp_path / "copy.jsonl"
    with open(copy, "wb") as f:
        fp, lengths = corpus.fingerprint_and_lengths(copy_to=f)
    assert fp == corpus.fingerprint() == hashlib.sha256(copy.read_bytes()).hexdigest()
    assert lengths.dtype == np.int64 and lengths.tolist() == [3, 1]
    replay = Corpus.from_records(copy, name="x", split="dev")
    assert list(replay) == two_sentences()  # dataclass equality: ids, words and every annotation
    assert replay.fingerprint() == fp
    lines = copy.read_bytes().splitlines(keepends=True)
    (tmp_path / "bad.jsonl").write_bytes(lines[0] + lines[1] + b'["s9", "d"]\n')
    with pytest.raises(CorpusFormatError, match=r"bad.jsonl:3: expected one sentence record"):
        list(Corpus.from_records(tmp_path / "bad.jsonl", name="x", split="dev"))
    (tmp_path / "headless.jsonl").write_bytes(lines[1])
    with pytest.raises(CorpusFormatError, match=r"headless.jsonl:1: expected the header 'probing-corpus/1'"):
        list(Corpus.from_records(tmp_path / "headless.jsonl", name="x", split="dev"))


def test_fingerprint_changes_with_one_tag_and_only_with_content():
    base = Corpus.from_sentences(two_sentences(), name="a", split="train", source="here").fingerprint()
    same_content = Corpus.from_sentences(two_sentences(), name="b", split="test", source="there", license="L")
    assert same_content.fingerprint() == base, "name, split, source and licence are not content"
    changed = two_sentences()
    changed[1].upos = ["NOUN"]
    assert Corpus.from_sentences(changed, name="a").fingerprint() != base, "one upos tag changed"
    changed = two_sentences()
    changed[0].senses[1] = ("bank%1:14:00::",)
    assert Corpus.from_sentences(changed, name="a").fingerprint() != base, "one sense key removed"


def test_corpus_streams_again_and_head_keeps_name_and_split():
    corpus = Corpus.from_sentences(two_sentences(), name="toy", split="dev")
    assert [s.id for s in corpus] == [s.id for s in corpus] == ["s1", "s2"]
    head = corpus.head(1)
    assert (head.name, head.split, [s.id for s in head]) == ("toy", "dev", ["s1"])
    assert list(corpus.head(0)) == []


def test_head_closes_the_underlying_stream():
    closed = []

    def sentences():
        try:
            yield from two_sentences()
        finally:
            closed.append(True)

    corpus = Corpus(sentences, name="toy", split="all")
    assert [s.id for s in corpus.head(1)] == ["s1"]
    assert closed == [True], "head must close the reader (and its open file) once it has n sentences"


def test_token_table_columns_and_values():
    table = Corpus.from_sentences(two_sentences(), name="toy").token_table()
    assert (
        list(table.columns)
        == list(TOKEN_COLUMNS)
        == [
            "sentence_id",
            "doc_id",
            "position",
            "word",
            "upos",
            "xpos",
            "lemma",
            "sense",
            "instance_id",
            "head",
            "deprel",
            "feats",
        ]
    )
    assert table["head"].tolist() == [-1, -1, -1, -1], "a sentence without heads gets head -1"
    assert table["position"].tolist() == [0, 1, 2, 0]
    assert table["sense"].tolist() == ["", "bank%1:14:00:: bank%1:14:01::", "", ""], "keys joined by a space"
    assert table["instance_id"].tolist() == ["", "d1.s1.t0", "", ""]
    assert table["xpos"].tolist() == ["", "", "", ""], "a missing annotation is the empty string"
    assert table["lemma"].tolist() == ["the", "bank", "close", ""]


# --- CoNLL-U -------------------------------------------------------------------------------------------


def test_conllu_words_skip_multiword_ranges_and_empty_nodes():
    sents = list(read_conllu(UD / "en_ewt-ud-train.conllu"))
    assert [s.id for s in sents] == ["reviews-004940-0009", "reviews-133981-0001", "reviews-133981-0002"]
    # empty node 4.1 ("_", lemma "with") is not a word
    assert sents[0].words == ["They", "recently", "surprised", "me", "a", "larger", "order", "."]
    # the multiword token "1-2 Smokers" is replaced by its syntactic words
    assert sents[1].words == ["Smoker", "s", "Haven"]
    assert sents[1].upos == ["NOUN", "PART", "NOUN"]
    assert sents[1].xpos == ["NN", "POS", "NN"]
    assert sents[1].lemmas == ["smoker", "'s", "haven"]
    assert len(sents[2].words) == 9


def test_conllu_doc_ids_from_newdoc_or_sent_id():
    sents = list(read_conllu(UD / "en_ewt-ud-train.conllu"))
    # no "# newdoc" before the first sentence: its sent_id without the trailing number
    assert [s.doc_id for s in sents] == ["reviews-004940", "reviews-133981", "reviews-133981"]
    dev = list(read_conllu(UD / "en_ewt-ud-dev.conllu"))
    doc = "weblog-blogspot.com_nominations_20041117172713_ENG_20041117_172713"
    assert [s.doc_id for s in dev] == [doc, doc], "newdoc id is carried forward"
    assert [len(s.words) for s in dev] == [7, 19]


def test_conllu_gz_reads_the_same(tmp_path):
    gz = tmp_path / "en_ewt-ud-train.conllu.gz"
    gz.write_bytes(gzip.compress((UD / "en_ewt-ud-train.conllu").read_bytes()))
    plain, packed = read_conllu(UD / "en_ewt-ud-train.conllu"), read_conllu(gz)
    assert packed.name == plain.name == "en_ewt-ud-train"
    assert packed.fingerprint() == plain.fingerprint()


def test_conllu_underscore_lemma_and_generated_ids(tmp_path):
    path = tmp_path / "mini.conllu"
    path.write_text("1\t_\t_\tPUNCT\t_\t_\t0\troot\t_\t_\n2\tgo\t_\t_\t_\t_\t1\tdep\t_\t_\n\n", encoding="utf-8")
    (s,) = read_conllu(path)
    assert (s.id, s.doc_id) == ("mini-1", "mini"), "no sent_id: <file>-<n>; no newdoc/sent_id: the file name"
    assert s.words == ["_", "go"]
    assert s.lemmas == ["_", ""], "lemma _ of the word _ is real; otherwise _ means missing"
    assert s.upos == ["PUNCT", ""] and s.xpos == ["", ""]


def test_conllu_wrong_column_count_names_file_and_line(tmp_path):
    path = tmp_path / "bad.conllu"
    lines = (UD / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[6] = "3\tAP\tAP\tPROPN\n"  # line 7: a token line cut to 4 columns
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=rf"{path}:7: expected 10 tab-separated columns, found 4"):
        list(read_conllu(path))


def test_conllu_bad_id_names_file_and_line(tmp_path):
    path = tmp_path / "bad.conllu"
    lines = (UD / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[15] = lines[15].replace("1\tPresident", "x\tPresident", 1)  # line 16: first token of sentence 2
    assert lines[15].startswith("x\tPresident")
    path.write_text("".join(lines), encoding="utf-8")
    corpus = read_conllu(path)
    with pytest.raises(CorpusFormatError, match=rf"{path}:16: .*'x' is not a valid ID"):
        list(corpus)


def test_conllu_duplicate_sentence_id(tmp_path):
    path = tmp_path / "dup.conllu"
    text = (UD / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8")
    path.write_text(text + text, encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"dup.conllu:\d+: sentence id .*-0001' appears twice"):
        list(read_conllu(path))


def test_missing_file_is_named():
    with pytest.raises(FileNotFoundError, match="nope.conllu"):
        read_conllu(UD / "nope.conllu")


# --- NLTK tagged corpora -------------------------------------------------------------------------------


def test_treebank_drops_traces_and_keeps_stable_ids(nltk_root):
    sents = list(read_nltk_tagged("treebank", nltk_root))
    # wsj_0180.mrg:0 holds only a trace, so it is skipped; ids keep NLTK's sentence index
    assert [s.id for s in sents] == ["wsj_0001.mrg:0", "wsj_0001.mrg:1", "wsj_0160.mrg:0", "wsj_0180.mrg:1"]
    assert [s.doc_id for s in sents] == ["wsj_0001.mrg", "wsj_0001.mrg", "wsj_0160.mrg", "wsj_0180.mrg"]
    assert sents[1].words == ["Passengers", "were", "asked", "to", "wait", "."], "-NONE- *-1 dropped"
    assert sents[3].words == ["Ms.", "Rivera", "says", "she", "will", "stay", "."], "-NONE- 0 dropped"
    assert sents[1].xpos == ["NNS", "VBD", "VBN", "TO", "VB", "."]
    # Petrov et al.'s en-ptb map: TO is PRT, MD is VERB, NNP is NOUN
    assert sents[1].upos == ["NOUN", "VERB", "VERB", "PRT", "VERB", "."]
    assert sents[3].upos == ["NOUN", "NOUN", "VERB", "PRON", "VERB", "VERB", "."]
    assert sents[0].lemmas is None and sents[0].senses is None


def test_treebank_from_zip_equals_folder(nltk_root, tmp_path):
    zipped = tmp_path / "zipped"
    (zipped / "corpora").mkdir(parents=True)
    with zipfile.ZipFile(zipped / "corpora" / "treebank.zip", "w") as zf:
        for p in sorted((nltk_root / "corpora" / "treebank").rglob("*")):
            zf.write(p, p.relative_to(nltk_root / "corpora").as_posix() + ("/" if p.is_dir() else ""))
    folder, packed = read_nltk_tagged("treebank", nltk_root), read_nltk_tagged("treebank", zipped)
    assert packed.fingerprint() == folder.fingerprint()


def test_treebank_fileids_subset(nltk_root):
    corpus = read_nltk_tagged("treebank", nltk_root, fileids=["wsj_0160.mrg"])
    assert [s.words for s in corpus] == [["It", "rained", "."]]
    picked = read_nltk_tagged("treebank", nltk_root, fileids=lambda f: f.startswith("wsj_018"))
    assert [s.id for s in picked] == ["wsj_0180.mrg:1"]
    with pytest.raises(FileNotFoundError, match="wsj_9999.mrg"):
        read_nltk_tagged("treebank", nltk_root, fileids=["wsj_9999.mrg"])


def test_brown_uses_the_brown_map(nltk_root):
    sents = list(read_nltk_tagged("brown", nltk_root))
    assert [s.id for s in sents] == ["ca01:0", "ca01:1", "cb01:0"]
    assert sents[1].xpos == ["PP$", "NNS", "BED", "VBN", "."], "NLTK upper-cases Brown tags"
    assert sents[1].upos == ["DET", "NOUN", "VERB", "VERB", "."], "en-brown: PP$ DET, BED VERB"
    assert sents[2].upos == ["DET", "NOUN", "NOUN", "VERB", "."], "en-brown: NP-TL and NN-TL are NOUN"


def test_conll2000_files_are_docs(nltk_root):
    sents = list(read_nltk_tagged("conll2000", nltk_root))
    assert [(s.id, s.doc_id) for s in sents] == [
        ("train.txt:0", "train.txt"),
        ("train.txt:1", "train.txt"),
        ("test.txt:0", "test.txt"),
    ]
    assert sents[2].upos == ["NOUN", "VERB", "ADJ", "."]


def test_masc_drops_empty_words_and_blanks_missing_tags(nltk_root):
    sents = {s.id: s for s in read_nltk_tagged("masc_tagged", nltk_root)}
    assert sents["written/notes.txt:0"].words == ["Prices", "rose", "again", "."], "the item '_-' has no word"
    met = sents["written/notes.txt:1"]
    assert met.words == ["We", "met", "at", "5", "p.m.", "."]
    assert (met.xpos[3], met.upos[3]) == ("", ""), "'5' carries no tag: missing, not invented"
    talk = sents["spoken/talk.txt:0"]
    assert talk.upos == ["X", ".", "X", "VERB", "."], "UH and the unmapped '-' are X, as in NLTK"


def test_universal_map_matches_petrov_tables():
    ptb = universal_map("en-ptb")
    # Petrov, Das & McDonald (2012), en-ptb.map
    assert {t: ptb[t] for t in ("NNS", "VBZ", "IN", "TO", "-LRB-", "PRP$", "UH")} == {
        "NNS": "NOUN",
        "VBZ": "VERB",
        "IN": "ADP",
        "TO": "PRT",
        "-LRB-": ".",
        "PRP$": "PRON",
        "UH": "X",
    }
    universal = {"VERB", "NOUN", "PRON", "ADJ", "ADV", "ADP", "CONJ", "DET", "NUM", "PRT", "X", "."}
    assert set(ptb.values()) <= universal and set(universal_map("en-brown").values()) <= universal
    assert len(ptb) == 68 and len(universal_map("en-brown")) == 472, "non-empty lines of the bundled maps (grep -c .)"


def test_unknown_nltk_corpus_and_missing_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))
    with pytest.raises(ValueError, match="unknown NLTK corpus 'penn'"):
        read_nltk_tagged("penn", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"corpora/treebank.zip or corpora/treebank/combined/"):
        read_nltk_tagged("treebank", tmp_path)


# --- Raganato WSD --------------------------------------------------------------------------------------


def test_raganato_tokens_instances_and_keys():
    corpus = read_raganato(SE2 / "senseval2.data.xml")
    assert corpus.name == "senseval2"
    sents = list(corpus)
    assert [(s.id, s.doc_id) for s in sents] == [("d000.s000", "d000"), ("d000.s001", "d000"), ("d001.s000", "d001")]
    first = sents[0]
    assert first.words == ["The", "bank", "raised", "its", "interest_rates", "."], "multiword token kept whole"
    assert first.lemmas == ["the", "bank", "raise", "its", "interest_rate", "."]
    assert first.upos == ["DET", "NOUN", "VERB", "PRON", "NOUN", "."]
    assert first.instance_ids == [None, "d000.s000.t000", "d000.s000.t001", None, "d000.s000.t002", None]
    assert first.senses == [(), ("bank%1:14:00::",), ("raise%2:30:01::",), (), ("interest_rate%1:21:00::",), ()]
    assert sents[2].senses[1] == ("play%2:33:00::", "play%2:41:12::"), "all keys of a line, in file order"
    assert first.xpos is None


def test_raganato_gz_and_key_beside(tmp_path):
    corpus = read_raganato(FIXTURES / "wsd" / "semcor" / "semcor.data.xml.gz")
    sents = list(corpus)
    assert corpus.name == "semcor"
    assert [s.doc_id for s in sents] == ["d000", "d001", "d002", "d003", "d004", "d005"]
    assert sents[4].words == ["The", "bank", "."] and sents[4].senses[1] == ("bank%1:17:01::",)


def write_keys(tmp_path: Path, lines: list[str]) -> tuple[Path, Path]:
    data = tmp_path / "se.data.xml"
    shutil.copy(SE2 / "senseval2.data.xml", data)
    keys = tmp_path / "se.gold.key.txt"
    keys.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data, keys


def gold_lines() -> list[str]:
    return (SE2 / "senseval2.gold.key.txt").read_text(encoding="utf-8").splitlines()


def test_raganato_out_of_order_keys_still_match(tmp_path):
    data, keys = write_keys(tmp_path, list(reversed(gold_lines())))
    expected = read_raganato(SE2 / "senseval2.data.xml").fingerprint()
    assert read_raganato(data, keys).fingerprint() == expected


def test_raganato_key_for_unknown_instance_names_file_and_line(tmp_path):
    lines = gold_lines()
    lines.insert(3, "d000.s000.t009 bank%1:17:01::")  # line 4
    data, keys = write_keys(tmp_path, lines)
    with pytest.raises(CorpusFormatError, match=rf"{keys}:4: key line for instance 'd000.s000.t009', which is not in"):
        list(read_raganato(data, keys))


def test_raganato_instance_without_key_names_files_and_instance(tmp_path):
    lines = [line for line in gold_lines() if not line.startswith("d000.s001.t001")]
    data, keys = write_keys(tmp_path, lines)
    with pytest.raises(
        CorpusFormatError,
        match=rf"{data} \(sentence 'd000.s001'\): instance 'd000.s001.t001' "
        rf"has no line in the gold key file {keys}",
    ):
        list(read_raganato(data, keys))


def test_raganato_key_line_without_key_and_duplicate(tmp_path):
    lines = gold_lines()
    lines[5] = "d001.s000.t000"  # line 6: id only
    data, keys = write_keys(tmp_path, lines)
    with pytest.raises(CorpusFormatError, match=rf"{keys}:6: expected an instance id and at least one sense key"):
        list(read_raganato(data, keys))
    lines = gold_lines()
    lines[:0] = [lines[-1], lines[-1]]  # lines 1, 2 and 9 are all d001.s000.t001
    data, keys = write_keys(tmp_path, lines)
    with pytest.raises(
        CorpusFormatError, match=rf"{keys}:2: second key line for instance 'd001.s000.t001' \(first at line 1\)"
    ):
        list(read_raganato(data, keys))


def test_raganato_repeated_key_line_after_its_instance(tmp_path):
    lines = gold_lines() + [gold_lines()[0]]  # line 8 repeats line 1, whose instance already has its keys
    data, keys = write_keys(tmp_path, lines)
    with pytest.raises(
        CorpusFormatError,
        match=rf"{keys}:8: key line for instance 'd000.s000.t000', which is not in "
        r".* \(or was already given a key line\)",
    ):
        list(read_raganato(data, keys))


def test_raganato_malformed_xml_names_line(tmp_path):
    data = tmp_path / "bad.data.xml"
    text = (
        (SE2 / "senseval2.data.xml")
        .read_text(encoding="utf-8")
        .replace('</sentence>\n<sentence id="d000.s001">', '<sentence id="d000.s001">', 1)
    )
    data.write_text(text, encoding="utf-8")
    shutil.copy(SE2 / "senseval2.gold.key.txt", tmp_path / "bad.gold.key.txt")
    with pytest.raises(CorpusFormatError, match=rf"{data}:\d+: malformed XML"):
        list(read_raganato(data))


def test_raganato_missing_key_file(tmp_path):
    data = tmp_path / "lonely.data.xml"
    shutil.copy(SE2 / "senseval2.data.xml", data)
    with pytest.raises(FileNotFoundError, match=r"no gold key file beside .*lonely.gold.key.txt"):
        read_raganato(data)


def test_raganato_head_stops_without_reading_all_keys():
    (s,) = read_raganato(SE2 / "senseval2.data.xml").head(1)
    assert s.id == "d000.s000"


# --- plain text ----------------------------------------------------------------------------------------


def test_text_skips_blank_lines_and_ids_name_lines(tmp_path):
    path = tmp_path / "story.txt.gz"
    path.write_bytes(gzip.compress(b"The cat  sat .\n\n   \nIt purred\tloudly .\n"))
    sents = list(read_text(path))
    assert [(s.id, s.doc_id) for s in sents] == [("story:1", "story"), ("story:4", "story")]
    assert sents[1].words == ["It", "purred", "loudly", "."]
    assert sents[0].upos is None


def test_raganato_empty_token_names_file_and_sentence(tmp_path):
    data = tmp_path / "empty.data.xml"
    text = (SE2 / "senseval2.data.xml").read_text(encoding="utf-8")
    text = text.replace('<wf lemma="its" pos="PRON">its</wf>', '<wf lemma="its" pos="PRON"></wf>')
    data.write_text(text, encoding="utf-8")
    shutil.copy(SE2 / "senseval2.gold.key.txt", tmp_path / "empty.gold.key.txt")
    with pytest.raises(CorpusFormatError, match=rf"{data}: sentence 'd000.s000': token 3 is empty"):
        list(read_raganato(data))


@pytest.mark.parametrize("reader,suffix", [(read_text, ".txt"), (read_conllu, ".conllu")])
def test_bytes_that_are_not_utf8_name_the_file(tmp_path, reader, suffix):
    path = tmp_path / f"latin1{suffix}"
    good = (UD / "en_ewt-ud-dev.conllu").read_bytes()
    path.write_bytes(good + "# caf\xe9\n".encode("latin-1"))
    bad_line = good.count(b"\n") + 1  # the appended line, named exactly (not "after line N")
    with pytest.raises(CorpusFormatError, match=rf"{path}:{bad_line}: not UTF-8 text"):
        list(reader(path))


# --- dependency trees (HEAD, DEPREL, FEATS) ------------------------------------------------------------


def test_conllu_keeps_heads_deprels_and_raw_feats():
    (s, *_) = read_conllu(UD / "en_ewt-ud-train.conllu")
    assert s.words == ["They", "recently", "surprised", "me", "a", "larger", "order", "."]
    assert s.heads == [3, 3, 0, 3, 7, 7, 3, 3], "HEAD column of the fixture's first sentence"
    assert s.deprels == ["nsubj", "advmod", "root", "obj", "det", "amod", "obl", "punct"]
    assert s.feats[0] == "Case=Nom|Number=Plur|Person=3|PronType=Prs" and s.feats[1] == "", "raw string, _ -> ''"


def test_conllu_heads_with_multiword_tokens_and_empty_nodes(tmp_path):
    """Ids 1..n of the syntactic words are the 1-based positions: the range 2-3 and the node 3.1 add none."""
    path = tmp_path / "mwt.conllu"
    path.write_text(
        "# sent_id = m1\n"
        "1\tI\tI\tPRON\tPRP\tCase=Nom\t2\tnsubj\t_\t_\n"
        "2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "2\tca\tcan\tAUX\tMD\t_\t0\troot\t_\t_\n"
        "3\tn't\tnot\tPART\tRB\t_\t2\tadvmod\t_\t_\n"
        "3.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t2:xcomp\t_\n"
        "4\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_\n\n",
        encoding="utf-8",
    )
    (s,) = read_conllu(path)
    assert s.words == ["I", "ca", "n't", "."] and s.heads == [2, 0, 2, 2]
    assert s.deprels == ["nsubj", "root", "advmod", "punct"] and s.feats == ["Case=Nom", "", "", ""]


def test_conllu_without_heads_has_none(tmp_path):
    path = tmp_path / "flat.conllu"
    path.write_text("1\tHi\thi\tINTJ\tUH\t_\t_\t_\t_\t_\n2\tyou\tyou\tPRON\tPRP\t_\t_\t_\t_\t_\n\n", encoding="utf-8")
    (s,) = read_conllu(path)
    assert s.heads is None and s.deprels is None and s.feats is None


@pytest.mark.parametrize(
    "heads,message",
    [
        ("0 0", r"bad.conllu:2: sentence 'b1': 2 roots"),
        ("2 1", r"bad.conllu:2: sentence 'b1': 0 roots"),
        ("0 _", r"bad.conllu:2: sentence 'b1': words \[2\] have no HEAD but others do"),
    ],
)
def test_conllu_heads_that_are_not_a_tree_name_file_and_sentence(tmp_path, heads, message):
    h1, h2 = heads.split()
    path = tmp_path / "bad.conllu"
    path.write_text(
        f"\n# sent_id = b1\n1\tHi\thi\tINTJ\tUH\t_\t{h1}\tdep\t_\t_\n2\tyou\tyou\tPRON\tPRP\t_\t{h2}\tdep\t_\t_\n\n",
        encoding="utf-8",
    )
    with pytest.raises(CorpusFormatError, match=message):
        list(read_conllu(path))


def test_fingerprint_appends_tree_fields_only_when_present_and_the_copy_replays_them(tmp_path):
    """A sentence without heads/deprels/feats keeps its 8-field record (so stores of such corpora keep
    their keys); one with them appends [heads, deprels, feats]."""
    tree = Sentence("t1", "d", ["Dogs", "bark"], heads=[2, 0], deprels=["nsubj", "root"], feats=["Number=Plur", ""])
    h = hashlib.sha256(b"probing-corpus/1\n")
    record = ["t1", "d", ["Dogs", "bark"], None, None, None, None, None, [2, 0], ["nsubj", "root"], ["Number=Plur", ""]]
    h.update(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    corpus = Corpus.from_sentences([tree], name="t")
    assert corpus.fingerprint() == h.hexdigest()
    copy = tmp_path / "copy.jsonl"
    with open(copy, "wb") as f:
        corpus.fingerprint_and_lengths(copy_to=f)
    (back,) = Corpus.from_records(copy, name="t", split="all")
    assert (back.heads, back.deprels, back.feats) == (tree.heads, tree.deprels, tree.feats)
    table = corpus.token_table()
    assert table["head"].tolist() == [2, 0] and table["deprel"].tolist() == ["nsubj", "root"]
