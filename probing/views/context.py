"""Sentence-only context (one of ELMo's claims made visible): how much a sentence's vectors change with the
sentence before it, stateless (each sentence from a zero state, the default) against stateful (the reference
biLM carrying its state across a document)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from probing.errors import InputError

__all__ = ["CONTEXT_NOTE", "DEFAULT_PREDECESSORS", "context_dependence"]

CONTEXT_NOTE = """\
By default (stateless) every sentence starts from a zero LSTM state, so its vectors depend on the sentence
alone: the same sentence gets the same vectors wherever it occurs, and a probe's result cannot come from
the preceding sentences of the document. The reference biLM (stateful) carries the state of one sentence
into the next, so its vectors for the same sentence differ with what came before (the forward LSTM
from the first token on, the backward one, which the reference also seeds, from the last), and a store extracted that way also depends on batch order."""

DEFAULT_PREDECESSORS: tuple[tuple[str, ...], ...] = (
    (),
    ("The", "market", "closed", "lower", "on", "Friday", "."),
    ("She", "did", "not", "answer", "the", "letter", "for", "weeks", "."),
    ("Rain", "!"),
)


def context_dependence(
    model: str = "default",
    sentence: Sequence[str] = ("They", "play", "the", "game", "again", "."),
    predecessors: Sequence[Sequence[str]] = DEFAULT_PREDECESSORS,
    *,
    batch_size: int = 64,
) -> pd.DataFrame:
    """How much a sentence's vectors change with the sentence before it, per state mode and layer.

    For each predecessor (``()`` = the sentence alone), the document ``[predecessor, sentence]`` is embedded
    from a fresh state; the sentence's vectors are compared with those it gets alone. ``stateless`` embeds
    the document as an extraction does (``batch_size`` sentences per batch, batched by length);
    ``stateful`` one sentence per batch in document order, so the state of the predecessor seeds the
    sentence, as in the reference biLM reading a document. ``model`` is what
    :func:`probing.encoders.get_encoder` takes (a registry name or a folder).

    Returns one row per mode and layer: ``mode, layer, max_abs_diff`` (over predecessors, tokens and
    dimensions), ``mean_abs_diff``, ``max_abs_value`` (the largest vector entry, for scale) and
    ``first_token_diff`` / ``last_token_diff`` (max over predecessors and dimensions at those positions).
    """
    from probing.encoders import get_encoder

    sentence = list(sentence)
    if not sentence:
        raise InputError("context_dependence: the sentence is empty")
    records = []
    for mode in ("stateless", "stateful"):
        encoder: Any = get_encoder(
            model, stateful=mode == "stateful", batch_size=1 if mode == "stateful" else batch_size
        )
        outputs = []
        for before in [(), *predecessors]:
            if encoder.stateful:
                encoder.model.reset_states()
            docs = ([list(before)] if before else []) + [sentence]
            outputs.append(encoder.encode(docs)[-1])
        alone, others = outputs[0], np.stack(outputs[1:])
        diff = np.abs(others - alone[None])  # (n_predecessors, n_layers, n_tokens, dim)
        for i, layer in enumerate(encoder.layer_names):
            d = diff[:, i]
            records.append(
                {
                    "mode": mode,
                    "layer": layer,
                    "max_abs_diff": float(d.max()),
                    "mean_abs_diff": float(d.mean()),
                    "max_abs_value": float(np.abs(alone[i]).max()),
                    "first_token_diff": float(d[:, 0].max()),
                    "last_token_diff": float(d[:, -1].max()),
                }
            )
    return pd.DataFrame.from_records(records)
