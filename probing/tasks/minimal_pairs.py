"""Minimal pairs as a task kind (issue 29): does the encoder's language model give the grammatical sentence
of each pair the higher probability?

``kind = "minimal-pairs"`` with ``data = "blimp"`` (``$PROBING_DATA/blimp/BLiMP.zip`` or ``probing data get
blimp``) or ``"pairs:PATH"`` (a CSV/JSONL with ``good``, ``bad``, optional ``group``; relative to the
experiment file), ``paradigms`` (BLiMP UIDs or your groups to keep; default all), ``max_pairs`` (the first N
pairs of each group, for quick runs) and ``batch_size``. The kind reads the encoder's model, not activation
stores: the encoder must be an ELMo from a registered checkpoint with an LM head (``model = "default"``,
the bundled model, or an official one with ``probing download NAME --with-softmax``).

A pair is scored on the sentence totals of :func:`probing.lm.sentence_scores` (words plus the boundary
prediction; ``both`` = the mean of the two directions' totals) and aggregated as the BLiMP authors do
(:mod:`probing.lm.pairs`). Rows: ``layer`` = ``forward``, ``backward``, ``both``; ``split`` = the group:
``overall`` (the share of all pairs), ``mean-over-groups`` (the mean over paradigms, the BLiMP authors' overall:
the same for BLiMP's equal-sized paradigms), ``phenomenon:<name>`` (BLiMP: the mean over its paradigms) and
``paradigm:<group>``; metrics ``accuracy`` (the headline), ``coverage`` (pairs whose differing words are all
in the head's vocabulary) and ``accuracy_covered`` (left out where no pair is covered), each with a 95 %
bootstrap CI over pairs. For BLiMP, the first encoder's job adds the authors' models and human agreement
over the same paradigms (encoder ``reference``, layers ``5-gram``, ``lstm``, ``txl``, ``gpt2``, ``human``;
no CI).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.results import make_row
from probing.results.metrics import MINIMAL_PAIRS_METRICS
from probing.tasks.common import Job, TaskError, TaskKind, TaskOutput

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing._toml import Table

KIND = "minimal-pairs"
REFERENCE_ENCODER = "reference"
SCORE_VERSION = 1  # bump when the scores change for a reason probing.lm's code does not show


@dataclass(frozen=True)
class MinimalPairsOptions:
    """The kind's own keys: ``data`` (``"blimp"`` or ``"pairs:PATH"``, the path made absolute), ``paradigms``
    (groups to keep; empty: all), ``max_pairs`` (per group; None: all), ``batch_size`` (sentences per biLM batch)."""

    data: str = "blimp"
    paradigms: tuple[str, ...] = ()
    max_pairs: int | None = None
    batch_size: int = 64


def group_split(level: str, group: str) -> str:
    """The ``split`` of a row: ``overall``, ``mean-over-groups``, ``phenomenon:<name>`` or ``paradigm:<group>``."""
    from probing.lm.pairs import MEAN_OVER_GROUPS, OVERALL

    return group if level in (OVERALL, MEAN_OVER_GROUPS) else f"{level}:{group}"


def _parse(t: Table) -> dict[str, Any]:
    data = t.string("data", "blimp")
    if data != "blimp":
        if not data.startswith("pairs:") or not data.removeprefix("pairs:"):
            raise t.fail("data", "'blimp' or 'pairs:PATH' (a CSV or JSONL file with good, bad[, group])", data)
        path = Path(data.removeprefix("pairs:")).expanduser()
        path = path if path.is_absolute() else (t.base / path)
        if not path.is_file():
            raise t.fail("data", "'pairs:PATH' naming an existing file (relative to the experiment file)", data)
        data = f"pairs:{path.resolve()}"
    paradigms = t.string_list("paradigms", ())
    if len(set(paradigms)) != len(paradigms):
        raise t.fail("paradigms", "distinct names", list(paradigms))
    opts = MinimalPairsOptions(
        data=data,
        paradigms=tuple(paradigms),
        max_pairs=t.integer("max_pairs", None, minimum=1),
        batch_size=t.integer("batch_size", 64, minimum=1),
    )
    return {**asdict(opts), "paradigms": list(opts.paradigms)}


def _options(options: Mapping[str, Any]) -> MinimalPairsOptions:
    return MinimalPairsOptions(**{**options, "paradigms": tuple(options.get("paradigms", ()))})


def _checkpoint(task: str, encoder: Any) -> str:
    """The registered checkpoint whose LM head ``encoder`` uses; TaskError naming the encoder when it has none."""
    from probing.elmo import hub
    from probing.encoders import lm_checkpoint

    checkpoint = lm_checkpoint(encoder)
    if checkpoint is None or not hub.has_head(checkpoint):
        what = f"checkpoint {checkpoint!r}" if checkpoint else getattr(encoder, "source", type(encoder).__name__)
        raise TaskError(
            f"task {task!r}: encoder {encoder.name!r} ({type(encoder).__name__}, {what}) has no LM head, so it "
            f"cannot score sentences: a {KIND} task needs an ELMo encoder of a registered checkpoint with a head "
            '(model = "default", the bundled model, ships one; official ones: probing download NAME --with-softmax)'
        )
    return checkpoint


def _data_path(data: str) -> Path:
    from probing.lm.pairs import find_blimp

    return find_blimp() if data == "blimp" else Path(data.removeprefix("pairs:"))


def _identity(task: str, encoder: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """Everything a job reads: the biLM's fingerprint, the head (the bundled head file's sha256, or the
    official softmax's URLs), the data file's sha256 and the scoring code (``probing.lm``)."""
    from probing._io import sha256_file
    from probing.elmo import hub
    from probing.identity import code_identity

    checkpoint = _checkpoint(task, encoder)
    entry = hub.get(checkpoint)
    if entry.head is not None:
        head: Any = {"file": sha256_file(hub.resolve_head(checkpoint)[0])}
    else:
        head = {"softmax": entry.softmax_url, "vocab": entry.vocab_url}
    data = _data_path(_options(options).data)
    return {
        "model": encoder.fingerprint,
        "checkpoint": checkpoint,
        "head": head,
        "data": sha256_file(data),
        "code": code_identity(SCORE_VERSION, ["probing.lm"]),
    }


def select_pairs(task: str, data: str, paradigms: tuple[str, ...], max_pairs: int | None) -> tuple[str, pd.DataFrame]:
    """(dataset name, pairs) of ``data``: only the groups ``paradigms`` (when given, in the data's order) and
    the first ``max_pairs`` of each group."""
    from probing.lm.pairs import load_pairs

    dataset, pairs = load_pairs(data)
    if paradigms:
        known = list(dict.fromkeys(pairs.group))
        unknown = [p for p in paradigms if p not in known]
        if unknown:
            raise TaskError(f"task {task!r}: {data} has no group(s) {unknown}; its groups: {', '.join(known)}")
        pairs = pairs[pairs.group.isin(paradigms)]
    if max_pairs is not None:
        pairs = pairs.groupby("group", sort=False).head(max_pairs)
    return dataset, pairs.reset_index(drop=True)


def _rows(task: str, table: pd.DataFrame, dataset: str, encoder: str, seed: int) -> list[dict]:
    """Result rows from :func:`probing.lm.pairs.summarize`'s (or ``reference_rows``') table; a value that is
    undefined (accuracy on covered pairs where none is covered) gives no row."""
    out = []
    for r in table.itertuples(index=False):
        if not np.isfinite(r.value):
            continue
        split = group_split(str(r.level), str(r.group))
        out.append(
            make_row(task, dataset, split, encoder, str(r.layer), str(r.metric), r.value, r.ci_low, r.ci_high, seed)
        )
    return out


def _run(job: Job) -> TaskOutput:
    from probing.lm.pairs import pair_outcomes, reference_rows, summarize
    from probing.lm.score import load_model

    opts = _options(job.options)
    _checkpoint(job.task, job.model)
    t0 = time.time()
    dataset, pairs = select_pairs(job.task, opts.data, opts.paradigms, opts.max_pairs)
    job.progress(f"{job.task} {job.encoder}: {len(pairs)} pairs")
    elmo, head = load_model(job.model.model)
    outcomes = pair_outcomes(pairs, elmo, head, batch_size=opts.batch_size)
    seed = job.settings.seeds[0]
    table = summarize(outcomes, dataset=dataset, encoder=job.encoder, n_boot=job.settings.n_boot, seed=seed)
    out = TaskOutput(rows=_rows(job.task, table, dataset, job.encoder, seed))
    if opts.data == "blimp" and job.with_baselines:
        refs = reference_rows(paradigms=list(dict.fromkeys(pairs.group)))
        out.rows += _rows(job.task, refs, dataset, REFERENCE_ENCODER, seed)
    out.probes.append(
        {
            "task": job.task,
            "encoder": job.encoder,
            "kind": KIND,
            "data": opts.data,
            "n_pairs": len(pairs),
            "n_groups": int(pairs.group.nunique()),
            "n_sentences": len(set(pairs.good) | set(pairs.bad)),
            "head": head.source,
            "seconds": round(time.time() - t0, 3),
        }
    )
    return out


def _figures(results: pd.DataFrame, task: str, dataset: str, split: str) -> dict[str, Figure]:
    """The accuracy-by-group figure of a task (:func:`probing.figures.grammar.minimal_pairs_figure`), drawn
    once, for its ``overall`` group."""
    if split != "overall":
        return {}
    from probing.figures.grammar import minimal_pairs_figure

    return {"minimal_pairs": minimal_pairs_figure(results, task, dataset=dataset)}


MINIMAL_PAIRS = TaskKind(
    KIND,
    run=_run,
    metrics=MINIMAL_PAIRS_METRICS,
    headline="accuracy",
    parse=_parse,
    options=MinimalPairsOptions,
    allows_dev=False,
    figures=_figures,
    layer_figures=False,
    model_identity=_identity,
)
