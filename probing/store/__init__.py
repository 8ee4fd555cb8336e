"""Content-addressed per-layer activation store: extract once, read as memory-mapped layers.

Typical use::

    store = extract(encoder, corpus)               # a second call is a cache hit
    nouns = store.rows(upos="NOUN")
    X = store.layer("1", rows=nouns, dtype=np.float32)
    y = store.tokens["lemma"].to_numpy()[nouns]
"""

from probing.store.distributed import extract_ray
from probing.store.extraction import extract, length_batches, plan_chunks, shard_range
from probing.store.format import FORMAT_VERSION, StoreCorruptError, StoreError, store_key, store_root
from probing.store.merging import merge
from probing.store.reader import Store

__all__ = [
    "FORMAT_VERSION",
    "Store",
    "StoreCorruptError",
    "StoreError",
    "extract",
    "extract_ray",
    "length_batches",
    "merge",
    "plan_chunks",
    "shard_range",
    "store_key",
    "store_root",
]
