"""Nearest neighbours: word types in a static vector table, word occurrences in a cached corpus.

All searches are exact cosine searches read in chunks, so memory stays bounded however large the
vector table or activation store is. Results are DataFrames (they render in Jupyter);
:func:`format_table` renders them as plain text for a terminal.

A query is never its own neighbour. A query that is a store row excludes its sentence by identity
(document id and sentence id), never by its words. A query sentence from outside the store (Table 4's
sources, ``neighbors(sentence=...)``) is matched to store sentences by :func:`normalise_text`, which
undoes the corpora's tokenisation choices: SemCor writes ``Chico_Ruiz`` as one token and ``Alusik 's``
as two, the paper "Chico Ruiz" and a student "Alusik's". A store sentence is a copy of a query
sentence when their normalised texts are equal, or, for a query of at least :data:`MIN_CUT_WORDS`
words, when the store sentence's normalised text starts with the query's, less a final full stop, and
a store token, or a part of a multiword token, ends where the query does (the paper cuts its sources with
"{...}": its "Olivia De Havilland ... for Garson" is SemCor's "... for Garson_Kanin this season"). Copies are
excluded, and so are copies of a store-row query's own sentence. Strings are tokenized by
:func:`probing.tokenize.tokenize`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from probing.errors import InputError
from probing.glove import UnknownWordError, Vectors
from probing.layers import is_half, resolve
from probing.protocols import StoreLike
from probing.tokenize import as_words

Gloss = Callable[[str], str]
SentenceKey = tuple[str, str]  # (doc_id, sentence_id): a sentence's identity in a store
MIN_CUT_WORDS = 5  # a query this long may be a cut copy ("{...}") of a longer store sentence
_FINAL_PUNCT = ".!?;:,\u2026"
_QUOTES = str.maketrans({"`": "'", "‘": "'", "’": "'", "“": '"', "”": '"'})

# The two source sentences of Peters et al. (2018), Table 4 (cut where the paper writes "{...}").
PAPER_TABLE4_SOURCES: tuple[tuple[list[str], int], ...] = (
    ("Chico Ruiz made a spectacular play on Alusik 's grounder".split(), 5),
    ("Olivia De Havilland signed to do a Broadway play for Garson".split(), 8),
)


def cosine_topk(
    matrix: np.ndarray,
    query: np.ndarray,
    k: int,
    *,
    rows: np.ndarray | None = None,
    exclude: np.ndarray | None = None,
    chunk_rows: int = 16384,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` rows of ``matrix`` by cosine similarity to ``query``, best first.

    ``matrix`` may be a memmap (any float dtype); it is read ``chunk_rows`` rows at a time and
    converted to float32. ``rows`` restricts the search to those row indices; ``exclude`` is a
    boolean mask over all rows of ``matrix`` marking rows to skip. Rows with zero norm have no
    cosine and are skipped. Ties are broken by the lower row index, so results are deterministic.
    Returns ``(row indices int64, cosines float32)``.

    Parameters
    ----------
    matrix : ndarray (n, d)
        The vectors searched (e.g. an fp16 store layer memmap, a GloVe table).
    query : ndarray (d,)
        The query vector (any shape with ``d`` values is flattened); zero or non-finite: InputError.
    k : how many rows to return, at least 1.
    rows : ndarray (m,) of int, optional
        Row indices of ``matrix`` to search; ``None``: all ``n`` rows.
    exclude : ndarray (n,) of bool, optional
        True for the rows of ``matrix`` to skip.
    chunk_rows : rows read and compared at a time.

    Returns
    -------
    ids : ndarray (k',) of int64
        Row indices of ``matrix``, best first; ``k' = min(k, rows that qualify)``.
    cosines : ndarray (k',), float32
        Their cosine similarities to ``query``.
    """
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != matrix.shape[1]:
        raise InputError(f"query has dimension {q.shape[0]}, the vectors have {matrix.shape[1]}")
    q_norm = float(np.linalg.norm(q))
    if not np.isfinite(q_norm) or q_norm == 0:
        raise InputError("the query vector is zero (or not finite): cosine similarity is undefined")
    q = q / q_norm
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    if exclude is not None and exclude.shape != (matrix.shape[0],):
        raise InputError(f"exclude must be a boolean mask of length {matrix.shape[0]}, got shape {exclude.shape}")
    n = matrix.shape[0] if rows is None else len(rows)
    best_ids = np.empty(0, dtype=np.int64)
    best_sims = np.empty(0, dtype=np.float32)
    for start in range(0, n, chunk_rows):
        stop = min(start + chunk_rows, n)
        if rows is None:
            ids = np.arange(start, stop, dtype=np.int64)
            block = np.asarray(matrix[start:stop], dtype=np.float32)
        else:
            ids = np.asarray(rows[start:stop], dtype=np.int64)
            block = np.asarray(matrix[ids], dtype=np.float32)
        norms = np.linalg.norm(block, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            sims = (block @ q) / norms
        valid = norms > 0
        if exclude is not None:
            valid &= ~exclude[ids]
        ids, sims = ids[valid], sims[valid].astype(np.float32)
        if len(sims) > k:
            kth = np.partition(sims, len(sims) - k)[len(sims) - k]
            keep = sims >= kth  # keeps every tie with the k-th value
            ids, sims = ids[keep], sims[keep]
        best_ids = np.concatenate([best_ids, ids])
        best_sims = np.concatenate([best_sims, sims])
        order = np.lexsort((best_ids, -best_sims))[:k]
        best_ids, best_sims = best_ids[order], best_sims[order]
    return best_ids, best_sims


# -- word types ---------------------------------------------------------------------------------


def type_neighbors(vectors: Vectors, word: str, k: int = 10, *, chunk_rows: int = 65536) -> pd.DataFrame:
    """The ``k`` vocabulary words closest to ``word`` by cosine (``rank, word, cosine``), excluding itself."""
    row = vectors.index_of(word)
    if row is None:
        raise UnknownWordError(f"{word!r} is not in the vocabulary of {vectors.name} ({len(vectors)} words)")
    exclude = np.zeros(len(vectors), dtype=bool)
    exclude[row] = True
    ids, sims = cosine_topk(vectors.matrix, vectors.matrix[row], k, exclude=exclude, chunk_rows=chunk_rows)
    return pd.DataFrame({"rank": np.arange(1, len(ids) + 1), "word": [vectors.vocab[i] for i in ids], "cosine": sims})


# -- word occurrences in a store ----------------------------------------------------------------


def _sentence_rows(tokens: pd.DataFrame, row: int) -> np.ndarray:
    """Row indices of the sentence holding ``row``, in token order (no contiguity assumed)."""
    sid = tokens["sentence_id"].to_numpy()
    rows = np.flatnonzero(sid == sid[row])
    return rows[np.argsort(tokens["position"].to_numpy()[rows], kind="stable")]


def mark(words: Sequence[str], position: int) -> str:
    """The sentence as text with the word at ``position`` in brackets: ``a fine [play] .``"""
    return " ".join(f"[{w}]" if i == position else w for i, w in enumerate(words))


def sentence_text(tokens: pd.DataFrame, row: int) -> str:
    """The sentence of store row ``row`` rebuilt from the token table, its word marked."""
    rows = _sentence_rows(tokens, row)
    words = tokens["word"].to_numpy()[rows]
    return mark(list(words), int(np.flatnonzero(rows == row)[0]))


def _gloss_of(keys: str, gloss: Gloss) -> str:
    out = []
    for key in keys.split():
        try:
            out.append(gloss(key))
        except LookupError:
            out.append(f"(no gloss for {key})")
    return " | ".join(out)


def _layer_index(layer: int | str, names: Sequence[str] | None) -> int:
    if isinstance(layer, (int, np.integer)):
        return int(layer)
    if names is not None and str(layer) in list(names):
        return list(names).index(str(layer))
    if str(layer).isdigit():
        return int(layer)
    raise InputError(f"unknown layer {layer!r}; expected an index or one of {list(names or [])}")


def encoded_layer(encoded: np.ndarray, layer: int | str, names: Sequence[str]) -> np.ndarray:
    """One layer of an encoder's ``(n_layers, n_tokens, dim)`` output; a half name (``"1f"``) gives its columns.

    Parameters
    ----------
    encoded : ndarray (n_layers, n_tokens, dim)
        All layers of one sentence, as an encoder's ``encode`` returns them.
    layer : a layer index, a layer name of ``names`` or a half name (``"1f"``, ``"2b"``).
    names : sequence of str (n_layers,)
        The encoder's layer names.

    Returns
    -------
    ndarray (n_tokens, dim)
        ``(n_tokens, dim // 2)`` for a half name: ``[:dim // 2]`` forward, ``[dim // 2:]`` backward. A view of
        ``encoded``, same dtype.
    """
    if is_half(layer):
        i, columns = resolve(str(layer), names, encoded.shape[-1])
        return encoded[i][:, columns]
    return encoded[_layer_index(layer, names)]


def _store_layer_names(store: StoreLike) -> list[str] | None:
    names = getattr(store, "layer_names", None)
    if names is None:
        names = (getattr(store, "manifest", None) or {}).get("layer_names")
    return list(names) if names is not None else None


def normalise_text(words: Sequence[str]) -> str:
    """A sentence's text with tokenisation undone, for spotting copies of one sentence.

    Lower-cased; underscores (multiword tokens such as ``Chico_Ruiz``) and all whitespace removed, so
    ``Chico_Ruiz`` = ``Chico Ruiz`` and ``Alusik 's`` = ``Alusik's``; quote marks unified (``` `` ```,
    ``''``, curly quotes -> ``''``, ``'``).
    """
    text = "".join(words).lower().replace("_", "").translate(_QUOTES).replace('"', "''")
    return "".join(text.split())


def _keys(tokens: pd.DataFrame, rows: np.ndarray | None = None) -> np.ndarray:
    """``doc_id \\x1f sentence_id`` per token (of ``rows``): one string per sentence identity."""
    t = tokens if rows is None else tokens.iloc[rows]
    return (t["doc_id"].astype(str) + "\x1f" + t["sentence_id"].astype(str)).to_numpy()


def _sentence_texts(tokens: pd.DataFrame, keep: np.ndarray) -> dict[SentenceKey, tuple[str, set[int]]]:
    """Normalised text of every sentence holding a row of the boolean mask ``keep``, with the character
    offsets in it where a token, or a part of a multiword token (``Garson`` in ``Garson_Kanin``), ends."""
    keys = _keys(tokens)
    chosen = np.isin(keys, np.unique(keys[keep]))
    part = pd.DataFrame({"key": keys[chosen], "position": tokens["position"].to_numpy()[chosen]})
    part["word"] = tokens["word"].astype(str).to_numpy()[chosen]
    out = {}
    for key, group in part.sort_values(["key", "position"], kind="stable").groupby("key", sort=False):
        doc, sid = str(key).split("\x1f", 1)
        parts = [normalise_text([part]) for w in group["word"] for part in w.split("_")]
        out[(doc, sid)] = ("".join(parts), set(np.cumsum([len(p) for p in parts]).tolist()))
    return out


def copies_of(tokens: pd.DataFrame, words: Sequence[str], *, cut: bool = True) -> set[SentenceKey]:
    """``(doc_id, sentence_id)`` of the store sentences that are copies of ``words`` (rule in the module
    docstring; with ``cut=False`` only equal normalised texts)."""
    query = normalise_text(words)
    head = query.rstrip(_FINAL_PUNCT)  # a typed cut copy may end with a full stop where the original goes on
    cut = cut and len(words) >= MIN_CUT_WORDS and len(head) > 0
    first = normalise_text(words[:1])
    starts = np.flatnonzero(tokens["position"].to_numpy() == (int(tokens["position"].min()) if len(tokens) else 0))
    # a copy's first token starts with the query's first word, or is merged with what follows ("Chico_Ruiz")
    firsts = [normalise_text([w]) for w in tokens["word"].astype(str).to_numpy()[starts]]
    keep = np.zeros(len(tokens), dtype=bool)
    keep[starts[[f.startswith(first) or first.startswith(f) for f in firsts]]] = True
    if not keep.any():
        return set()
    return {
        key
        for key, (text, ends) in _sentence_texts(tokens, keep).items()
        if text == query or (cut and text.startswith(head) and len(head) in ends)
    }


def occurrence_neighbors(
    store: StoreLike,
    query: int | np.ndarray,
    layer: int | str,
    k: int = 5,
    rows: np.ndarray | None = None,
    *,
    exclude_own_sentence: bool = True,
    exclude_sentences: Iterable[str | SentenceKey] = (),
    gloss: Gloss | None = None,
    chunk_rows: int = 8192,
) -> pd.DataFrame:
    """The ``k`` token occurrences in ``store`` closest to ``query`` at ``layer``, by cosine.

    ``query`` is a row of the store or a vector of the layer's width. With a row and
    ``exclude_own_sentence`` (default), the query's own sentence (same document and sentence id) and
    the store's copies of it (same normalised text, see the module docstring) are skipped: they share
    its context and would crowd the list. ``exclude_sentences`` skips more sentences, given as
    ``(doc_id, sentence_id)`` or a bare sentence id (every document). ``rows`` restricts the search
    (e.g. ``store.rows(lemma="play")``). ``gloss(key) -> str``, when given, adds a ``gloss`` column.
    Columns: ``rank, cosine, word, lemma, sense, [gloss], sentence, doc_id, sentence_id, row``;
    ``sentence`` has the neighbour word in brackets.

    Parameters
    ----------
    store : the store searched.
    query : int or ndarray (dim,)
        A store row, or a vector of the layer's width (``dim // 2`` for a half name).
    layer : a layer index, a layer name of the store or a half name (``"1f"``).
    k : how many neighbours.
    rows : ndarray (m,) of int, optional
        Store rows to search; ``None``: every row.
    exclude_own_sentence, exclude_sentences, gloss, chunk_rows : as above (``chunk_rows``: rows read at a time).

    Returns
    -------
    pandas.DataFrame
        ``min(k, rows that qualify)`` rows, nearest first, with the columns above (``row``: int64 store row).
    """
    tokens = store.tokens
    matrix = store.layer(layer if is_half(layer) else _layer_index(layer, _store_layer_names(store)))
    if matrix.shape[0] != len(tokens):
        raise InputError(f"store layer {layer!r} has {matrix.shape[0]} rows but the token table has {len(tokens)}")
    pairs: set[SentenceKey] = set()
    bare: set[str] = set()
    for item in exclude_sentences:
        if isinstance(item, str):
            bare.add(item)
        else:
            pairs.add((str(item[0]), str(item[1])))
    if isinstance(query, (int, np.integer)):
        if not 0 <= int(query) < len(tokens):
            raise IndexError(f"query row {query} is outside the store's {len(tokens)} tokens")
        vector = np.asarray(matrix[int(query)], dtype=np.float32)
        if exclude_own_sentence:
            own = (str(tokens["doc_id"].iat[int(query)]), str(tokens["sentence_id"].iat[int(query)]))
            pairs.add(own)
            words = tokens["word"].to_numpy()[_sentence_rows(tokens, int(query))].astype(str).tolist()
            pairs |= copies_of(tokens, words, cut=False)
    else:
        vector = np.asarray(query, dtype=np.float32)
    exclude = None
    if pairs or bare:
        exclude = np.isin(_keys(tokens), ["\x1f".join(p) for p in pairs])
        if bare:
            exclude |= np.isin(tokens["sentence_id"].astype(str).to_numpy(), list(bare))
    ids, sims = cosine_topk(matrix, vector, k, rows=rows, exclude=exclude, chunk_rows=chunk_rows)
    hits = tokens.iloc[ids]
    out = pd.DataFrame(
        {
            "rank": np.arange(1, len(ids) + 1),
            "cosine": sims,
            "word": hits["word"].to_numpy(),
            "lemma": hits["lemma"].to_numpy(),
            "sense": hits["sense"].to_numpy(),
        }
    )
    if gloss is not None:
        out["gloss"] = [_gloss_of(s, gloss) for s in out["sense"]]
    out["sentence"] = [sentence_text(tokens, int(i)) for i in ids]
    out["doc_id"] = hits["doc_id"].to_numpy()
    out["sentence_id"] = hits["sentence_id"].to_numpy()
    out["row"] = ids
    return out


def _encode(encoder: Any, words: list[str]) -> np.ndarray:
    """All layers of one sentence from the encoder: (n_layers, len(words), dim) float32."""
    out = np.asarray(encoder.encode([words])[0], dtype=np.float32)
    if out.ndim != 3 or out.shape[1] != len(words):
        raise InputError(
            f"encoder {getattr(encoder, 'name', encoder)!r} returned shape {out.shape} for {len(words)} words"
        )
    return out


def holds_word(found: str, word: str) -> bool:
    """Whether the token ``found`` may be an occurrence of ``word``, ignoring case: equal, or sharing all but
    the word's last letter (at least 3 letters): ``play`` -> ``plays``, ``played``; ``stop`` -> ``stopped``;
    ``bank`` -> ``banks``. Irregular forms (``ran`` for ``run``) must be asked for as they are written."""
    f, w = found.lower(), word.lower()
    return f == w or (len(w) >= 3 and f.startswith(w[: max(3, len(w) - 1)]))


def word_positions(words: Sequence[str], word: str) -> list[int]:
    """0-based indices of ``word`` in ``words``: its exact forms (any case), else its inflected forms
    (:func:`holds_word`); :func:`locate` takes the first."""
    exact = [i for i, w in enumerate(words) if w.lower() == word.lower()]
    return exact or [i for i, w in enumerate(words) if holds_word(w, word)]


def locate(words: Sequence[str], position: int | None = None, word: str | None = None) -> int:
    """Index of the query in ``words``: ``position`` (checked to hold ``word`` when both are given), or the
    first occurrence of ``word`` (any case, inflected forms as :func:`holds_word`)."""
    if position is None:
        if word is None:
            raise InputError("give the query's position in the sentence (or the word to find)")
        found = word_positions(words, word)
        if not found:
            raise InputError(f"{word!r} does not occur in the sentence {' '.join(words)!r}")
        return found[0]
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
        raise InputError(f"position must be a 0-based word index, got {position!r}")
    if not 0 <= position < len(words):
        raise InputError(
            f"position {position} is outside the sentence {' '.join(words)!r} of {len(words)} words (0-based)"
        )
    if word is not None and not holds_word(words[position], word):
        raise InputError(
            f"position {position} of the sentence {' '.join(words)!r} holds {words[position]!r}, not {word!r} "
            "(positions are 0-based word indices; or give the position as None to find the word)"
        )
    return int(position)


def neighbors(
    word: str | None = None,
    *,
    vectors: Vectors | None = None,
    sentence: str | Sequence[str] | None = None,
    position: int | None = None,
    layer: int | str | None = None,
    store: StoreLike | None = None,
    encoder: Any = None,
    k: int | None = None,
    rows: np.ndarray | None = None,
    gloss: Gloss | None = None,
    exclude_same_sentence: bool = True,
) -> pd.DataFrame:
    """Nearest neighbours, for a word type or for a word in context.

    - ``neighbors("play", vectors=v)``: the word's type neighbours in a static table (k=10).
    - ``neighbors(sentence=..., position=i, layer=l, store=s, encoder=e)``: embeds the sentence
      (a string is tokenized by :func:`probing.tokenize.tokenize`) with the encoder and lists the
      nearest occurrences in the store at that layer (k=5); ``word`` may replace ``position`` (its
      first occurrence), and with both the position is checked to hold the word. Copies of the query
      sentence in the store are skipped (``exclude_same_sentence``; rule in the module docstring).

    Parameters
    ----------
    word : the query word (a type; in context, it may stand for ``position``).
    vectors : the static table of type neighbours.
    sentence : str or sequence of str
        The query's sentence (in context): a string or its words.
    position : 0-based index of the query word in ``sentence``.
    layer, store, encoder : the layer (index, name or half name), the store searched and the encoder that
        embeds ``sentence`` (its ``encode`` gives ``(n_layers, n_words, dim)`` per sentence).
    k : how many neighbours (default 10 for types, 5 in context).
    rows : ndarray (m,) of int, optional
        Store rows to search in context (e.g. ``store.rows(lemma="play")``); ignored for type neighbours.
    gloss, exclude_same_sentence : a ``gloss(key) -> str`` column, and skipping copies of ``sentence``.

    Returns
    -------
    pandas.DataFrame
        Type neighbours ``rank, word, cosine`` or occurrence neighbours (:func:`occurrence_neighbors`).
    """
    if sentence is None:
        if word is None or vectors is None:
            raise InputError("give word= and vectors= (type neighbours), or sentence=, layer=, store=, encoder=")
        return type_neighbors(vectors, word, k=k or 10)
    if store is None or encoder is None or layer is None:
        raise InputError("neighbours in context need store=, encoder= and layer=")
    words = as_words(sentence)
    pos = locate(words, position, word)
    vector = encoded_layer(_encode(encoder, words), layer, list(encoder.layer_names))[pos]
    skip = copies_of(store.tokens, words) if exclude_same_sentence else set()
    return occurrence_neighbors(store, vector, layer, k=k or 5, rows=rows, exclude_sentences=skip, gloss=gloss)


def table4(
    vectors: Vectors | None,
    store: StoreLike,
    encoder: Any,
    word: str = "play",
    sources: Sequence[tuple[str | Sequence[str], int | None]] | None = None,
    layers: Sequence[int | str] | None = None,
    *,
    k_glove: int = 10,
    rows: np.ndarray | None = None,
    gloss: Gloss | None = None,
) -> pd.DataFrame:
    """Peters et al. (2018) Table 4: GloVe's type neighbours vs. the biLM's neighbours in context.

    First row: ``source="GloVe"``, the ``k_glove`` type neighbours of ``word``. Then, for each
    source ``(sentence, position)`` and each layer, the nearest occurrence in ``store`` (SemCor in
    the paper) with its sentence, sense and gloss; copies of the source sentence in the store are
    never the answer (module docstring). Each position must hold ``word`` (or an inflected form; an
    error names the sentence, position and word otherwise); ``None`` finds the word's first
    occurrence. A string sentence is tokenized by :func:`probing.tokenize.tokenize`. ``sources``
    defaults to the paper's two sentences when ``word == "play"``; ``layers`` defaults to all of the
    encoder's layers. ``rows`` restricts the search, e.g. to the word's own occurrences. Columns:
    ``source, layer, nearest, cosine, sense, gloss, sentence_id``.

    Parameters
    ----------
    vectors : the static table of the GloVe row; ``None``: no GloVe row.
    store, encoder : the store searched and the encoder that embeds the sources (its layer names name ``layers``).
    word : the word of every source.
    sources : sequence of (str or sequence of str, int or None)
        ``(sentence, position)`` pairs.
    layers : sequence of int or str
        Layer indices, names or half names (``"1f"``).
    k_glove : how many GloVe type neighbours.
    rows : ndarray (m,) of int, optional
        Store rows to search; ``None``: every row.
    gloss : ``gloss(key) -> str`` for the ``gloss`` column (empty without it).

    Returns
    -------
    pandas.DataFrame
        The GloVe row (when ``vectors`` is given), then one row per source and layer, in that order.
    """
    if sources is None:
        if word != "play":
            raise InputError("sources= is required unless word == 'play' (the paper's own sentences)")
        sources = PAPER_TABLE4_SOURCES
    layer_names = list(encoder.layer_names)
    layers = list(layer_names if layers is None else layers)
    records = []
    if vectors is not None:
        glove = type_neighbors(vectors, word, k=k_glove)
        records.append(
            {
                "source": "GloVe",
                "layer": "glove",
                "nearest": ", ".join(glove["word"]),
                "cosine": np.nan,
                "sense": "",
                "gloss": "",
                "sentence_id": "",
            }
        )
    for sentence, position in sources:
        words = as_words(sentence, "table4 source")
        pos = locate(words, position, word)
        encoded = _encode(encoder, words)
        skip = copies_of(store.tokens, words)
        for layer in layers:
            vector = encoded_layer(encoded, layer, layer_names)[pos]
            hit = occurrence_neighbors(store, vector, layer, k=1, rows=rows, exclude_sentences=skip, gloss=gloss)
            if hit.empty:
                raise InputError(f"no occurrence to compare with at layer {layer!r} (empty store or rows?)")
            top = hit.iloc[0]
            records.append(
                {
                    "source": mark(words, pos),
                    "layer": str(layer),
                    "nearest": top["sentence"],
                    "cosine": float(top["cosine"]),
                    "sense": top["sense"],
                    "gloss": top.get("gloss", ""),
                    "sentence_id": top["sentence_id"],
                }
            )
    return pd.DataFrame.from_records(
        records, columns=["source", "layer", "nearest", "cosine", "sense", "gloss", "sentence_id"]
    )


def format_table(df: pd.DataFrame, max_colwidth: int = 70, float_format: str = "{:.3f}") -> str:
    """Plain-text rendering for a terminal: left-aligned text, long cells cut with an ellipsis."""

    def cell(value: Any) -> str:
        text = float_format.format(value) if isinstance(value, (float, np.floating)) else str(value)
        return text if len(text) <= max_colwidth else text[: max_colwidth - 1] + "…"

    columns = [str(c) for c in df.columns]
    body = [[cell(v) for v in row] for row in df.itertuples(index=False)]
    widths = [max([len(c)] + [len(r[j]) for r in body]) for j, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in body]
    return "\n".join(lines)
