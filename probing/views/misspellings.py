"""Characters against a vocabulary (one of ELMo's claims made visible): a correct word next to a misspelled
or rare form of it, for GloVe (an out-of-vocabulary form has no vector) and each ELMo layer (its character
CNN always has one): cosine to the correct form, nearest neighbours and a POS probe's prediction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from probing.errors import InputError
from probing.glove import Vectors
from probing.probes.linear import LinearProbe
from probing.protocols import EncoderLike, StoreLike
from probing.views.neighbors import encoded_layer, occurrence_neighbors, type_neighbors

__all__ = ["misspellings"]


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
    POS probes (:func:`probing.experiment.helpers.fit_layer_probes`), run on ``encoder``'s vectors; ``store`` (same encoder) gives the
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
            vectors = [encoded_layer(e, layer, names)[position] for e in encoded]
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
