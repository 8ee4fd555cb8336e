"""Human reading times as a task kind (issue 40): does the encoder's LM surprisal predict how long people read
each word of Natural Stories, per direction?

``kind = "reading-times"`` with ``data = "naturalstories"`` (``$PROBING_DATA/naturalstories`` or ``probing data
get naturalstories``; CC BY-NC-SA 4.0, never bundled) or ``"rt:PATH"`` (a folder in the same layout:
``naturalstories_RTS/all_stories.tok``, ``naturalstories_RTS/processed_wordinfo.tsv``, ``freqs/freqs-1.tsv``,
optional ``probs/all_stories_gpt3.csv``; relative to the experiment file), ``spillover`` (previous words whose
predictors enter the regressions; default 2), ``folds`` (folds of whole stories; default 10) and
``batch_size``. Like ``minimal-pairs`` it reads the encoder's model (an ELMo with an LM head).

Rows (:mod:`probing.lm.reading_times`): ``split`` ``overall``, ``layer`` the direction (``forward``,
``backward``, ``both``: the mean of the two surprisals), metrics ``delta-loglik`` (the headline: held-out
log-likelihood per word, nats, of mean reading time with surprisal over the regression without it) and
``pearson-r`` (Brain-Score's r over words not first in their sentence; ceiling 0.858, not applied), each with
a 95 % bootstrap CI over words. The task's first encoder adds reference rows (encoder ``reference``): ``gpt-3``
(the corpus's GPT-3 log-probabilities, where the data has them) and ``unigram`` (``pearson-r`` only: the
unigram surprisal is the baseline's log frequency, so it adds nothing to the regression by construction).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probing.results import Metric, make_row
from probing.tasks.common import Job, TaskKind, TaskOutput

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing._toml import Table

KIND = "reading-times"
REFERENCE_ENCODER = "reference"
SCORE_VERSION = 1
DELTA_LOGLIK = Metric("delta-loglik", "ΔLogLik per word (nats), held out by story", False, None, True)
PEARSON_R = Metric("pearson-r", "Pearson r of surprisal with mean reading time", False, (-1.0, 1.0), True)


@dataclass(frozen=True)
class ReadingTimesOptions:
    """The kind's own keys: ``data`` (``"naturalstories"`` or ``"rt:PATH"``, the path made absolute),
    ``spillover`` (>= 0), ``folds`` (>= 2), ``batch_size``."""

    data: str = "naturalstories"
    spillover: int = 2
    folds: int = 10
    batch_size: int = 64


def _parse(t: Table) -> dict[str, Any]:
    data = t.string("data", "naturalstories")
    if data != "naturalstories":
        if not data.startswith("rt:") or not data.removeprefix("rt:"):
            raise t.fail("data", "'naturalstories' or 'rt:PATH' (a folder in the Natural Stories layout)", data)
        path = Path(data.removeprefix("rt:")).expanduser()
        path = path if path.is_absolute() else (t.base / path)
        if not path.is_dir():
            raise t.fail("data", "'rt:PATH' naming an existing folder (relative to the experiment file)", data)
        data = f"rt:{path.resolve()}"
    opts = ReadingTimesOptions(
        data=data,
        spillover=t.integer("spillover", 2, minimum=0),
        folds=t.integer("folds", 10, minimum=2),
        batch_size=t.integer("batch_size", 64, minimum=1),
    )
    return asdict(opts)


def _folder(data: str) -> Path:
    from probing.lm.reading_times import find_naturalstories

    return find_naturalstories() if data == "naturalstories" else Path(data.removeprefix("rt:"))


def _identity(task: str, encoder: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The model and head (as ``syntaxgym``'s), the corpus files' sha256 and the code of ``probing.lm``."""
    from probing._io import sha256_file
    from probing.identity import code_identity
    from probing.lm.reading_times import NATURALSTORIES_FILES
    from probing.tasks.syntaxgym import model_head_identity

    root = _folder(str(options.get("data", "naturalstories")))
    return {
        **model_head_identity(task, encoder),
        "data": {f: sha256_file(root / f) for f in NATURALSTORIES_FILES if (root / f).is_file()},
        "code": code_identity(SCORE_VERSION, ["probing.lm"]),
    }


def _run(job: Job) -> TaskOutput:
    from probing.lm.reading_times import metrics, read_corpus, score_words
    from probing.lm.score import load_model
    from probing.tasks.syntaxgym import _checkpoint

    opts = ReadingTimesOptions(**job.options)
    _checkpoint(job.task, job.model)
    t0 = time.time()
    root = _folder(opts.data)
    dataset = "naturalstories" if opts.data == "naturalstories" else root.name
    words = read_corpus(root)
    job.progress(f"{job.task} {job.encoder}: {len(words)} words")
    elmo, head = load_model(job.model.model)
    fw, bw = score_words(words, elmo, head, batch_size=opts.batch_size)
    words = words.assign(surprisal_forward=fw, surprisal_backward=bw, surprisal_both=(fw + bw) / 2)
    seed, n_boot = job.settings.seeds[0], job.settings.n_boot
    series = [(job.encoder, d, f"surprisal_{d}") for d in ("forward", "backward", "both")]
    if job.with_baselines:
        if words.surprisal_gpt3.notna().any():
            series.append((REFERENCE_ENCODER, "gpt-3", "surprisal_gpt3"))
        series.append((REFERENCE_ENCODER, "unigram", "surprisal_unigram"))
    rows = []
    for encoder, layer, column in series:
        found = metrics(
            words,
            column,
            spillover=opts.spillover,
            folds=opts.folds,
            n_boot=n_boot,
            seed=seed,
            delta_loglik=layer != "unigram",
        )
        for metric, (value, low, high, _) in found.items():
            rows.append(make_row(job.task, dataset, "overall", encoder, layer, metric, value, low, high, seed))
    out = TaskOutput(rows=rows)
    out.probes.append(
        {
            "task": job.task,
            "encoder": job.encoder,
            "kind": KIND,
            "data": opts.data,
            "n_words": len(words),
            "n_stories": int(words.story.nunique()),
            "head": head.source,
            "seconds": round(time.time() - t0, 3),
        }
    )
    return out


def _figures(results: pd.DataFrame, task: str, dataset: str, split: str) -> dict[str, Figure]:
    """The task's ΔLogLik and Pearson r per direction beside the references
    (:func:`probing.figures.reading_times.reading_times_metrics_figure`)."""
    from probing.figures.reading_times import reading_times_metrics_figure

    return {"reading_times": reading_times_metrics_figure(results, task, dataset=dataset)}


READING_TIMES = TaskKind(
    KIND,
    run=_run,
    metrics=(DELTA_LOGLIK, PEARSON_R),
    headline="delta-loglik",
    parse=_parse,
    options=ReadingTimesOptions,
    allows_dev=False,
    figures=_figures,
    layer_figures=False,
    model_identity=_identity,
)
