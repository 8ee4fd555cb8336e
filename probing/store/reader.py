"""Read a finished activation store: memory-mapped layers aligned with a token table."""

from __future__ import annotations

import os
import warnings
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from probing._io import sha256_file
from probing.errors import InputError
from probing.layers import resolve
from probing.store.format import (
    DTYPE,
    FORMAT_VERSION,
    MANIFEST,
    OFFSETS,
    TREE_COLUMNS,
    StoreCorruptError,
    StoreError,
    hash_region,
    layer_data_offset,
    layer_file_size,
    read_json,
)

if TYPE_CHECKING:
    import pandas as pd
    import torch

_Match = str | Collection[str] | None

SAMPLE_BYTES = 32 << 20
"""Layer bytes re-hashed by the sampled check of a cache hit (benchmarks/bench_integrity.py measures it)."""
FULL_CHECK_BYTES = 256 << 20
"""A cache hit on a store with at most this many layer bytes hashes all of them, not a sample: 0.19 s from
the page cache (benchmarks/bench_integrity.py); above it, a sample of SAMPLE_BYTES."""


class Store:
    """A complete store on disk. Opening reads only the manifest; layers are memory-mapped on first use."""

    def __init__(self, path: str | os.PathLike, manifest: dict):
        self.path = Path(path)
        self.manifest = manifest
        self._layers: dict[int, np.memmap] = {}
        self._tokens: pd.DataFrame | None = None
        self._offsets: np.ndarray | None = None
        self.cache_hit: bool | None = None  # set by extract(): whether the store was complete before the call

    def __reduce__(self) -> tuple:
        """Pickled as its path and manifest (a Ray task reopens the memory maps where it runs)."""
        return (type(self), (self.path, self.manifest))

    @classmethod
    def open(cls, path: str | os.PathLike) -> Store:
        """Open the store at ``path``; FileNotFoundError if it has no manifest (missing or unfinished)."""
        path = Path(path)
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            raise FileNotFoundError(
                f"{manifest_path}: no manifest, so {path} is not a complete store "
                "(never extracted, or an extraction that has not finished: run extract() again to resume)"
            )
        manifest = read_json(manifest_path)
        version = manifest.get("format_version")
        if version != FORMAT_VERSION:
            raise StoreError(f"{manifest_path}: format_version {version!r}, this code reads {FORMAT_VERSION}")
        for field in ("key", "n_tokens", "n_sentences", "layer_names", "dim", "layers", "chunks", "tokens", "offsets"):
            if field not in manifest:
                raise StoreError(f"{manifest_path}: missing field {field!r}")
        return cls(path, manifest)

    @property
    def key(self) -> str:
        return self.manifest["key"]

    @property
    def layer_names(self) -> list[str]:
        return list(self.manifest["layer_names"])

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    @property
    def n_sentences(self) -> int:
        return int(self.manifest["n_sentences"])

    def __len__(self) -> int:
        return int(self.manifest["n_tokens"])

    def __repr__(self) -> str:
        enc, corpus = self.manifest.get("encoder", {}), self.manifest.get("corpus", {})
        return (
            f"Store({enc.get('name')!r} on {corpus.get('name')!r}/{corpus.get('split')!r}: "
            f"{len(self)} tokens, layers {self.layer_names}, dim {self.dim}, at {str(self.path)!r})"
        )

    def layer_index(self, k: int | str) -> int:
        """Position of layer ``k``: an int index (negative counts from the end) or a layer name.

        A half name (``"1f"``, ``"1b"``: see :mod:`probing.layers`) gives the stored layer that holds it;
        :meth:`layer_columns` gives its columns."""
        names = self.layer_names
        if isinstance(k, (bool, np.bool_)):
            raise TypeError(f"layer must be an int index or a name from {names}, not a bool")
        if isinstance(k, (int, np.integer)):
            if not -len(names) <= k < len(names):
                raise IndexError(f"layer index {k} out of range for {len(names)} layers {names}")
            return int(k) % len(names)
        if isinstance(k, str):
            return resolve(k, names, self.dim, self.path)[0]
        raise TypeError(f"layer must be an int index or a name from {names}, not {type(k).__name__}")

    def layer_columns(self, k: int | str) -> slice:
        """The columns of the stored layer that ``k`` reads: all of them, or one direction's half."""
        if isinstance(k, str):
            return resolve(k, self.layer_names, self.dim, self.path)[1]
        self.layer_index(k)
        return slice(None)

    def _layer_path(self, i: int) -> Path:
        return self.path / self.manifest["layers"][i]["file"]

    def layer(
        self,
        k: int | str,
        rows: Iterable[int] | np.ndarray | slice | None = None,
        dtype: np.dtype | type | str | None = None,
    ) -> np.ndarray:
        """Activations of layer ``k`` as ``(n_tokens, dim)``, row i = token i of :attr:`tokens`.

        With neither ``rows`` nor ``dtype`` this is a read-only fp16 ``np.memmap`` (nothing is read yet).
        ``rows`` (indices, a boolean mask or a slice) gathers only those rows; ``dtype`` converts.
        A half name (``"1f"``, ``"1b"``) gives that direction's ``(n_tokens, dim // 2)`` columns of layer 1.

        Parameters
        ----------
        k : int or str
            Layer index (negative counts from the end), name (``"0"``, ``"1"``, ...) or half name.
        rows : array-like (m,) of int, boolean mask (n_tokens,), or slice, optional
            Token rows to gather, in the order given (a mask: in store order, m = its number of True).
            Default: all n_tokens rows.
        dtype : numpy dtype, optional
            Convert to it (e.g. ``"float32"``); default: fp16, as stored.

        Returns
        -------
        ndarray (m, dim), or (m, dim // 2) for a half name
            With neither ``rows`` nor ``dtype``, the read-only fp16 memmap (m = n_tokens); otherwise a new writable
            array of ``dtype`` (default float16).

        Examples
        --------
        >>> from probing.experiment import extract_activations
        >>> store = extract_activations("default", "demo-ud", "test", max_sentences=20, progress=False)
        >>> store.layer("2").shape, store.layer("2").dtype
        ((310, 512), dtype('float16'))
        >>> store.layer("1", rows=[0, 1, 2], dtype="float32").shape
        (3, 512)
        >>> store.layer("1f").shape  # layer 1's forward half
        (310, 256)
        """
        i = self.layer_index(k)
        columns = self.layer_columns(k)
        mm = self._layers.get(i)
        if mm is None:
            mm = np.load(self._layer_path(i), mmap_mode="r", allow_pickle=False)
            if mm.shape != (len(self), self.dim) or mm.dtype != DTYPE:
                raise StoreError(
                    f"{self._layer_path(i)}: shape {mm.shape} {mm.dtype}, manifest says ({len(self)}, {self.dim}) {DTYPE}"
                )
            self._layers[i] = mm
        full: np.ndarray = mm if columns == slice(None) else mm[:, columns]
        if rows is None and dtype is None:
            return full
        if rows is None:
            src = full
        elif isinstance(rows, slice):
            src = full[rows]
        else:
            idx = np.asarray(rows)
            if idx.dtype == bool:
                if idx.shape != (len(self),):
                    raise IndexError(f"boolean rows mask has shape {idx.shape}, expected ({len(self)},)")
                idx = np.flatnonzero(idx)
            elif idx.size and not np.issubdtype(idx.dtype, np.integer):
                raise TypeError(f"rows must be integer indices, a boolean mask or a slice, not {idx.dtype}")
            src = full[idx.astype(np.int64, copy=False)]
        return _convert(src, np.dtype(dtype) if dtype is not None else DTYPE)

    def as_tensor(
        self, k: int | str, rows: Iterable[int] | np.ndarray | slice | None = None, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        """Layer ``k`` (optionally only ``rows``) as a torch tensor, float32 unless ``dtype`` says otherwise.

        Parameters
        ----------
        k, rows : as in :meth:`layer`.
        dtype : torch.dtype, optional
            ``torch.float16`` keeps the stored values; any other is converted from float32. Default float32.

        Returns
        -------
        Tensor (m, dim), or (m, dim // 2) for a half name
            A new CPU tensor (m rows as in :meth:`layer`), not sharing memory with the store.
        """
        import torch

        dtype = dtype or torch.float32
        np_dtype = np.float16 if dtype == torch.float16 else np.float32
        return torch.from_numpy(self.layer(k, rows=rows, dtype=np_dtype)).to(dtype)

    @property
    def tokens(self) -> pd.DataFrame:
        """The token table (columns of DESIGN.md), loaded on first access.

        A store written before the tree columns existed gets ``head`` -1, ``deprel`` and ``feats`` ``""``.
        """
        if self._tokens is None:
            import pandas as pd

            self._tokens = pd.read_parquet(self.path / self.manifest["tokens"]["file"])
            for column, missing in TREE_COLUMNS.items():
                if column not in self._tokens.columns:
                    self._tokens[column] = np.full(
                        len(self._tokens), missing, dtype=np.int64 if missing == -1 else object
                    )
            if len(self._tokens) != len(self):
                raise StoreError(
                    f"{self.path / self.manifest['tokens']['file']}: {len(self._tokens)} rows, expected {len(self)}"
                )
        return self._tokens

    @property
    def offsets(self) -> np.ndarray:
        """int64 ``(n_sentences + 1,)``: the rows of sentence i are ``offsets[i]:offsets[i + 1]``.

        Returns
        -------
        ndarray (n_sentences + 1,) of int64
            ``offsets[0] == 0``, ``offsets[-1] == n_tokens``; loaded once, then cached.
        """
        if self._offsets is None:
            self._offsets = np.load(self.path / OFFSETS, allow_pickle=False)
        return self._offsets

    def sentence(self, i: int) -> pd.DataFrame:
        """Token-table rows of the i-th sentence (store order); the frame's index holds the store rows."""
        n = self.n_sentences
        if not -n <= i < n:
            raise IndexError(f"sentence index {i} out of range for {n} sentences")
        i %= n
        return self.tokens.iloc[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def rows(
        self,
        *,
        upos: _Match = None,
        xpos: _Match = None,
        lemma: _Match = None,
        word: _Match = None,
        doc_id: _Match = None,
        sentence_id: _Match = None,
        sense_annotated: bool | None = None,
        oov: bool | None = None,
    ) -> np.ndarray:
        """Sorted int64 rows whose columns match every given filter (a value or a collection of values).

        ``lemma`` matches ignoring case (``"bank"`` finds ``bank`` and ``Bank``), the one lemma rule of the
        toolkit (also in the maps and the neighbour filters); the other columns match exactly.

        Parameters
        ----------
        upos, xpos, lemma, word, doc_id, sentence_id : str or collection of str, optional
            Keep the tokens whose column is that value or one of those values; None: no filter.
        sense_annotated : bool, optional
            True: only tokens with a ``sense``; False: only those without.
        oov : bool, optional
            Filter on the token table's ``oov`` column.

        Returns
        -------
        ndarray (m,) of int64
            Row indices into the layers and :attr:`tokens`, ascending (m = tokens matching every filter).
        """
        t = self.tokens
        mask = np.ones(len(t), dtype=bool)
        for column, want in (
            ("upos", upos),
            ("xpos", xpos),
            ("lemma", lemma),
            ("word", word),
            ("doc_id", doc_id),
            ("sentence_id", sentence_id),
        ):
            if want is None:
                continue
            if not isinstance(want, (str, Collection)):
                raise InputError(f"Store.rows: {column}= takes a string or a collection of strings, got {want!r}")
            values = [want] if isinstance(want, str) else list(want)
            if column == "lemma":
                mask &= t[column].astype(str).str.lower().isin([str(v).lower() for v in values]).to_numpy()
            else:
                mask &= t[column].isin(values).to_numpy()
        if sense_annotated is not None:
            mask &= (t["sense"] != "").to_numpy() == bool(sense_annotated)
        if oov is not None:
            mask &= t["oov"].to_numpy(dtype=bool) == bool(oov)
        return np.flatnonzero(mask).astype(np.int64)

    def _chunk_bad(self, fd: int, offset: int, layer_file: str, chunk: dict) -> bool:
        row_bytes = self.dim * DTYPE.itemsize
        r0, r1 = chunk["rows"]
        return hash_region(fd, offset + r0 * row_bytes, (r1 - r0) * row_bytes) != chunk["sha256"].get(layer_file)

    def _check_layers(self, pairs: Collection[tuple[int, int]] | None) -> list[tuple[int, str]]:
        """(chunk index, file) of the chunks that fail their sha256: all of them (``pairs=None``) or only the
        given ``(layer, chunk)`` pairs. A missing file or a bad header fails every chunk checked in it."""
        bad = []
        n, dim = len(self), self.dim
        chunks = self.manifest["chunks"]
        for i, layer in enumerate(self.manifest["layers"]):
            wanted = [chunks[c] for li, c in sorted(pairs) if li == i] if pairs is not None else chunks
            if pairs is not None and not wanted:
                continue
            path = self._layer_path(i)
            try:
                offset = layer_data_offset(path, n, dim) if path.is_file() and not path.is_symlink() else None
            except StoreError:
                offset = None
            if offset is None:
                bad += [(c["index"], layer["file"]) for c in wanted]
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                bad += [(c["index"], layer["file"]) for c in wanted if self._chunk_bad(fd, offset, layer["file"], c)]
            finally:
                os.close(fd)
        return bad

    def bad_chunks(self) -> list[tuple[int, str]]:
        """(chunk index, file) for every chunk whose bytes do not match the manifest's sha256."""
        return self._check_layers(None)

    def bad_files(self) -> list[str]:
        """Token table or offsets files that are missing or do not match their recorded sha256."""
        bad = []
        for entry in (self.manifest["tokens"], self.manifest["offsets"]):
            p = self.path / entry["file"]
            if not p.is_file() or p.is_symlink() or sha256_file(p) != entry["sha256"]:
                bad.append(entry["file"])
        return bad

    def sizes_ok(self) -> bool:
        """Cheap check (stat only): every file present, layer files of the expected size."""
        expected = layer_file_size(len(self), self.dim)
        for i in range(len(self.manifest["layers"])):
            p = self._layer_path(i)
            if not p.is_file() or p.stat().st_size != expected:
                return False
        return all((self.path / e["file"]).is_file() for e in (self.manifest["tokens"], self.manifest["offsets"]))

    def check_sample(
        self, budget_bytes: int = SAMPLE_BYTES, seed: int | None = None, full_below: int = FULL_CHECK_BYTES
    ) -> list[str]:
        """Fast integrity check of a cache hit; returns what is wrong (empty if nothing was found).

        Sizes are checked and the token table and offsets are hashed whole (they are small next to the
        layers: a random-bytes ``tokens.parquet`` of the right size fails here). Layers totalling at most
        ``full_below`` bytes are hashed whole too; in a bigger store randomly drawn (layer, chunk) pairs
        are re-hashed until about ``budget_bytes`` are read (at least one pair), a different draw on each
        call unless ``seed`` is given, which catches a damaged layer only with the probability of drawing
        it; :meth:`verify` hashes everything.
        """
        if not self.sizes_ok():
            return ["a file is missing or has the wrong size"]
        problems = [f"{f} (sha256 mismatch)" for f in self.bad_files()]
        chunks = self.manifest["chunks"]
        whole = len(self) * self.dim * DTYPE.itemsize * len(self.manifest["layers"]) <= full_below
        chosen = None if whole else self._sample(budget_bytes, seed)
        return problems + [
            f"{f} rows {chunks[c]['rows']} (chunk {c}, sha256 mismatch)" for c, f in self._check_layers(chosen)
        ]

    def _sample(self, budget_bytes: int, seed: int | None) -> list[tuple[int, int]]:
        """Randomly drawn (layer, chunk) pairs of about ``budget_bytes`` in all (at least one)."""
        chunks = self.manifest["chunks"]
        pairs = [(i, c) for i in range(len(self.manifest["layers"])) for c in range(len(chunks))]
        order = np.random.default_rng(seed).permutation(len(pairs))
        row_bytes = self.dim * DTYPE.itemsize
        chosen: list[tuple[int, int]] = []
        spent = 0
        for k in order:
            i, c = pairs[k]
            r0, r1 = chunks[c]["rows"]
            size = (r1 - r0) * row_bytes
            if chosen and spent + size > budget_bytes:
                continue
            chosen.append((i, c))
            spent += size
        return chosen

    def verify(self) -> None:
        """Hash every chunk of every layer and the token files; StoreCorruptError listing what is wrong."""
        problems = [f"{f} rows {self.manifest['chunks'][c]['rows']} (chunk {c})" for c, f in self.bad_chunks()]
        problems += [f"{f} (sha256 mismatch or missing)" for f in self.bad_files()]
        if problems:
            raise StoreCorruptError(
                f"{self.path}: {len(problems)} corrupt part(s): "
                + "; ".join(problems)
                + ". Recompute them with extract(..., verify=True) (probing extract ... --verify) with the same "
                "encoder and corpus, or delete the folder to rebuild it from scratch."
            )


def _convert(src: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``src`` as a new, writable ``dtype`` ndarray (never a memmap view); fp16->fp32 goes through torch."""
    if dtype == src.dtype:
        return np.array(src, subok=False)
    if src.dtype == DTYPE and dtype == np.float32 and src.ndim == 2:
        import torch

        out = np.empty(src.shape, dtype=np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # read-only source: torch only reads it
            torch.from_numpy(out).copy_(torch.from_numpy(np.asarray(src)))
        return out
    return src.astype(dtype)
