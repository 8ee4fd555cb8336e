"""Encoder adapters: lazy ELMo fingerprints, outputs equal to Elmo.embed, GloVe OOV, random ELMo control.

Uses the tiny trained ELMo of tests/fixtures/elmo_allennlp (Apache-2.0, see its NOTICE) and the GloVe-format
fixture tests/fixtures/glove/tiny.glove.txt.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import probing.elmo.elmo as elmo_module
from probing.elmo import Elmo
from probing.encoders import ElmoEncoder, Encoder, GloveEncoder, RandomElmoEncoder, get_encoder
from probing.glove import Vectors

FIX = Path(__file__).parent / "fixtures"
OPTIONS = FIX / "elmo_allennlp" / "options.json"
WEIGHTS = FIX / "elmo_allennlp" / "lm_weights.hdf5"
GLOVE = FIX / "glove" / "tiny.glove.txt"
SENTENCES = [
    ["The", "king", "met", "the", "queen", "."],
    ["Play", "it", "again", ",", "Sam"],
    ["Hi"],
    ["A", "game", "of", "football", "at", "the", "theater", "stage", "today", "!"],
]


@pytest.fixture
def no_model(monkeypatch):
    """Any attempt to build an Elmo fails the test."""

    def boom(self, *args, **kwargs):
        raise AssertionError("an Elmo model was built")

    monkeypatch.setattr(elmo_module.Elmo, "__init__", boom)


@pytest.fixture
def copies(tmp_path):
    """Two byte-identical copies of the fixture checkpoint in different folders."""
    out = []
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        shutil.copy(OPTIONS, d / "options.json")
        shutil.copy(WEIGHTS, d / "weights.hdf5")
        out.append(d)
    return out


def test_fingerprint_and_shape_come_from_files_without_building_the_model(copies, no_model):
    a, b = (ElmoEncoder(d / "options.json", d / "weights.hdf5") for d in copies)
    # identical bytes in different places: the same content address
    assert a.fingerprint == b.fingerprint
    assert len(a.fingerprint) == 64
    # the fixture has 2 LSTM layers of projection 16: layers 0, 1, 2 of width 2 * 16
    assert a.layer_names == ["0", "1", "2"] and a.dim == 32
    assert isinstance(a, Encoder) and not a.loaded


def test_one_changed_weight_byte_changes_the_fingerprint(copies):
    before = ElmoEncoder(copies[0] / "options.json", copies[0] / "weights.hdf5").fingerprint
    path = copies[0] / "weights.hdf5"
    data = bytearray(path.read_bytes())
    data[-100] ^= 0x01
    path.write_bytes(bytes(data))
    after = ElmoEncoder(path.parent / "options.json", path).fingerprint
    assert after != before


def test_options_are_canonicalised_and_the_state_policy_counts(copies):
    a, b = copies
    # the same architecture written with other key order and spacing is the same model
    opts = json.loads((b / "options.json").read_text())
    (b / "options.json").write_text(json.dumps({k: opts[k] for k in reversed(list(opts))}, indent=7))
    fa = ElmoEncoder(a / "options.json", a / "weights.hdf5").fingerprint
    assert ElmoEncoder(b / "options.json", b / "weights.hdf5").fingerprint == fa
    # stateful vectors differ from stateless ones, so they must not share a store
    assert ElmoEncoder(a / "options.json", a / "weights.hdf5", stateful=True).fingerprint != fa
    # a different architecture (one filter fewer) is a different model
    opts["char_cnn"]["filters"] = opts["char_cnn"]["filters"][:-1]
    (b / "options.json").write_text(json.dumps(opts))
    assert ElmoEncoder(b / "options.json", b / "weights.hdf5").fingerprint != fa


def test_encode_equals_elmo_embed_and_is_batch_independent():
    enc = ElmoEncoder(OPTIONS, WEIGHTS, batch_size=2)
    reference = Elmo.from_files(OPTIONS, WEIGHTS).embed(SENTENCES, batch_size=2)  # same batches: bit-equal
    out = enc.encode(SENTENCES)
    assert enc.loaded
    assert len(out) == len(SENTENCES)
    for got, want, words in zip(out, reference, SENTENCES):
        assert got.dtype == np.float32 and got.shape == (3, len(words), 32)
        np.testing.assert_array_equal(got, want)
    # one sentence at a time gives the same vectors as batches of two (zero-state policy); 1e-5 is the
    # ELMo conformance bound used in test_elmo.py (padding changes only float summation order)
    for words, batched in zip(SENTENCES, out):
        np.testing.assert_allclose(enc.encode([words])[0], batched, atol=1e-5)
    assert not enc.oov_mask(["qwertyuiop", "the"]).any()  # a character model has no OOV


def test_from_model_wraps_an_in_memory_elmo():
    model = Elmo.from_files(OPTIONS, WEIGHTS)
    enc = ElmoEncoder.from_model(model, name="mine")
    assert enc.name == "mine" and enc.loaded and enc.layer_names == ["0", "1", "2"]
    np.testing.assert_array_equal(enc.encode(SENTENCES[:1])[0], model.embed(SENTENCES[:1])[0])
    # its identity is the model's weights: equal for an equal model, different for a random one
    assert ElmoEncoder.from_model(Elmo.from_files(OPTIONS, WEIGHTS)).fingerprint == enc.fingerprint
    assert ElmoEncoder.from_model(Elmo.random(OPTIONS, seed=0)).fingerprint != enc.fingerprint


def test_random_elmo_is_the_same_architecture_with_other_vectors(no_model):
    trained = ElmoEncoder(OPTIONS, WEIGHTS)
    rand0, rand0b, rand1 = (
        RandomElmoEncoder(OPTIONS, seed=0),
        RandomElmoEncoder(OPTIONS, seed=0),
        RandomElmoEncoder(OPTIONS, seed=1),
    )
    assert rand0.name == "random-elmo"
    assert (rand0.layer_names, rand0.dim) == (trained.layer_names, trained.dim)
    # fingerprints without building anything: equal for equal seeds, distinct from each other and trained
    assert rand0.fingerprint == rand0b.fingerprint
    assert len({rand0.fingerprint, rand1.fingerprint, trained.fingerprint}) == 3


def test_random_elmo_vectors_differ_from_trained_and_equal_elmo_random():
    trained = ElmoEncoder(OPTIONS, WEIGHTS).encode(SENTENCES)
    rand = RandomElmoEncoder(OPTIONS, seed=3).encode(SENTENCES)
    want = Elmo.random(OPTIONS, seed=3).embed(SENTENCES)
    for r, w, t in zip(rand, want, trained):
        np.testing.assert_array_equal(r, w)
        assert r.shape == t.shape
        for layer in range(3):  # random weights give other vectors in every layer
            assert not np.allclose(r[layer], t[layer], atol=1e-3)


def test_glove_encoder_zero_vectors_and_oov_mask(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path))
    vectors = Vectors.from_file(GLOVE, progress=False)
    enc = GloveEncoder(vectors)
    words = ["The", "king", "zyxwv", "games", "Kingdom", "."]
    # the fixture is lowercase, so lookups are lowercased: "The" and "king" are known, the rest unknown
    # ("zyxwv", "Kingdom" and "." are not in its 27 words)
    expected_oov = [w.lower() not in vectors.vocab for w in words]
    assert expected_oov == [False, False, True, False, True, True]
    np.testing.assert_array_equal(enc.oov_mask(words), expected_oov)
    (out,) = enc.encode([words])
    assert enc.layer_names == ["glove"] and out.shape == (1, len(words), vectors.dim) and out.dtype == np.float32
    for i, w in enumerate(words):
        want = np.zeros(vectors.dim, np.float32) if expected_oov[i] else vectors[w]
        np.testing.assert_array_equal(out[0, i], want)
    assert enc.fingerprint != vectors.fingerprint and len(enc.fingerprint) == 64


def test_get_encoder_descriptions(copies, tmp_path, monkeypatch):
    enc = get_encoder(str(copies[0]))
    assert isinstance(enc, ElmoEncoder) and enc.name == "elmo"
    assert enc.fingerprint == ElmoEncoder(copies[1] / "options.json", copies[1] / "weights.hdf5").fingerprint
    rand = get_encoder(f"random-elmo:{copies[0]}", seed=4)
    assert isinstance(rand, RandomElmoEncoder) and rand.seed == 4
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    assert isinstance(get_encoder(f"glove:{GLOVE}"), GloveEncoder)
    with pytest.raises(ValueError, match=r"model 'no-such-model' is neither a folder .* nor a known name"):
        get_encoder("no-such-model")


def test_missing_weights_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="weights file not found: .*nothing.hdf5"):
        ElmoEncoder(OPTIONS, tmp_path / "nothing.hdf5")
