"""``probing extract``'s entry point, kept apart from the runner so that a store hit imports no probe code."""

from __future__ import annotations

import os
from pathlib import Path

from probing.encoders import get_encoder
from probing.store.reader import Store


def extract_activations(
    model: str,
    corpus: str,
    split: str | None = None,
    *,
    path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    max_sentences: int | None = None,
    seed: int = 0,
    progress: bool = True,
    verify: bool = False,
    device: str | None = None,
) -> Store:
    """``probing extract``: the store of ``model`` (see :func:`probing.encoders.get_encoder`) on dataset
    ``corpus``/``split`` (optionally read from ``path``), extracted once and cached; ``verify`` re-hashes
    every chunk of a cached store and recomputes what fails; ``device`` runs the model there (default: CUDA
    when available, else CPU; recorded in the manifest, not part of the key)."""
    from probing.corpora import load
    from probing.store import extract

    data = load(corpus, split, path=None if path is None else Path(path))
    if max_sentences:
        data = data.head(max_sentences)
    return extract(
        get_encoder(model, seed=seed, device=device), data, cache_dir=cache_dir, progress=progress, verify=verify
    )
