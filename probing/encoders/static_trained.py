"""Static vectors trained here with gensim: word2vec skip-gram and fastText (``kind = "word2vec"`` /
``"fasttext"``), the same-corpus twins of the bundled ELMo, and ``probing train-static`` that trains them.

Why: GloVe 6B saw 6 billion tokens, the bundled biLM 24 million (4 epochs of 6 million); static vectors
trained on the biLM's own pretraining text separate "context" from "data" in the ladder. fastText's character
n-grams (3-6) make it the static twin of ELMo's character CNN: it gives every word a vector, also one it never
saw, as the sum of its n-grams' vectors.

**Files.** ``train-static --out DIR`` writes ``DIR/vectors.vec`` (word2vec: the word2vec text format) or
``DIR/vectors.bin`` (fastText: Facebook's binary format, with the n-gram buckets), and ``DIR/training.json``
(method, hyperparameters, the corpus's path, size and sha256, gensim's version, seconds). A kind's ``vectors``
key takes such a DIR, a ``.vec``/``.txt`` file (word2vec text format: no n-grams, so fastText gives OOV words
zeros), or a ``.bin`` file (word2vec binary format for ``word2vec``; Facebook's fastText binary for
``fasttext``). Everything is read by gensim's format parsers (``KeyedVectors.load_word2vec_format``,
``load_facebook_vectors``): no pickle is ever loaded, so gensim's own ``.model`` files are refused.

**OOV rows.** A token outside the trained vocabulary is flagged by ``oov_mask`` (the store's ``oov`` column, as
GloVe's): word2vec gives it zeros, fastText its n-gram vector (zeros if none of its n-grams has a bucket).

**Determinism.** Training is seeded (``seed``) and runs on one worker thread: gensim's multi-threaded
training interleaves the threads' updates in the order the scheduler runs them, so only ``workers=1`` repeats
bit for bit. In gensim 4.4 the initial vectors come from ``numpy.random.default_rng(seed)``, not from Python's
``hash``, so ``PYTHONHASHSEED`` plays no part (``tests/test_static_trained.py`` trains twice under two hash
seeds and compares the bytes).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probing._io import atomic_open, atomic_path, file_record
from probing._toml import Table, resolve_path
from probing.encoders.base import EncoderKind
from probing.errors import InputError
from probing.identity import digest

METHODS = ("word2vec", "fasttext")
FILES = {"word2vec": "vectors.vec", "fasttext": "vectors.bin"}
TRAINING_JSON = "training.json"
PRETRAIN_TEXT = "pretrain-corpus/train.txt"  # under the cache root: the bundled model's pretraining text
TWIN = "twin"  # vectors = "twin": the same-corpus twin trained into the cache (twin_folder)
FASTTEXT_BUCKETS = 200_000  # n-gram buckets (fastText's default 2M x 300 floats would be 2.4 GB for 6M tokens)


def pretraining_text() -> Path:
    """The bundled model's pretraining text (its model card: ``scripts/make_pretrain_corpus.py``'s
    ``train.txt``), expected at ``<cache>/pretrain-corpus/train.txt``; an InputError saying how to build it
    when it is not there."""
    from probing.paths import cache_dir

    path = cache_dir() / PRETRAIN_TEXT
    if not path.is_file():
        raise InputError(
            f"the bundled model's pretraining text is not at {path}: build it with "
            f"`PROBING_DATA=<data root> python scripts/make_pretrain_corpus.py --out {path.parent}` "
            "(probing/resources/models/default/MODEL_CARD.md lists its sources), or give --corpus TEXT"
        )
    return path


class LineSentences:
    """The sentences of a text file, one per line, split at whitespace; empty lines are skipped. Iterable
    more than once (gensim reads the corpus once to count and once per epoch)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __iter__(self) -> Iterator[list[str]]:
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                words = line.split()
                if words:
                    yield words


def train_static(
    method: str,
    corpus: str | os.PathLike | None,
    out: str | os.PathLike,
    *,
    dim: int = 300,
    epochs: int = 5,
    seed: int = 0,
    min_count: int = 5,
    window: int = 5,
    progress: bool = True,
) -> Path:
    """Train skip-gram word2vec or fastText vectors on ``corpus`` (one whitespace-tokenized sentence per line;
    None: :func:`pretraining_text`) and write them to the folder ``out``; return the vectors file.

    Skip-gram with negative sampling (5 noise words), window 5, words seen at least ``min_count`` times;
    fastText adds character n-grams of 3 to 6 in :data:`FASTTEXT_BUCKETS` buckets. One worker thread, seeded:
    the same call gives the same bytes. Progress: one line per epoch.
    """
    if method not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    for name, value in (("--dim", dim), ("--epochs", epochs), ("min_count", min_count), ("window", window)):
        if value < 1:
            raise InputError(f"{name} must be a positive integer, got {value}")
    if importlib.util.find_spec("gensim") is None:
        raise InputError("probing train-static needs the gensim package: pip install 'elmo-probing[static]'")
    from gensim.models import FastText, Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec

    text = Path(corpus) if corpus is not None else pretraining_text()
    if not text.is_file():
        raise InputError(f"--corpus {text}: no such file")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    class Report(CallbackAny2Vec):
        def __init__(self) -> None:
            self.epoch, self.start = 0, time.monotonic()

        def on_epoch_end(self, model: Any) -> None:
            self.epoch += 1
            if progress:
                print(f"{method}: epoch {self.epoch}/{epochs} done, {time.monotonic() - self.start:.0f} s", flush=True)

    params: dict[str, Any] = dict(
        vector_size=dim, window=window, min_count=min_count, sg=1, negative=5, epochs=epochs, seed=seed, workers=1
    )
    wall, cpu = time.monotonic(), time.process_time()
    sentences = LineSentences(text)
    if method == "word2vec":
        model: Any = Word2Vec(sentences, callbacks=[Report()], **params)
    else:
        model = FastText(sentences, callbacks=[Report()], min_n=3, max_n=6, bucket=FASTTEXT_BUCKETS, **params)
    seconds = {"wall": time.monotonic() - wall, "cpu": time.process_time() - cpu}
    target = out / FILES[method]
    with atomic_path(target) as tmp:
        if method == "word2vec":
            model.wv.save_word2vec_format(str(tmp), binary=False)
        else:
            from gensim.models.fasttext import save_facebook_model

            save_facebook_model(model, str(tmp))
    import gensim

    record = {
        "method": method,
        "corpus": file_record(text),
        "vocabulary": len(model.wv),
        "corpus_words": int(model.corpus_total_words),
        "params": {**params, **({"min_n": 3, "max_n": 6, "bucket": FASTTEXT_BUCKETS} if method == "fasttext" else {})},
        "gensim": gensim.__version__,
        "seconds": seconds,
        "vectors": FILES[method],
    }
    with atomic_open(out / TRAINING_JSON) as f:
        json.dump(record, f, indent=2)
    return target


def vectors_file(method: str, vectors: str | os.PathLike) -> Path:
    """The vectors file a kind's ``vectors`` key names: ``DIR/vectors.vec`` or ``DIR/vectors.bin`` for a
    folder, else the file itself (``.vec``, ``.txt`` or ``.bin``); InputError naming the key otherwise."""
    path = Path(vectors)
    if path.is_dir():
        path = path / FILES[method]
        if not path.is_file():
            raise InputError(
                f"vectors = {str(vectors)!r}: the folder has no {FILES[method]} (probing train-static writes one)"
            )
        return path
    if not path.is_file():
        raise InputError(f"vectors = {str(vectors)!r}: no such file or folder")
    if path.suffix not in (".vec", ".txt", ".bin"):
        raise InputError(
            f"vectors = {str(vectors)!r}: expected a folder written by probing train-static, a .vec/.txt "
            "(word2vec text format) or a .bin file (gensim's .model files are pickles and are not loaded)"
        )
    return path


def load_vectors(method: str, path: Path) -> Any:
    """gensim KeyedVectors from ``path`` through gensim's format parsers (never pickle)."""
    from gensim.models import KeyedVectors

    try:
        if path.suffix == ".bin" and method == "fasttext":
            from gensim.models.fasttext import load_facebook_vectors

            return load_facebook_vectors(str(path))
        return KeyedVectors.load_word2vec_format(str(path), binary=path.suffix == ".bin")
    except (ValueError, UnicodeDecodeError, EOFError, KeyError, AssertionError) as e:
        raise InputError(
            f"{path}: not a {method} vectors file in the expected format ({type(e).__name__}: {e})"
        ) from None


class TrainedStaticEncoder:
    """Static vectors of gensim's formats as a one-layer encoder (layer named like the kind, as GloVe's is):
    every occurrence of a word type gets the same vector. ``oov_mask`` flags the words outside the trained
    vocabulary: zeros for word2vec, the n-gram vector for fastText (zeros if it has none)."""

    def __init__(self, kind: str, path: Path, *, name: str | None = None):
        self.kind = kind
        self.path = path
        self.name = name or kind
        self.layer_names = [kind]
        self._record = file_record(path)
        self._kv: Any = None
        self._dim: int | None = None

    @property
    def kv(self) -> Any:
        if self._kv is None:
            self._kv = load_vectors(self.kind, self.path)
        return self._kv

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = _header_dim(self.path) if self.path.suffix != ".bin" else int(self.kv.vector_size)
        return self._dim

    @property
    def fingerprint(self) -> str:
        return digest({"static": self.kind, "sha256": self._record["sha256"]})

    def _vector(self, word: str) -> np.ndarray:
        kv = self.kv
        if word in kv.key_to_index:
            return kv.get_vector(word)
        if self.kind == "fasttext" and hasattr(kv, "buckets_word"):
            return kv.get_vector(word)  # the mean of its n-grams' vectors (zeros without any)
        return np.zeros(self.dim, dtype=np.float32)

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """One ``(1, n_tokens, dim)`` float32 array per sentence.

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str

        Returns
        -------
        list (n_sentences,) of ndarray (1, n_tokens, dim), float32
        """
        return [np.stack([self._vector(w) for w in words]).astype(np.float32)[None] for words in sentences]

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        """Which words are outside the trained vocabulary.

        Parameters
        ----------
        words : sequence (n,) of str

        Returns
        -------
        ndarray (n,) of bool
        """
        vocab = self.kv.key_to_index
        return np.array([w not in vocab for w in words], dtype=bool)

    def __repr__(self) -> str:
        return f"TrainedStaticEncoder(kind={self.kind!r}, path={str(self.path)!r})"


def _header_dim(path: Path) -> int:
    """The dimension in a word2vec text file's header line (``count dim``)."""
    with open(path, encoding="utf-8") as f:
        head = f.readline().split()
    if len(head) != 2 or not all(h.isdigit() for h in head):
        raise InputError(f"{path} line 1: expected the word2vec header 'count dim', got {' '.join(head)!r}")
    return int(head[1])


@dataclass(frozen=True)
class StaticTrainedOptions:
    """The key of a ``kind = "word2vec"`` or ``"fasttext"`` table: ``vectors``, a folder written by
    ``probing train-static`` or a vectors file (relative to the experiment file), or ``"twin"``: the folder
    :func:`twin_folder` in the cache."""

    vectors: str


def _parse(t: Table) -> StaticTrainedOptions:
    vectors = t.string("vectors")
    return StaticTrainedOptions(vectors if vectors == TWIN else str(resolve_path(vectors, t.base)))


def twin_folder(method: str) -> Path:
    """Where ``vectors = "twin"`` looks: ``<cache>/static-twins/<method>`` (train it there with
    ``probing train-static --method <method> --out <that folder>``)."""
    from probing.paths import cache_dir

    return cache_dir() / "static-twins" / method


def _kind(method: str) -> EncoderKind:
    def build(o: StaticTrainedOptions, name: str | None, device: str | None) -> TrainedStaticEncoder:
        """A table lookup: ``device`` plays no part."""
        if importlib.util.find_spec("gensim") is None:
            raise InputError(f"kind = {method!r} needs the gensim package: pip install 'elmo-probing[static]'")
        if o.vectors == TWIN and not (twin_folder(method) / FILES[method]).is_file():
            raise InputError(
                f'vectors = "twin": no {FILES[method]} in {twin_folder(method)}; train the same-corpus twin with '
                f"`probing train-static --method {method} --out {twin_folder(method)}`"
            )
        path = twin_folder(method) if o.vectors == TWIN else o.vectors
        return TrainedStaticEncoder(method, vectors_file(method, path), name=name)

    def shorthand(text: str) -> StaticTrainedOptions | None:
        return StaticTrainedOptions(text.removeprefix(f"{method}:")) if text.startswith(f"{method}:") else None

    return EncoderKind(
        method,
        options=StaticTrainedOptions,
        build=build,
        parse=_parse,
        shorthand=shorthand,
        forms=lambda: f"{method}:PATH",
    )


WORD2VEC = _kind("word2vec")
FASTTEXT = _kind("fasttext")
