"""Static vectors trained with gensim (``probing train-static``) and the ``word2vec``/``fasttext`` encoder
kinds. Skipped without gensim (``pip install 'probing[static]'``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gensim")

from probing.encoders import ENCODER_KINDS, get_encoder  # noqa: E402
from probing.encoders.static_trained import TrainedStaticEncoder, train_static, vectors_file  # noqa: E402
from probing.errors import InputError  # noqa: E402

WORDS = "the cat sat on a mat while the dog ran to the bank of the river with money".split()


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    lines = [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 12)))) for _ in range(300)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(text, tmp_path_factory) -> dict[str, Path]:
    out = {}
    for method in ("word2vec", "fasttext"):
        folder = tmp_path_factory.mktemp(method)
        train_static(method, text, folder, dim=16, epochs=2, seed=0, min_count=5, progress=False)
        out[method] = folder
    return out


def test_train_static_writes_vectors_and_a_record(trained, text):
    rec = json.loads((trained["word2vec"] / "training.json").read_text())
    assert rec["method"] == "word2vec" and rec["params"]["workers"] == 1 and rec["params"]["sg"] == 1
    assert rec["corpus"]["path"] == str(text) and len(rec["corpus"]["sha256"]) == 64
    # every one of the 17 word types occurs far more than 5 times in 300 lines of 4-11 words
    assert rec["vocabulary"] == len(set(WORDS))
    header = (trained["word2vec"] / "vectors.vec").read_text().splitlines()[0]
    assert header == f"{len(set(WORDS))} 16"
    assert json.loads((trained["fasttext"] / "training.json").read_text())["params"]["bucket"] == 200_000


def test_the_same_seed_gives_the_same_bytes_under_any_hash_seed(text, tmp_path):
    """Two processes with different PYTHONHASHSEED: workers=1 and the seed make the output identical."""
    code = (
        "import sys; from probing.encoders.static_trained import train_static; "
        "train_static('word2vec', sys.argv[1], sys.argv[2], dim=8, epochs=1, seed=3, progress=False)"
    )
    outs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run([sys.executable, "-c", code, str(text), str(out)], check=True, env=env)
        outs.append((out / "vectors.vec").read_bytes())
    assert outs[0] == outs[1]


def test_word2vec_encoder_gives_zeros_and_flags_oov(trained):
    enc = ENCODER_KINDS["word2vec"].encoder(ENCODER_KINDS["word2vec"].options(str(trained["word2vec"])))
    assert enc.layer_names == ["word2vec"] and enc.dim == 16
    (x,) = enc.encode([["cat", "zebra", "cat"]])
    assert x.shape == (1, 3, 16) and x.dtype == np.float32
    assert np.array_equal(x[0, 0], x[0, 2]) and np.any(x[0, 0] != 0)  # static: one vector per type
    assert not np.any(x[0, 1])  # OOV: zeros
    assert enc.oov_mask(["cat", "zebra"]).tolist() == [False, True]


def test_fasttext_gives_oov_words_their_ngram_vector(trained):
    enc = get_encoder(f"fasttext:{trained['fasttext']}")
    (x,) = enc.encode([["cats", "cat"]])
    # "cats" is OOV but shares the n-grams "<ca", "cat", "<cat" with "cat": a non-zero vector close to it
    assert enc.oov_mask(["cats", "cat"]).tolist() == [True, False]
    a, b = x[0].astype(np.float64)
    assert np.any(a != 0) and a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) > 0.3


def test_fasttext_vectors_equal_gensims_own_lookup(trained):
    from gensim.models.fasttext import load_facebook_vectors

    kv = load_facebook_vectors(str(trained["fasttext"] / "vectors.bin"))
    enc = TrainedStaticEncoder("fasttext", trained["fasttext"] / "vectors.bin")
    (x,) = enc.encode([["river", "rivers"]])
    assert np.allclose(x[0, 0], kv["river"]) and np.allclose(x[0, 1], kv["rivers"])


def test_fingerprint_follows_the_file(trained, tmp_path):
    a = TrainedStaticEncoder("word2vec", trained["word2vec"] / "vectors.vec")
    copy = tmp_path / "copy.vec"
    copy.write_bytes((trained["word2vec"] / "vectors.vec").read_bytes())
    assert TrainedStaticEncoder("word2vec", copy).fingerprint == a.fingerprint  # content, not path
    lines = copy.read_text().splitlines()
    lines[1] = lines[1].rsplit(" ", 1)[0] + " 9.0"
    copy.write_text("\n".join(lines) + "\n")
    assert TrainedStaticEncoder("word2vec", copy).fingerprint != a.fingerprint


def test_bad_vectors_name_the_key(tmp_path):
    with pytest.raises(InputError, match="no such file or folder"):
        vectors_file("word2vec", tmp_path / "missing")
    with pytest.raises(InputError, match=r"has no vectors\.bin"):
        vectors_file("fasttext", tmp_path)
    pickle_file = tmp_path / "model.model"
    pickle_file.write_bytes(b"\x80\x04")
    with pytest.raises(InputError, match="pickles and are not loaded"):
        vectors_file("word2vec", pickle_file)
    bad = tmp_path / "bad.vec"
    bad.write_text("not a header\n")
    with pytest.raises(InputError, match="bad.vec line 1"):
        _ = TrainedStaticEncoder("word2vec", bad).dim


def test_cli_train_static(text, tmp_path, capsys):
    from probing.cli import main

    assert (
        main(
            [
                "train-static",
                "--method",
                "word2vec",
                "--corpus",
                str(text),
                "--out",
                str(tmp_path),
                "--dim",
                "8",
                "--epochs",
                "1",
                "-q",
            ]
        )
        == 0
    )
    assert "kind = 'word2vec'" in capsys.readouterr().out
    assert (tmp_path / "vectors.vec").read_text().splitlines()[0].endswith(" 8")
    assert (
        main(["train-static", "--method", "word2vec", "--corpus", str(tmp_path / "none.txt"), "--out", str(tmp_path)])
        == 2
    )
    assert "--corpus" in capsys.readouterr().err


def test_twin_names_the_cache_folder_and_how_to_train_it(trained, isolated_cache):
    import shutil

    kind = ENCODER_KINDS["word2vec"]
    with pytest.raises(InputError, match=r"probing train-static --method word2vec --out .*static-twins/word2vec"):
        kind.encoder(kind.options("twin"))
    shutil.copytree(trained["word2vec"], isolated_cache / "static-twins" / "word2vec")
    assert kind.encoder(kind.options("twin")).dim == 16
