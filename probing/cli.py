"""``probing``: a thin command-line shell over the public Python API."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


class UserError(Exception):
    """An error whose message is the whole story: printed without a traceback."""


def command(name: str):
    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = fn
        return fn
    return register


@command("pretrain")
def _pretrain(args: argparse.Namespace) -> int:
    from .elmo.pretrain import PretrainConfig, Pretrainer

    if args.export_only:
        trainer = Pretrainer(PretrainConfig(train=[]), args.out, resume=True, progress=False)
    else:
        if not args.resume and not (args.train and args.options):
            raise UserError("pretrain needs --train and --options (or --resume to continue a run)")
        config = PretrainConfig(train=args.train or [], valid=args.valid, options=args.options or "",
                                max_tokens=args.max_tokens, hours=args.hours, seed=args.seed,
                                threads=args.threads, batch_tokens=args.batch_tokens,
                                checkpoint_minutes=args.checkpoint_minutes)
        trainer = Pretrainer(config, args.out, resume=args.resume)
        if args.resume:
            trainer.extend_budget(max_tokens=args.max_tokens, hours=args.hours)
        trainer.run()
    path = trainer.export(Path(args.out) / "export", dtype=args.export_dtype)
    print(f"exported options.json + weights.hdf5 to {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="probing", description="Look inside ELMo, layer by layer.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("pretrain", help="pretrain an ELMo-style biLM on raw text (resumable)")
    p.add_argument("--train", nargs="+", help="training text files, one tokenized sentence per line")
    p.add_argument("--valid", help="held-out text for perplexity")
    p.add_argument("--options", help="architecture, in the options.json schema")
    p.add_argument("--out", required=True, help="run directory (checkpoint, log.csv, export/)")
    p.add_argument("--max-tokens", type=int, help="stop after this many training tokens")
    p.add_argument("--hours", type=float, help="stop after this much wall time (this invocation)")
    p.add_argument("--resume", action="store_true", help="continue the checkpoint in --out exactly")
    p.add_argument("--export-only", action="store_true", help="only export the checkpoint in --out")
    p.add_argument("--export-dtype", default="float32", choices=["float32", "float16"])
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--checkpoint-minutes", type=float, default=10.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (UserError, FileNotFoundError, FileExistsError, ValueError) as e:
        print(f"probing {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
