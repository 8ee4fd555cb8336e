"""Extract a store as Ray tasks, one per shard, then merge on the driver."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

from probing.errors import InputError
from probing.store.extraction import corpus_fingerprint, extract
from probing.store.format import MANIFEST, store_key, store_root
from probing.store.merging import merge
from probing.store.reader import Store


def _extract_shard(
    encoder_factory: Callable[[], Any],
    corpus_factory: Callable[[], Any],
    shard: tuple[int, int],
    cache_dir: str,
    chunk_tokens: int,
    batch_tokens: int,
) -> str:
    store = extract(
        encoder_factory(),
        corpus_factory(),
        cache_dir=cache_dir,
        shard=shard,
        chunk_tokens=chunk_tokens,
        batch_tokens=batch_tokens,
        progress=False,
    )
    return str(store.path)


def extract_ray(
    encoder_factory: Callable[[], Any],
    corpus_factory: Callable[[], Any],
    n_shards: int,
    *,
    cache_dir: str | os.PathLike | None = None,
    chunk_tokens: int = 32768,
    batch_tokens: int = 4096,
    num_cpus: float = 1,
    num_gpus: float = 0,
    keep_shards: bool = False,
    progress: bool = True,
) -> Store:
    """:func:`extract` split into ``n_shards`` Ray tasks (``shard=(i, n_shards)``), merged into one store.

    ``encoder_factory`` and ``corpus_factory`` are called once on the driver (to compute the key: a
    complete store is returned as a cache hit without starting any task) and once in every task, so
    they should be cheap and picklable (e.g. ``functools.partial(ElmoEncoder, "original")`` with a
    lazily loaded model). Each task asks Ray for ``num_cpus`` CPUs and ``num_gpus`` GPUs.

    Ray: an already initialised session is used as is; otherwise ``ray.init()`` starts a local one (or
    joins the cluster named by ``$RAY_ADDRESS``). To run on a cluster, call
    ``ray.init(address="auto")`` on a cluster node, or ``ray.init(address="ray://<head>:10001")``
    from outside, before this function, and give a ``cache_dir`` on a filesystem that every node mounts
    at the same path (shards are written by the workers and merged by the driver). Shard stores are
    deleted after a successful merge unless ``keep_shards``; a failed task leaves its shard resumable.
    """
    try:
        import ray
    except ImportError as e:
        raise ImportError("extract_ray needs Ray: pip install 'elmo-probing[ray]'") from e
    if not isinstance(n_shards, int) or n_shards < 1:
        raise InputError(f"n_shards must be a positive int, got {n_shards!r}")
    root = store_root(cache_dir)
    encoder, corpus = encoder_factory(), corpus_factory()
    path = root / store_key(encoder.fingerprint, corpus_fingerprint(corpus, root), None)
    if (path / MANIFEST).is_file():
        return extract(encoder, corpus, cache_dir=root, progress=progress)
    if not ray.is_initialized():
        ray.init()
    task = ray.remote(_extract_shard).options(num_cpus=num_cpus, num_gpus=num_gpus)
    refs = [
        task.remote(encoder_factory, corpus_factory, (i, n_shards), str(root), chunk_tokens, batch_tokens)
        for i in range(n_shards)
    ]
    shard_paths = ray.get(refs)
    store = merge(shard_paths, cache_dir=root, progress=progress)
    if not keep_shards:
        for p in shard_paths:
            shutil.rmtree(p, ignore_errors=True)
    return store
