"""The token table: one row per token (DESIGN.md columns), built and written per chunk as Parquet."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probing._io import atomic_path
from probing.store.format import TOKEN_COLUMNS, TREE_COLUMNS, StoreError

if TYPE_CHECKING:
    import pyarrow as pa


@functools.cache
def _arrow() -> tuple[Any, Any, pa.Schema]:
    """``(pyarrow, pyarrow.parquet, the token table's schema)``, imported when a table is first written (a store
    hit needs none of it)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(
            "probing.store writes its token table as Parquet and needs pyarrow: pip install pyarrow"
        ) from e
    schema = pa.schema(
        [
            (c, pa.int64() if c in ("position", "head") else pa.bool_() if c == "oov" else pa.string())
            for c in TOKEN_COLUMNS
        ]
    )
    return pa, pq, schema


_FIELDS = (
    ("upos", "upos"),
    ("xpos", "xpos"),
    ("lemma", "lemmas"),
    ("sense", "senses"),
    ("instance_id", "instance_ids"),
    ("deprel", "deprels"),
    ("feats", "feats"),
)


def _annotation(sentence: Any, field: str, n: int) -> list:
    values = getattr(sentence, field, None)
    if values is None:
        return [""] * n
    if len(values) != n:
        raise StoreError(
            f"sentence {sentence.id!r}: field {field!r} has {len(values)} entries, expected {n} (one per word)"
        )
    if field == "senses":
        return [" ".join(keys) for keys in values]
    return ["" if v is None else v for v in values]


def token_table(sentences: Sequence[Any], encoder: Any) -> pa.Table:
    """Rows for ``sentences`` in order; ``oov`` from ``encoder.oov_mask``; missing annotations are ``""``,
    a missing ``head`` is -1 (else the 1-based head position, 0 for the root)."""
    cols: dict[str, list] = {c: [] for c in TOKEN_COLUMNS}
    for s in sentences:
        words = list(s.words)
        n = len(words)
        cols["sentence_id"] += [s.id] * n
        cols["doc_id"] += [s.doc_id] * n
        cols["position"] += range(n)
        cols["word"] += words
        for column, field in _FIELDS:
            cols[column] += _annotation(s, field, n)
        heads = getattr(s, "heads", None)
        cols["head"] += [-1] * n if heads is None else [int(h) for h in _annotation(s, "heads", n)]
        if n:
            oov = np.asarray(encoder.oov_mask(words))
            if oov.shape != (n,):
                raise StoreError(
                    f"encoder {encoder.name!r}.oov_mask returned shape {oov.shape} for sentence {s.id!r}, expected ({n},)"
                )
            cols["oov"] += oov.astype(bool).tolist()
    pa, _, schema = _arrow()
    try:
        return pa.table(cols, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        first = sentences[0].id if sentences else None
        raise StoreError(f"token table for sentences from {first!r}: a value is not a string ({e})") from None


def write_part(table: pa.Table, path: Path) -> None:
    _arrow()[1].write_table(table, path)


def with_tree_columns(table: pa.Table) -> pa.Table:
    """``table`` with the tree columns it lacks (a part or store written before they existed) filled in."""
    pa, _, schema = _arrow()
    for column, missing in TREE_COLUMNS.items():
        if column not in table.column_names:
            table = table.append_column(
                schema.field(column), pa.array([missing] * table.num_rows, schema.field(column).type)
            )
    return table.select(list(TOKEN_COLUMNS))


def concat_parts(parts: Sequence[Path], dest: Path) -> None:
    """Concatenate Parquet parts into ``dest`` (atomically), one part in memory at a time."""
    pa, pq, schema = _arrow()
    with atomic_path(dest) as tmp:
        with pq.ParquetWriter(tmp, schema) as writer:
            for p in parts:
                for batch in pq.ParquetFile(p).iter_batches(batch_size=1 << 16):
                    writer.write_table(with_tree_columns(pa.Table.from_batches([batch])))
