"""``probing demo``: the offline end-to-end run a newcomer starts with.

The bundled default ELMo, a randomly initialised twin and GloVe 6B 50d are probed layer by layer on the
bundled UD EWT and SemCor slices (the ``default`` experiment), then the paper's two qualitative views are
drawn: the nearest neighbours of "play" (Peters et al. 2018, Table 4) and per-layer maps of word senses and
parts of speech. Everything lands in one folder::

    OUT/figures/*.png, *.svg      layer-comparison figures, maps
    OUT/results/                  results.csv, results.json (provenance), mix_weights.csv, per_tag.csv,
                                  neighbours_play.csv
    OUT/report.html               one self-contained page with all of it

OUT is ``./probing-demo`` by default, so a run inside the repository leaves its tracked ``figures/`` alone;
``scripts/refresh_figures.sh`` (maintainers) copies a full run's figures and results there. Activations and
finished probes are cached (``$PROBING_CACHE``), so a second run only redraws.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from probing import figures as fg
from probing._io import atomic_open
from probing.corpora import Corpus, load
from probing.encoders import Encoder, get_encoder
from probing.experiment import Results, load_experiment, run_experiment
from probing.glove import Vectors
from probing.report import draw_figures, write_report
from probing.results import write_results
from probing.results.display import format_summary
from probing.store import Store, extract
from probing.views.explorer import GLOVE_PANEL, MissingExtraError, explore
from probing.views.neighbors import format_table, table4
from probing.views.sense_claim import sense_claim_note
from probing.views.umap import umap_layers, umap_pos
from probing.wordnet import inventory

SENSE_LEMMAS = ("play", "serve", "time")  # frequent, many-sensed lemmas of the bundled SemCor slice
SENSE_STORE = ("elmo", "demo-semcor", "train")  # (encoder, dataset, split) of the default experiment
POS_STORE = ("elmo", "demo-ud", "test")
TABLE4_SPLITS = ("train", "test")  # of demo-semcor: its sports uses of the noun "play" are in test documents

DEMO_NOTES = {
    "umap_senses": (
        "Occurrences of a few many-sensed lemmas of the SemCor slice, one map per layer (UMAP of the "
        "occurrence vectors), coloured by their gold WordNet sense. Layer 0 gives every occurrence of a word "
        "the same vector (one point), as GloVe does; the biLSTM layers spread occurrences out by context, "
        "and senses gather in the top layer if the model learned them. The star marks the mean vector."
    ),
    "umap_pos": (
        "A sample of UD EWT test tokens per layer, coloured by universal POS tag. Tags that share word "
        "forms (NOUN/VERB, ADP/SCONJ) overlap at layer 0 and separate in the contextual layers."
    ),
}


@dataclass
class DemoOutput:
    """What :func:`run_demo` produced: the probing results, the Table-4 neighbours of "play", the figure
    and report files, wall times in seconds by stage, and the sentence on the paper's sense claim where the
    model contradicts it."""

    results: Results
    neighbours: pd.DataFrame
    figures: dict[str, Path]
    report: Path
    timings: dict[str, float] = field(default_factory=dict)
    sense_note: str | None = None
    """Where the model contradicts the paper's sense claim (:func:`probing.views.sense_claim.sense_claim_note`)."""

    def summary(self) -> str:
        """The headline table (scores in percent) and where the files are, as printed by ``probing demo``."""
        table = format_summary(self.results.summary(), self.results.headlines)
        stages = ", ".join(f"{k} {v:.0f} s" for k, v in self.timings.items())
        note = f"{textwrap.fill(self.sense_note, 100)}\n\n" if self.sense_note else ""
        return (
            f"{table}\n\nnearest neighbours of 'play':\n{format_table(self.neighbours, max_colwidth=60)}\n\n"
            f"{note}report:  {self.report}\nfigures: {len(self.figures)} in {self.report.parent / 'figures'}\n"
            f"time:    {stages}"
        )


def play_occurrences(encoder: Encoder, word: str = "play") -> Store:
    """The activations of every sentence of the bundled SemCor slice, both splits, that holds ``word`` as a
    lemma (cached like any store). Table 4 is a view, not an evaluation: the paper searched all of SemCor, and
    so the demo searches all of its slice, whose only sports uses of the noun "play" are in test documents."""
    parts = [load("demo-semcor", split) for split in TABLE4_SPLITS]

    def sentences():
        for part in parts:
            for s in part:
                if s.lemmas and word in s.lemmas:
                    yield s

    return extract(encoder, Corpus(sentences, name=f"demo-semcor-{word}", split="all"), progress=False)


def run_demo(
    out_dir: str | os.PathLike = "probing-demo",
    *,
    quick: bool = False,
    progress: bool = True,
    formats: tuple[str, ...] = ("png", "svg"),
) -> DemoOutput:
    """Run the bundled ``default`` experiment and draw everything into ``out_dir`` (see the module doc).

    ``quick`` runs the experiment's reduced size (its ``[quick]`` table: fewer sentences and bootstrap
    replicates) and smaller maps: for tests and a first look, not for conclusions.
    """
    out = Path(out_dir)
    timings: dict[str, float] = {}
    t0 = time.time()
    res = run_experiment(load_experiment("default", quick=quick), out / "results", progress=progress)
    timings["probes"] = time.time() - t0

    t1 = time.time()
    senses = inventory("auto")
    encoder = get_encoder("default")
    glove = Vectors.glove_6b_50d()
    semcor = res.store(*SENSE_STORE)
    # as in the paper's Table 4, the neighbours are other occurrences of "play": which sense is nearest?
    plays = play_occurrences(encoder)
    neighbours = table4(glove, plays, encoder, "play", rows=plays.rows(lemma="play"), gloss=senses.gloss)
    with atomic_open(out / "results" / "neighbours_play.csv", newline="", encoding="utf-8") as f:
        neighbours.to_csv(f, index=False)
    timings["neighbours"] = time.time() - t1

    t2 = time.time()
    drawn = draw_figures(res.results, res.tables)
    points = 150 if quick else 400
    drawn["umap_senses"] = umap_layers(semcor, SENSE_LEMMAS, max_points=points, glove=glove, gloss=senses.gloss)
    drawn["umap_pos"] = umap_pos(res.store(*POS_STORE), max_points=5 * points)
    tables = {'Nearest neighbours of "play" (Peters et al. 2018, Table 4)': neighbours}
    links = {}
    notes = dict(DEMO_NOTES)
    sense_note = None
    try:
        explorer = explore(semcor, SENSE_LEMMAS, glove=glove, gloss=senses.gloss, max_points=5 * points)
        explorer.save(out / "explorer.html")
        links["Occurrence explorer: hover a point to read its sentence (explorer.html)"] = "explorer.html"
        tables["Sense separation per layer (leave-one-out 1-NN sense accuracy, 95% CI)"] = explorer.scores
        top = [p for p in explorer.panels if p != GLOVE_PANEL][-1]
        sense_note = sense_claim_note(explorer.scores, top, model="the bundled model")
        if sense_note:
            notes["umap_senses"] = f"{notes['umap_senses']} {sense_note}"
    except MissingExtraError as e:
        print(f"probing demo: no explorer.html ({e})", file=sys.stderr)
    embed = "png" if "png" in formats else formats[0]
    files = {name: fg.save(fig, out / "figures", name, formats=formats)[embed] for name, fig in drawn.items()}
    timings["figures"] = time.time() - t2

    timings["total"] = time.time() - t0
    provenance = {**res.provenance, "demo": {"quick": quick, "seconds": {k: round(v, 1) for k, v in timings.items()}}}
    write_results(res.results, out / "results", provenance)
    report = write_report(
        out,
        res.results,
        provenance,
        figures=files,
        notes=notes,
        tables=tables,
        links=links,
        title="probing demo: what each ELMo layer knows",
    )
    return DemoOutput(
        results=res, neighbours=neighbours, figures=files, report=report, timings=timings, sense_note=sense_note
    )


__all__ = ["DemoOutput", "run_demo"]
