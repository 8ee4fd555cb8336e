"""Extract stores as Ray tasks, one per shard, then merge on the driver."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probing.devices import use_device
from probing.errors import InputError
from probing.store.extraction import corpus_fingerprint, extract, plan_chunks, shard_owners
from probing.store.format import CHUNK_TOKENS, MANIFEST, store_key, store_root
from probing.store.memo import corpus_state, recall
from probing.store.merging import merge
from probing.store.reader import Store

Request = tuple[Callable[[], Any], Callable[[], Any], int]  # (encoder_factory, corpus_factory, n_shards)


class _Tally:
    """Tokens encoded by each shard task since the driver last asked (a Ray actor: the driver's progress)."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    def add(self, task: int, n: int) -> None:
        self.counts[task] = self.counts.get(task, 0) + n

    def take(self) -> dict[int, int]:
        out, self.counts = self.counts, {}
        return out


class _Counting:
    """``inner`` encoder that tells the tally how many tokens each batch it encodes had."""

    def __init__(self, inner: Any, tally: Any, task: int) -> None:
        self._inner, self._tally, self._task = inner, tally, task

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        out = self._inner.encode(sentences)
        self._tally.add.remote(self._task, sum(len(s) for s in sentences))
        return out


def _extract_shard(
    encoder_factory: Callable[[], Any],
    corpus_factory: Callable[[], Any],
    shard: tuple[int, int],
    cache_dir: str,
    chunk_tokens: int,
    batch_tokens: int,
    device: str | None,
    tally: Any,
    task: int,
    threads: int,
) -> str:
    """One shard store (the body of a Ray task); the model is built on ``device`` inside the task and runs
    with ``threads`` torch threads, the driver's: with the same batches (whole chunks) and the same thread
    count, a shard computes exactly what the single-process extraction computes (on some CPUs, e.g. an
    AVX2-only one, float32 kernels round differently at another thread count; Ray starts a task with one)."""
    import torch

    torch.set_num_threads(threads)
    with use_device(device):
        store = extract(
            _Counting(encoder_factory(), tally, task),
            corpus_factory(),
            cache_dir=cache_dir,
            shard=shard,
            chunk_tokens=chunk_tokens,
            batch_tokens=batch_tokens,
            progress=False,
        )
    return str(store.path)


def shard_count(lengths: np.ndarray, n_shards: int, chunk_tokens: int) -> int:
    """The largest ``m <= n_shards`` for which every shard of :func:`~probing.store.extraction.shard_range`
    (contiguous whole chunks, balanced by tokens) gets at least one token: a corpus of few chunks or very
    unequal ones is cut into fewer shards rather than failing on an empty one (a corpus of one chunk, under
    ``chunk_tokens`` tokens, is one shard).

    Parameters
    ----------
    lengths : array-like (n_sentences,) of int
        Words per sentence, in corpus order.
    n_shards : int
        The most shards wanted (at least 1).
    chunk_tokens : int
        The extraction's chunk size: shards never split a chunk.

    Returns
    -------
    int
        ``m`` in ``[1, n_shards]``, and at most the number of non-empty chunks (but at least 1).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    starts = np.array([r0 for _, _, r0, r1 in plan_chunks(lengths, chunk_tokens) if r1 > r0], dtype=np.int64)
    for m in range(min(n_shards, len(starts)), 1, -1):
        if len(np.unique(starts * m // total)) == m:
            return m
    return 1


def _lengths(corpus: Any, root: Path) -> np.ndarray:
    """Words per sentence, ``(n_sentences,)``: memoised with the corpus fingerprint when it was read from
    files, else counted in one pass."""
    state = corpus_state(corpus)
    known = None if state is None else recall(root, state)
    if known is not None:
        return np.asarray(known[1], dtype=np.int64)
    return np.fromiter((len(s.words) for s in corpus), dtype=np.int64)


def extract_ray_many(
    requests: Sequence[Request],
    *,
    cache_dir: str | os.PathLike | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
    batch_tokens: int = 4096,
    num_cpus: float = 1,
    num_gpus: float = 0,
    device: str | None = None,
    keep_shards: bool = False,
    progress: bool = True,
    desc: str = "activations on Ray",
) -> list[Store]:
    """The stores of several ``(encoder_factory, corpus_factory, n_shards)`` requests (see
    :func:`extract_ray`), in order: the shard tasks of every store not in the cache are submitted at once,
    and each store is merged on the driver as soon as its last shard returns.

    A corpus is cut into at most ``n_shards`` shards (fewer when some would get no token, see
    :func:`shard_count`); the merged manifest's ``merged_from`` lists them. Progress on the driver counts
    the tokens the tasks encode. Ray retries a task whose worker died (``max_retries=3``); a retried or
    re-run shard resumes from its journal, so a killed driver loses at most the chunks in flight.
    """
    try:
        import ray
    except ImportError as e:
        raise ImportError("extract_ray needs Ray: pip install 'elmo-probing[ray]'") from e
    from tqdm.auto import tqdm

    for _, _, n in requests:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"n_shards must be a positive int, got {n!r}")
    root = store_root(cache_dir)
    stores: list[Store | None] = [None] * len(requests)
    todo: list[tuple[int, np.ndarray, int]] = []  # (request, words per sentence, shards)
    for i, (encoder_factory, corpus_factory, n) in enumerate(requests):
        encoder, corpus = encoder_factory(), corpus_factory()
        path = root / store_key(encoder.fingerprint, corpus_fingerprint(corpus, root), None)
        if (path / MANIFEST).is_file():
            stores[i] = extract(encoder, corpus, cache_dir=root, progress=progress)
        else:
            lengths = _lengths(corpus, root)
            todo.append((i, lengths, shard_count(lengths, n, chunk_tokens)))
    if not todo:
        return [s for s in stores if s is not None]
    if not ray.is_initialized():
        ray.init()
    tally: Any = ray.remote(_Tally).options(num_cpus=0).remote()
    import torch

    threads = torch.get_num_threads()  # a shard runs with the thread count the driver would extract with
    task = ray.remote(_extract_shard).options(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=3)
    refs: dict[Any, int] = {}
    owner: list[tuple[int, int]] = []  # per task: (request, shard index)
    expected: list[int] = []  # per task: tokens of its shard
    for i, lengths, m in todo:
        encoder_factory, corpus_factory, _ = requests[i]
        owners = shard_owners(lengths, m, chunk_tokens)
        tokens = np.bincount(owners, weights=lengths, minlength=m)
        for k in range(m):
            tid = len(owner)
            owner.append((i, k))
            expected.append(int(tokens[k]))
            ref = task.remote(
                encoder_factory,
                corpus_factory,
                (k, m),
                str(root),
                chunk_tokens,
                batch_tokens,
                device,
                tally,
                tid,
                threads,
            )
            refs[ref] = tid
    shard_paths: dict[int, dict[int, str]] = {i: {} for i, _, _ in todo}
    shards_of = {i: m for i, _, m in todo}
    reported = [0] * len(owner)
    finished: set[int] = set()
    bar = tqdm(total=sum(expected), unit="tok", unit_scale=True, dynamic_ncols=True, desc=desc, disable=not progress)

    def count(tid: int, n: int) -> None:
        n = min(n, expected[tid] - reported[tid])  # a retried task counts its tokens again
        reported[tid] += n
        bar.update(n)

    try:
        waiting = list(refs)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=0.5)
            counts: dict[int, int] = ray.get(tally.take.remote())
            for tid, n in counts.items():
                if tid not in finished:
                    count(tid, n)
            for ref in ready:
                tid = refs[ref]
                path_k = ray.get(ref)
                finished.add(tid)
                count(tid, expected[tid])
                i, k = owner[tid]
                shard_paths[i][k] = path_k
                if len(shard_paths[i]) == shards_of[i]:
                    paths = [shard_paths[i][k] for k in range(shards_of[i])]
                    merged = merge(paths, cache_dir=root, progress=False)
                    merged.cache_hit = False
                    stores[i] = merged
                    bar.set_postfix_str(f"merged {merged.path.name}", refresh=True)
                    if not keep_shards:
                        for p in paths:
                            shutil.rmtree(p, ignore_errors=True)
    finally:
        bar.close()
        ray.kill(tally)
    return [s for s in stores if s is not None]


def extract_ray(
    encoder_factory: Callable[[], Any],
    corpus_factory: Callable[[], Any],
    n_shards: int,
    *,
    cache_dir: str | os.PathLike | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
    batch_tokens: int = 4096,
    num_cpus: float = 1,
    num_gpus: float = 0,
    device: str | None = None,
    keep_shards: bool = False,
    progress: bool = True,
) -> Store:
    """:func:`extract` split into ``n_shards`` Ray tasks (``shard=(i, n_shards)``), merged into one store.

    ``encoder_factory`` and ``corpus_factory`` are called once on the driver (to compute the key: a
    complete store is returned as a cache hit without starting any task) and once in every task, so
    they should be cheap and picklable (e.g. ``functools.partial(ElmoEncoder, "original")`` with a
    lazily loaded model). Each task asks Ray for ``num_cpus`` CPUs and ``num_gpus`` GPUs and builds its
    model on ``device`` (default: :func:`probing.devices.resolve_device` in the task). A corpus too small
    for ``n_shards`` non-empty shards is cut into fewer (:func:`shard_count`).

    Ray: an already initialised session is used as is; otherwise ``ray.init()`` starts a local one (or
    joins the cluster named by ``$RAY_ADDRESS``). To run on a cluster, call
    ``ray.init(address="auto")`` on a cluster node, or ``ray.init(address="ray://<head>:10001")``
    from outside, before this function, and give a ``cache_dir`` on a filesystem that every node mounts
    at the same path (shards are written by the workers and merged by the driver). Shard stores are
    deleted after a successful merge unless ``keep_shards``; a failed task leaves its shard resumable.
    """
    return extract_ray_many(
        [(encoder_factory, corpus_factory, n_shards)],
        cache_dir=cache_dir,
        chunk_tokens=chunk_tokens,
        batch_tokens=batch_tokens,
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        device=device,
        keep_shards=keep_shards,
        progress=progress,
    )[0]
