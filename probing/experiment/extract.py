"""``probing extract``'s entry point, kept apart from the runner so that a store hit imports no probe code."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from probing.encoders import get_encoder
from probing.errors import InputError
from probing.store.format import CHUNK_TOKENS
from probing.store.reader import Store

LOCAL_RAY = "local"  # ``--ray`` without an address: a Ray started for this run on this machine


def load_corpus(corpus: str, split: str | None, path: str | os.PathLike | None, max_sentences: int | None) -> Any:
    """The dataset ``corpus``/``split`` (from ``path`` if given), cut to its first ``max_sentences``."""
    from probing.corpora import load

    data = load(corpus, split, path=None if path is None else Path(path))
    return data.head(max_sentences) if max_sentences else data


def init_ray(address: str) -> None:
    """Join the Ray cluster at ``address`` (``"auto"``, ``"ray://head:10001"``, ...), or start a local Ray for
    ``"local"``; a session already initialised in this process is used as it is."""
    try:
        import ray
    except ImportError as e:
        raise InputError("--ray needs Ray: pip install 'elmo-probing[ray]'") from e
    if not ray.is_initialized():
        ray.init(address=None if address == LOCAL_RAY else address, include_dashboard=False, configure_logging=False)


def gpus_for(device: str | None) -> int:
    """GPUs a Ray task asks for to run a model on ``device`` (an explicit CUDA device: 1; else 0, and Ray
    then hides the GPUs from the task, so ``None``/``"auto"`` runs on its CPU)."""
    return 1 if device is not None and device.startswith("cuda") else 0


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
    ray: str | None = None,
    shards: int = 1,
    chunk_tokens: int = CHUNK_TOKENS,
) -> Store:
    """``probing extract``: the store of ``model`` (see :func:`probing.encoders.get_encoder`) on dataset
    ``corpus``/``split`` (optionally read from ``path``), extracted once and cached; ``verify`` re-parses the
    corpus, re-hashes every chunk of a cached store and recomputes what fails; ``device`` runs the model there
    (default: CUDA when available, else CPU; recorded in the manifest, not part of the key).

    ``ray`` (a Ray address, or ``"local"``) extracts ``shards`` contiguous shards as Ray tasks
    (:func:`probing.store.extract_ray`; fewer when the corpus is too small for that many) and merges them
    into the store a single process would write (same key; values within one fp16 rounding, see DESIGN.md).
    On a cluster, ``cache_dir`` must be a filesystem every node mounts at the same path. ``chunk_tokens`` is
    the extraction's unit of work and memory (:func:`probing.store.extract`); shards are whole chunks, so a
    corpus under ``chunk_tokens`` tokens is extracted as one shard.

    Examples
    --------
    The bundled model on the first 20 sentences of the bundled UD slice's test split (310 tokens), cached in
    ``$PROBING_CACHE``:

    >>> store = extract_activations("default", "demo-ud", "test", max_sentences=20, progress=False)
    >>> store.layer_names, store.dim, len(store)
    (['0', '1', '2'], 512, 310)
    """
    from probing.store import extract

    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise InputError(f"shards must be a positive integer, got {shards!r}")
    if ray is None:
        if shards != 1:
            raise InputError("shards > 1 needs ray= (probing extract --ray [ADDRESS] --shards N)")
        encoder = get_encoder(model, seed=seed, device=device)
        data = load_corpus(corpus, split, path, max_sentences)
        return extract(encoder, data, cache_dir=cache_dir, progress=progress, verify=verify, chunk_tokens=chunk_tokens)
    from probing.store.distributed import extract_ray

    init_ray(ray)
    return extract_ray(
        functools.partial(get_encoder, model, seed=seed, device=device),
        functools.partial(load_corpus, corpus, split, path, max_sentences),
        shards,
        cache_dir=cache_dir,
        chunk_tokens=chunk_tokens,
        num_gpus=gpus_for(device),
        progress=progress,
    )
