"""Pretrain an ELMo-style biLM on raw text (one tokenized sentence per line), with exact resume.

The objective is the paper's: the forward LM predicts the next token and the backward LM the previous
one; both share the char CNN, highway layers and projection (and here the softmax). Training is
stateless (each sentence starts from zero state), matching the default inference policy.

Everything needed to continue lives in ``OUT/checkpoint.pt`` (tensors and plain values only, loaded with
``weights_only=True``): weights, optimizer, data position, RNG state, vocabulary and configuration.

``precision="bf16"`` runs the forward pass under bfloat16 autocast (matmuls and convolutions in bfloat16 with
float32 accumulation; the LSTM cell state, the log-softmax and the loss in float32); weights, gradients and
Adam's state stay float32, and so does the export. ``"auto"`` takes bf16 where ``native_bf16()`` finds
native support; the resolved precision is stored in the checkpoint and training.json.
"""

from __future__ import annotations

import csv
import json
import math
import pickle
import platform
import signal
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from probing.errors import InputError

from .._io import atomic_open, atomic_path
from ..errors import ProbingError
from .chars import BOS_TOKEN, EOS_TOKEN, token_char_ids
from .elmo import Elmo
from .model import BiLM, cpu_flags
from .options import ElmoOptions
from .weights import init_random

UNK = "<UNK>"


@dataclass
class PretrainConfig:
    """Hyperparameters; all of them are recorded in the checkpoint and the model card."""

    train: list[str]
    valid: str | None = None
    options: str = ""
    max_tokens: int | None = None
    hours: float | None = None
    batch_tokens: int = 2048
    max_len: int = 50
    vocab_size: int = 40000
    min_count: int = 3
    cutoffs: list[int] = field(default_factory=lambda: [2000, 10000])
    lr: float = 2e-3
    min_lr_fraction: float = 0.1
    warmup_tokens: int = 200_000
    dropout: float = 0.1
    clip_norm: float = 5.0
    seed: int = 0
    threads: int = 2
    checkpoint_minutes: float = 10.0
    eval_every_tokens: int = 500_000
    eval_sentences: int = 2000
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise InputError(f"PretrainConfig.precision: expected one of {PRECISIONS}, got {self.precision!r}")


PRECISIONS = ("fp32", "bf16", "auto")


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 matmuls natively, probed rather than assumed from the model name.

    True when torch's kernels run at AVX512 level or above, the kernel's CPU flags list AVX512_BF16 or AMX-BF16,
    oneDNN reports bfloat16 support, and an autocast matmul of small integers (exact in float32, with partial
    sums past bfloat16's 8 significant bits) equals the exact product rounded once to bfloat16: float32
    accumulation, as a native bfloat16 GEMM does.
    """
    if not torch.backends.cpu.get_cpu_capability().startswith(("AVX512", "AMX")):
        return False
    if not cpu_flags() & {"avx512_bf16", "amx_bf16"} or not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return False
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-8, 9, (64, 256), generator=gen).float()
    b = torch.randint(-8, 9, (256, 96), generator=gen).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = a @ b
    return got.dtype == torch.bfloat16 and bool(torch.equal(got, (a @ b).bfloat16()))


def resolve_precision(precision: str) -> str:
    """``fp32`` or ``bf16``: ``auto`` is bf16 exactly where ``native_bf16()``."""
    if precision == "auto":
        return "bf16" if native_bf16() else "fp32"
    return precision


class Corpus:
    """Sentences as integer arrays over a type table; each type keeps its characters and LM target id."""

    def __init__(self, types: list[str], sentences: list[np.ndarray]):
        self.types = types
        self.sentences = sentences

    @classmethod
    def read(cls, paths: Sequence[str | Path], type_index: dict[str, int], types: list[str], max_len: int) -> Corpus:
        """Read files; sentences longer than ``max_len`` are cut into pieces; blank lines are skipped."""
        sentences = []
        for path in paths:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    words = line.split()
                    for start in range(0, len(words), max_len):
                        ids = []
                        for w in words[start : start + max_len]:
                            if w not in type_index:
                                type_index[w] = len(types)
                                types.append(w)
                            ids.append(type_index[w])
                        sentences.append(np.asarray(ids, dtype=np.int32))
        return cls(types, sentences)

    @property
    def n_tokens(self) -> int:
        return int(sum(len(s) for s in self.sentences))


def build_vocab(paths: Sequence[str | Path], size: int, min_count: int) -> list[str]:
    """Most frequent words of the training text, with ``<S>``, ``</S>`` and ``<UNK>`` first."""
    counts: Counter[str] = Counter()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                counts.update(line.split())
    words = [w for w, c in counts.most_common() if c >= min_count and w not in (BOS_TOKEN, EOS_TOKEN, UNK)]
    return [BOS_TOKEN, EOS_TOKEN, UNK] + words[: size - 3]


def batches(lengths: np.ndarray, batch_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Sentence indices grouped into length-sorted batches of about ``batch_tokens``; order fixed by seed+epoch.

    Parameters
    ----------
    lengths : ndarray (n_sentences,) of int
        Tokens per sentence, without ``<S>``/``</S>``.
    batch_tokens : int
        Cap on a batch's padded size, ``len(batch) * (longest + 2)``; a sentence longer than it is a batch alone.
    seed, epoch : seed the shuffle (the same pair gives the same batches).

    Returns
    -------
    list of ndarray (b_i,) of int64
        Indices into ``lengths``, each sentence in exactly one batch, shortest first within a batch;
        the batches in random order.
    """
    rng = np.random.default_rng([seed, epoch])
    perm = rng.permutation(len(lengths))
    out = []
    pool = 200 * max(1, batch_tokens // 20)
    for start in range(0, len(perm), pool):
        group = perm[start : start + pool]
        group = group[np.argsort(lengths[group], kind="stable")]
        cur: list[int] = []
        longest = 0
        for i in group:
            longest_next = max(longest, int(lengths[i]) + 2)
            if cur and longest_next * (len(cur) + 1) > batch_tokens:
                out.append(np.asarray(cur))
                cur, longest_next = [], int(lengths[i]) + 2
            cur.append(int(i))
            longest = longest_next
        if cur:
            out.append(np.asarray(cur))
    order = rng.permutation(len(out))
    return [out[i] for i in order]


class BiLMTrainer(nn.Module):
    """The biLM plus its (shared, adaptive) softmax."""

    def __init__(self, opts: ElmoOptions, vocab_size: int, cutoffs: list[int], dropout: float):
        super().__init__()
        self.bilm = BiLM(opts)
        # a vocabulary smaller than the configured cutoffs gets one tail cluster at its midpoint
        cut = [c for c in cutoffs if c < vocab_size - 1] or [max(1, vocab_size // 2)]
        self.softmax = nn.AdaptiveLogSoftmaxWithLoss(opts.projection_dim, vocab_size, cut, div_value=4.0)
        # under bf16 autocast the softmax's linear maps run in bfloat16; their outputs go back to float32 so
        # that log_softmax and the summed NLL are float32 (autocast on CPU would keep them in bfloat16)
        for module in (self.softmax.head, *self.softmax.tail):
            module.register_forward_hook(lambda _m, _i, out: out.float())
        self.dropout = dropout

    def forward(self, char_ids: Tensor, targets: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Mean loss, and summed forward and backward negative log-likelihoods (nats).

        ``targets`` ``(B, T)`` holds the LM ids of ``<S> w1 .. wn </S>`` (-1 at padding).

        Parameters
        ----------
        char_ids : Tensor (B, T, n_chars) of int64
            Shifted character ids of ``<S> w1 .. wn </S>`` per row, 0 at padding (:meth:`Pretrainer.make_batch`).
        targets : Tensor (B, T) of int64
            Vocabulary id of each slot's word, -1 at padding.

        Returns
        -------
        loss : Tensor (), float32
            ``(forward_nll + backward_nll) / (2 n)``, n = predictions per direction: ``n_words + 1`` summed
            over the rows.
        forward_nll, backward_nll : Tensor (), float32
            Summed over the batch, detached.
        """
        _, fw, bw, mask, _ = self.bilm(char_ids, dropout=self.dropout)
        top_f = nn.functional.dropout(fw[-1], self.dropout, self.training)
        top_b = nn.functional.dropout(bw[-1], self.dropout, self.training)
        valid_next = mask[:, 1:]
        f_in = top_f[:, :-1][valid_next]
        f_tgt = targets[:, 1:][valid_next]
        b_in = top_b[:, 1:][valid_next]
        b_tgt = targets[:, :-1][valid_next]
        f_nll = -self.softmax(f_in.float(), f_tgt).output.sum()
        b_nll = -self.softmax(b_in.float(), b_tgt).output.sum()
        n = f_tgt.numel()
        return (f_nll + b_nll) / (2 * n), f_nll.detach(), b_nll.detach()


class CheckpointError(ProbingError, ValueError):
    """checkpoint.pt is truncated, damaged or not a checkpoint written by ``probing pretrain``."""


_CHECKPOINT_KEYS = ("config", "options", "vocab", "model", "optim", "tokens_seen", "epoch", "batch_in_epoch")


def _load_checkpoint(path: Path) -> dict:
    """The state dict of a ``probing pretrain`` checkpoint (``weights_only``: nothing is unpickled), with
    ``config`` as a PretrainConfig; CheckpointError naming the file and what is wrong."""
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError) as e:
        raise CheckpointError(
            f"{path}: not a readable checkpoint ({type(e).__name__}: {str(e).splitlines()[0][:200]}); it is "
            "truncated or not written by probing pretrain: move it away to start afresh"
        ) from None
    missing = [k for k in _CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise CheckpointError(f"{path}: not a probing pretrain checkpoint (no {', '.join(map(repr, missing))})")
    try:
        return {**state, "config": PretrainConfig(**state["config"])}
    except TypeError as e:
        raise CheckpointError(f"{path}: field 'config' does not match this version's PretrainConfig ({e})") from None


class Pretrainer:
    """Owns the data, model, optimizer and the resumable loop."""

    def __init__(
        self,
        config: PretrainConfig,
        out: str | Path,
        *,
        resume: bool = False,
        progress: bool = True,
        device: str | None = None,
    ):
        """``device``: where the model trains (:func:`probing.devices.resolve_device`; default CUDA when
        available, else CPU). Checkpoints are device-free: a run may resume on another device."""
        from probing.devices import torch_device

        self.device = torch_device(device)
        self.out = Path(out)
        self.ckpt_path = self.out / "checkpoint.pt"
        self.progress = progress
        state = None
        if self.ckpt_path.exists():
            if not resume:
                raise FileExistsError(f"{self.ckpt_path} exists: pass --resume to continue it, or choose another --out")
            state = _load_checkpoint(self.ckpt_path)
            config = state["config"]
        elif resume:
            raise FileNotFoundError(f"--resume: no checkpoint at {self.ckpt_path}")
        self.config = config
        self.precision = resolve_precision(config.precision) if state is None else str(state.get("precision", "fp32"))
        torch.set_num_threads(config.threads)
        self.opts = ElmoOptions.from_json(config.options) if state is None else ElmoOptions.from_dict(state["options"])
        self.vocab = build_vocab(config.train, config.vocab_size, config.min_count) if state is None else state["vocab"]
        self.vocab_index = {w: i for i, w in enumerate(self.vocab)}
        types: list[str] = [BOS_TOKEN, EOS_TOKEN]
        type_index = {BOS_TOKEN: 0, EOS_TOKEN: 1}
        self.train = Corpus.read(config.train, type_index, types, config.max_len)
        self.valid = Corpus.read([config.valid], type_index, types, config.max_len) if config.valid else None
        if self.valid is not None:
            self.valid.sentences = self.valid.sentences[: config.eval_sentences]
        self.types = types
        self.type_chars = torch.from_numpy(
            np.stack([token_char_ids(t, self.opts.max_characters_per_token) for t in types])
        )
        unk = self.vocab_index[UNK]
        self.type_target = torch.tensor([self.vocab_index.get(t, unk) for t in types], dtype=torch.long)
        self.train_lengths = np.asarray([len(s) for s in self.train.sentences])

        torch.manual_seed(config.seed)
        self.model = BiLMTrainer(self.opts, len(self.vocab), config.cutoffs, config.dropout)
        init_random(self.model.bilm, config.seed)
        self.model.to(self.device)
        self.optim = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self.tokens_seen = 0
        self.epoch = 0
        self.batch_in_epoch = 0
        self.train_seconds = 0.0
        self.log: list[dict] = []
        if state is not None:
            try:
                self.model.load_state_dict(state["model"])
                self.optim.load_state_dict(state["optim"])
                self.tokens_seen = int(state["tokens_seen"])
                self.epoch = int(state["epoch"])
                self.batch_in_epoch = int(state["batch_in_epoch"])
                self.train_seconds = float(state["train_seconds"])
                self.log = list(state["log"])
                torch.set_rng_state(state["torch_rng"])
                if self.device.type == "cuda" and "cuda_rng" in state:
                    torch.cuda.set_rng_state(state["cuda_rng"], self.device)
            except (RuntimeError, KeyError, TypeError, ValueError) as e:
                raise CheckpointError(
                    f"{self.ckpt_path}: does not match the model it describes ({type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200]})"
                ) from None
        self._stop = False

    def extend_budget(
        self, *, max_tokens: int | None = None, hours: float | None = None, threads: int | None = None
    ) -> None:
        """Continue a resumed run with a new budget (a new ``max_tokens`` also stretches the LR schedule) or on
        another number of threads (the machine changed; the results change only in their last bits)."""
        if max_tokens is not None:
            self.config.max_tokens = max_tokens
        if hours is not None:
            self.config.hours = hours
        if threads is not None:
            self.config.threads = threads
            torch.set_num_threads(threads)

    def make_batch(self, sentence_ids: Sequence[int] | np.ndarray, corpus: Corpus) -> tuple[Tensor, Tensor]:
        """Character ids ``(B, T, C)`` and LM targets ``(B, T)`` for ``<S> w1 .. wn </S>``.

        Both are put on the trainer's device.

        Parameters
        ----------
        sentence_ids : sequence or ndarray (B,) of int
            Indices into ``corpus.sentences``.
        corpus : Corpus
            The sentences, as type ids.

        Returns
        -------
        char_ids : Tensor (B, T, C) of int64
            T = longest sentence + 2, C = ``max_characters_per_token``; 0 at padding slots.
        targets : Tensor (B, T) of int64
            Vocabulary id of each slot's word (``<UNK>``'s outside the vocabulary), -1 at padding.
        """
        longest = max(len(corpus.sentences[i]) for i in sentence_ids) + 2
        type_ids = torch.full((len(sentence_ids), longest), -1, dtype=torch.long)
        for row, i in enumerate(sentence_ids):
            s = corpus.sentences[i]
            type_ids[row, 0] = 0
            type_ids[row, 1 : len(s) + 1] = torch.from_numpy(s.astype(np.int64))
            type_ids[row, len(s) + 1] = 1
        valid = type_ids >= 0
        chars = self.type_chars[type_ids.clamp(min=0)] * valid.unsqueeze(-1)
        targets = torch.where(valid, self.type_target[type_ids.clamp(min=0)], torch.full_like(type_ids, -1))
        return chars.to(self.device), targets.to(self.device)

    def lr_at(self, tokens: int) -> float:
        c = self.config
        if tokens < c.warmup_tokens:
            return c.lr * max(tokens, 1) / c.warmup_tokens
        if not c.max_tokens:
            return c.lr
        frac = min(1.0, (tokens - c.warmup_tokens) / max(1, c.max_tokens - c.warmup_tokens))
        return c.lr * (c.min_lr_fraction + (1 - c.min_lr_fraction) * 0.5 * (1 + math.cos(math.pi * frac)))

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """Held-out perplexity of the forward and backward LMs (``<S>``/``</S>`` predictions included), in
        float32 whatever the training precision: the exported weights are float32 and used so."""
        assert self.valid is not None
        self.model.eval()
        f_total = b_total = 0.0
        n = 0
        lengths = np.asarray([len(s) for s in self.valid.sentences])
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), 64):
            ids = order[start : start + 64]
            chars, targets = self.make_batch(ids, self.valid)
            _, f_nll, b_nll = self.model(chars, targets)
            f_total += float(f_nll)
            b_total += float(b_nll)
            n += int((targets[:, 1:] >= 0).sum())
        self.model.train()
        return math.exp(f_total / n), math.exp(b_total / n)

    def save_checkpoint(self) -> None:
        state = {
            "config": asdict(self.config),
            "options": self.opts.to_dict(),
            "vocab": self.vocab,
            "model": self.model.state_dict(),
            "optim": self.optim.state_dict(),
            "tokens_seen": self.tokens_seen,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "train_seconds": self.train_seconds,
            "log": self.log,
            "torch_rng": torch.get_rng_state(),
            "precision": self.precision,
        }
        if self.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        with atomic_path(self.ckpt_path) as tmp:
            torch.save(state, tmp)
        self._write_log()

    def _write_log(self) -> None:
        if not self.log:
            return
        with atomic_open(self.out / "log.csv", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(self.log[0]))
            writer.writeheader()
            writer.writerows(self.log)

    def _budget_left(self, started: float, until_tokens: int | None = None) -> bool:
        c = self.config
        if until_tokens is not None and self.tokens_seen >= until_tokens:
            return False
        if c.max_tokens is not None and self.tokens_seen >= c.max_tokens:
            return False
        if c.hours is not None and time.monotonic() - started >= c.hours * 3600:
            return False
        return not self._stop

    def run(self, max_steps: int | None = None, until_tokens: int | None = None) -> dict:
        """Train until the token or time budget is spent (or Ctrl-C/SIGTERM, or ``max_steps`` steps in
        this call, or ``until_tokens`` tokens seen: a stop that leaves the LR schedule of ``max_tokens``
        alone); checkpoint on the way out."""
        c = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        self.model.train()
        self._stop = False
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        started = time.monotonic()
        last_ckpt = started
        next_eval = (self.tokens_seen // c.eval_every_tokens + 1) * c.eval_every_tokens
        bar = tqdm(
            total=c.max_tokens,
            initial=self.tokens_seen,
            unit="tok",
            unit_scale=True,
            desc="pretrain",
            disable=not self.progress,
            smoothing=0.05,
        )
        loss_ema = None
        steps = 0
        try:
            while self._budget_left(started, until_tokens):
                epoch_batches = batches(self.train_lengths, c.batch_tokens, c.seed, self.epoch)
                while self.batch_in_epoch < len(epoch_batches) and self._budget_left(started, until_tokens):
                    t0 = time.monotonic()
                    ids = epoch_batches[self.batch_in_epoch]
                    chars, targets = self.make_batch(ids, self.train)
                    for group in self.optim.param_groups:
                        group["lr"] = self.lr_at(self.tokens_seen)
                    with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
                        loss, _, _ = self.model(chars, targets)
                    self.optim.zero_grad(set_to_none=True)
                    loss.backward()
                    nn.utils.clip_grad_norm_(self.model.parameters(), c.clip_norm)
                    self.optim.step()
                    n = int(self.train_lengths[ids].sum())
                    self.tokens_seen += n
                    self.batch_in_epoch += 1
                    self.train_seconds += time.monotonic() - t0
                    loss_value = float(loss.detach())
                    loss_ema = loss_value if loss_ema is None else 0.98 * loss_ema + 0.02 * loss_value
                    bar.update(n)
                    bar.set_postfix(loss=f"{loss_ema:.3f}", ppl=f"{math.exp(loss_ema):.0f}", epoch=self.epoch)
                    if self.valid is not None and self.tokens_seen >= next_eval:
                        self._log_eval(loss_ema)
                        next_eval += c.eval_every_tokens
                    steps += 1
                    if max_steps is not None and steps >= max_steps:
                        self._stop = True
                    if time.monotonic() - last_ckpt >= c.checkpoint_minutes * 60:
                        self.save_checkpoint()
                        last_ckpt = time.monotonic()
                if self.batch_in_epoch >= len(epoch_batches):
                    self.epoch += 1
                    self.batch_in_epoch = 0
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            bar.close()
        if self._stop:
            print("interrupted: checkpoint written; continue with --resume")
        if self.valid is not None and (not self.log or self.log[-1]["tokens_seen"] != self.tokens_seen):
            self._log_eval(loss_ema)
        self.save_checkpoint()
        summary = {
            "tokens_seen": self.tokens_seen,
            "train_seconds": round(self.train_seconds, 1),
            "tokens_per_second": round(self.tokens_seen / max(self.train_seconds, 1e-9), 1),
            "epoch": self.epoch,
            **(self.log[-1] if self.log else {}),
        }
        print("pretrain summary: " + ", ".join(f"{k}={v}" for k, v in summary.items()))
        return summary

    def _on_signal(self, signum, frame) -> None:
        """First Ctrl-C/SIGTERM: finish the current step, checkpoint, exit. A second one aborts."""
        if self._stop:
            raise KeyboardInterrupt
        self._stop = True

    def _log_eval(self, train_loss: float | None) -> None:
        fwd, bwd = self.evaluate()
        self.log.append(
            {
                "tokens_seen": self.tokens_seen,
                "train_seconds": round(self.train_seconds, 1),
                "train_loss": round(train_loss, 4) if train_loss is not None else "",
                "valid_ppl_forward": round(fwd, 2),
                "valid_ppl_backward": round(bwd, 2),
            }
        )
        self._write_log()

    def elmo(self) -> Elmo:
        """The current weights as an inference ``Elmo`` (stateless)."""
        model = Elmo(self.opts)
        model.bilm.load_state_dict(self.model.bilm.state_dict())
        model.source = f"pretrained({self.out})"
        return model

    def export(self, directory: str | Path, dtype: str = "float32") -> Path:
        """options.json + weights.hdf5 (official layout) + vocab.txt + training.json into ``directory``."""
        directory = Path(directory)
        self.elmo().save(directory / "options.json", directory / "weights.hdf5", dtype=dtype)
        # the fingerprint of what is stored (float16 rounds the weights), as every later load computes it
        model = Elmo.from_files(directory / "options.json", directory / "weights.hdf5")
        with atomic_open(directory / "vocab.txt") as f:
            f.write("\n".join(self.vocab) + "\n")
        info = {
            "config": asdict(self.config),
            "tokens_seen": self.tokens_seen,
            "epochs": self.epoch,
            "train_seconds": round(self.train_seconds, 1),
            "train_tokens": self.train.n_tokens,
            "valid_tokens": self.valid.n_tokens if self.valid else 0,
            "log": self.log,
            "torch": torch.__version__,
            "machine": platform.processor() or platform.machine(),
            "threads": self.config.threads,
            "precision": self.precision,
            "device": str(self.device),
            "fingerprint": model.fingerprint,
        }
        with atomic_open(directory / "training.json") as f:
            json.dump(info, f, indent=2)
        return directory
