"""One run's working state beside its record (:class:`~probing.experiment.assembly.RunRecord`): the experiment,
its encoders and corpora, and the parts (stores) read, extracted here or as Ray tasks on first use."""

from __future__ import annotations

import functools
import time
from typing import Any

from probing.experiment.assembly import RunRecord
from probing.experiment.spec import DataRef, Experiment, TaskSpec
from probing.store.reader import Store
from probing.tasks import Part


class RunState(RunRecord):
    """One run's working state beside its record: the experiment, its corpora and the parts (stores) read."""

    def __init__(self, exp: Experiment, progress: bool):
        super().__init__(encoders={spec.name: spec.build(exp.cache_dir) for spec in exp.encoders}, progress=progress)
        self.exp = exp
        self.corpora: dict[DataRef, Any] = {}
        self.parts: dict[tuple[str, DataRef], Part] = {}
        self.overlaps_checked: set[tuple[str, str, str, str]] = set()

    def corpus(self, ref: DataRef):
        if ref not in self.corpora:
            self.corpora[ref] = ref.load(self.exp.max_sentences)
        return self.corpora[ref]

    def part(self, encoder: str, ref: DataRef) -> Part:
        key = (encoder, ref)
        if key not in self.parts:
            from probing.store import extract

            t0 = time.time()
            self.log(f"activations: {encoder} on {ref}")
            store = extract(
                self.encoders[encoder],
                self.corpus(ref),
                cache_dir=self.exp.cache_dir,
                progress=self.progress,
                chunk_tokens=self.exp.chunk_tokens,
            )
            self.add_store(encoder, ref, store, time.time() - t0)
        return self.parts[key]

    def add_store(self, encoder: str, ref: DataRef, store: Store, elapsed: float, **info: Any) -> None:
        self.store_info[f"{encoder}/{ref}"] = {
            "path": str(store.path),
            "key": store.key,
            "cache_hit": bool(store.cache_hit),
            "seconds": round(elapsed, 3),
            "n_sentences": store.n_sentences,
            "n_tokens": len(store),
            "corpus_fingerprint": store.manifest.get("corpus", {}).get("fingerprint"),
            **info,
        }
        self.timings[f"extract {encoder}/{ref}"] = round(elapsed, 3)
        self.parts[(encoder, ref)] = Part(ref.dataset, ref.split, store)
        self.stores[(encoder, ref)] = store

    def extract_on_ray(
        self, needed: list[tuple[str, DataRef]], address: str, shards: int | None, device: str | None
    ) -> None:
        """Extract the ``needed`` (encoder, data) stores as Ray tasks, up to ``shards`` per store (default:
        the CPUs Ray reports), all submitted at once and merged on the driver (:func:`extract_ray_many`).
        Stores in the cache start no task; data that is not found is left to :meth:`tests` to report."""
        from probing.corpora.registry import DatasetNotFound
        from probing.experiment.extract import gpus_for, init_ray
        from probing.store.distributed import extract_ray_many

        todo = []
        for enc, ref in dict.fromkeys(needed):
            try:
                self.corpus(ref)
            except DatasetNotFound:
                continue
            todo.append((enc, ref))
        if not todo:
            return
        init_ray(address)
        import ray

        n = shards if shards is not None else max(1, int(ray.cluster_resources().get("CPU", 2)))
        specs = {spec.name: spec for spec in self.exp.encoders}
        self.log(f"activations: {len(todo)} stores on Ray ({address}), up to {n} shard tasks each")
        t0 = time.time()
        stores = extract_ray_many(
            [
                (
                    functools.partial(specs[enc].build, self.exp.cache_dir),
                    functools.partial(ref.load, self.exp.max_sentences),
                    n,
                )
                for enc, ref in todo
            ],
            cache_dir=self.exp.cache_dir,
            chunk_tokens=self.exp.chunk_tokens,
            num_gpus=gpus_for(device),
            device=device,
            progress=self.progress,
        )
        elapsed = time.time() - t0
        for (enc, ref), store in zip(todo, stores):
            written = 0 if store.cache_hit else len(store.manifest.get("merged_from") or [])
            self.add_store(enc, ref, store, elapsed, ray_shards=written)

    def tests(self, task: TaskSpec, encoder: str) -> list[Part]:
        """The task's test parts; with ``skip_missing``, sets that are not found are skipped (once noted)."""
        from probing.corpora.registry import DatasetNotFound

        parts = []
        for ref in task.test:
            try:
                parts.append(self.part(encoder, ref))
            except DatasetNotFound as e:
                if not task.skip_missing:
                    raise
                note = {"task": task.name, "data": str(ref), "reason": str(e).splitlines()[0]}
                if note not in self.skipped:
                    self.skipped.append(note)
                    self.log(f"skipped {ref} for task {task.name}: not found")
        return parts

    def check_overlap(self, train: Part, dev: Part | None, tests: list[Part]) -> None:
        """State how many dev and test sentences also occur in training, once per pair of splits: a warning
        where that can matter (:data:`probing.experiment.overlap.WARN_SHARE` or more, or the same split), a
        log line otherwise."""
        from probing.experiment.overlap import new_overlaps

        evaluated = ([("dev", dev)] if dev is not None else []) + [("test", p) for p in tests]
        for found in new_overlaps(train, evaluated, self.overlaps_checked):
            if found.matters:
                self.warn(found.describe())
            elif found.shared:
                self.log(found.describe())
