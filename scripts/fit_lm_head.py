"""Fit an LM head for the bundled model on its FROZEN biLM: cache top-layer states, fit an adaptive softmax.

The bundled model was trained with an adaptive softmax (40,000 words, cutoffs [2000, 10000], div_value 4) that
was not exported. This script re-fits a head of the same shape on cached top-layer states, so the biLM itself is
untouched: a head cluster of the 2,000 most frequent words (+ 2 cluster tokens) at d = 256 and two low-rank tail
clusters (256 -> 64 -> 8,000 words, 256 -> 16 -> 30,000 words), 1.53M parameters, about 3 MB in float16.

Text: the four raw-text sources of the pretraining corpus (1B Word held-out shards, WikiText-2 valid/test, as in
scripts/make_pretrain_corpus.py); the last 500 sentences of each are the held-out set the model card's perplexity
(150.6 / 150.9) was measured on, and are never fitted on; a training sentence equal (same key) to a held-out one is
dropped. Sentences longer than 50 tokens are cut into pieces, as in training. Perplexity counts every prediction
(words and the boundary: forward ``</S>``, backward ``<S>``), as ``probing pretrain`` does.

Resumable: every stage writes under ``--out`` and is skipped when its output exists; ``states/*.npz`` are
written shard by shard, ``fit.pt`` after every epoch (loaded with ``weights_only=True``).

    PROBING_DATA=/path/to/shared/data python scripts/fit_lm_head.py --out runs/lm-head [--max-tokens N]
        [--epochs E] [--install]

``--install`` writes probing/resources/models/default/lm_head.npz (float16) from the best epoch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_pretrain_corpus import HELD_OUT, raw_text, sentence_key  # noqa: E402

from probing.elmo import Elmo  # noqa: E402
from probing.elmo.chars import batch_char_ids  # noqa: E402
from probing.lm.head import AdaptiveHead  # noqa: E402
from probing.paths import resources_dir  # noqa: E402

SOURCES = (
    "text/1b_benchmark/1b_benchmark.dev.tokens",
    "text/1b_benchmark/1b_benchmark.test.tokens",
    "text/wikitext-2/valid.sents.txt",
    "text/wikitext-2/test.sents.txt",
)
CUTOFFS, DIV_VALUE, MAX_LEN, SHARD_SENTENCES = [2000, 10000], 4.0, 50, 2000


def pieces(lines: list[str]) -> list[list[str]]:
    out = []
    for line in lines:
        words = line.split()
        out += [words[i : i + MAX_LEN] for i in range(0, len(words), MAX_LEN)]
    return out


def texts(data: Path, max_tokens: int, seed: int) -> tuple[list[list[str]], list[list[str]]]:
    """(train, held-out) sentences: held-out = the last 500 lines of each source, train = the rest, shuffled."""
    train, valid = [], []
    for rel in SOURCES:
        lines = raw_text(data / rel)
        train += lines[:-HELD_OUT]
        valid += lines[-HELD_OUT:]
    held = {sentence_key(v) for v in valid}
    train = [t for t in train if sentence_key(t) not in held]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(train))
    chosen, n = [], 0
    for i in order:
        if n >= max_tokens:
            break
        chosen.append(train[i])
        n += len(train[i].split())
    return pieces(chosen), pieces(valid)


@torch.inference_mode()
def cache_states(model: Elmo, vocab: dict[str, int], sentences: list[list[str]], folder: Path, name: str) -> None:
    """Shards ``{name}-{k}.npz``: forward inputs ``fi`` / targets ``ft``, backward ``bi`` / ``bt`` (float16)."""
    folder.mkdir(parents=True, exist_ok=True)
    unk = vocab["<UNK>"]
    for k, start in enumerate(range(0, len(sentences), SHARD_SENTENCES)):
        path = folder / f"{name}-{k:04d}.npz"
        if path.exists():
            continue
        block = sentences[start : start + SHARD_SENTENCES]
        order = sorted(range(len(block)), key=lambda i: len(block[i]))
        parts: dict[str, list[np.ndarray]] = {"fi": [], "ft": [], "bi": [], "bt": []}
        began = time.time()
        for b in range(0, len(order), 64):
            batch = [block[i] for i in order[b : b + 64]]
            _, fw, bw, _, _ = model.bilm(torch.from_numpy(batch_char_ids(batch)))
            for row, sent in enumerate(batch):
                n = len(sent)
                ids = np.array([0] + [vocab.get(w, unk) for w in sent] + [1], dtype=np.int32)
                parts["fi"].append(fw[-1][row, : n + 1].numpy().astype(np.float16))
                parts["ft"].append(ids[1:])
                parts["bi"].append(bw[-1][row, 1 : n + 2].numpy().astype(np.float16))
                parts["bt"].append(ids[:-1])
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, **{key: np.concatenate(v) for key, v in parts.items()})
        os.replace(tmp, path)
        n_tok = sum(len(s) for s in block)
        print(f"{path.name}: {n_tok} tokens in {time.time() - began:.0f} s", flush=True)


def load_states(folder: Path, name: str) -> dict[str, torch.Tensor]:
    shards = sorted(folder.glob(f"{name}-*.npz"))
    out: dict[str, list[np.ndarray]] = {"fi": [], "ft": [], "bi": [], "bt": []}
    for s in shards:
        with np.load(s, allow_pickle=False) as z:
            for key in out:
                out[key].append(z[key])
    return {key: torch.from_numpy(np.concatenate(v)) for key, v in out.items()}


@torch.no_grad()
def perplexity(module: nn.AdaptiveLogSoftmaxWithLoss, states: dict[str, torch.Tensor]) -> tuple[float, float]:
    module.eval()
    result = []
    for x, t in (("fi", "ft"), ("bi", "bt")):
        nll = 0.0
        for s in range(0, len(states[t]), 8192):
            out = module(states[x][s : s + 8192].float(), states[t][s : s + 8192].long()).output
            nll -= float(out.double().sum())
        result.append(math.exp(nll / len(states[t])))
    module.train()
    return result[0], result[1]


def fit(out: Path, train: dict[str, torch.Tensor], valid: dict[str, torch.Tensor], epochs: int, lr: float) -> dict:
    """Adam on both directions' predictions together; ``fit.pt`` after every epoch, the best one kept."""
    torch.manual_seed(0)
    module = nn.AdaptiveLogSoftmaxWithLoss(256, 40000, CUTOFFS, div_value=DIV_VALUE)
    optim = torch.optim.Adam(module.parameters(), lr=lr)
    state = {"epoch": 0, "log": [], "best": None}
    ckpt = out / "fit.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=True)
        module.load_state_dict(saved["module"])
        optim.load_state_dict(saved["optim"])
        state = json.loads(saved["state"])
    x = torch.cat([train["fi"], train["bi"]])
    t = torch.cat([train["ft"], train["bt"]]).long()
    gen = torch.Generator()
    for epoch in range(state["epoch"], epochs):
        began = time.time()
        order = torch.randperm(len(t), generator=gen.manual_seed(epoch))
        total = 0.0
        for s in range(0, len(t), 4096):
            idx = order[s : s + 4096]
            loss = module(x[idx].float(), t[idx]).loss
            optim.zero_grad()
            loss.backward()
            optim.step()
            total += float(loss.detach()) * len(idx)
        for g in optim.param_groups:
            g["lr"] *= 0.6 if epoch >= 2 else 1.0
        ppl = perplexity(module, valid)
        entry = {
            "epoch": epoch + 1,
            "train_nll": total / len(t),
            "ppl_forward": ppl[0],
            "ppl_backward": ppl[1],
            "seconds": time.time() - began,
        }
        print(json.dumps(entry), flush=True)
        state["log"].append(entry)
        state["epoch"] = epoch + 1
        if state["best"] is None or sum(ppl) < state["best"]["ppl_forward"] + state["best"]["ppl_backward"]:
            state["best"] = entry
            torch.save({"module": module.state_dict()}, out / "best.pt")
        torch.save({"module": module.state_dict(), "optim": optim.state_dict(), "state": json.dumps(state)}, ckpt)
    return state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--max-tokens", type=int, default=1_000_000, help="training tokens whose states are cached")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--install", action="store_true", help="write the best head into probing/resources")
    args = ap.parse_args()
    data = Path(os.environ.get("PROBING_DATA", ""))
    if not (data / SOURCES[0]).is_file():
        sys.exit(f"set PROBING_DATA to shared/data (no {data / SOURCES[0]})")
    model = Elmo.from_pretrained("default")
    folder = resources_dir() / "models" / "default"
    import gzip

    with gzip.open(folder / "vocab.txt.gz", "rt", encoding="utf-8") as f:
        words = f.read().split("\n")[:40000]
    vocab = {w: i for i, w in enumerate(words)}
    train_sents, valid_sents = texts(data, args.max_tokens, seed=0)
    print(f"train {len(train_sents)} sentences, held-out {len(valid_sents)}", flush=True)
    cache_states(model, vocab, valid_sents, args.out / "states", "valid")
    cache_states(model, vocab, train_sents, args.out / "states", "train")
    train, valid = load_states(args.out / "states", "train"), load_states(args.out / "states", "valid")
    print(f"cached: {len(train['ft'])} train and {len(valid['ft'])} held-out predictions per direction", flush=True)
    state = fit(args.out, train, valid, args.epochs, args.lr)
    print("best:", json.dumps(state["best"]))
    if args.install:
        module = nn.AdaptiveLogSoftmaxWithLoss(256, 40000, CUTOFFS, div_value=DIV_VALUE)
        module.load_state_dict(torch.load(args.out / "best.pt", weights_only=True)["module"])
        head = AdaptiveHead(module, words)
        head.save(folder / "lm_head.npz", dtype="float16")
        stored = perplexity(AdaptiveHead.load(folder / "lm_head.npz").module, valid)
        print("installed; float16 held-out perplexity:", stored)
        write_card(folder, state, stored, len(train["ft"]), len(valid["ft"]), args)


def write_card(folder: Path, state: dict, stored: tuple[float, float], n_train: int, n_valid: int, args) -> None:
    """LM_HEAD.md (the model card's section on the head; scripts/bundle_default_model.py includes it), and the
    same section put into MODEL_CARD.md before its Reproduce section."""
    n_params = sum(
        p.numel() for p in nn.AdaptiveLogSoftmaxWithLoss(256, 40000, CUTOFFS, div_value=DIV_VALUE).parameters()
    )
    size = (folder / "lm_head.npz").stat().st_size
    rows = "\n".join(
        f"| {e['epoch']} | {e['train_nll']:.3f} | {e['ppl_forward']:.1f} | {e['ppl_backward']:.1f} |"
        for e in state["log"]
    )
    best = state["best"]
    section = f"""## LM head (`lm_head.npz`, for `probing.lm`)
The training softmax was not exported, so a head of the same shape was re-fitted on the FROZEN biLM by
`scripts/fit_lm_head.py` (the biLM's weights and fingerprint are unchanged): an adaptive softmax over the
40,000-word training vocabulary, cutoffs {CUTOFFS}, div_value {DIV_VALUE} (a 2,002-way head cluster at d = 256,
tails 256 -> 64 -> 8,000 and 256 -> 16 -> 30,000 words), {n_params:,} parameters, stored in float16 as
`lm_head.npz` ({size / 1e6:.1f} MB; the full 40,000 x 256 softmax would be 20 MB in float16). Both directions
share it, as in training.

Fitted on the cached top-layer states of {args.max_tokens:,} tokens ({n_train:,} predictions per direction,
boundaries included) drawn from the training part of the four raw-text sources of the pretraining corpus (1B Word
held-out shards, WikiText-2 valid/test); Adam, lr {args.lr}, batches of 4,096 predictions, {state["epoch"]} epochs,
the epoch with the lowest held-out perplexity kept. Held-out: the model card's 2,000 sentences ({n_valid:,}
predictions per direction), never fitted on.

| epoch | train NLL (nats) | held-out ppl forward | held-out ppl backward |
|---|---|---|---|
{rows}

Held-out perplexity of the stored (float16) head: forward {stored[0]:.1f}, backward {stored[1]:.1f} (epoch
{best["epoch"]}), against 150.6 / 150.9 with the training-time softmax. The head was fitted on four of the
corpus's sixteen sources, the ones the held-out sentences come from, which may flatter its held-out perplexity
against the training softmax (fitted on all sixteen).

"""
    (folder / "LM_HEAD.md").write_text(section, encoding="utf-8")
    card = (folder / "MODEL_CARD.md").read_text(encoding="utf-8")
    start = card.find("## LM head")
    if start >= 0:
        card = card[:start] + card[card.index("## Reproduce", start) :]
    at = card.index("## Reproduce")
    (folder / "MODEL_CARD.md").write_text(card[:at] + section + card[at:], encoding="utf-8")


if __name__ == "__main__":
    main()
