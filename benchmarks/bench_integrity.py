#!/usr/bin/env python3
"""Benchmark the cost of integrity checks on a store cache hit (issue 14). Prints a table.

    OMP_NUM_THREADS=1 python benchmarks/bench_integrity.py                  # 200,000 tokens x 3 x 1024
    python benchmarks/bench_integrity.py --tokens 52000 --dim 512   # the default model on demo-ud train

A synthetic store (3 layers of dim 1024, fp16, default chunking: 32,768 tokens per chunk, i.e. 64 MiB per
layer chunk) is written once; then, with the files in the page cache, each check is timed ``--repeat``
times (median): the sizes-only check of the former cache hit, the sampled check a hit now runs
(``Store.check_sample``: token table and offsets hashed whole, and the layers too up to FULL_CHECK_BYTES,
else ~32 MiB of layer chunks), the sampled check forced, the full ``Store.verify()`` (``probing extract
--verify``), and a whole ``extract()`` hit end to end; wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

from probing._io import human_size
from probing.store import Store, extract


@dataclass
class Sentence:
    id: str
    doc_id: str
    words: list[str]
    upos: list[str] | None = None
    xpos: list[str] | None = None
    lemmas: list[str] | None = None
    senses: list = field(default_factory=list)
    instance_ids: list | None = None

    def __post_init__(self) -> None:
        self.senses = [()] * len(self.words)


class Corpus:
    name, split = "synthetic", "bench"

    def __init__(self, n_tokens: int):
        rng = np.random.default_rng(0)
        self.sentences, total, i = [], 0, 0
        while total < n_tokens:
            n = int(min(rng.integers(5, 40), n_tokens - total))
            self.sentences.append(Sentence(f"s{i}", f"d{i // 20}", [f"w{int(k)}" for k in rng.integers(0, 5000, n)]))
            total, i = total + n, i + 1

    def __iter__(self):
        return iter(self.sentences)

    def fingerprint(self) -> str:
        return hashlib.sha256(str(len(self.sentences)).encode()).hexdigest()


class Encoder:
    name, fingerprint, layer_names = "bench", "b" * 64, ["0", "1", "2"]

    def __init__(self, dim: int):
        self.dim = dim

    def encode(self, sentences):
        return [np.full((3, len(s), self.dim), 0.5, dtype=np.float32) for s in sentences]

    def oov_mask(self, words):
        return np.zeros(len(words), dtype=bool)


def timed(fn, repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``fn()``."""
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus, encoder = Corpus(args.tokens), Encoder(args.dim)
        store = extract(encoder, corpus, cache_dir=tmp, progress=False)
        layers = sum((store.path / e["file"]).stat().st_size for e in store.manifest["layers"])
        tokens = (store.path / "tokens.parquet").stat().st_size
        rows = [
            ("sizes only (the former hit check)", timed(lambda: Store.open(store.path).sizes_ok(), args.repeat)),
            ("check_sample (a hit now)", timed(lambda: Store.open(store.path).check_sample(), args.repeat)),
            (
                "check_sample, sampled (above the line)",
                timed(lambda: Store.open(store.path).check_sample(full_below=0), args.repeat),
            ),
            (
                "extract() cache hit, end to end",
                timed(lambda: extract(encoder, corpus, cache_dir=tmp, progress=False), args.repeat),
            ),
            ("verify() (probing extract --verify)", timed(lambda: Store.open(store.path).verify(), args.repeat)),
        ]
        print(
            f"store: {len(store):,} tokens, {len(store.manifest['chunks'])} chunks, layers {human_size(layers)}, "
            f"tokens.parquet {human_size(tokens)} (files in the page cache; median of {args.repeat})"
        )
        print(f"{'check':40s} {'wall s':>10s} {'CPU s':>10s}")
        for what, (wall, cpu) in rows:
            print(f"{what:40s} {wall:10.4f} {cpu:10.4f}")


if __name__ == "__main__":
    main()
