"""Conformance of the PyTorch ELMo with the reference activations (TensorFlow bilm-tf / AllenNLP).

The fixture (tests/fixtures/elmo_allennlp, Apache-2.0, see its NOTICE) holds a tiny trained ELMo and
activations computed by the original implementations; its README says how they were made.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from probing.elmo import Elmo, ElmoOptions, OptionsError, ScalarMix, WeightsError
from probing.elmo.chars import token_char_ids

FIX = Path(__file__).parent / "fixtures" / "elmo_allennlp"
OPTIONS = FIX / "options.json"
WEIGHTS = FIX / "lm_weights.hdf5"
TOL = 1e-5  # the conformance bound; observed diffs are about 1e-6
DEVICE = os.environ.get("PROBING_TEST_DEVICE", "cpu")  # benchmarks/device_check.sh runs these on a GPU too


def lines() -> list[list[str]]:
    return [line.split() for line in (FIX / "input.txt").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def stateless() -> Elmo:
    return Elmo.from_files(OPTIONS, WEIGHTS).to_device(DEVICE)


def test_stateful_reproduces_reference_all_layers():
    model = Elmo.from_files(OPTIONS, WEIGHTS, stateful=True).to_device(DEVICE)
    sents = lines()
    with h5py.File(FIX / "expected_all_layers.hdf5", "r") as exp:
        for start in range(0, len(sents), 3):  # the reference fed batches of 3, in order
            for k, out in enumerate(model.embed(sents[start : start + 3], batch_size=3)):
                expected = exp[str(start + k)][...]
                assert out.shape == expected.shape == (3, len(sents[start + k]), 32)
                assert np.abs(out - expected).max() <= TOL


def test_stateful_top_layer_matches_tensorflow():
    """bilm-tf's own top-layer output for sentences[k][i], fed as batch i row k."""
    model = Elmo.from_files(OPTIONS, WEIGHTS, stateful=True).to_device(DEVICE)
    groups = json.loads((FIX / "sentences.json").read_text())
    tf = [h5py.File(FIX / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    for i in range(10):
        batch = [groups[k][i].split() for k in range(3)]
        for k, out in enumerate(model.embed(batch, batch_size=3)):
            expected = np.concatenate([tf[k][str(i)][0], tf[k][str(i)][1]], axis=-1)
            assert np.abs(out[2] - expected).max() <= TOL


def test_stateless_reproduces_reference(stateless):
    sents = lines()
    with h5py.File(FIX / "expected_all_layers_stateless.hdf5", "r") as exp:
        for i, out in enumerate(stateless.embed(sents, batch_size=5)):
            assert np.abs(out - exp[str(i)][...]).max() <= TOL


def test_token_layer_matches_tensorflow_vocabulary(stateless):
    vocab = (FIX / "vocab_test.txt").read_text(encoding="utf-8").split("\n")[:458]
    ids = torch.from_numpy(np.stack([token_char_ids(w) for w in vocab]))
    with torch.no_grad():
        got = stateless.bilm.char_cnn(ids).numpy()
    with h5py.File(FIX / "elmo_token_embeddings.hdf5", "r") as f:
        assert np.abs(got - f["embedding"][...]).max() <= TOL


def test_stateless_is_independent_of_batch(stateless):
    sents = lines()
    alone = [stateless.embed([s])[0] for s in sents]
    shuffled = list(range(len(sents)))
    random.Random(0).shuffle(shuffled)
    together = stateless.embed([sents[i] for i in shuffled], batch_size=len(sents))
    for out, i in zip(together, shuffled):
        assert np.abs(out - alone[i]).max() <= TOL


def test_stateless_random_original_architecture_is_batch_invariant():
    """Random weights of the 4096-cell architecture, shrunk in depth of filters only for speed."""
    opts = ElmoOptions.from_dict(
        {
            "lstm": {
                "dim": 4096,
                "projection_dim": 512,
                "n_layers": 2,
                "cell_clip": 3,
                "proj_clip": 3,
                "use_skip_connections": True,
            },
            "char_cnn": {
                "embedding": {"dim": 16},
                "filters": [[1, 32], [2, 32], [3, 64], [4, 128]],
                "n_highway": 2,
                "n_characters": 262,
                "max_characters_per_token": 50,
                "activation": "relu",
            },
        }
    )
    model = Elmo.random(opts, seed=1).to_device(DEVICE)
    sents = [["a"] * n for n in (1, 7, 3)] + [["The", "cat", "sat", "."]]
    alone = [model.embed([s])[0] for s in sents]
    for out, ref in zip(model.embed(sents[::-1], batch_size=4)[::-1], alone):
        assert np.abs(out - ref).max() <= 1e-4  # the bound for GEMM-blocking drift


def test_edge_cases(stateless):
    assert stateless.embed([]) == []
    one = stateless.embed([["word"]])[0]
    assert one.shape == (3, 1, 32)
    long = stateless.embed([["token"] * 300])[0]
    assert long.shape == (3, 300, 32) and np.isfinite(long).all()
    # over-long tokens are cut at 48 bytes: two tokens that differ only after byte 48 are identical
    a, b = "x" * 48 + "AAAA", "x" * 48 + "BBBB"
    out = stateless.embed([[a], [b]])
    assert np.array_equal(out[0][0], out[1][0])
    assert not np.array_equal(stateless.embed([["x" * 47 + "A"]])[0][0], stateless.embed([["x" * 47 + "B"]])[0][0])
    emoji = stateless.embed([["café", "🙂", "naïve", "東京"]])[0]
    assert emoji.shape == (3, 4, 32) and np.isfinite(emoji).all()


def test_char_ids_follow_reference_layout():
    ids = token_char_ids("é")  # two UTF-8 bytes 0xC3 0xA9
    assert list(ids[:5]) == [259, 0xC3 + 1, 0xA9 + 1, 260, 261]
    assert list(token_char_ids("<S>")[:4]) == [259, 257, 260, 261]
    cut = token_char_ids("é" * 30)  # 60 bytes, cut to 48: [bow, 48 bytes, eow], no padding left
    assert len(cut) == 50 and cut[48] == 0xA9 + 1 and cut[49] == 259 + 1


def test_bad_input_is_refused(stateless):
    with pytest.raises(ValueError, match="sentence 0, token 1: empty token"):
        stateless.embed([["a", ""]])
    with pytest.raises(TypeError, match="token 0: expected str"):
        stateless.embed([[3]])


def test_strings_are_tokenized_by_the_one_rule(stateless):
    """A string sentence (issue #15) equals its tokens by probing.tokenize: "Alusik's grounder." is four tokens;
    a bare string is one sentence."""
    tokens = ["Chico", "Ruiz", "made", "a", "play", "on", "Alusik", "'s", "grounder", "."]
    want = stateless.embed([tokens])[0]
    (one,) = stateless.embed("Chico Ruiz made a play on Alusik's grounder.")
    listed = stateless.embed(["Chico Ruiz made a play on Alusik's grounder.", ["a", "b"]])
    np.testing.assert_array_equal(one, want)  # the same single-sentence batch: bit for bit
    assert np.abs(listed[0] - want).max() <= TOL and listed[1].shape[1] == 2  # batched with another: within TOL


def test_weights_errors_name_dataset_and_shapes(tmp_path):
    bad = tmp_path / "w.hdf5"
    with h5py.File(WEIGHTS, "r") as src, h5py.File(bad, "w") as dst:
        for name in ("char_embed", "CNN/W_cnn_0"):
            dst.create_dataset(name, data=src[name][...])
    with pytest.raises(WeightsError, match="missing dataset 'CNN/b_cnn_0'"):
        Elmo.from_files(OPTIONS, bad)
    with h5py.File(bad, "a") as f:
        del f["CNN/W_cnn_0"]
        f.create_dataset("CNN/W_cnn_0", data=np.zeros((1, 1, 4, 5), np.float32))
    with pytest.raises(
        WeightsError, match=r"'CNN/W_cnn_0' has shape \(1, 1, 4, 5\), options.json expects \(1, 1, 4, 4\)"
    ):
        Elmo.from_files(OPTIONS, bad)


def test_options_errors_name_missing_key(tmp_path):
    d = json.loads(OPTIONS.read_text())
    del d["lstm"]["projection_dim"]
    p = tmp_path / "options.json"
    p.write_text(json.dumps(d))
    with pytest.raises(OptionsError, match="missing key 'lstm.projection_dim'"):
        Elmo.from_files(p, WEIGHTS)
    p.write_text("{not json")
    with pytest.raises(OptionsError, match="not valid JSON"):
        Elmo.from_files(p, WEIGHTS)


def test_save_load_round_trip(tmp_path, stateless):
    stateless.save(tmp_path / "o.json", tmp_path / "w.hdf5")
    again = Elmo.from_files(tmp_path / "o.json", tmp_path / "w.hdf5")
    sents = lines()[:4]
    for a, b in zip(stateless.embed(sents), again.embed(sents)):
        assert np.array_equal(a, b)  # float32 round trip is exact
    assert again.fingerprint == stateless.fingerprint
    assert Elmo.from_files(OPTIONS, WEIGHTS, stateful=True).fingerprint != stateless.fingerprint


def test_random_weights_are_seeded():
    a, b, c = (Elmo.random(OPTIONS, seed=s) for s in (3, 3, 4))
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_scalar_mix_is_eq1():
    mix = ScalarMix(3, initial=[0.0, 1.0, 2.0])
    with torch.no_grad():
        mix.gamma.fill_(2.0)
    layers = torch.arange(3 * 4, dtype=torch.float32).view(3, 4)
    w = torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0)
    assert torch.allclose(mix(layers), 2.0 * (w[:, None] * layers).sum(0))
