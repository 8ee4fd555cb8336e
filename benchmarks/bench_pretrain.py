"""Pretraining speed on one thread: tokens/s in fp32 and bf16 autocast for the v1 architecture and larger
candidates, and (``--ppl-check``) the held-out perplexity after the first 0.5M tokens of a run in fp32.

    PYTHONPATH=$PWD python benchmarks/bench_pretrain.py --corpus /work/runs/pretrain-v2/corpus
    PYTHONPATH=$PWD python benchmarks/bench_pretrain.py --corpus ... --ppl-check CONFIG.json --out DIR ...

Speed: each candidate trains ``--warmup`` steps, then ``--steps`` timed steps of 4096-token batches drawn from
a fixed random sample of 20,000 training sentences (vocabulary 40,000, min count 1, so the softmax has the
full run's size); tokens/s is training tokens over the CPU time of the timed steps (forward, backward, clip,
Adam): CPU time, not wall time, because the machine is shared.
Weights size is the export's: float32 and float16 (the issue's 25 MB budget).

ppl check: the given config (the long run's settings, so the same LR schedule) in ``--precision`` until the
first evaluation at 0.5M tokens; compare with the long run's first log row (same batches, same seed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from probing.elmo.hub import count_parameters  # noqa: E402
from probing.elmo.options import ElmoOptions  # noqa: E402
from probing.elmo.pretrain import PretrainConfig, Pretrainer, resolve_precision  # noqa: E402

V1_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]]
WIDE_FILTERS = [[1, 64], [2, 64], [3, 128], [4, 256], [5, 512]]


def arch(lstm: int, proj: int, filters: list[list[int]], n_highway: int = 1) -> dict:
    return {
        "lstm": {
            "dim": lstm,
            "projection_dim": proj,
            "n_layers": 2,
            "cell_clip": 3,
            "proj_clip": 3,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": 16},
            "filters": filters,
            "n_highway": n_highway,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "relu",
        },
    }


CANDIDATES = {
    "v1: lstm 512 / proj 128, 512 filters": arch(512, 128, V1_FILTERS),
    "lstm 512 / proj 256, 512 filters": arch(512, 256, V1_FILTERS),
    "lstm 1024 / proj 256, 512 filters": arch(1024, 256, V1_FILTERS),
    "lstm 1024 / proj 256, 1024 filters": arch(1024, 256, WIDE_FILTERS),
}


def speed(corpus: Path, options: dict, precision: str, steps: int, warmup: int, work: Path) -> float:
    opts_path = work / "options.json"
    opts_path.write_text(json.dumps(options))
    config = PretrainConfig(
        train=[str(work / "sample.txt")],
        options=str(opts_path),
        batch_tokens=4096,
        vocab_size=40000,
        min_count=1,
        threads=1,
        precision=precision,
        max_tokens=10**9,
        checkpoint_minutes=10**6,
    )
    run = work / f"run-{precision}-{len(os.listdir(work))}"
    trainer = Pretrainer(config, run, progress=False)
    trainer.save_checkpoint = lambda: None  # type: ignore[method-assign]
    trainer.run(max_steps=warmup)
    tokens, cpu = trainer.tokens_seen, time.process_time()
    trainer.run(max_steps=steps)
    return (trainer.tokens_seen - tokens) / (time.process_time() - cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True, help="folder of make_pretrain_corpus.py (train.txt)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="substrings of the candidate names to run")
    ap.add_argument("--ppl-check", type=Path, metavar="CONFIG", help="a PretrainConfig JSON (the long run's)")
    ap.add_argument("--precision", default="fp32", help="precision of the ppl check (default fp32)")
    ap.add_argument("--out", type=Path, help="run folder of the ppl check")
    args = ap.parse_args()
    torch.set_num_threads(1)

    if args.ppl_check:
        config = PretrainConfig(**{**json.loads(args.ppl_check.read_text()), "precision": args.precision})
        trainer = Pretrainer(config, args.out, resume=(args.out / "checkpoint.pt").exists())
        trainer.run(until_tokens=config.eval_every_tokens)
        row = next(r for r in trainer.log if r["tokens_seen"] >= config.eval_every_tokens)  # not an interruption's row
        print("| precision | tokens seen | train hours | held-out ppl fw | held-out ppl bw |\n|---|---|---|---|---|")
        print(
            f"| {trainer.precision} | {row['tokens_seen']:,} | {row['train_seconds'] / 3600:.3f} | "
            f"{row['valid_ppl_forward']:.2f} | {row['valid_ppl_backward']:.2f} |"
        )
        return

    lines = (args.corpus / "train.txt").read_text(encoding="utf-8").splitlines()
    sample = random.Random(0).sample(lines, 20_000)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "sample.txt").write_text("\n".join(sample) + "\n", encoding="utf-8")
        print(f"bf16 autocast native here: {resolve_precision('auto') == 'bf16'}; torch {torch.__version__}, 1 thread")
        print(
            "| architecture | biLM parameters | weights MB fp32 / fp16 | tokens/s fp32 | tokens/s bf16 | bf16 speed-up |"
        )
        print("|---|---|---|---|---|---|")
        for name, options in CANDIDATES.items():
            if args.only and not any(o in name for o in args.only):
                continue
            n = count_parameters(ElmoOptions.from_dict(options))
            fp32 = speed(args.corpus, options, "fp32", args.steps, args.warmup, work)
            bf16 = speed(args.corpus, options, "bf16", args.steps, args.warmup, work)
            print(
                f"| {name} | {n / 1e6:.2f}M | {4 * n / 1e6:.1f} / {2 * n / 1e6:.1f} | {fp32:,.0f} | {bf16:,.0f} | "
                f"{bf16 / fp32:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
