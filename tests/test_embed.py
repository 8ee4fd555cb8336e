"""``embed_file`` reproduces the files of the former ``allennlp elmo --all`` command (fixture:
tests/fixtures/elmo_allennlp, Apache-2.0, see its NOTICE and README)."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from probing.elmo import Elmo
from probing.elmo.embed import EmbedInputError, embed_file

FIX = Path(__file__).parent / "fixtures" / "elmo_allennlp"
INPUT = FIX / "input.txt"
TOL = 1e-5  # the conformance bound of tests/test_elmo.py


def model(stateful: bool) -> Elmo:
    return Elmo.from_files(FIX / "options.json", FIX / "lm_weights.hdf5", stateful=stateful)


def assert_same_file(got_path: Path, expected_path: Path) -> None:
    with h5py.File(got_path, "r") as got, h5py.File(expected_path, "r") as exp:
        assert sorted(got.keys()) == sorted(exp.keys())  # "0".."29" and sentence_to_index
        for key in exp:
            if key == "sentence_to_index":
                continue
            assert got[key].dtype == exp[key].dtype == np.float32
            assert got[key].shape == exp[key].shape
            diff = np.abs(got[key][...] - exp[key][...]).max()
            assert diff <= TOL, f"dataset {key}: max abs diff {diff}"
        g, e = got["sentence_to_index"], exp["sentence_to_index"]
        assert g.shape == e.shape == (1,)
        assert h5py.check_string_dtype(g.dtype) == h5py.check_string_dtype(e.dtype)  # vlen UTF-8 str
        assert g[0] == e[0]  # the same JSON text, byte for byte


def test_stateful_reproduces_allennlp_file(tmp_path):
    """The reference fed batches of 3 lines in input order with state carried between them."""
    out = embed_file(model(stateful=True), INPUT, tmp_path / "out.hdf5", batch_size=3, progress=False)
    assert out == tmp_path / "out.hdf5"
    assert_same_file(out, FIX / "expected_all_layers.hdf5")


def test_stateful_starts_from_zero_state(tmp_path):
    """A model that already ran must not leak its carried state into the file."""
    m = model(stateful=True)
    m.embed([["Some", "earlier", "text", "."]] * 3, batch_size=3)
    out = embed_file(m, INPUT, tmp_path / "out.hdf5", batch_size=3, progress=False)
    assert_same_file(out, FIX / "expected_all_layers.hdf5")


def test_stateless_reproduces_allennlp_file(tmp_path):
    """Stateless vectors do not depend on batching, so any batch size gives the reference file."""
    out = embed_file(model(stateful=False), INPUT, tmp_path / "out.hdf5", batch_size=7, progress=False)
    assert_same_file(out, FIX / "expected_all_layers_stateless.hdf5")


@pytest.mark.parametrize("layers", ["top", "average"])
def test_top_and_average_layers(tmp_path, layers):
    out = embed_file(model(stateful=False), INPUT, tmp_path / f"{layers}.hdf5", layers=layers, progress=False)
    lines = INPUT.read_text(encoding="utf-8").splitlines()
    with h5py.File(out, "r") as got, h5py.File(FIX / "expected_all_layers_stateless.hdf5", "r") as exp:
        assert len(got.keys()) == len(lines) + 1
        for i, line in enumerate(lines):
            full = exp[str(i)][...]
            # top: the last biLSTM layer; average: the mean of all 3 layers, token layer included
            expected = full[-1] if layers == "top" else full.mean(axis=0)
            assert got[str(i)].shape == (len(line.split()), 32)
            assert np.abs(got[str(i)][...] - expected).max() <= TOL
        assert json.loads(got["sentence_to_index"][0])[lines[4].strip()] == "4"


def test_repeated_line_keeps_last_index_like_allennlp(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b\n  c  \na b\n", encoding="utf-8")
    out = embed_file(model(stateful=False), src, tmp_path / "o.hdf5", progress=False)
    with h5py.File(out, "r") as f:
        assert json.loads(f["sentence_to_index"][0]) == {"a b": "2", "c": "1"}  # keys are stripped lines
        assert np.array_equal(f["0"][...], f["2"][...])  # stateless: the same sentence, the same vectors
        assert f["1"].shape == (3, 1, 32)


def test_blank_line_is_refused_before_any_work(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("first line\nsecond\n   \nfourth\n\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    with pytest.raises(EmbedInputError, match=r"in\.txt, line 3: blank line \(and 1 more: lines 5\)"):
        embed_file(model(stateful=False), src, out, progress=False)
    assert list(tmp_path.iterdir()) == [src]  # no output, no temporary file


def test_bad_utf8_names_the_line(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"fine\nbad \xff byte\n")
    with pytest.raises(EmbedInputError, match=r"in\.txt:2: not UTF-8 text"):
        embed_file(model(stateful=False), src, tmp_path / "out.hdf5", progress=False)


def test_error_midway_leaves_no_partial_file(tmp_path, monkeypatch):
    out = tmp_path / "out.hdf5"
    out.write_bytes(b"previous result")
    m = model(stateful=False)
    calls = []
    real = m.embed

    def failing(sentences, **kw):
        calls.append(len(sentences))
        if len(calls) == 2:
            raise RuntimeError("simulated failure in the second batch")
        return real(sentences, **kw)

    monkeypatch.setattr(m, "embed", failing)
    with pytest.raises(RuntimeError, match="second batch"):
        embed_file(m, INPUT, out, batch_size=4, progress=False)
    assert calls == [4, 4]
    assert out.read_bytes() == b"previous result"  # the old file survives untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.hdf5"]  # and no temporary is left


def test_argument_errors(tmp_path):
    m = model(stateful=False)
    with pytest.raises(ValueError, match="layers must be one of all, top, average, got 'middle'"):
        embed_file(m, INPUT, tmp_path / "o.hdf5", layers="middle")
    with pytest.raises(FileNotFoundError, match="embed input not found: .*missing.txt"):
        embed_file(m, tmp_path / "missing.txt", tmp_path / "o.hdf5")
