"""Three of ELMo's claims made visible (issue 21): shallow bidirectionality, no out-of-vocabulary words, and
sentence-only context.

* Directions: probe layers ``"1f"``/``"1b"`` (:mod:`probing.layers`) with ``directions = true`` in a task
  table; :data:`DIRECTIONS_NOTE` says how to read the gap; :func:`probing.figures_claims.directions` draws it.
* Characters: ``oov_split = true`` splits accuracy by vocabulary; :func:`misspellings` compares a word with
  a misspelled or rare form of it, for GloVe and each ELMo layer.
* Context: :func:`context_dependence` measures how much a sentence's vectors change with what precedes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from probing.errors import InputError
from probing.glove import Vectors
from probing.probes.linear import LinearProbe
from probing.protocols import EncoderLike, StoreLike
from probing.views.neighbors import _encoded_layer, occurrence_neighbors, type_neighbors

DIRECTIONS_NOTE = """\
ELMo is two language models, not one: a forward LSTM that reads the sentence left to right and a backward
LSTM that reads it right to left, trained separately and concatenated only at the output. Layer "1f" is
the forward half of layer 1 (the word and its LEFT context), "1b" the backward half (the word and its
RIGHT context), "1" both. No unit ever sees both sides at once: that is what "shallowly bidirectional"
means. A probe on one half shows how much of a property one side of the context decides. For part of
speech the left neighbour often decides ("the ___" is a noun or adjective, "to ___" a verb) and the right
one too ("___ of" is a noun), so each half alone is already good and the concatenation gains only what
the two sides add together; a large gap between the halves says the property is mostly decided on one
side, and a gain of "both" over the better half is what the shallow concatenation buys. Compare each half
with layer 0 (no context) to see what one side of the context adds at all."""

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


def fit_layer_probes(
    store: StoreLike, layers: Sequence[str], label: str = "upos", *, C: float = 1.0, max_iter: int = 100
) -> dict[str, LinearProbe]:
    """One :class:`LinearProbe` per layer (or half, ``"1f"``) on the store's labelled tokens (column ``label``)."""
    tokens = store.tokens
    if label not in tokens.columns:
        raise InputError(f"the store's token table has no column {label!r}")
    y = tokens[label].fillna("").astype(str).to_numpy()
    rows = np.flatnonzero(y != "")
    if len(rows) == 0:
        raise InputError(f"{store}: no token has a {label!r} label")
    return {
        layer: LinearProbe(C=C, max_iter=max_iter).fit(store.layer(layer, rows=rows, dtype=np.float32), y[rows])
        for layer in layers
    }


def misspellings(
    cases: Sequence[tuple[Sequence[str], int, str]],
    encoder: EncoderLike,
    store: StoreLike,
    probes: Mapping[str, LinearProbe],
    *,
    glove: Vectors | None = None,
    glove_probe: LinearProbe | None = None,
    k: int = 3,
) -> pd.DataFrame:
    """A correct word next to a misspelled or rare form of it, in the same sentence, per representation.

    ``cases``: ``(tokens, position, other form)``: the word at ``position`` is the correct form, replaced by
    the other form for the second row. ``probes`` maps ELMo layers (``"0"``, ``"1"``, ``"1f"``, ...) to
    POS probes (:func:`fit_layer_probes`), run on ``encoder``'s vectors; ``store`` (same encoder) gives the
    nearest occurrences. With ``glove``, GloVe's rows come first: its type neighbours, and ``glove_probe``'s
    prediction on its vector; an out-of-vocabulary form gets GloVe's fallback, the zero vector (no
    neighbours, a prediction from the probe's intercept alone).

    Columns: ``case, form, word, representation, has_vector, cosine_to_correct, neighbours, predicted``
    (``has_vector``: False where GloVe falls back to the zero vector; always True for ELMo's characters).
    ``cosine_to_correct`` compares the form's vector with the correct form's in the same representation
    (1 for the correct form, NaN for a zero vector).
    """
    records = []
    names = list(encoder.layer_names)
    for c, (tokens, position, other) in enumerate(cases):
        tokens = list(tokens)
        if not 0 <= position < len(tokens):
            raise InputError(f"case {c}: position {position} is outside the {len(tokens)} tokens")
        forms = [("correct", tokens), ("misspelled", tokens[:position] + [other] + tokens[position + 1 :])]
        if glove is not None:
            vecs = {}
            for form, words in forms:
                word = words[position]
                vec, oov = glove.lookup([word])
                vecs[form] = vec[0]
                nn = "" if oov[0] else ", ".join(type_neighbors(glove, word, k=k)["word"])
                records.append(
                    {
                        "case": c,
                        "form": form,
                        "word": word,
                        "representation": "glove",
                        "has_vector": not bool(oov[0]),
                        "cosine_to_correct": _cosine(vec[0], vecs["correct"]),
                        "neighbours": nn or "(out of vocabulary: zero vector)",
                        "predicted": str(glove_probe.predict(vec)[0]) if glove_probe is not None else "",
                    }
                )
        encoded = encoder.encode([words for _, words in forms])
        for layer, probe in probes.items():
            vectors = [_encoded_layer(e, layer, names)[position] for e in encoded]
            for (form, words), vec in zip(forms, vectors):
                hits = occurrence_neighbors(store, vec, layer, k=k)
                records.append(
                    {
                        "case": c,
                        "form": form,
                        "word": words[position],
                        "representation": f"layer {layer}",
                        "has_vector": True,
                        "cosine_to_correct": _cosine(vec, vectors[0]),
                        "neighbours": ", ".join(hits["word"]),
                        "predicted": str(probe.predict(vec[None].astype(np.float32))[0]),
                    }
                )
    return pd.DataFrame.from_records(records)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return float("nan")
    return float(np.dot(a, b) / (na * nb))
