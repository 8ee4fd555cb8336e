#!/usr/bin/env python3
"""Time and peak memory of each stage of a probing run at scale, so that you can extrapolate to your corpus.

    python benchmarks/bench_scale.py                     # 1,000,000 tokens, plus the 2M x 1024 probe
    python benchmarks/bench_scale.py --tokens 100000 --big-rows 0     # quick: a few minutes

Stages, each in a fresh process (so that its peak RSS, VmHWM, is its own):

imports      the floor: a process that only imports torch and probing's store, probes and encoders.
corpus       a synthetic CoNLL-U file of ``--tokens`` tokens: 20,000 pseudo-words drawn with Zipf frequencies
             (s = 1.1), sentence lengths 1 + Poisson(16). Each word has one of 12 tags, which its suffix shows
             for 85% of the vocabulary (the rest are exceptions a probe must remember), so a probe has signal.
extract      ``probing.store.extract`` with the bundled default ELMo (``get_encoder("default")``, all 3
             layers) into a fresh store (fp16 memmaps); ``--threads`` torch threads.
probe        ``LinearProbe()`` (L-BFGS, whitened, default C and tol) on layer 1: the first 90% of the tokens
             (whole sentences) train, the rest test. Its fp32 design fits the default 4 GiB budget: in memory.
probe-stream the same fit with ``max_design_bytes=0``: X is streamed from the store's memmap at every evaluation.
big-data     an fp16 memmap of ``--big-rows`` x ``--big-dim`` (default 2M x 1024: 4 GB on disk, 8 GB as fp32)
             of synthetic activations (12 classes, offsets and uneven scales), written in chunks.
big-probe    ``LinearProbe(max_iter=--big-iter)`` on it: over the budget, so streamed. Peak RSS is the point;
             time per iteration scales with rows x dim x classes.

Everything is written under ``--workdir`` (default: a temporary folder, removed at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

TAGS = ["NOUN", "VERB", "ADJ", "ADV", "DET", "ADP", "PRON", "PROPN", "NUM", "CCONJ", "AUX", "PART"]
SUFFIXES = ["on", "ir", "al", "ly", "e", "u", "i", "ek", "ta", "o", "as", "ne"]
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def vocabulary(size: int, seed: int) -> tuple[list[str], list[str]]:
    """``size`` distinct pseudo-words and their tags; 15% carry another tag's suffix."""
    rng = np.random.default_rng(seed)
    words: list[str] = []
    tags: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        tag = int(rng.integers(len(TAGS)))
        shown = int(rng.integers(len(TAGS))) if rng.random() < 0.15 else tag
        stem = "".join(SYLLABLES[j] for j in rng.integers(len(SYLLABLES), size=int(rng.integers(1, 4))))
        word = stem + SUFFIXES[shown]
        if word not in seen:
            seen.add(word)
            words.append(word)
            tags.append(TAGS[tag])
    return words, tags


def write_corpus(path: Path, n_tokens: int, seed: int) -> int:
    """Write the synthetic CoNLL-U corpus; returns its number of sentences."""
    words, tags = vocabulary(20_000, seed)
    p = 1.0 / np.arange(1, len(words) + 1) ** 1.1
    p /= p.sum()
    rng = np.random.default_rng(seed + 1)
    left, i = n_tokens, 0
    with open(path, "w", encoding="utf-8") as f:
        while left > 0:
            n = min(left, 1 + int(rng.poisson(16)))
            ids = rng.choice(len(words), size=n, p=p)
            if i % 50 == 0:
                f.write(f"# newdoc id = d{i // 50}\n")
            f.write(f"# sent_id = s{i}\n")
            for j, w in enumerate(ids, start=1):
                f.write(f"{j}\t{words[w]}\t_\t{tags[w]}\t_\t_\t_\t_\t_\t_\n")
            f.write("\n")
            left -= n
            i += 1
    return i


def write_big(path: Path, rows: int, dim: int, seed: int, chunk: int = 16384) -> None:
    """fp16 memmap of activation-like rows (class means + noise, offsets, log-normal scales) and labels."""
    rng = np.random.default_rng(seed)
    k = len(TAGS)
    means = rng.standard_normal((k, dim)).astype(np.float32) * (4.0 / np.sqrt(dim))
    offset = rng.normal(0.0, 2.0, dim).astype(np.float32)
    scale = np.exp(rng.normal(0.0, 0.7, dim)).astype(np.float32)
    y = rng.integers(0, k, rows)
    header = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(rows, dim))
    data_offset = header.offset
    del header
    with open(path, "r+b") as f:  # plain writes: the memmap's dirty pages would count in this stage's RSS
        f.seek(data_offset)
        for start in range(0, rows, chunk):
            stop = min(start + chunk, rows)
            block = means[y[start:stop]] + rng.standard_normal((stop - start, dim), dtype=np.float32)
            f.write((block * scale + offset).astype(np.float16).tobytes())
    np.save(path.with_suffix(".labels.npy"), y)


def peak_mib() -> float:
    """This process's peak RSS (VmHWM) in MiB; ``ru_maxrss`` where /proc has none."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_stage(args) -> dict:
    """One stage in this process; returns what the table shows (``items`` = tokens or rows processed)."""
    import torch

    torch.set_num_threads(args.threads)
    work = Path(args.workdir)
    corpus_path = work / "synthetic.conllu"
    if args.stage == "imports":
        import probing.encoders  # noqa: F401
        import probing.probes.linear  # noqa: F401
        import probing.store  # noqa: F401

        return {"items": 0, "note": "torch, probing.store, .probes, .encoders imported: every stage's floor"}
    if args.stage == "corpus":
        n_sent = write_corpus(corpus_path, args.tokens, args.seed)
        return {"items": args.tokens, "note": f"{n_sent:,} sentences, {corpus_path.stat().st_size / 2**20:,.0f} MiB"}
    if args.stage == "extract":
        from probing.corpora import read_conllu
        from probing.encoders import get_encoder
        from probing.store import extract

        corpus = read_conllu(corpus_path, name="synthetic", split="train")
        store = extract(get_encoder("default"), corpus, cache_dir=work / "cache", progress=args.progress)
        t = store.manifest["timings"]
        (work / "store.txt").write_text(str(store.path))
        size = sum(p.stat().st_size for p in store.path.iterdir() if p.is_file())
        return {"items": len(store), "note": f"encoder {t['encode_s']:.0f} s of it; store {size / 2**20:,.0f} MiB"}
    if args.stage in ("probe", "probe-stream"):
        from probing.probes.linear import LinearProbe
        from probing.store import Store

        store = Store.open((work / "store.txt").read_text())
        X = store.layer(1)
        y = store.tokens["upos"].to_numpy()
        offsets = store.offsets
        cut = int(offsets[np.searchsorted(offsets, 0.9 * len(store))])
        budget = 0 if args.stage == "probe-stream" else None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a ConvergenceWarning is reported in the note instead
            probe = LinearProbe(max_design_bytes=budget).fit(X[:cut], y[:cut])
        acc = probe.score(X[cut:], y[cut:])
        return {"items": cut, "note": f"{X.shape[1]} dims, {probe.n_iter_} iterations, test accuracy {acc:.3f}"}
    big = work / "big.npy"
    if args.stage == "big-data":
        write_big(big, args.big_rows, args.big_dim, args.seed)
        return {"items": args.big_rows, "note": f"{big.stat().st_size / 2**30:.1f} GiB fp16 on disk"}
    if args.stage == "big-probe":
        from probing.probes.linear import LinearProbe

        X = np.load(big, mmap_mode="r")
        y = np.load(big.with_suffix(".labels.npy"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = LinearProbe(max_iter=args.big_iter).fit(X, y)
        fp32 = X.shape[0] * X.shape[1] * 4 / 2**30
        return {
            "items": X.shape[0],
            "note": f"{X.shape[1]} dims, {probe.n_iter_} iterations (streamed; fp32 copy would be {fp32:.1f} GiB)",
        }
    raise SystemExit(f"unknown stage {args.stage!r}")


def child(args, stage: str) -> dict:
    """Run ``stage`` in a fresh interpreter; its last stdout line is a JSON dict."""
    cmd = [sys.executable, __file__, "--stage", stage, "--workdir", str(args.workdir)]
    for flag in ("tokens", "threads", "seed", "big_rows", "big_dim", "big_iter"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if args.progress:
        cmd.append("--progress")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"stage {stage} failed (exit {out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=1_000_000, help="tokens in the synthetic corpus (default 1M)")
    p.add_argument("--big-rows", type=int, default=2_000_000, help="rows of the big probe (0 skips it)")
    p.add_argument("--big-dim", type=int, default=1024)
    p.add_argument("--big-iter", type=int, default=3, help="L-BFGS iterations of the big probe")
    p.add_argument("--threads", type=int, default=1, help="torch / BLAS threads of every stage")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", type=Path, help="where the corpus, store and memmap go (default: a temp folder)")
    p.add_argument("--progress", action="store_true", help="show extract()'s progress bar")
    p.add_argument("--stage", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.stage:
        t0, c0 = time.perf_counter(), time.process_time()
        result = run_stage(args)
        result.update(wall=time.perf_counter() - t0, cpu=time.process_time() - c0, peak=peak_mib())
        print(json.dumps(result))
        return
    own = args.workdir is None
    args.workdir = Path(tempfile.mkdtemp(prefix="bench-scale-")) if own else args.workdir
    args.workdir.mkdir(parents=True, exist_ok=True)
    stages = ["imports", "corpus", "extract", "probe", "probe-stream"]
    if args.big_rows:
        stages += ["big-data", "big-probe"]
    print(f"{os.cpu_count()} CPUs, {args.threads} thread(s) per stage, work in {args.workdir}", flush=True)
    header = ["stage", "items", "wall s", "CPU s", "peak RSS MiB", "items/s", "note"]
    rows = []
    try:
        for stage in stages:
            r = child(args, stage)
            rows.append(
                [
                    stage,
                    f"{r['items']:,}",
                    f"{r['wall']:.1f}",
                    f"{r['cpu']:.1f}",
                    f"{r['peak']:,.0f}",
                    f"{r['items'] / r['wall']:,.0f}" if r["items"] else "",
                    r["note"],
                ]
            )
            print("  ".join(rows[-1]), flush=True)
    finally:
        if own:
            shutil.rmtree(args.workdir, ignore_errors=True)
        else:
            for name in ("big.npy", "big.labels.npy"):
                (args.workdir / name).unlink(missing_ok=True)
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths)))
    print(
        "items = tokens (corpus, extract), training rows (probes). Peak RSS = VmHWM of the stage's own process\n"
        "(the memmaps' pages count while mapped). Extraction and the probes' time grow linearly in tokens; the\n"
        "probe's also in dim x classes per iteration, plus two O(n dim^2) whitening passes."
    )


if __name__ == "__main__":
    main()
