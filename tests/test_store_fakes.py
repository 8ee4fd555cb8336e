"""Small stand-ins for the Sentence / Corpus / Encoder contracts of DESIGN.md, used by the store tests.

They follow the contracts exactly and are deterministic (hash-based), so a store can be compared with
a straightforward per-sentence reference. No tests live here.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VOCAB = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "dog",
    "ran",
    "to",
    "bank",
    "river",
    "money",
    "Paris",
    "quickly",
    "green",
    "idea",
    "sleeps",
    "furiously",
    "of",
    "and",
    "3.14",
    "co-op",
    "naïve",
]
UPOS = {
    "the": "DET",
    "a": "DET",
    "cat": "NOUN",
    "mat": "NOUN",
    "dog": "NOUN",
    "bank": "NOUN",
    "river": "NOUN",
    "money": "NOUN",
    "idea": "NOUN",
    "sat": "VERB",
    "ran": "VERB",
    "sleeps": "VERB",
    "on": "ADP",
    "to": "ADP",
    "of": "ADP",
    "Paris": "PROPN",
    "quickly": "ADV",
    "furiously": "ADV",
    "green": "ADJ",
    "naïve": "ADJ",
    "and": "CCONJ",
    "3.14": "NUM",
    "co-op": "NOUN",
}
SENSES = {"bank": ("bank%1:14:00::",), "river": ("river%1:17:00::",), "idea": ("idea%1:09:00::", "idea%1:09:01::")}


@dataclass
class FakeSentence:
    id: str
    doc_id: str
    words: list[str]
    upos: list[str] | None = None
    xpos: list[str] | None = None
    lemmas: list[str] | None = None
    senses: list[tuple[str, ...]] | None = None
    instance_ids: list[str | None] | None = None


class FakeCorpus:
    """Streams its sentences; counts how often it was iterated."""

    def __init__(self, sentences: Sequence[FakeSentence], name: str = "fake", split: str = "test"):
        self.name, self.split = name, split
        self._sentences = list(sentences)
        self.iterations = 0

    def __iter__(self):
        self.iterations += 1
        return iter(self._sentences)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for s in self._sentences:
            h.update(json.dumps([s.id, s.doc_id, s.words, s.upos, s.xpos, s.lemmas, s.senses, s.instance_ids]).encode())
        return h.hexdigest()


def make_corpus(
    n_sentences: int, seed: int = 0, max_len: int = 12, annotate: bool = True, name: str = "fake"
) -> FakeCorpus:
    """Random sentences over VOCAB, 1..max_len words; every third sentence has no annotations at all."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_sentences):
        words = [VOCAB[j] for j in rng.integers(0, len(VOCAB), size=int(rng.integers(1, max_len + 1)))]
        s = FakeSentence(id=f"s{i}", doc_id=f"d{i // 4}", words=words)
        if annotate and i % 3:
            s.upos = [UPOS[w] for w in words]
            s.xpos = [UPOS[w][:2] for w in words]
            s.lemmas = [w.lower() for w in words]
            s.senses = [SENSES.get(w, ()) for w in words]
            s.instance_ids = [f"s{i}.t{p}" if w in SENSES else None for p, w in enumerate(words)]
        out.append(s)
    return FakeCorpus(out, name=name)


class FakeEncoder:
    """Deterministic "contextual" encoder: layer 0 depends on the word, layers >= 1 also on its neighbours.

    Outputs are independent of batch composition, as the Encoder contract requires. The model is "loaded"
    on the first ``encode``/``oov_mask`` (counted in ``loads``), like a lazy ELMo adapter. ``sleep`` seconds
    are spent per batch; ``log`` (a path) gets one JSON line per encoded sentence, for cross-process counts.
    """

    name = "fake-hash"

    def __init__(
        self,
        dim: int = 8,
        n_layers: int = 3,
        sleep: float = 0.0,
        log: str | Path | None = None,
        salt: str = "",
        fail_after_batches: int | None = None,
        scale: float = 4.0,
    ):
        self.dim, self.sleep, self.log, self.scale = dim, sleep, log, scale
        self.layer_names = [str(i) for i in range(n_layers)]
        self.fingerprint = hashlib.sha256(f"fake-hash|{dim}|{n_layers}|{salt}|{scale}".encode()).hexdigest()
        self.fail_after_batches = fail_after_batches
        self.batches: list[list[tuple[str, ...]]] = []
        self.loads = 0

    def _load(self) -> None:
        if self.loads == 0:
            self.loads = 1

    def vector(self, layer: int, words: Sequence[str], p: int) -> np.ndarray:
        context = (
            words[p]
            if layer == 0
            else f"{words[p - 1] if p else '<s>'}|{words[p]}|{words[p + 1] if p + 1 < len(words) else '</s>'}"
        )
        raw = b"".join(
            hashlib.sha256(f"{self.fingerprint}|{layer}|{context}|{k}".encode()).digest()
            for k in range((self.dim + 15) // 16)
        )
        u = np.frombuffer(raw, dtype="<u2")[: self.dim].astype(np.float32)
        return (u / 65536.0 * 2.0 - 1.0) * self.scale

    def encode_one(self, words: Sequence[str]) -> np.ndarray:
        out = np.empty((len(self.layer_names), len(words), self.dim), dtype=np.float32)
        for layer in range(len(self.layer_names)):
            for p in range(len(words)):
                out[layer, p] = self.vector(layer, words, p)
        return out

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        self._load()
        if self.fail_after_batches is not None and len(self.batches) >= self.fail_after_batches:
            raise RuntimeError("fake encoder: simulated crash")
        self.batches.append([tuple(s) for s in sentences])
        if self.log is not None:
            with open(self.log, "a", encoding="utf-8") as f:
                for s in sentences:
                    f.write(json.dumps(list(s)) + "\n")
        if self.sleep:
            time.sleep(self.sleep)
        return [self.encode_one(s) for s in sentences]

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        self._load()
        return np.array([not w.isalpha() for w in words], dtype=bool)


class MetadataOnly:
    """Wraps an encoder and fails the test if anything but name/fingerprint/layer_names/dim is touched."""

    allowed = ("name", "fingerprint", "layer_names", "dim")

    def __init__(self, inner):
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, attr):
        if attr in self.allowed:
            return getattr(self._inner, attr)
        raise AssertionError(f"a cache hit touched encoder.{attr}; only {self.allowed} are allowed")


def reference_layers(encoder: FakeEncoder, corpus: FakeCorpus) -> list[np.ndarray]:
    """Per layer, fp16 (n_tokens, dim): each sentence encoded alone, concatenated in corpus order."""
    per = [encoder.encode_one(s.words) for s in corpus._sentences if s.words]
    return [np.concatenate([a[layer] for a in per]).astype(np.float16) for layer in range(len(encoder.layer_names))]


class StreamingCorpus:
    """A generated corpus that is never held in memory: sentence i is rebuilt from (seed, i) on each pass."""

    def __init__(self, n_sentences: int, seed: int = 0, max_len: int = 40, name: str = "synthetic"):
        self.n_sentences, self.seed, self.max_len = n_sentences, seed, max_len
        self.name, self.split = name, "train"

    def __iter__(self):
        for i in range(self.n_sentences):
            rng = np.random.default_rng((self.seed, i))
            words = [VOCAB[j] for j in rng.integers(0, len(VOCAB), size=int(rng.integers(1, self.max_len + 1)))]
            yield FakeSentence(id=f"s{i}", doc_id=f"d{i // 20}", words=words)

    def fingerprint(self) -> str:
        return hashlib.sha256(f"streaming|{self.n_sentences}|{self.seed}|{self.max_len}".encode()).hexdigest()


class FastEncoder:
    """Vectorised, batch-independent encoder for large synthetic runs: values depend on (layer, word, position)."""

    name = "fast-fake"

    def __init__(self, dim: int = 256, n_layers: int = 3):
        self.dim, self.layer_names = dim, [str(i) for i in range(n_layers)]
        self.fingerprint = hashlib.sha256(f"fast|{dim}|{n_layers}".encode()).hexdigest()
        table = np.random.default_rng(0).standard_normal((n_layers, len(VOCAB), dim)).astype(np.float32)
        self._table, self._ids = table, {w: i for i, w in enumerate(VOCAB)}

    def encode(self, sentences):
        out = []
        for words in sentences:
            ids = np.fromiter((self._ids[w] for w in words), dtype=np.int64, count=len(words))
            out.append(self._table[:, ids] + np.arange(len(words), dtype=np.float32)[None, :, None] * 0.01)
        return out

    def oov_mask(self, words):
        return np.zeros(len(words), dtype=bool)
