"""SyntaxGym's targeted syntactic evaluation as a task kind (issue 40): is the encoder's language model surprised
where a construction says it should be?

``kind = "syntaxgym"`` with ``data = "syntaxgym"`` (the 34 suites of Hu et al. 2020, bundled, MIT),
``"syntaxgym:<suite>"`` (one of them) or ``"suite:PATH"`` (your own SyntaxGym JSON file, relative to the
experiment file); ``suites`` (names to keep; default all), ``max_items`` (the first N items of each suite,
for quick runs) and ``batch_size``. Like ``minimal-pairs`` the kind reads the encoder's model, not stores:
the encoder must be an ELMo of a registered checkpoint with an LM head (``model = "default"`` ships one).

Region surprisals, predictions and aggregation are :mod:`probing.lm.syntaxgym`'s. Rows: ``layer`` = the
direction (``forward``, ``backward``, ``both``: the predictions on the mean of the two directions' region
surprisals), ``split`` = ``suite:<name>``, ``circuit:<name>`` (the authors' six circuits, each the mean over
its suites) or ``overall`` (the SG score: the mean over suites), metric ``accuracy`` (the share of items
whose every prediction holds) with a 95 % bootstrap CI over items; ``fgd-embed3``, ``fgd-embed4`` and
``nn-nv-rpl`` get suite rows but, as in the authors' analysis, count in no circuit and not in ``overall``.

**What a backward row means.** The backward LM scores a region given the words *after* it. The suites'
predictions are written for left-to-right reading: the manipulation precedes the critical region. In 32 of
the 34 suites (all but ``center_embed`` and ``center_embed_mod``, whose predictions sum the verb regions that
differ between conditions; :func:`probing.lm.syntaxgym.left_to_right_only`), every comparison is between
conditions with the same words after the regions it reads, so the backward LM sees none of the manipulation:
where the compared regions hold the same words (NPI, filler-gap, subordination) their backward surprisals
are equal and a strict ``<`` or ``>`` fails, and where the words differ (agreement, reflexives: ``is`` vs
``are`` after either subject) the prediction asks for opposite preferences between the same words, which a
model blind to the subject cannot satisfy both ways. Backward accuracy near 0 there is by construction,
not a finding about the backward LM; ``both`` mixes that in. Backward rows say something only where the
right context differs (the center-embedding suites) or on suites of your own written for it.

For the bundled suites the task's first encoder also writes the authors' results as reference rows (encoder
``reference``, one layer per model: ``grnn``, ``jrnn``, ``gpt-2``, ``gpt-2-xl``, ``transformer-xl`` and their
BLLIP-LG-trained ``gpt-2-bllip``, ``rnng-bllip``, ``on-lstm-bllip``, ``lstm-bllip``, ``n-gram-bllip``; no CI),
over the same suites and items, aggregated as their ``main.upstream.py`` does (seeds averaged, the n-gram's
seeds by majority vote).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.results import make_row
from probing.results.metrics import ACCURACY
from probing.tasks.common import Job, TaskError, TaskKind, TaskOutput

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing._toml import Table
    from probing.lm.syntaxgym import Suite

KIND = "syntaxgym"
REFERENCE_ENCODER = "reference"
SCORE_VERSION = 1  # bump when the scores change for a reason probing.lm's code does not show
DATA_FORMS = "'syntaxgym', 'syntaxgym:<suite>' (a bundled suite) or 'suite:PATH' (a SyntaxGym JSON file)"


@dataclass(frozen=True)
class SyntaxGymOptions:
    """The kind's own keys: ``data`` (``"syntaxgym"``, ``"syntaxgym:<suite>"`` or ``"suite:PATH"``, the path
    made absolute), ``suites`` (names to keep; empty: all), ``max_items`` (per suite; None: all),
    ``batch_size`` (sentences per biLM batch)."""

    data: str = "syntaxgym"
    suites: tuple[str, ...] = ()
    max_items: int | None = None
    batch_size: int = 64


def _parse(t: Table) -> dict[str, Any]:
    from probing.lm.syntaxgym import bundled_suites

    data = t.string("data", "syntaxgym")
    if data.startswith("syntaxgym:"):
        if data.removeprefix("syntaxgym:") not in bundled_suites():
            raise t.fail("data", f"'syntaxgym:<suite>' with a bundled suite ({', '.join(bundled_suites())})", data)
    elif data.startswith("suite:") and data.removeprefix("suite:"):
        path = Path(data.removeprefix("suite:")).expanduser()
        path = path if path.is_absolute() else (t.base / path)
        if not path.is_file():
            raise t.fail("data", "'suite:PATH' naming an existing file (relative to the experiment file)", data)
        data = f"suite:{path.resolve()}"
    elif data != "syntaxgym":
        raise t.fail("data", DATA_FORMS, data)
    suites = t.string_list("suites", ())
    if len(set(suites)) != len(suites):
        raise t.fail("suites", "distinct names", list(suites))
    opts = SyntaxGymOptions(
        data=data,
        suites=tuple(suites),
        max_items=t.integer("max_items", None, minimum=1),
        batch_size=t.integer("batch_size", 64, minimum=1),
    )
    return {**asdict(opts), "suites": list(opts.suites)}


def _options(options: Mapping[str, Any]) -> SyntaxGymOptions:
    return SyntaxGymOptions(**{**options, "suites": tuple(options.get("suites", ()))})


def suite_sources(data: str) -> list[str | Path]:
    """The suites ``data`` names: bundled names, or the one path of ``suite:PATH``."""
    from probing.lm.syntaxgym import bundled_suites

    if data == "syntaxgym":
        return list(bundled_suites())
    if data.startswith("syntaxgym:"):
        return [data.removeprefix("syntaxgym:")]
    return [Path(data.removeprefix("suite:"))]


def dataset_name(data: str) -> str:
    """``syntaxgym`` for the bundled suites, the file's stem for ``suite:PATH``."""
    return Path(data.removeprefix("suite:")).name.split(".")[0] if data.startswith("suite:") else "syntaxgym"


def select_suites(task: str, opts: SyntaxGymOptions) -> list[Suite]:
    """The suites of the task: ``suites`` kept (in the data's order), each cut to its first ``max_items``."""
    from dataclasses import replace

    from probing.lm.syntaxgym import load_suite

    loaded = [load_suite(s) for s in suite_sources(opts.data)]
    if opts.suites:
        known = [s.name for s in loaded]
        unknown = [s for s in opts.suites if s not in known]
        if unknown:
            raise TaskError(f"task {task!r}: {opts.data} has no suite(s) {unknown}; its suites: {', '.join(known)}")
        loaded = [s for s in loaded if s.name in opts.suites]
    if opts.max_items is not None:
        loaded = [replace(s, items=s.items[: opts.max_items]) for s in loaded]
    return loaded


def _checkpoint(task: str, encoder: Any) -> str:
    """The registered checkpoint whose LM head ``encoder`` uses; TaskError naming the encoder when it has none."""
    from probing.elmo import hub
    from probing.encoders import lm_checkpoint

    checkpoint = lm_checkpoint(encoder)
    if checkpoint is None or not hub.has_head(checkpoint):
        raise TaskError(
            f"task {task!r}: encoder {encoder.name!r} ({type(encoder).__name__}) has no LM head, so it cannot "
            f"score text: a {KIND} task needs an ELMo encoder of a registered checkpoint with a head "
            '(model = "default", the bundled model, ships one; official ones: probing download NAME --with-softmax)'
        )
    return checkpoint


def model_head_identity(task: str, encoder: Any) -> dict[str, Any]:
    """The biLM's fingerprint, its checkpoint and the head (the bundled head file's sha256, or the official
    softmax's URLs): what a kind that scores with the encoder's LM reads of it."""
    from probing._io import sha256_file
    from probing.elmo import hub

    checkpoint = _checkpoint(task, encoder)
    entry = hub.get(checkpoint)
    if entry.head is not None:
        head: Any = {"file": sha256_file(hub.resolve_head(checkpoint)[0])}
    else:
        head = {"softmax": entry.softmax_url, "vocab": entry.vocab_url}
    return {"model": encoder.fingerprint, "checkpoint": checkpoint, "head": head}


def _identity(task: str, encoder: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """Everything a job reads: the model and head (:func:`model_head_identity`), the suite files' sha256 and
    the scoring code (``probing.lm``)."""
    from probing._io import sha256_file
    from probing.identity import code_identity
    from probing.lm.syntaxgym import load_suite

    files = [Path(load_suite(s).source) for s in suite_sources(_options(options).data)]
    return {
        **model_head_identity(task, encoder),
        "data": {f.name: sha256_file(f) for f in files},
        "code": code_identity(SCORE_VERSION, ["probing.lm"]),
    }


def _run(job: Job) -> TaskOutput:
    import pandas as pd

    from probing.lm.score import load_model
    from probing.lm.syntaxgym import evaluate_predictions, item_outcomes, reference_table, score_suite, summarize

    opts = _options(job.options)
    _checkpoint(job.task, job.model)
    t0 = time.time()
    suites = select_suites(job.task, opts)
    dataset = dataset_name(opts.data)
    elmo, head = load_model(job.model.model)
    outcomes = []
    for s in suites:
        job.progress(f"{job.task} {job.encoder}: {s.name} ({len(s.items)} items)")
        regions = score_suite(s, elmo, head, batch_size=opts.batch_size)
        outcomes.append(item_outcomes(evaluate_predictions(regions, s)))
    seed = job.settings.seeds[0]
    table = summarize(pd.concat(outcomes, ignore_index=True), n_boot=job.settings.n_boot, seed=seed)
    rows = [
        make_row(job.task, dataset, r.split, job.encoder, r.direction, "accuracy", r.value, r.ci_low, r.ci_high, seed)
        for r in table.itertuples(index=False)
    ]
    out = TaskOutput(rows=rows)
    if not opts.data.startswith("suite:") and job.with_baselines:
        refs = reference_table([s.name for s in suites], items={s.name: [it.number for it in s.items] for s in suites})
        out.rows += reference_rows(job.task, dataset, refs, seed)
    out.probes.append(
        {
            "task": job.task,
            "encoder": job.encoder,
            "kind": KIND,
            "data": opts.data,
            "n_suites": len(suites),
            "n_items": sum(len(s.items) for s in suites),
            "head": head.source,
            "seconds": round(time.time() - t0, 3),
        }
    )
    return out


def reference_rows(task: str, dataset: str, refs: pd.DataFrame, seed: int) -> list[dict]:
    """Result rows (encoder ``reference``, layer = the model's name in ``REFERENCE_MODELS``, no CI) from
    :func:`probing.lm.syntaxgym.reference_table`."""
    from probing.lm.syntaxgym import REFERENCE_MODELS

    return [
        make_row(
            task,
            dataset,
            r.split,
            REFERENCE_ENCODER,
            REFERENCE_MODELS.get(r.model, r.model),
            "accuracy",
            r.value,
            seed=seed,
        )
        for r in refs.itertuples(index=False)
        if np.isfinite(r.value)
    ]


def _figures(results: pd.DataFrame, task: str, dataset: str, split: str) -> dict[str, Figure]:
    """The accuracy-by-circuit figure of a task (:func:`probing.figures.syntaxgym.circuits_figure`), drawn
    once, for its ``overall`` group."""
    if split != "overall":
        return {}
    from probing.figures.syntaxgym import circuits_figure

    return {"syntaxgym": circuits_figure(results, task, dataset=dataset)}


SYNTAXGYM = TaskKind(
    KIND,
    run=_run,
    metrics=(ACCURACY,),
    headline="accuracy",
    parse=_parse,
    options=SyntaxGymOptions,
    allows_dev=False,
    figures=_figures,
    layer_figures=False,
    model_identity=_identity,
)
