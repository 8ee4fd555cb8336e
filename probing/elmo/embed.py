"""``probing embed``: a text file in, every sentence's ELMo vectors out, in the HDF5 layout of the
former ``allennlp elmo`` command, so that AllenNLP-era scripts read the file unchanged.

Layout: one float32 dataset per input line, named by its 0-based index (``"0"``, ``"1"``, ...), of
shape ``(num_layers, n_tokens, 2 * projection_dim)`` for ``layers="all"`` or ``(n_tokens, dim)`` for
``"top"`` and ``"average"`` (the mean of all layers, the token layer included, as AllenNLP
averaged); plus ``sentence_to_index``, shape ``(1,)``, one UTF-8 string holding the JSON object
``{stripped line: "index"}`` (a repeated line keeps its last index, as in AllenNLP). The root's attribute
``provenance`` (a JSON object, which AllenNLP-era readers do not see) records what made the file: probing's
version, the model's source, layers, state policy and precision, and what the caller adds (``probing embed``:
the weights file's path, size and sha256).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import h5py
import numpy as np
from tqdm.auto import tqdm

from .._io import atomic_path, guarded_file, remove_stale_temps
from ..corpora._files import numbered_lines, require_file
from ..corpora.base import CorpusFormatError
from ..corpora.text import line_tokens
from ..errors import InputError, ProbingError, check_count
from .elmo import Elmo

LAYER_MODES = ("all", "top", "average")


class EmbedInputError(ProbingError, ValueError):
    """The input file cannot be embedded (a blank line, bad UTF-8); the message names file and line."""


def read_sentences(path: str | Path) -> list[str]:
    """The stripped lines of a UTF-8 text file, refusing blank lines (all of them named at once).

    The text rules of ``probing.corpora`` apply: a leading BOM is dropped; a NUL byte, invalid UTF-8, a
    line over 1 MiB or over ``MAX_TOKENS`` (1,000) tokens is refused with its line number.
    """
    path = require_file(path, "embed input")
    sentences: list[str] = []
    blank: list[int] = []
    try:
        for lineno, raw in numbered_lines(path):
            if not line_tokens(path, lineno, raw):
                blank.append(lineno)
            sentences.append(raw.strip())
    except CorpusFormatError as e:
        raise EmbedInputError(str(e)) from None
    if blank:
        more = f" (and {len(blank) - 1} more: lines {_first(blank[1:])})" if len(blank) > 1 else ""
        raise EmbedInputError(
            f"{path}, line {blank[0]}: blank line{more}; embed expects one "
            "whitespace-tokenized sentence per line, remove blank lines first"
        )
    return sentences


def embed_file(
    model: Elmo,
    input_path: str | Path,
    output_path: str | Path,
    *,
    batch_size: int = 64,
    layers: str = "all",
    progress: bool = True,
    provenance: Mapping[str, object] | None = None,
) -> Path:
    """Embed every line of ``input_path`` (one whitespace-tokenized sentence per line) into the HDF5
    file ``output_path``; returns its path.

    The whole input is checked before any work. Stateless models take batches of similar length
    (fast; the vectors do not depend on batching); stateful models start from zero state and take
    batches of ``batch_size`` lines in input order, as the AllenNLP command did. Each batch is written
    as soon as it is computed, to a temporary file renamed onto ``output_path`` at the end: an error
    or an interrupt leaves no partial file (and one left by a killed run is removed by the next); a full disk
    or a file-size limit is one WriteError naming the output (HDF5 writes through a guard that stops at
    the first failed write).
    The output may not be the input (``EmbedInputError``). ``provenance`` adds JSON-able fields to the
    file's ``provenance`` attribute (see the module docstring).
    """
    from .. import __version__

    if layers not in LAYER_MODES:
        raise InputError(f"layers must be one of {', '.join(LAYER_MODES)}, got {layers!r}")
    check_count(batch_size, "batch_size")
    if Path(output_path).resolve() == Path(input_path).resolve() or (
        Path(output_path).exists() and Path(output_path).samefile(input_path)
    ):
        raise EmbedInputError(f"--output {output_path} is the input file {input_path}: it would be replaced")
    sentences = read_sentences(input_path)
    tokens = [s.split() for s in sentences]
    output_path = Path(output_path)
    remove_stale_temps(output_path.parent.resolve())  # temp files of killed embeds (their pid is gone)
    if model.stateful:
        model.reset_states()
    bar = tqdm(total=sum(map(len, tokens)), unit="tok", desc=f"embed {Path(input_path).name}", disable=not progress)
    with atomic_path(output_path) as tmp, guarded_file(tmp) as sink, h5py.File(sink, "w") as out:
        for batch in _batches(tokens, batch_size, in_order=model.stateful):
            vectors = model.embed([tokens[i] for i in batch], batch_size=len(batch))
            for i, v in zip(batch, vectors):
                out.create_dataset(str(i), data=_select(v, layers))
                bar.update(v.shape[1])
        index = out.create_dataset("sentence_to_index", (1,), dtype=h5py.string_dtype("utf-8"))
        index[0] = json.dumps({s: str(i) for i, s in enumerate(sentences)})
        out.attrs["provenance"] = json.dumps(
            {
                "probing": __version__,
                "model": model.source,
                "layers": layers,
                "stateful": model.stateful,
                "precision": model.precision,
                **(provenance or {}),
            }
        )
    bar.close()
    return output_path


def _batches(tokens: Sequence[Sequence[str]], size: int, in_order: bool) -> Iterator[list[int]]:
    order = range(len(tokens)) if in_order else sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
    order = list(order)
    for start in range(0, len(order), size):
        yield order[start : start + size]


def _select(v: np.ndarray, layers: str) -> np.ndarray:
    if layers == "top":
        return v[-1]
    if layers == "average":
        return v.mean(axis=0, dtype=np.float32)
    return v


def _first(lines: list[int], shown: int = 5) -> str:
    head = ", ".join(map(str, lines[:shown]))
    return head + (", ..." if len(lines) > shown else "")
