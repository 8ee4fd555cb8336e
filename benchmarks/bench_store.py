#!/usr/bin/env python3
"""Benchmark the activation store: write overhead, read speed, peak memory. Prints tables.

    python benchmarks/bench_store.py                       # everything, defaults below
    python benchmarks/bench_store.py --skip-elmo --big-tokens 50000

(a) Extraction throughput through ``probing.store.extract`` against the same encoder called on the same
    length-sorted batches with no store at all (corpus streamed once, outputs dropped). Encoders, all
    dim 1024 x 3 layers but two: a GPU-like one (the CPU sleeps 100 us per token, i.e. 10k tokens/s,
    as while a GPU computes), a CPU-bound ELMo-shaped torch encoder (~6 MFLOP/token at ~20k tokens/s:
    a stress case, whose memory traffic competes with the store's threads), the tiny test-fixture ELMo
    in ``tests/fixtures/elmo_allennlp`` (dim 32, ~90k tokens/s, where per-sentence costs show), the
    ``original`` ELMo architecture with random weights (the real CPU cost), and the bundled default
    ELMo (dim 256) on as many tokens as UD EWT train. ``--repeat`` interleaved runs of each; see the
    note under the table for the columns.
(b) Reading one layer of a big store from the page cache: whole layer into float32, fp16 copy, and
    gathers of random rows (sorted and unsorted).
(c) Peak RSS (VmHWM, and ``ru_maxrss``) of a fresh process extracting ``--big-tokens`` tokens (dim 1024, 3 layers)
    from a streamed synthetic corpus, next to the same process doing everything but the extraction.
(d) The issue's scenario, in fresh processes: ``--model`` (the bundled default ELMo) on ``--corpus``/``--split``
    (UD EWT train, 204,577 words, from $PROBING_DATA), extract() against the encoder alone, with peak RSS.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from probing.store import Store, extract, length_batches

ROOT = Path(__file__).resolve().parents[1]
VOCAB = [f"w{i}" for i in range(5000)]


class Sentence:
    __slots__ = ("id", "doc_id", "words", "upos", "xpos", "lemmas", "senses", "instance_ids")

    def __init__(self, id: str, doc_id: str, words: list[str]):
        self.id, self.doc_id, self.words = id, doc_id, words
        self.upos = self.xpos = self.lemmas = self.senses = self.instance_ids = None


class SyntheticCorpus:
    """Streamed, never held in memory: sentence lengths ~ 1 + Poisson(21) (mean as in UD EWT train ~ 17-22)."""

    def __init__(self, n_tokens: int, seed: int = 0):
        self.n_tokens, self.seed = n_tokens, seed
        self.name, self.split = f"synthetic-{n_tokens}", "train"

    def __iter__(self):
        rng = np.random.default_rng(self.seed)
        left, i = self.n_tokens, 0
        while left > 0:
            n = min(left, 1 + int(rng.poisson(21)))
            ids = rng.integers(0, len(VOCAB), size=n)
            yield Sentence(f"s{i}", f"d{i // 25}", [VOCAB[j] for j in ids])
            left -= n
            i += 1

    def fingerprint(self) -> str:
        return hashlib.sha256(f"synthetic|{self.n_tokens}|{self.seed}".encode()).hexdigest()


class TorchMixEncoder:
    """ELMo-shaped stand-in: embedding, then per layer tanh((h + previous token's h) @ W). dim x dim per layer."""

    def __init__(self, dim: int = 1024, n_layers: int = 3):
        import torch

        g = torch.Generator().manual_seed(0)
        self.torch = torch
        self.name, self.dim, self.layer_names = "torch-mix", dim, [str(i) for i in range(n_layers)]
        self.emb = torch.randn(len(VOCAB), dim, generator=g) * 0.5
        self.weights = [torch.randn(dim, dim, generator=g) / dim**0.5 for _ in range(n_layers - 1)]
        self.fingerprint = hashlib.sha256(f"torch-mix|{dim}|{n_layers}".encode()).hexdigest()

    def encode(self, sentences):
        torch = self.torch
        with torch.inference_mode():
            lengths = [len(s) for s in sentences]
            ids = torch.tensor([int(w[1:]) for s in sentences for w in s])
            first = torch.zeros(len(ids), dtype=torch.bool)
            first[np.cumsum([0] + lengths[:-1]).tolist()] = True
            h = self.emb[ids]
            layers = [h]
            for w in self.weights:
                prev = torch.roll(h, 1, 0).masked_fill(first[:, None], 0.0)
                h = torch.tanh((h + prev) @ w)
                layers.append(h)
            out = torch.stack(layers).numpy()
        bounds = np.cumsum([0] + lengths)
        return [out[:, a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def oov_mask(self, words):
        return np.zeros(len(words), dtype=bool)


class SleepEncoder:
    """GPU-like: the CPU is idle for ``seconds_per_token`` while "the device" works; outputs are precomputed."""

    def __init__(self, dim: int = 1024, n_layers: int = 3, seconds_per_token: float = 1e-4, max_tokens: int = 1 << 14):
        self.name, self.dim, self.layer_names = "sleep", dim, [str(i) for i in range(n_layers)]
        self.fingerprint = hashlib.sha256(f"sleep|{dim}|{n_layers}".encode()).hexdigest()
        self.seconds_per_token = seconds_per_token
        self.out = np.random.default_rng(0).standard_normal((n_layers, max_tokens, dim)).astype(np.float32)

    def encode(self, sentences):
        n = sum(len(s) for s in sentences)
        time.sleep(n * self.seconds_per_token)
        offsets = np.cumsum([0] + [len(s) for s in sentences]) % (self.out.shape[1] - 512)
        return [self.out[:, a : a + len(s)] for a, s in zip(offsets, sentences)]

    def oov_mask(self, words):
        return np.zeros(len(words), dtype=bool)


class ElmoAdapter:
    """The Encoder contract over ``probing.elmo.Elmo`` (stateless), for the benchmark only."""

    def __init__(self, model, name: str):
        self.model, self.name = model, name
        self.dim, self.layer_names, self.fingerprint = model.output_dim, model.layer_names, model.fingerprint

    def encode(self, sentences):
        return self.model.embed([list(s) for s in sentences], batch_size=max(1, len(sentences)))

    def oov_mask(self, words):
        return np.zeros(len(words), dtype=bool)


def encoder_alone(encoder, corpus, chunk_tokens: int, batch_tokens: int) -> tuple[float, float]:
    """(wall s, CPU s) to stream the corpus and encode it in the batches extract() uses; outputs dropped."""
    t0, c0, window, count = time.perf_counter(), time.process_time(), [], 0

    def flush():
        lengths = [len(s.words) for s in window]
        for batch in length_batches(lengths, batch_tokens):
            encoder.encode([window[j].words for j in batch])

    for s in corpus:
        window.append(s)
        count += len(s.words)
        if count >= chunk_tokens:
            flush()
            window, count = [], 0
    flush()
    return time.perf_counter() - t0, time.process_time() - c0


def with_store(encoder, corpus, workdir: Path, chunk_tokens: int, batch_tokens: int) -> tuple[float, float, float]:
    """(wall s, CPU s of all threads, wall s / encoder s inside the run) of a cold extract() into a fresh
    cache dir (removed afterwards). The last is the store's cost on the encoding thread's critical path,
    free of the run-to-run drift of the encoder's own speed on a shared machine."""
    cache = Path(tempfile.mkdtemp(dir=workdir))
    t0, c0 = time.perf_counter(), time.process_time()
    store = extract(
        encoder, corpus, cache_dir=cache, chunk_tokens=chunk_tokens, batch_tokens=batch_tokens, progress=False
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    timings = store.manifest["timings"]
    shutil.rmtree(cache)
    return wall, cpu, wall / timings["encode_s"]


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))


def bench_extract(args, workdir: Path) -> None:
    cases = [
        ("GPU-like: CPU idle 100 us/token, dim 1024 x3", SleepEncoder, args.fast_tokens),
        ("torch-mix dim 1024 x3, CPU-bound, ~6 MFLOP/token", TorchMixEncoder, args.fast_tokens),
    ]
    if not args.skip_elmo:
        from probing.elmo import Elmo, hub

        fixture = ROOT / "tests" / "fixtures" / "elmo_allennlp"
        cases.append(
            (
                "ELMo test fixture (dim 32)",
                lambda: ElmoAdapter(
                    Elmo.from_files(fixture / "options.json", fixture / "lm_weights.hdf5"), "elmo-fixture"
                ),
                args.fixture_tokens,
            )
        )
        cases.append(
            (
                "ELMo 'original' arch, random weights (dim 1024)",
                lambda: ElmoAdapter(Elmo.random(hub.get("original").architecture, seed=0), "elmo-original"),
                args.elmo_tokens,
            )
        )
        cases.append(
            (
                "bundled default ELMo (dim 256)",
                lambda: ElmoAdapter(Elmo.from_pretrained("default"), "elmo-default"),
                args.default_tokens,
            )
        )
    rows = []
    for label, make, n_tokens in cases:
        encoder, corpus = make(), SyntheticCorpus(n_tokens)
        encoder.encode([["w1", "w2"]])  # warm-up (first-call allocations)
        alone, stored = [], []
        for _ in range(args.repeat):  # interleaved, so slow phases of a shared machine hit both
            alone.append(encoder_alone(encoder, corpus, args.chunk_tokens, args.batch_tokens))
            stored.append(with_store(encoder, corpus, workdir, args.chunk_tokens, args.batch_tokens))
        alone, stored = np.array(alone), np.array(stored)
        (a_wall, a_cpu), (s_wall, s_cpu, inside) = np.median(alone, axis=0), np.median(stored, axis=0)
        a_best, s_best = alone[:, 0].min(), stored[:, 0].min()
        rows.append(
            [
                label,
                f"{n_tokens:,}",
                f"{n_tokens / a_best:,.0f}",
                f"{n_tokens / s_best:,.0f}",
                f"{100 * (s_best / a_best - 1):+.1f}%",
                f"{100 * (s_wall / a_wall - 1):+.1f}%",
                f"{100 * (inside - 1):+.1f}%",
                f"{100 * (s_cpu / a_cpu - 1):+.1f}%",
                f"{n_tokens * encoder.dim * len(encoder.layer_names) * 2 / 1e6:,.0f}",
            ]
        )
    table(
        f"(a) extraction, chunk_tokens={args.chunk_tokens}, batch_tokens={args.batch_tokens}, "
        f"{args.repeat} interleaved runs each, torch threads={args.threads}",
        [
            "encoder",
            "tokens",
            "alone tok/s (best)",
            "extract() tok/s (best)",
            "wall overhead (best)",
            "(median)",
            "in-run overhead",
            "CPU overhead",
            "written MB",
        ],
        rows,
    )
    print(
        "wall overhead: best (and median) extract() wall time over the encoder alone's. in-run overhead: median of\n"
        "extract()'s wall time over the seconds it spent inside encoder.encode in that same run (the store's cost on\n"
        "the encoding thread, immune to the encoder's speed drifting between runs on a shared machine). CPU overhead:\n"
        "extra CPU seconds of all threads (casts, hashing, token tables, corpus passes) over the encoder's."
    )


def bench_read(store: Store, args) -> None:
    layer = store.layer(1)
    n, d = layer.shape
    nbytes = layer.nbytes
    np.asarray(layer).sum(dtype=np.float32)  # fault the pages in: measure page cache, not disk
    rng = np.random.default_rng(0)
    k = min(args.gather_rows, n)
    sorted_idx = np.sort(rng.choice(n, size=k, replace=False))
    shuffled = rng.permutation(sorted_idx)

    def best(fn, reps=3):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    rows = []
    t = best(lambda: store.layer(1, dtype=np.float32))
    rows.append(
        [
            "whole layer -> float32 (layer(k, dtype=float32))",
            f"{n:,} x {d}",
            f"{nbytes / 1e9 / t:.2f}",
            f"{2 * nbytes / 1e9 / t:.2f}",
            f"{t * 1e3:.0f}",
        ]
    )
    t = best(lambda: np.array(layer))
    rows.append(
        [
            "whole layer fp16 copy (np.array(layer(k)))",
            f"{n:,} x {d}",
            f"{nbytes / 1e9 / t:.2f}",
            f"{nbytes / 1e9 / t:.2f}",
            f"{t * 1e3:.0f}",
        ]
    )
    gb = k * d * 2 / 1e9
    t = best(lambda: store.layer(1, rows=sorted_idx, dtype=np.float32))
    rows.append(
        [
            f"{k:,} random rows, sorted -> float32",
            f"{k:,} x {d}",
            f"{gb / t:.2f}",
            f"{2 * gb / t:.2f}",
            f"{t * 1e3:.0f}",
        ]
    )
    t = best(lambda: store.layer(1, rows=shuffled, dtype=np.float32))
    rows.append(
        [
            f"{k:,} random rows, unsorted -> float32",
            f"{k:,} x {d}",
            f"{gb / t:.2f}",
            f"{2 * gb / t:.2f}",
            f"{t * 1e3:.0f}",
        ]
    )
    table(
        "(b) reading one layer from the page cache (best of 3)",
        ["operation", "rows x dim", "fp16 GB/s read", "GB/s out", "ms"],
        rows,
    )


RSS_CHILD = """
import resource, sys, time
sys.path.insert(0, {bench!r})
import torch  # extract() uses it for the fp16 cast; the baseline loads it too
from bench_store import SyntheticCorpus, TableEncoder, peak_kib
def peak():
    return peak_kib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from probing.store import extract
corpus, encoder = SyntheticCorpus({n}), TableEncoder({dim}, {layers})
encoder.encode([["w1", "w2"]])
fp = corpus.fingerprint()
if {do_extract}:
    t0 = time.perf_counter()
    store = extract(encoder, corpus, cache_dir={cache!r}, chunk_tokens={chunk}, batch_tokens={batch}, progress=False)
    print(len(store), time.perf_counter() - t0, *peak())
else:
    print(0, 0.0, *peak())
"""


class TableEncoder:
    """Cheapest possible encoder of the right shape (a table lookup), so (c) measures the store, not a model."""

    def __init__(self, dim: int, n_layers: int):
        self.name, self.dim, self.layer_names = "table", dim, [str(i) for i in range(n_layers)]
        self.fingerprint = hashlib.sha256(f"table|{dim}|{n_layers}".encode()).hexdigest()
        self.table = np.random.default_rng(0).standard_normal((n_layers, 512, dim)).astype(np.float32)

    def encode(self, sentences):
        return [self.table[:, [int(w[1:]) % 512 for w in s]] for s in sentences]

    def oov_mask(self, words):
        return np.zeros(len(words), dtype=bool)


def bench_rss(args, workdir: Path) -> Store:
    def child(do_extract: bool, chunk: int, cache: Path) -> tuple[int, float, int, int]:
        code = RSS_CHILD.format(
            bench=str(Path(__file__).parent),
            n=args.big_tokens,
            dim=args.dim,
            layers=args.layers,
            cache=str(cache),
            chunk=chunk,
            batch=args.batch_tokens,
            do_extract=do_extract,
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        tokens, seconds, hwm_kib, maxrss_kib = out.stdout.split()
        return int(tokens), float(seconds), int(hwm_kib) * 1024, int(maxrss_kib) * 1024

    _, _, base, _ = child(False, args.chunk_tokens, workdir)
    rows, keep = [], None
    for chunk in sorted({args.chunk_tokens, 8192}):
        cache = workdir / f"rss-{chunk}"
        tokens, seconds, peak, maxrss = child(True, chunk, cache)
        buffers = 2 * chunk * args.layers * args.dim * 2
        data = tokens * args.layers * args.dim * 2
        rows.append(
            [
                f"{chunk:,}",
                f"{tokens:,}",
                f"{data / 1e6:,.0f}",
                f"{seconds:.1f}",
                f"{tokens / seconds:,.0f}",
                f"{base / 1e6:,.0f}",
                f"{peak / 1e6:,.0f}",
                f"{(peak - base) / 1e6:,.0f}",
                f"{buffers / 1e6:,.0f}",
                f"{maxrss / 1e6:,.0f}",
            ]
        )
        if chunk == args.chunk_tokens:
            keep = Store.open(next(p for p in cache.iterdir() if p.is_dir()))
    table(
        f"(c) peak RSS extracting {args.big_tokens:,} tokens, dim {args.dim}, {args.layers} layers "
        "(table-lookup encoder, fresh process; peak = VmHWM)",
        [
            "chunk_tokens",
            "tokens",
            "data MB",
            "s",
            "tok/s",
            "baseline peak MB",
            "peak MB",
            "peak - baseline MB",
            "2 chunk buffers MB",
            "ru_maxrss MB*",
        ],
        rows,
    )
    print("* ru_maxrss of the child; Linux carries the parent's RSS at fork into it, so it is >= the parent's size")
    return keep


REAL_CHILD = """
import sys, time
sys.path.insert(0, {bench!r})
import torch
torch.set_num_threads({threads})
from bench_store import encoder_alone, peak_kib
from probing.corpora import load
from probing.encoders import get_encoder
from probing.store import extract
corpus, encoder = load({corpus!r}, {split!r}), get_encoder({model!r})
encoder.encode([["warm", "up"]])
if {do_extract}:
    t0, c0 = time.perf_counter(), time.process_time()
    store = extract(encoder, corpus, cache_dir={cache!r}, chunk_tokens={chunk}, batch_tokens={batch}, progress=False)
    print(len(store), time.perf_counter() - t0, peak_kib(), time.process_time() - c0)
else:
    c0 = time.process_time()
    wall, _ = encoder_alone(encoder, corpus, {chunk}, {batch})
    cpu = time.process_time() - c0
    print(sum(len(s.words) for s in corpus), wall, peak_kib(), cpu)
"""


def peak_kib() -> int:
    """This process's peak RSS in KiB: VmHWM where /proc has it (``ru_maxrss`` also counts the parent's RSS
    at fork, so it is only the fallback)."""
    hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
    if hwm:
        return int(hwm[0].split()[1])
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def bench_real(args, workdir: Path) -> None:
    """(d) The issue's scenario: a registry model on a real corpus, each run in a fresh process."""

    def child(do_extract: bool, i: int) -> tuple[int, float, int, float]:
        code = REAL_CHILD.format(
            bench=str(Path(__file__).parent),
            threads=args.threads or 1,
            corpus=args.corpus,
            split=args.split,
            model=args.model,
            do_extract=do_extract,
            cache=str(workdir / f"real-{i}"),
            chunk=args.chunk_tokens,
            batch=args.batch_tokens,
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(out.stderr[-2000:])
        tokens, wall, hwm, cpu = out.stdout.split()
        return int(tokens), float(wall), int(hwm) * 1024, float(cpu)

    try:
        runs = [(child(False, i), child(True, i)) for i in range(args.repeat)]
    except RuntimeError as e:
        print(f"\n(d) skipped: {args.model} on {args.corpus}/{args.split} did not run (set PROBING_DATA?):\n{e}")
        return
    tokens = runs[0][0][0]
    alone = np.array([a[1] for a, _ in runs])
    stored = np.array([s[1] for _, s in runs])
    rows = [
        [
            f"{args.model} on {args.corpus}/{args.split}",
            f"{tokens:,}",
            f"{tokens / alone.min():,.0f}",
            f"{tokens / stored.min():,.0f}",
            f"{100 * (stored.min() / alone.min() - 1):+.1f}%",
            f"{100 * (np.median(stored) / np.median(alone) - 1):+.1f}%",
            f"{100 * (min(s[3] for _, s in runs) / min(a[3] for a, _ in runs) - 1):+.1f}%",
            f"{max(a[2] for a, _ in runs) / 1e6:,.0f}",
            f"{max(s[2] for _, s in runs) / 1e6:,.0f}",
        ]
    ]
    table(
        f"(d) a real corpus, {args.repeat} interleaved runs each in fresh processes, torch threads={args.threads or 1}",
        [
            "run",
            "tokens",
            "alone tok/s (best)",
            "extract() tok/s (best)",
            "wall overhead (best)",
            "(median)",
            "CPU overhead (best)",
            "alone peak RSS MB",
            "extract() peak RSS MB",
        ],
        rows,
    )
    print(
        "alone = the corpus parsed once and encoded in extract()'s batches. extract() parses it once too: that pass\n"
        "gives its content key, the sentence lengths and a copy of the sentences that it replays to the encoder.\n"
        "CPU overhead: least CPU seconds (all threads) of extract() over the encoder alone's: the wall overhead when\n"
        "no core is free for the store's two threads (a saturated machine), an upper bound otherwise.\n"
        "Peak RSS = VmHWM of the whole process (model, corpus reader and, for extract(), the store's buffers)."
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", type=Path, help="where stores are written (default: a temporary directory)")
    p.add_argument("--chunk-tokens", type=int, default=32768)
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument(
        "--fast-tokens", type=int, default=200_000, help="tokens for the GPU-like and torch-mix encoders in (a)"
    )
    p.add_argument("--fixture-tokens", type=int, default=20000, help="tokens for the fixture ELMo in (a)")
    p.add_argument("--elmo-tokens", type=int, default=1000, help="tokens for the 'original' ELMo in (a)")
    p.add_argument("--default-tokens", type=int, default=200_000, help="tokens for the bundled default ELMo in (a)")
    p.add_argument("--skip-elmo", action="store_true", help="only the torch-mix encoder in (a)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads for the encoders in (a)")
    p.add_argument("--big-tokens", type=int, default=200_000, help="tokens for (b) and (c)")
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--gather-rows", type=int, default=20000)
    p.add_argument("--model", default="default", help="registry model for (d) (default: the bundled default ELMo)")
    p.add_argument("--corpus", default="ud-ewt", help="dataset for (d); found through $PROBING_DATA (default ud-ewt)")
    p.add_argument("--split", default="train", help="split for (d) (default train: 204,577 words)")
    p.add_argument("--skip-real", action="store_true", help="skip (d)")
    p.add_argument("--only-real", action="store_true", help="only (d): the bundled model on a real corpus")
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.workdir))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        print(f"numpy {np.__version__}, {os.cpu_count()} CPUs, stores under {workdir}")
        if not args.only_real:
            bench_extract(args, workdir)
            store = bench_rss(args, workdir)
            bench_read(store, args)
        if not args.skip_real:
            bench_real(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
