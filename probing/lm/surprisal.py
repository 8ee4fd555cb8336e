"""The surprisal view: one sentence, each word's forward and backward surprisal (bits) as bars.

Forward surprisal of a word is ``-log2 p(word | words before it)``, backward ``-log2 p(word | words after it)``:
a garden-path sentence ("The old man the boat .") shows where each direction is surprised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing.elmo import Elmo


def surprisal(
    sentence: str | Sequence[str],
    model: Elmo | str | None = None,
    softmax: str | Path | None = None,
    vocab: str | Path | None = None,
) -> pd.DataFrame:
    """Per word of one sentence: ``position``, ``word``, ``surprisal_forward``, ``surprisal_backward`` (bits),
    ``in_vocab``."""
    from .score import score

    words = score([sentence], model=model, softmax=softmax, vocab=vocab)
    return words.assign(
        surprisal_forward=-words.logprob_forward / math.log(2), surprisal_backward=-words.logprob_backward / math.log(2)
    )[["position", "word", "surprisal_forward", "surprisal_backward", "in_vocab"]]


def surprisal_figure(table: pd.DataFrame, title: str | None = None) -> Figure:
    """Bars of forward and backward surprisal per word (a table from :func:`surprisal`); words outside the
    head's vocabulary are marked with ``*`` (scored as ``<UNK>``)."""
    from matplotlib.figure import Figure

    n = len(table)
    fig = Figure(figsize=(max(4.0, 0.7 * n + 1.5), 3.2), layout="constrained")
    ax = fig.subplots()
    x = np.arange(n)
    ax.bar(x - 0.2, table.surprisal_forward, width=0.4, label="forward (left context)", color="#1f77b4")
    ax.bar(x + 0.2, table.surprisal_backward, width=0.4, label="backward (right context)", color="#ff7f0e")
    ax.set_xticks(x, [w if v else f"{w}*" for w, v in zip(table.word, table.in_vocab)], rotation=30, ha="right")
    ax.set_ylabel("surprisal (bits)")
    ax.legend(frameon=False, fontsize="small")
    if title:
        ax.set_title(title)
    return fig
