"""Join the shard stores of one corpus into the store a single unsharded extraction would have made."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from probing._io import atomic_open, sha256_file
from probing.errors import InputError
from probing.store.extraction import _versions
from probing.store.format import (
    DTYPE,
    MANIFEST,
    OFFSETS,
    TOKENS,
    StoreCorruptError,
    StoreError,
    check_free_space,
    create_layer_file,
    layer_data_offset,
    layer_file_size,
    store_key,
    store_lock,
    store_root,
)
from probing.store.reader import Store
from probing.store.tokens import concat_parts


def _check_shards(stores: list[Store]) -> list[Store]:
    """The shards sorted by index, after checking they are all the shards of one extraction."""
    if not stores:
        raise InputError("merge() needs at least one shard store")
    for s in stores:
        if s.manifest.get("shard") is None:
            raise StoreError(f"{s.path}: not a shard store (its manifest has no 'shard'); nothing to merge")
    ref = stores[0].manifest
    same = (("encoder", "fingerprint"), ("corpus", "fingerprint"), ("shard", "count"))
    for s in stores[1:]:
        for outer, inner in same:
            if s.manifest[outer][inner] != ref[outer][inner]:
                raise StoreError(
                    f"{s.path}: {outer}.{inner} is {s.manifest[outer][inner]!r}, but {stores[0].path} has "
                    f"{ref[outer][inner]!r}: shards of different extractions cannot be merged"
                )
        if s.layer_names != stores[0].layer_names or s.dim != stores[0].dim:
            raise StoreError(f"{s.path}: layers/dim differ from {stores[0].path}")
    count = ref["shard"]["count"]
    by_index = sorted(stores, key=lambda s: s.manifest["shard"]["index"])
    indices = [s.manifest["shard"]["index"] for s in by_index]
    if indices != list(range(count)):
        missing = sorted(set(range(count)) - set(indices))
        dupes = sorted({i for i in indices if indices.count(i) > 1})
        raise StoreError(f"merge needs shards 0..{count - 1} exactly once; missing {missing}, repeated {dupes}")
    stop = 0
    for s in by_index:
        a, b = s.manifest["shard"]["sentences"]
        if a != stop:
            raise StoreError(f"{s.path}: shard starts at sentence {a}, expected {stop}")
        stop = b
    if stop != ref["corpus"]["n_sentences"]:
        raise StoreError(f"shards end at sentence {stop}, the corpus has {ref['corpus']['n_sentences']}")
    return by_index


def merge(
    shards: Sequence[Store | str | os.PathLike], *, cache_dir: str | os.PathLike | None = None, progress: bool = True
) -> Store:
    """Merge all ``shard=(i, n)`` stores of one encoder and corpus into the unsharded store.

    The result has the unsharded key, so it sits where ``extract(encoder, corpus)`` looks (a later call
    is a cache hit), and its layers, token table and offsets equal an unsharded extraction's. Shard
    bytes are re-hashed while copied: a corrupt shard raises StoreCorruptError naming it. The output
    goes under ``cache_dir`` (default: the directory holding the first shard). An interrupted merge
    leaves no manifest, and calling it again starts the copy over.
    """
    stores = _check_shards([s if isinstance(s, Store) else Store.open(s) for s in shards])
    ref = stores[0].manifest
    key = store_key(ref["encoder"]["fingerprint"], ref["corpus"]["fingerprint"], None)
    root = store_root(cache_dir) if cache_dir is not None else stores[0].path.parent
    path = root / key
    path.mkdir(parents=True, exist_ok=True)
    with store_lock(path, progress):
        if (path / MANIFEST).is_file():
            done = Store.open(path)
            if done.sizes_ok():
                return done
        t0 = time.perf_counter()
        n_tokens = sum(len(s) for s in stores)
        n_sentences = sum(s.n_sentences for s in stores)
        dim, files = stores[0].dim, [layer["file"] for layer in ref["layers"]]
        row_bytes = dim * DTYPE.itemsize
        chunks: list[Any] = []
        row0, sent0 = 0, 0
        for s in stores:
            for c in s.manifest["chunks"]:
                chunks.append(
                    {
                        "index": len(chunks),
                        "sentences": [sent0 + x for x in c["sentences"]],
                        "rows": [row0 + r for r in c["rows"]],
                        "sha256": c["sha256"],
                    }
                )
            row0, sent0 = row0 + len(s), sent0 + s.n_sentences
        check_free_space(path, len(files) * layer_file_size(n_tokens, dim), "the merged layers")
        for name in files:
            dest = path / name
            create_layer_file(dest, n_tokens, dim)
            out_off = layer_data_offset(dest, n_tokens, dim)
            out = os.open(dest, os.O_WRONLY)
            try:
                row0 = 0
                for s in stores:
                    _copy_layer(s, name, out, out_off + row0 * row_bytes, row_bytes)
                    row0 += len(s)
                os.fsync(out)
            finally:
                os.close(out)
        for s in stores:
            bad = s.bad_files()
            if bad:
                raise StoreCorruptError(f"{s.path}: {bad} fail their sha256; re-extract this shard before merging")
        concat_parts([s.path / s.manifest["tokens"]["file"] for s in stores], path / TOKENS)
        offsets = [np.zeros(1, np.int64)]
        row0 = 0
        for s in stores:
            offsets.append(s.offsets[1:] + row0)
            row0 += len(s)
        with atomic_open(path / OFFSETS, "wb") as f:
            np.save(f, np.concatenate(offsets).astype(np.int64), allow_pickle=False)
        shard_timings = [s.manifest.get("timings", {}) for s in stores]
        manifest = {
            **{
                k: ref[k]
                for k in ("format_version", "dtype", "encoder", "layer_names", "dim", "layers", "chunk_tokens")
            },
            "key": key,
            "corpus": ref["corpus"],
            "shard": None,
            "n_sentences": n_sentences,
            "n_tokens": n_tokens,
            "tokens": {"file": TOKENS, "sha256": sha256_file(path / TOKENS)},
            "offsets": {"file": OFFSETS, "sha256": sha256_file(path / OFFSETS)},
            "chunks": chunks,
            "merged_from": [{"index": s.manifest["shard"]["index"], "key": s.key, "path": str(s.path)} for s in stores],
            "versions": _versions(),
            "timings": {
                "encode_s": round(sum(t.get("encode_s", 0.0) for t in shard_timings), 3),
                "write_s": round(sum(t.get("write_s", 0.0) for t in shard_timings), 3),
                "merge_s": round(time.perf_counter() - t0, 3),
                "runs": max(t.get("runs", 1) for t in shard_timings),
            },
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        with atomic_open(path / MANIFEST, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
        if progress:
            print(
                f"merged {len(stores)} shards: {n_tokens} tokens in {time.perf_counter() - t0:.1f} s -> {path}",
                file=sys.stderr,
            )
        return Store.open(path)


def _copy_layer(shard: Store, name: str, out: int, out_pos: int, row_bytes: int) -> None:
    """Copy one shard's layer file chunk by chunk into ``out`` at ``out_pos``, checking each chunk's sha256."""
    src_path = shard.path / name
    src_off = layer_data_offset(src_path, len(shard), shard.dim)
    src = os.open(src_path, os.O_RDONLY)
    try:
        for c in shard.manifest["chunks"]:
            r0, r1 = c["rows"]
            data = os.pread(src, (r1 - r0) * row_bytes, src_off + r0 * row_bytes)
            if len(data) != (r1 - r0) * row_bytes or hashlib.sha256(data).hexdigest() != c["sha256"][name]:
                raise StoreCorruptError(
                    f"{src_path}: rows {r0}:{r1} (chunk {c['index']}) fail their sha256; "
                    "re-extract this shard with extract(..., shard=..., verify=True) before merging"
                )
            view, pos = memoryview(data), 0
            while pos < len(view):
                pos += os.pwrite(out, view[pos:], out_pos + r0 * row_bytes + pos)
    finally:
        os.close(src)
