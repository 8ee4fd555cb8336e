"""Dataset registry: search order, splits, error messages, get() wiring, and the bundled demo data."""

from __future__ import annotations

import gzip
import shutil
import zipfile
from collections import Counter
from pathlib import Path

import nltk
import nltk.data
import pytest

import probing.download
from probing.corpora import DatasetNotFound, available, get, load
from probing.corpora.registry import RAGANATO_SETS, RAGANATO_URL, UD_EWT_FILES, UD_EWT_URL
from probing.paths import resources_dir

FIXTURES = Path(__file__).parent / "fixtures" / "corpora" / "data"


def private_copy(src: Path, dest: Path) -> Path:
    """Copy a fixture tree with go-w permissions: NLTK refuses data folders other accounts can write to."""
    shutil.copytree(src, dest)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest


@pytest.fixture
def clean(tmp_path, monkeypatch) -> Path:
    """No $PROBING_DATA, an empty download cache, an empty NLTK data path."""
    monkeypatch.delenv("PROBING_DATA", raising=False)
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(nltk.data, "path", [])
    return tmp_path


@pytest.fixture
def data_root(clean, monkeypatch) -> Path:
    """The fixture tree as $PROBING_DATA."""
    root = private_copy(FIXTURES, clean / "data")
    monkeypatch.setenv("PROBING_DATA", str(root))
    return root


def ids(corpus) -> list[str]:
    return [s.id for s in corpus]


# --- finding -------------------------------------------------------------------------------------------


def test_ud_from_probing_data(data_root):
    corpus = load("ud-ewt", "train")
    assert (corpus.name, corpus.split, corpus.license) == ("ud-ewt", "train", "CC BY-SA 4.0")
    assert corpus.source == str(data_root / "ud" / "en_ewt" / "en_ewt-ud-train.conllu")
    assert ids(corpus) == ["reviews-004940-0009", "reviews-133981-0001", "reviews-133981-0002"]


def test_path_may_be_folder_root_or_file(clean):
    ud = FIXTURES / "ud" / "en_ewt"
    assert len(ids(load("ud-ewt", "dev", path=ud))) == 2, "the folder holding the files"
    assert len(ids(load("ud-ewt", "dev", path=FIXTURES))) == 2, "a root laid out like shared/data"
    single = load("ud-ewt", "test", path=ud / "en_ewt-ud-test.conllu")
    assert (single.split, len(ids(single))) == ("test", 2), "a file is used as the requested split"


def test_wsd_path_may_be_raganatos_folder(clean):
    framework = clean / "unpacked" / "WSD_Evaluation_Framework" / "Evaluation_Datasets" / "senseval2"
    shutil.copytree(FIXTURES / "wsd" / "senseval2", framework)
    corpus = load("senseval2", path=clean / "unpacked")
    assert corpus.split == "test", "a WSD test set has the single split 'test'"
    assert ids(corpus) == ["d000.s000", "d000.s001", "d001.s000"]


def test_ptb_sample_split_by_file_number(data_root):
    # train = wsj_0001-0159, dev = wsj_0160-0179, test = wsj_0180-0199
    assert ids(load("ptb-sample", "train")) == ["wsj_0001.mrg:0", "wsj_0001.mrg:1"]
    assert ids(load("ptb-sample", "dev")) == ["wsj_0160.mrg:0"]
    assert ids(load("ptb-sample", "test")) == ["wsj_0180.mrg:1"]


def test_nltk_corpora_found_on_nltk_data_path(clean, monkeypatch):
    root = private_copy(FIXTURES / "nltk_data", clean / "my_nltk_data")
    monkeypatch.setattr(nltk.data, "path", [str(root)])
    assert ids(load("conll2000", "test")) == ["test.txt:0"]
    assert ids(load("brown")) == ["ca01:0", "ca01:1", "cb01:0"], "brown has the single split 'all'"
    assert len(ids(load("masc"))) == 3


def test_semcor_split_by_document(data_root):
    docs = lambda corpus: [s.doc_id for s in corpus]  # noqa: E731
    assert docs(load("semcor")) == ["d000", "d001", "d002", "d003", "d004", "d005"], "default split 'all'"
    # the document with 0-based index i is in test when i % 5 == 4
    assert docs(load("semcor", "test")) == ["d004"]
    assert docs(load("semcor", "train")) == ["d000", "d001", "d002", "d003", "d005"]


def test_text_needs_a_file(clean):
    path = clean / "lines.txt"
    path.write_text("a b\n\nc\n", encoding="utf-8")
    corpus = load("text", path=path)
    assert (corpus.name, corpus.split, [s.words for s in corpus]) == ("lines", "all", [["a", "b"], ["c"]])
    with pytest.raises(DatasetNotFound, match="is not a file"):
        load("text", path=clean)


def test_split_checks():
    with pytest.raises(
        ValueError,
        match=r"ud-ewt has splits train, dev, test: name one \(split= in Python, --split on the command line\)",
    ):
        load("ud-ewt")
    with pytest.raises(ValueError, match="ud-ewt has no split 'validation'; its splits are train, dev, test"):
        load("ud-ewt", "validation")
    with pytest.raises(ValueError, match="unknown dataset 'ptb'"):
        load("ptb", "train")


# --- not found -----------------------------------------------------------------------------------------


def test_missing_ud_lists_places_and_the_command(clean):
    with pytest.raises(DatasetNotFound) as info:
        load("ud-ewt", "train")
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert "Looked for en_ewt-ud-train.conllu[.gz] in:" in message
    assert "$PROBING_DATA  (not set)" in message
    assert f"{clean / 'cache' / 'data' / 'ud' / 'en_ewt'}  (download cache)" in message
    assert "Get it with:  probing data get ud-ewt" in message


def test_missing_nltk_corpus_names_the_nltk_command(clean):
    with pytest.raises(
        DatasetNotFound,
        match=r"(?s)corpora/treebank.zip or corpora/treebank/.*"
        r"python -m nltk.downloader treebank",
    ):
        load("ptb-sample", "train")


def test_missing_semeval2015_lists_probing_data(data_root):
    with pytest.raises(DatasetNotFound) as info:
        load("semeval2015")
    message = str(info.value)
    assert f"{data_root / 'wsd' / 'semeval2015'}  ($PROBING_DATA)" in message
    assert "semeval2015.data.xml[.gz] and semeval2015.gold.key.txt[.gz]" in message
    assert "probing data get semeval2015" in message


def test_explicit_path_is_the_only_place(data_root):
    with pytest.raises(DatasetNotFound, match="does not exist"):
        load("ud-ewt", "train", path=data_root / "nowhere")
    with pytest.raises(DatasetNotFound, match=rf"{data_root / 'wsd'}  \(path=\)"):
        load("ud-ewt", "train", path=data_root / "wsd")


def test_full_dataset_never_falls_back_to_demo(clean):
    assert (resources_dir() / "data" / "demo-ud" / "en_ewt-demo-train.conllu.gz").is_file()
    with pytest.raises(DatasetNotFound):
        load("ud-ewt", "train")


# --- available and get ---------------------------------------------------------------------------------


def test_available_reports_where_found(data_root):
    table = available().set_index("name")
    assert list(table.reset_index().columns) == ["name", "splits", "found", "license", "get", "about"]
    assert table.loc["ud-ewt", "found"] == str(data_root / "ud" / "en_ewt")
    assert table.loc["ptb-sample", "found"] == str(data_root / "nltk_data")
    assert table.loc["semeval2015", "found"] == "", "not in the fixture data"
    assert table.loc["demo-semcor", "found"] == str(resources_dir() / "data" / "demo-semcor")
    assert table.loc["semcor", "splits"] == "all, train, test"
    assert table.loc["ptb-sample", "get"].startswith("python -m nltk.downloader treebank")


def test_get_ud_fetches_pinned_files_into_the_cache(clean, monkeypatch):
    calls = []

    def fake_fetch(url, *, sha256=None, size=None, dest=None, hint=None, **kwargs):
        calls.append((url, sha256, size))
        name = url.rsplit("/", 1)[-1]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / "ud" / "en_ewt" / name, dest)
        return dest

    monkeypatch.setattr(probing.download, "fetch", fake_fetch)
    folder = get("ud-ewt")
    assert folder == clean / "cache" / "data" / "ud" / "en_ewt"
    assert calls[0] == (
        UD_EWT_URL.format(file="en_ewt-ud-train.conllu"),
        "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b",
        14_203_025,
    )
    assert [c[0].rsplit("/", 1)[-1] for c in calls] == [*UD_EWT_FILES, "LICENSE.txt"]
    assert UD_EWT_URL.startswith("https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16/")
    assert load("ud-ewt", "dev").source == str(folder / "en_ewt-ud-dev.conllu"), "found in the download cache"


def raganato_zip(path: Path, sets=RAGANATO_SETS) -> Path:
    """A zip laid out like Raganato's WSD_Evaluation_Framework.zip, filled with fixture files."""
    se2 = FIXTURES / "wsd" / "senseval2"
    semcor = FIXTURES / "wsd" / "semcor"
    with zipfile.ZipFile(path, "w") as zf:
        for name in sets:
            folder = (
                "WSD_Evaluation_Framework/Training_Corpora/SemCor"
                if name == "semcor"
                else f"WSD_Evaluation_Framework/Evaluation_Datasets/{name}"
            )
            if name == "semcor":
                xml = gzip.decompress((semcor / "semcor.data.xml.gz").read_bytes())
                keys = (semcor / "semcor.gold.key.txt").read_bytes()
            else:
                xml, keys = (se2 / "senseval2.data.xml").read_bytes(), (se2 / "senseval2.gold.key.txt").read_bytes()
            zf.writestr(f"{folder}/{name}.data.xml", xml)
            zf.writestr(f"{folder}/{name}.gold.key.txt", keys)
        zf.writestr("WSD_Evaluation_Framework/Evaluation_Datasets/Scorer.java", "class Scorer {}")
    return path


def test_get_wsd_prints_terms_and_unpacks_every_set(clean, monkeypatch, capsys):
    archive = raganato_zip(clean / "framework.zip")
    monkeypatch.setattr(probing.download, "fetch", lambda url, **kw: archive if url == RAGANATO_URL else None)
    folder = get("semeval2015")
    assert "you accept the terms" in capsys.readouterr().err
    assert folder == clean / "cache" / "data" / "wsd" / "semeval2015"
    assert ids(load("semeval2015")) == ["d000.s000", "d000.s001", "d001.s000"]
    assert [s.doc_id for s in load("semcor", "test")] == ["d004"], "SemCor came out of the same zip"
    assert (clean / "cache" / "data" / "wsd" / "ALL" / "ALL.gold.key.txt").is_file()


def test_get_wsd_rejects_a_zip_without_the_sets(clean, monkeypatch):
    archive = raganato_zip(clean / "partial.zip", sets=("semcor",))
    monkeypatch.setattr(probing.download, "fetch", lambda url, **kw: archive)
    with pytest.raises(FileNotFoundError, match=r"partial.zip lacks .*'senseval2.data.xml'"):
        get("senseval2")


def test_get_nltk_downloads_into_the_cache(clean, monkeypatch):
    def fake_download(package, download_dir=None, **kwargs):
        shutil.copytree(FIXTURES / "nltk_data" / "corpora" / package, Path(download_dir) / "corpora" / package)
        for p in [Path(download_dir), *Path(download_dir).rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        return True

    monkeypatch.setattr(nltk, "download", fake_download)
    assert get("ptb-sample") == clean / "cache" / "data" / "nltk_data"
    assert ids(load("ptb-sample", "dev")) == ["wsj_0160.mrg:0"]


def test_get_bundled_and_text_need_no_download():
    assert get("demo-ud") == resources_dir() / "data" / "demo-ud"
    with pytest.raises(ValueError, match="pass path= to a text file"):
        get("text")


# --- bundled demo data (counts stated in probing/resources/data/README.md) ------------------------------


def test_demo_ud_counts():
    for split, (sentences, words) in {"train": (3074, 51974), "dev": (509, 7735), "test": (1012, 13340)}.items():
        corpus = load("demo-ud", split)
        assert corpus.license == "CC BY-SA 4.0"
        got = [len(s.words) for s in corpus]
        assert (len(got), sum(got)) == (sentences, words), split


def test_demo_semcor_counts_and_disjoint_documents():
    expected = {
        "train": (6044, 46232, {"play": 122, "bank": 23, "line": 61, "serve": 86}),
        "test": (2113, 15717, {"play": 70, "bank": 17, "line": 32, "serve": 42}),
    }
    docs = {}
    for split, (sentences, instances, lemmas) in expected.items():
        n_sent, n_inst, targets, docs[split] = 0, 0, Counter(), set()
        for s in load("demo-semcor", split):
            n_sent += 1
            docs[split].add(s.doc_id)
            for iid, lemma in zip(s.instance_ids, s.lemmas):
                if iid is not None:
                    n_inst += 1
                    if lemma in lemmas:
                        targets[lemma] += 1
        assert (n_sent, n_inst, dict(targets)) == (sentences, instances, lemmas), split
    assert (len(docs["train"]), len(docs["test"])) == (60, 20)
    assert not docs["train"] & docs["test"], "split by document"
