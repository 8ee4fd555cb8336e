"""Integrated gradients through ELMo (issue 39, item 3): which input words, and which characters, a language
model's prediction rests on.

The output attributed is the forward LM's log-probability of the word at ``position`` given the words before
it (``target="forward"``, default the last word) or the backward LM's given the words after it
(``"backward"``, default the first word). The inputs are the character CNN's vectors of the words (one per
word; ``<S>`` and ``</S>`` stay as they are) or, with ``characters=True``, the character embeddings inside
every word (the CNN is then part of the function). The baseline is the padding character: a token made only
of it (words), or it at every character slot (characters); a vector of your own can replace it.

Integrated gradients (Sundararajan et al. 2017) along the straight path from the baseline ``x'`` to the input
``x``: ``(x - x') * integral_0^1 grad f(x' + a (x - x')) da``, the integral by Gauss-Legendre quadrature with
``n_steps`` nodes (Captum's default rule), summed over each vector's dimensions. Every node is a fresh
forward pass of the biLSTM from the zero state (the nodes are rows of one batch, and no state passes between
rows: the Captum #1183 pitfall of stateful LSTMs cannot arise). The completeness gap
``|sum of attributions - (f(x) - f(x'))|`` is reported per sentence. ``tests/test_attribution.py`` checks the
batched path against a one-node-at-a-time reference, against Captum's ``IntegratedGradients`` where Captum
is installed, and ``f(x)`` against :func:`probing.lm.score.score`.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.errors import InputError, check_count

if TYPE_CHECKING:
    import pandas as pd
    from torch import Tensor

    from probing.elmo import Elmo
    from probing.lm.head import LmHead

TARGETS = ("forward", "backward")
WORD_COLUMNS = ("sentence", "position", "word", "attribution", "output", "completeness_gap")
CHAR_COLUMNS = ("sentence", "position", "word", "char", "attribution", "output", "completeness_gap")
MAX_ROWS = 64
"""Interpolation nodes per biLSTM batch (more nodes run in several batches)."""


def gauss_legendre(n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of ``n_steps``-point Gauss-Legendre quadrature on [0, 1].

    Returns
    -------
    alphas, weights : ndarray (n_steps,), float64
        ``sum(weights * g(alphas))`` integrates a polynomial g of degree < 2 n_steps exactly.
    """
    check_count(n_steps, "n_steps")
    nodes, weights = np.polynomial.legendre.leggauss(n_steps)
    return (nodes + 1) / 2, weights / 2


@dataclass
class Attribution:
    """One sentence: ``words``, the predicted ``position``, ``output`` f(x), ``baseline_output`` f(x'),
    ``words_attr`` ``(n,)`` and, with characters, ``chars`` (per word, the (label, attribution) of each slot)."""

    words: list[str]
    position: int
    output: float
    baseline_output: float
    words_attr: np.ndarray
    chars: list[list[tuple[str, float]]] | None = None

    @property
    def completeness_gap(self) -> float:
        return float(abs(self.words_attr.sum(dtype=np.float64) - (self.output - self.baseline_output)))


def _char_label(char_id: int) -> str:
    from probing.elmo.chars import BOW_CHAR, EOW_CHAR

    raw = char_id - 1  # ids are shifted by one (0 = padding of the batch)
    if raw == BOW_CHAR:
        return "<w>"
    if raw == EOW_CHAR:
        return "</w>"
    return chr(raw) if raw < 128 else f"\\x{raw:02x}"


def _cnn_from_embedded(cnn: Any, embedded: Tensor) -> Tensor:
    """The character CNN from its character embeddings ``(N, max_chars, E)`` on: ``(N, projection_dim)``."""
    import torch

    x = embedded.transpose(1, 2)
    x = torch.cat([cnn.activation(conv(x).amax(dim=-1)) for conv in cnn.convs], dim=-1)
    for carry, transform in zip(cnn.highway_carry, cnn.highway_transform):
        t = torch.sigmoid(carry(x))
        x = t * torch.relu(transform(x)) + (1.0 - t) * x
    return cnn.projection(x)


class _Function:
    """f: the inputs of one sentence (rows of interpolated copies) -> the target log-probability per row."""

    def __init__(self, elmo: Elmo, head: LmHead, words: list[str], target: str, position: int, characters: bool):
        import torch

        from probing.elmo.chars import batch_char_ids

        self.elmo, self.head, self.target, self.characters = elmo, head, target, characters
        self.ids = torch.from_numpy(batch_char_ids([words], elmo.options.max_characters_per_token))[0]
        self.ids = self.ids.to(elmo.device)
        n = len(words)
        # forward: the top output at the word before predicts it; backward: the one after, in reversed time
        self.step = position if target == "forward" else n + 1 - (position + 2)
        ids, _ = head.ids([words[position]])
        self.word_id = torch.from_numpy(ids).to(elmo.device)
        with torch.no_grad():
            if characters:
                self.inputs = elmo.bilm.char_cnn.char_embed(self.ids)  # (T, max_chars, E)
            else:
                self.inputs = elmo.bilm.char_cnn(self.ids)  # (T, P)

    def __call__(self, x: Tensor) -> Tensor:
        """``x`` ``(rows, T, P)`` token vectors or ``(rows, T, max_chars, E)`` character embeddings -> ``(rows,)``."""
        import torch

        bilm = self.elmo.bilm
        rows, t = x.shape[:2]
        if self.characters:
            tokens = _cnn_from_embedded(bilm.char_cnn, x.reshape(rows * t, *x.shape[2:])).view(rows, t, -1)
        else:
            tokens = x
        mask = torch.ones(rows, t, dtype=torch.bool, device=x.device)
        lstm = bilm.forward_lstm if self.target == "forward" else bilm.backward_lstm
        seq = tokens if self.target == "forward" else tokens.flip(1)
        outputs, _ = lstm(seq, mask, None)
        hidden = outputs[-1][:, self.step]
        return log_probs(self.head, hidden, self.word_id.expand(rows))


def log_probs(head: LmHead, hidden: Tensor, targets: Tensor) -> Tensor:
    """The head's log-probabilities with autograd (:meth:`probing.lm.head.LmHead.log_probs` runs without it).

    Parameters
    ----------
    head : SoftmaxHead or AdaptiveHead
    hidden : Tensor (N, d)
        One direction half of the top layer per prediction.
    targets : Tensor (N,) of int64
        Vocabulary ids.

    Returns
    -------
    Tensor (N,), float32
        ``log p(targets[i] | hidden[i])``, differentiable in ``hidden``.
    """
    import torch

    from probing.lm.head import AdaptiveHead, SoftmaxHead

    if isinstance(head, AdaptiveHead):
        return head.module.to(hidden.device)(hidden.float(), targets).output
    if isinstance(head, SoftmaxHead):
        logits = torch.addmm(head.bias.to(hidden.device), hidden.float(), head.weight.to(hidden.device).t())
        return logits.gather(1, targets.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=1)
    raise InputError(f"model: LM head {type(head).__name__} has no differentiable form here")


def _baseline(elmo: Elmo, baseline: Any, characters: bool) -> Tensor:
    """The baseline vector of one word ``(P,)`` or of one character slot ``(E,)``."""
    import torch

    from probing.elmo.chars import token_char_ids
    from probing.elmo.model import PAD_ID

    opts = elmo.options
    cnn = elmo.bilm.char_cnn
    with torch.no_grad():
        if baseline is None:
            if characters:
                return cnn.char_embed.weight[PAD_ID].detach().clone()
            pad = torch.full((1, opts.max_characters_per_token), PAD_ID, dtype=torch.long, device=elmo.device)
            return cnn(pad)[0]
        if isinstance(baseline, str):
            if characters:
                raise InputError("baseline: with characters=True give a vector of the character embedding's width")
            ids = torch.from_numpy(token_char_ids(baseline, opts.max_characters_per_token) + 1).to(elmo.device)
            return cnn(ids.unsqueeze(0))[0]
    vec = torch.as_tensor(np.asarray(baseline, dtype=np.float32), device=elmo.device)
    width = opts.char_embed_dim if characters else opts.projection_dim
    if vec.shape != (width,):
        what = "character embedding" if characters else "token vector"
        raise InputError(f"baseline: expected a {what} of shape ({width},), got {tuple(vec.shape)}")
    return vec


def attribute_sentence(
    elmo: Elmo,
    head: LmHead,
    words: list[str],
    *,
    target: str = "forward",
    position: int | None = None,
    n_steps: int = 64,
    baseline: Any = None,
    characters: bool = False,
) -> Attribution:
    """Integrated gradients of one sentence (see the module's docstring)."""
    import torch

    if target not in TARGETS:
        raise InputError(f"target: expected 'forward' or 'backward', got {target!r}")
    n = len(words)
    pos = (n - 1 if target == "forward" else 0) if position is None else position
    if isinstance(pos, bool) or not isinstance(pos, (int, np.integer)) or not 0 <= pos < n:
        raise InputError(f"position: expected a word index in 0..{n - 1} of {' '.join(words)!r}, got {position!r}")
    alphas, weights = gauss_legendre(n_steps)
    f = _Function(elmo, head, words, target, int(pos), characters)
    base_vec = _baseline(elmo, baseline, characters)
    x = f.inputs
    start = x.clone()
    start[1 : n + 1] = base_vec  # words only; <S> and </S> stay
    if characters:  # padding slots of a word keep the padding character: no attribution there
        from probing.elmo.model import PAD_ID

        pad_slots = f.ids == PAD_ID
        start[pad_slots] = x[pad_slots]
    delta = x - start
    grads = torch.zeros_like(x, dtype=torch.float64)
    with torch.no_grad():
        ends = f(torch.stack([x, start])).double()
    for lo in range(0, n_steps, MAX_ROWS):
        a = torch.as_tensor(alphas[lo : lo + MAX_ROWS], dtype=x.dtype, device=x.device)
        w = torch.as_tensor(weights[lo : lo + MAX_ROWS], dtype=torch.float64, device=x.device)
        points = (start + a.view(-1, *[1] * x.dim()) * delta).requires_grad_(True)
        with torch.enable_grad():
            (g,) = torch.autograd.grad(f(points).sum(), points)
        grads += (g.double() * w.view(-1, *[1] * x.dim())).sum(0)
    contrib = (delta.double() * grads).cpu().numpy()
    if characters:
        per_slot = contrib.sum(-1)  # (T, max_chars)
        ids = f.ids.cpu().numpy()
        from probing.elmo.model import PAD_ID

        chars = [
            [(_char_label(int(c)), float(per_slot[j + 1, k])) for k, c in enumerate(ids[j + 1]) if c != PAD_ID]
            for j in range(n)
        ]
        word_attr = per_slot[1 : n + 1].sum(1)
    else:
        chars = None
        word_attr = contrib[1 : n + 1].sum(-1)
    return Attribution(list(words), int(pos), float(ends[0]), float(ends[1]), word_attr, chars)


def iter_attributions(
    sentences: Iterable[str | Sequence[str]],
    elmo: Elmo,
    head: LmHead,
    **options: Any,
) -> Iterator[tuple[int, Attribution]]:
    """``(index, Attribution)`` per sentence, streamed; a string is tokenized by :func:`probing.tokenize.tokenize`."""
    from probing.elmo.chars import check_sentences
    from probing.tokenize import tokenize

    for i, sentence in enumerate(sentences):
        words = tokenize(sentence) if isinstance(sentence, str) else list(sentence)
        try:
            (words,) = check_sentences([words])
        except InputError as e:
            raise InputError(f"sentences: sentence {i}: {e}") from None
        if not words:
            raise InputError(f"sentences: sentence {i} has no words")
        yield i, attribute_sentence(elmo, head, words, **options)


def attribution_rows(index: int, a: Attribution, characters: bool) -> Iterator[tuple]:
    """The table rows of one sentence (:data:`~probing.analysis.attribution.WORD_COLUMNS` or :data:`~probing.analysis.attribution.CHAR_COLUMNS`)."""
    gap = a.completeness_gap
    for j, word in enumerate(a.words):
        if characters:
            assert a.chars is not None
            for label, value in a.chars[j]:
                yield index, j, word, label, value, a.output, gap
        else:
            yield index, j, word, float(a.words_attr[j]), a.output, gap


def integrated_gradients(
    sentences: Iterable[str | Sequence[str]],
    *,
    model: Elmo | str | Path = "default",
    target: str = "forward",
    position: int | None = None,
    n_steps: int = 64,
    baseline: Any = None,
    characters: bool = False,
) -> pd.DataFrame:
    """Integrated gradients of the ``target`` LM's log-probability of the word at ``position`` (default: the last
    word forward, the first backward) to every word (or every character) of each sentence.

    Columns ``sentence`` (0-based), ``position`` (the word's), ``word``, (``char``: ``<w>``, the word's
    characters, ``</w>``), ``attribution``, ``output`` (f(x), the log-probability) and ``completeness_gap``
    (``|sum of the sentence's attributions - (f(x) - f(baseline))|``, one value per sentence). ``model``: a
    registered name, a model folder or a loaded :class:`~probing.elmo.Elmo` with an LM head.
    """
    import pandas as pd

    from probing.analysis.patching import resolve_model

    elmo, head = resolve_model(model)
    options = dict(target=target, position=position, n_steps=n_steps, baseline=baseline, characters=characters)
    rows = [
        r for i, a in iter_attributions(sentences, elmo, head, **options) for r in attribution_rows(i, a, characters)
    ]
    return pd.DataFrame(rows, columns=list(CHAR_COLUMNS if characters else WORD_COLUMNS))


def attribute_file(
    elmo: Elmo,
    head: LmHead,
    input_path: str | Path,
    output_path: str | Path,
    *,
    target: str = "forward",
    position: int | None = None,
    n_steps: int = 64,
) -> tuple[int, int]:
    """Stream a text file (one whitespace-tokenized sentence a line; ``sentence`` = 0-based line, blank lines
    skipped) into a CSV of word rows (:data:`~probing.analysis.attribution.WORD_COLUMNS`), written atomically. Returns (sentences, words)."""
    from probing._io import atomic_open

    input_path = Path(input_path)
    if not input_path.is_file():
        raise InputError(f"input file not found: {input_path}")
    with open(input_path, encoding="utf-8") as f:
        numbered = [(i, line.split()) for i, line in enumerate(f) if line.strip()]
    n_sent = n_words = 0
    with atomic_open(output_path, newline="") as out:
        writer = csv.writer(out)
        writer.writerow(WORD_COLUMNS)
        for line, words in numbered:
            if position is not None and position >= len(words):
                raise InputError(f"position: {position}, but line {line + 1} of {input_path} has {len(words)} words")
            for _, a in islice(
                iter_attributions([words], elmo, head, target=target, position=position, n_steps=n_steps), 1
            ):
                writer.writerows(attribution_rows(line, a, False))
                n_sent += 1
                n_words += len(words)
    return n_sent, n_words
