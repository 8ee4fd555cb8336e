"""Score text with ELMo's two language models: per-word and per-sentence log-probabilities.

Each sentence runs alone from zero state with ``<S>`` and ``</S>`` added (stateless, so a score never depends
on the batch). The forward LM reads the first half of the top layer at position t to predict token t+1,
the backward LM the second half at t to predict t-1 (AllenNLP's former ``elmo-perplexities``). A word's
rows hold ``log p(word | words before it, <S>)`` and ``log p(word | words after it, </S>)``; the boundary
predictions (forward ``</S>``, backward ``<S>``) enter only the sentence totals.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from probing.errors import InputError
from probing.tokenize import tokenize

from .head import LmHead, NoHeadError, SoftmaxHead, load_head

if TYPE_CHECKING:
    import pandas as pd

    from probing.elmo import Elmo

WORD_COLUMNS = ("sentence", "position", "word", "logprob_forward", "logprob_backward", "in_vocab")
SENTENCE_COLUMNS = ("sentence", "logprob_forward", "logprob_backward", "logprob_both", "n_words", "n_oov")


@dataclass
class Scored:
    """One sentence's scores: per word ``forward`` ``(n,)``, ``backward`` ``(n,)``, ``in_vocab`` ``(n,)``, and
    the boundary predictions ``end`` (forward ``</S>``) and ``start`` (backward ``<S>``), natural log."""

    words: list[str]
    forward: np.ndarray
    backward: np.ndarray
    in_vocab: np.ndarray
    end: float
    start: float

    @property
    def total_forward(self) -> float:
        return float(self.forward.sum(dtype=np.float64) + self.end)

    @property
    def total_backward(self) -> float:
        return float(self.backward.sum(dtype=np.float64) + self.start)


def load_model(
    model: Elmo | str | None = None, softmax: str | Path | None = None, vocab: str | Path | None = None
) -> tuple[Elmo, LmHead]:
    """The biLM and its head: ``model`` an :class:`~probing.elmo.Elmo` (its ``lm_head``, else the head
    registered for the checkpoint it was loaded by) or a registered name (its registered head);
    ``softmax`` + ``vocab`` (official layout) override the head."""
    from probing.elmo import Elmo

    if (softmax is None) != (vocab is None):
        raise InputError("give both softmax= (HDF5 softmax/W, softmax/b) and vocab= (one token a line), or neither")
    name = "default" if model is None else model
    elmo = Elmo.from_pretrained(name) if isinstance(name, str) else name
    if softmax is not None and vocab is not None:
        return elmo, SoftmaxHead.from_files(softmax, vocab)
    head = getattr(elmo, "lm_head", None)
    checkpoint = name if isinstance(name, str) else getattr(elmo, "checkpoint", None)
    if head is None and checkpoint is not None:
        head = load_head(checkpoint)
    if head is None:
        raise NoHeadError(
            f"model {elmo.source} has no LM head, so it cannot score text: pass softmax= and vocab= (the "
            "official layout), or use a checkpoint with a registered head (probing download original "
            "--with-softmax; the bundled 'default' model ships one)"
        )
    return elmo, head


@torch.inference_mode()
def score_batch(model: Elmo, head: LmHead, sentences: Sequence[Sequence[str]]) -> list[Scored]:
    """Score tokenized sentences in one biLM batch (each from zero state)."""
    from probing.elmo.chars import batch_char_ids, check_sentences
    from probing.elmo.elmo import PRECISIONS

    sentences = check_sentences(sentences)
    if not sentences:
        return []
    half = model.options.projection_dim
    if head.dim != half:
        raise InputError(
            f"LM head {head.source} has width {head.dim}, but each direction of {model.source} is {half} wide"
        )
    ids = torch.from_numpy(batch_char_ids(sentences, model.options.max_characters_per_token)).to(model.device)
    _, fw, bw, _, _ = model.bilm(ids, None, dtype=PRECISIONS[model.precision])
    top_f, top_b = fw[-1].float(), bw[-1].float()
    rows_f, rows_b, targets, spans = [], [], [], []
    vocab_flags = []
    start = 0
    for i, sent in enumerate(sentences):
        n = len(sent)
        word_ids, in_vocab = head.ids(sent)
        vocab_flags.append(in_vocab)
        rows_f.append(top_f[i, : n + 1])  # <S> w1 .. wn predict w1 .. wn </S>
        rows_b.append(top_b[i, 1 : n + 2])  # w1 .. wn </S> predict <S> w1 .. wn
        targets.append(word_ids)
        spans.append((start, n))
        start += n + 1
    ids_words = np.concatenate(
        [np.concatenate([w, [head.index["</S>"]]]) for w in targets]
    )  # forward targets, per sentence: words then </S>
    ids_back = np.concatenate([np.concatenate([[head.index["<S>"]], w]) for w in targets])
    device = top_f.device
    lp_f = head.log_probs(torch.cat(rows_f), torch.from_numpy(ids_words).to(device)).double().cpu().numpy()
    lp_b = head.log_probs(torch.cat(rows_b), torch.from_numpy(ids_back).to(device)).double().cpu().numpy()
    out = []
    for sent, (s, n), flags in zip(sentences, spans, vocab_flags):
        f, b = lp_f[s : s + n + 1], lp_b[s : s + n + 1]
        out.append(Scored(list(sent), f[:n], b[1:], flags, float(f[n]), float(b[0])))
    return out


def iter_scores(
    sentences: Iterable[str | Sequence[str]],
    model: Elmo,
    head: LmHead,
    *,
    batch_size: int = 64,
    chunk: int = 4096,
) -> Iterator[tuple[int, Scored]]:
    """``(index, Scored)`` in input order, reading ``chunk`` sentences at a time (streaming); within a chunk
    sentences are batched by length. A string is tokenized by :func:`probing.tokenize.tokenize`."""
    it = iter(sentences)
    offset = 0
    while True:
        block = [tokenize(s) if isinstance(s, str) else list(s) for s in islice(it, chunk)]
        if not block:
            return
        order = sorted(range(len(block)), key=lambda i: len(block[i]))
        results: list[Scored | None] = [None] * len(block)
        for b in range(0, len(order), batch_size):
            idx = order[b : b + batch_size]
            for i, scored in zip(idx, score_batch(model, head, [block[i] for i in idx])):
                results[i] = scored
        for i, done in enumerate(results):
            assert done is not None
            yield offset + i, done
        offset += len(block)


def word_rows(index: int, s: Scored) -> Iterator[tuple]:
    for j, w in enumerate(s.words):
        yield index, j, w, float(s.forward[j]), float(s.backward[j]), bool(s.in_vocab[j])


def sentence_row(index: int, s: Scored) -> tuple:
    f, b = s.total_forward, s.total_backward
    return index, f, b, (f + b) / 2, len(s.words), int((~s.in_vocab).sum())


def score(
    sentences: Iterable[str | Sequence[str]],
    model: Elmo | str | None = None,
    softmax: str | Path | None = None,
    vocab: str | Path | None = None,
    *,
    batch_size: int = 64,
) -> pd.DataFrame:
    """One row per word: ``sentence`` (0-based), ``position`` (0-based), ``word``, ``logprob_forward``,
    ``logprob_backward`` (natural log), ``in_vocab``. ``model``: an Elmo or a registered name (default
    ``"default"``); ``softmax``/``vocab``: an official-layout head instead of the model's own."""
    return _frame(sentences, model, softmax, vocab, batch_size, per_word=True)


def sentence_scores(
    sentences: Iterable[str | Sequence[str]],
    model: Elmo | str | None = None,
    softmax: str | Path | None = None,
    vocab: str | Path | None = None,
    *,
    batch_size: int = 64,
) -> pd.DataFrame:
    """One row per sentence: ``sentence``, ``logprob_forward``, ``logprob_backward`` (words plus the boundary
    prediction), ``logprob_both`` (their mean), ``n_words``, ``n_oov`` (words outside the head's vocabulary)."""
    return _frame(sentences, model, softmax, vocab, batch_size, per_word=False)


def _frame(
    sentences: Iterable[str | Sequence[str]],
    model: Elmo | str | None,
    softmax: str | Path | None,
    vocab: str | Path | None,
    batch_size: int,
    per_word: bool,
) -> pd.DataFrame:
    import pandas as pd

    elmo, head = load_model(model, softmax, vocab)
    scored = iter_scores(sentences, elmo, head, batch_size=batch_size)
    if per_word:
        return pd.DataFrame([r for i, s in scored for r in word_rows(i, s)], columns=list(WORD_COLUMNS))
    return pd.DataFrame([sentence_row(i, s) for i, s in scored], columns=list(SENTENCE_COLUMNS))


def score_file(
    model: Elmo, head: LmHead, input_path: str | Path, output_path: str | Path, *, batch_size: int = 64
) -> tuple[int, int]:
    """Stream a text file (one whitespace-tokenized sentence per line; ``sentence`` = 0-based line, blank lines
    skipped) into a CSV of word rows, written atomically. Returns (sentences, words) scored."""
    from probing._io import atomic_open

    input_path = Path(input_path)
    if not input_path.is_file():
        raise InputError(f"input file not found: {input_path}")

    def lines() -> Iterator[tuple[int, list[str]]]:
        with open(input_path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if line.strip():
                    yield i, line.split()

    numbered = lines()
    line_of: list[int] = []

    def words() -> Iterator[list[str]]:
        for i, toks in numbered:
            line_of.append(i)
            yield toks

    n_sent = n_words = 0
    with atomic_open(output_path, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(WORD_COLUMNS)
        for k, scored in iter_scores(words(), model, head, batch_size=batch_size):
            writer.writerows(word_rows(line_of[k], scored))
            n_sent += 1
            n_words += len(scored.words)
    return n_sent, n_words
