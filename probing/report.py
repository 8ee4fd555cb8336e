"""The HTML report: one self-contained ``report.html`` (figures embedded as data URIs, no JavaScript).

It answers first: a verdict (:func:`probing.verdict.verdict`: best single layer per task and
encoder, its CI, the paired test against the runner-up, baselines that beat every layer), the overview
figure, the summary (compact; the detailed table in a ``<details>``); then the other figures with a "how
to read this" note each, extra tables (e.g. nearest neighbours of "play"), the full results table and the
provenance (collapsed). Long strings wrap, so the page never scrolls sideways (tables scroll in their own
box). Every piece of text is HTML-escaped; the file is written atomically.
"""

from __future__ import annotations

import base64
import html
import math
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import probing
from probing import figures as fg
from probing._io import atomic_open
from probing.errors import InputError
from probing.figures import aggregate, split_layer
from probing.layers import is_half
from probing.results import (
    CONCAT_LAYER,
    MIX_LAYER,
    SIDE_TABLES,
    layer_sort_key,
    metric,
    read_provenance,
    read_results,
    read_side_table,
)
from probing.verdict import Finding, verdict

__all__ = [
    "FIGURE_NOTES",
    "FIGURE_TITLES",
    "build_report",
    "draw_figures",
    "figure_title",
    "summary_table",
    "write_report",
]

# Keyed by figure-name prefix: a figure named "layer_scores_upos" gets the "layer_scores" note.
FIGURE_NOTES = {
    "present_vs_used": (
        "Left: the erased property's own probe per layer (present), unedited and after each eraser: after "
        "LEACE it should fall towards the majority class, after the same-rank random subspace stay put. Middle: "
        "how many points the task loses on each layer when the property is erased (used): LEACE beside the "
        "random control of the same rank; only a drop well beyond the control's says the task relied on the "
        "property. 'in biLM' bars erase the property inside the model (the layers above recomputed from the "
        "erased one) and compare with the unedited model. Error bars: 95% intervals; a drop's combines the two "
        "scores' intervals as if independent (conservative: both score the same sentences)."
    ),
    "learning_curve": (
        "Each line is one layer's probe retrained on the first 1 %, 2 %, ... of the training sentences (one "
        "seeded order, nested prefixes; the probe's C chosen on dev at every size), scored on the test set; "
        "the x axis is logarithmic. Bands: 95% bootstrap intervals over test sentences (and the spread over "
        "sentence orders when several were run). Dashed lines: baselines trained on the full set. A curve that "
        "starts high needs few annotated sentences: data_efficiency.csv says how many times more sentences "
        "another layer or GloVe needs to reach its 1 %, 5 % and 10 % scores."
    ),
    "layer_scores": (
        "Each marker is the probe's score on one layer: 0 is the context-free character-CNN token layer, "
        "1 and 2 are the biLSTM layers, 'scalar mix' is a learned weighted sum of all layers. Error bars are "
        "95% confidence intervals (over seeds when several seeds were run, else from the test set). "
        "Horizontal lines are baselines that use no ELMo layer; a label with ▼ or ▲ names a baseline "
        "outside the plotted range. Random ELMo has the same architecture with untrained weights: the gap "
        "to it is what pre-training adds. Overlapping intervals do not make two layers equal: the summary "
        "compares the best layer with the runner-up by a paired bootstrap over test sentences (both layers "
        "score the same sentences), which can find a difference whose two intervals overlap."
    ),
    "selectivity": (
        "Blue bars: accuracy on the linguistic task; orange bars: accuracy of the same probe on the control "
        "task, which gives every word type a random but fixed label (Hewitt & Liang, 2019). A probe can "
        "only solve the control task by memorising words, so selectivity (the difference, written above "
        "each pair) measures how much of the task score comes from the representation rather than from "
        "the probe's own capacity. Higher selectivity means a more trustworthy layer comparison."
    ),
    "mix_weights": (
        "The softmax-normalised weight s_j that each task's scalar mix learned for each layer (they sum to "
        "1 per task). The dashed line is the uniform weight 1/L; bars above it mark the layers a task leans "
        "on. Error bars: the range over seeds and over refits on bootstrap resamples of the training "
        "sentences ([probe] mix_refits); a task whose weights move by more than 0.2 is marked unstable, and "
        "its weights are no finding. The mix is non-convex and layers that carry the same information trade "
        "weight freely, so even stable weights show preference, not information content: compare the "
        "single-layer scores for that."
    ),
    "tag_gains": (
        "Per-tag accuracy change when the probe reads the first contextual layer instead of the "
        "context-free token layer, for the tags that gain most. n is the number of test tokens with that "
        "gold tag; gains on small n are noisy. Large gains mark tags that need context to be told apart "
        "(ambiguous word forms)."
    ),
    "syntax": (
        "Structural probes (Hewitt & Manning, 2019): a linear map per layer under which squared distances "
        "between word vectors approximate distances in the dependency tree (distance probe), or squared "
        "lengths approximate depth in it (depth probe). Left: UUAS, the share of gold tree edges that the "
        "minimum spanning tree of the predicted distances recovers (punctuation left out), or Root%, the "
        "share of sentences whose least deep predicted word is the root. Right: Spearman correlation of "
        "predicted and gold distances (DSpr.) or depths (NSpr.), averaged per sentence length 5-50. Error bars "
        "are 95% bootstrap intervals over test sentences. Lines: GloVe (context-free word vectors) and the "
        "linear-position baseline (distance |i - j|; depth = position, a left-branching chain), which needs "
        "no vectors at all: a layer below it has learned less about the tree than word order gives for free."
    ),
    "directions": (
        "ELMo is only shallowly bidirectional: each biLSTM layer is a forward LM's state (the word and its left "
        "context, '1f') next to a backward LM's state (the word and its right context, '1b'), concatenated. "
        "Bars: a probe on each half and on the whole layer, with 95% CIs; the dashed line is the context-free "
        "layer 0. What one half scores alone says how much that side of the context decides the label; the "
        "gain of the whole layer over its better half is all that the concatenation adds."
    ),
    "oov": (
        "Accuracy on test tokens inside vs outside a vocabulary (GloVe's 400k words, or the bundled model's "
        "training vocabulary), with 95% CIs. GloVe gives an unknown word its zero vector, so it can only guess "
        "from the probe's bias; ELMo builds every token from its characters, so it has a vector for every "
        "word, and its loss on unseen words shows how far spelling and context make up for never having seen "
        "the word."
    ),
    "codelength": (
        "Minimum description length probing (Voita & Titov, 2020): the online codelength, in kbits, of the "
        "training labels given each layer. The training sentences are sent in growing blocks (0.1% ... 100%), "
        "each coded with a probe trained only on the blocks before it, so a layer from which the labels are "
        "easy to learn from few examples gets a short code; lower is better. Blue: the linguistic task; "
        "orange: the control task (a random but fixed label per word type). A large gap between the two "
        "means the layer encodes the task, not just word identity. Bars are the mean over seeds, with the "
        "min-max range when several seeds were run."
    ),
    "compression": (
        "Compression = uniform codelength (N log2 K bits: every label sent with no model) divided by the "
        "online codelength. 1 (dashed line) means the probe learnt nothing usable; higher is better. Unlike "
        "accuracy, it rewards layers from which the labels can be learnt with little data, and its layer "
        "ranking is stable across seeds."
    ),
    "similarity": (
        "Layer similarity without any probe: linear centred kernel alignment (CKA, Kornblith et al. 2019) "
        "between every pair of layers, on the same tokens (n_tokens in the title, drawn with a seed). 1 means "
        "the two layers are the same up to rotation and scale, 0 that they share no linear structure; the "
        "diagonal is 1. White lines separate encoders: compare ELMo's layers with each other, with GloVe "
        "(context-free word vectors) and with the untrained random ELMo."
    ),
    "overview": (
        "Part-of-speech accuracy (left) and word-sense disambiguation F1 (right) per layer, read like the "
        "per-task layer plots: markers with 95% confidence intervals, baselines as horizontal lines."
    ),
}

# Figure-name prefix -> title in words; the rest of the name (the task, dataset, split) follows a colon.
FIGURE_TITLES = {
    "layer_scores": "Score per layer",
    "syntax": "Dependency-tree structure per layer",
    "selectivity": "Task vs control-task accuracy (selectivity) per layer",
    "mix_weights": "Scalar-mix weight of each layer",
    "tag_gains": "Tags that gain most from context (layer 0 to layer 1)",
    "directions": "Forward and backward halves of each layer",
    "oov_glove": "Accuracy on words inside vs outside GloVe's vocabulary",
    "oov_train": "Accuracy on words inside vs outside the model's training vocabulary",
    "codelength": "Description length (online codelength) per layer",
    "learning_curve": "How much training data each layer needs (learning curves)",
    "compression": "Compression per layer",
    "similarity": "Layer similarity",
    "overview": "Overview: part of speech and word sense per layer",
    "present_vs_used": "Present vs used: what erasing a property costs",
}

_MIME = {".png": "image/png", ".svg": "image/svg+xml"}
_HEX_RE = re.compile(r"^(sha256:)?[0-9a-f]{16,}$")

_CSS = """
:root { --ink: #1a1a1a; --muted: #555; --rule: #d0d0d0; --stripe: #f5f6f8; --accent: #0072B2; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif; color: var(--ink);
       max-width: 1120px; margin: 2rem auto; padding: 0 1.5rem; background: #fff; }
h1 { font-size: 1.7rem; margin: 0 0 .3rem; }
h2 { font-size: 1.3rem; margin: 2.2rem 0 .6rem; padding-bottom: .2rem; border-bottom: 2px solid var(--accent); }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
p.meta { color: var(--muted); margin: 0 0 1rem; }
nav ul { list-style: none; padding: 0; margin: .5rem 0 0; display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; }
a { color: var(--accent); }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .86rem; width: auto; max-width: 100%; }
th, td { border-bottom: 1px solid var(--rule); padding: .28rem .6rem; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; position: sticky; top: 0; }
tbody tr:nth-child(even) { background: var(--stripe); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td, dd, li, p, figcaption, h1, h2, h3 { overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; }
.verdict { font-size: 1.02rem; background: #f3f7fb; border-left: 4px solid var(--accent); padding: .6rem 1rem;
           margin: 1rem 0; }
.verdict ul { margin: .3rem 0 0; padding-left: 1.2rem; }
details > summary { cursor: pointer; color: var(--accent); margin: .4rem 0; }
figure { margin: 1.2rem 0 2rem; break-inside: avoid; page-break-inside: avoid; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9rem; color: #333; margin-top: .5rem; max-width: 60rem; }
figcaption strong { display: block; font-size: 1rem; color: var(--ink); margin-bottom: .15rem; }
dl.prov { display: grid; grid-template-columns: minmax(0, max-content) minmax(0, 1fr); gap: .2rem 1rem;
           margin: .3rem 0 .6rem; }
dl.prov dt { font-weight: 600; overflow-wrap: anywhere; }
dl.prov dd { margin: 0; min-width: 0; }
dl.prov dl.prov { margin: 0; }
code, .fp { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: .85em; }
.fp { word-break: break-all; }
footer { margin-top: 3rem; color: var(--muted); font-size: .85rem; border-top: 1px solid var(--rule);
         padding-top: .6rem; }
@media (max-width: 600px) { body { padding: 0 .6rem; margin: 1rem auto; } }
@media print {
  body { margin: 0; max-width: none; font-size: 11pt; }
  nav { display: none; }
  a { color: inherit; text-decoration: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  th { position: static; }
  tr { break-inside: avoid; }
}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pct(name: str, v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return metric(name).format(v)


def _by_layer(rows: pd.DataFrame, name: str) -> dict[tuple[str, str], Any]:
    """The aggregated rows of metric ``name``, keyed by (series, layer)."""
    found = {}
    for r in rows[rows["metric"] == name].itertuples(index=False):
        parsed = split_layer(r.encoder, r.layer)
        if parsed is not None:
            found[parsed] = r
    return found


def summary_table(results: pd.DataFrame, kinds: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Which layer is best, per task, dataset, split and series (encoder), on the headline metric of the
    task's kind (``kinds``: task -> kind name from the run's provenance; else inferred from the metrics).

    Columns (display strings): ``task, dataset, split, metric, encoder, best layer, score, 95% CI, vs next,
    selectivity, mix, concat, seeds, baselines``. The best layer is the best *single* layer (the scalar mix
    and the concatenation, which combine layers, have their own columns); ties go to the earlier layer.
    ``vs next`` is its margin over the runner-up layer with the paired bootstrap CI over sentences (the
    ``best-layer-margin`` rows) and whether that CI excludes zero; ``selectivity`` is the control-task
    selectivity of the best layer; scores of fractions are in percent; ``baselines`` lists every baseline.
    "Best" follows the headline's ``higher_is_better`` (the lowest value for a lower-is-better headline),
    as does the order of the baselines.
    """
    agg = aggregate(results)
    if agg.empty:
        raise InputError("results: the table is empty; nothing to summarise")
    from probing.tasks.registry import task_kinds  # on first use: the kinds' modules import torch

    out = []
    of = task_kinds(results, kinds, strict=False)  # a task of a kind unknown here has no summary row
    for (task, dataset, split), g in agg.groupby(["task", "dataset", "split"], sort=False):
        kind = of.get(task)
        if kind is None or kind.headline not in set(g["metric"]):
            continue  # e.g. MDL codelength rows, which are measured on the training split
        headline = kind.headline
        sign = 1.0 if metric(headline).higher_is_better else -1.0
        rows = g[g["metric"] == headline]
        series: dict[str, list] = {}
        baselines = []
        for r in rows.itertuples(index=False):
            if is_half(r.layer):  # one direction of a layer (directions = true): not a layer or a baseline
                continue
            parsed = split_layer(r.encoder, r.layer)
            if parsed is None:
                baselines.append((r.layer, r.encoder, r.value))
            else:
                series.setdefault(parsed[0], []).append((parsed[1], r))
        names = [b[0] for b in baselines]
        base_txt = (
            "; ".join(
                f"{lay if names.count(lay) == 1 else f'{lay} ({enc})'} {_pct(headline, v)}"
                for lay, enc, v in sorted(baselines, key=lambda b: -sign * b[2])
            )
            or "—"
        )

        sel, margin = _by_layer(g, "selectivity"), _by_layer(g, "best-layer-margin")
        for name, pts in series.items():
            pts.sort(key=lambda p: layer_sort_key(p[0]))
            combined = {lay: r for lay, r in pts if lay in (MIX_LAYER, CONCAT_LAYER)}
            single = [(lay, r) for lay, r in pts if lay not in combined]
            if not single:
                continue
            best_layer, best = max(single, key=lambda p: sign * p[1].value)
            m = margin.get((name, best_layer))
            if m is None:
                vs_next = "—"
            else:
                significant = "significant" if m.ci_low > 0 else "not significant"
                vs_next = (
                    f"{_pct('best-layer-margin', m.value)} [{_pct('best-layer-margin', m.ci_low)}, "
                    f"{_pct('best-layer-margin', m.ci_high)}], {significant}"
                )
            out.append(
                {
                    "task": task,
                    "dataset": dataset,
                    "split": split,
                    "metric": headline,
                    "encoder": name,
                    "best layer": best_layer,
                    "score": _pct(headline, best.value),
                    "95% CI": "—"
                    if math.isnan(best.ci_low) or math.isnan(best.ci_high)
                    else f"[{_pct(headline, best.ci_low)}, {_pct(headline, best.ci_high)}]",
                    "vs next": vs_next,
                    "selectivity": _pct("selectivity", sel[(name, best_layer)].value)
                    if (name, best_layer) in sel
                    else "—",
                    "mix": _pct(headline, combined[MIX_LAYER].value) if MIX_LAYER in combined else "—",
                    "concat": _pct(headline, combined[CONCAT_LAYER].value) if CONCAT_LAYER in combined else "—",
                    "seeds": int(best.n_seeds),
                    "baselines": base_txt,
                }
            )
        if not series:
            out.append(
                {
                    "task": task,
                    "dataset": dataset,
                    "split": split,
                    "metric": headline,
                    "encoder": "—",
                    "best layer": "—",
                    "score": "—",
                    "95% CI": "—",
                    "vs next": "—",
                    "selectivity": "—",
                    "mix": "—",
                    "concat": "—",
                    "seeds": 0,
                    "baselines": base_txt,
                }
            )
    return pd.DataFrame(out)


def _is_num(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if isinstance(value, (float, np.floating)):
        return "—" if math.isnan(value) else f"{value:.4g}"
    return _e(value)


def _html_table(df: pd.DataFrame, num_cols: set[str] | None = None, fmt: Mapping[str, str] | None = None) -> str:
    if not isinstance(df.index, pd.RangeIndex):
        df = df.reset_index()
    cols = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in df.columns]
    num_cols = (
        num_cols
        if num_cols is not None
        else {c for c, col in zip(cols, df.columns) if pd.api.types.is_numeric_dtype(df[col]) and df[col].dtype != bool}
    )
    fmt = fmt or {}
    head = "".join(f'<th{" class=num" if c in num_cols else ""} scope="col">{_e(c)}</th>' for c in cols)
    body = []
    for row in df.itertuples(index=False):
        cells = []
        for c, v in zip(cols, row):
            if c in fmt and _is_num(v) and not (isinstance(v, float) and math.isnan(v)):
                text = _e(format(v, fmt[c]))
            else:
                text = _cell(v)
            cells.append(f'<td class="num">{text}</td>' if c in num_cols else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>' + "\n".join(body) + "</tbody></table></div>"
    )


def _provenance_html(obj: object) -> str:
    if isinstance(obj, Mapping):
        if not obj:
            return "<em>(empty)</em>"
        items = "".join(f"<dt>{_e(k)}</dt><dd>{_provenance_html(v)}</dd>" for k, v in obj.items())
        return f'<dl class="prov">{items}</dl>'
    if isinstance(obj, (list, tuple)):
        if not obj:
            return "<em>(none)</em>"
        return "<ul>" + "".join(f"<li>{_provenance_html(v)}</li>" for v in obj) + "</ul>"
    text = str(obj)
    if _HEX_RE.match(text):
        return f'<span class="fp">{_e(text)}</span>'
    return _e(text)


def _figure_html(name: str, path: Path, note: str | None) -> str:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"figure {name!r}: file {path} does not exist")
    mime = _MIME.get(path.suffix.lower())
    if mime is None:
        raise InputError(f"figure {name!r}: {path} is not a .png or .svg file (only those can be embedded)")
    raw = path.read_bytes()
    try:
        width = _png_css_width(raw) if mime == "image/png" else None
    except ValueError as exc:
        raise InputError(f"figure {name!r}: {path}: {exc}") from None
    size = f' style="width: {width:.0f}px"' if width else ""
    data = base64.b64encode(raw).decode("ascii")
    title = figure_title(name)
    caption = f"<strong>{_e(title)}</strong>"
    if note:
        caption += f"How to read this: {_e(note)}"
    return (
        f'<figure id="fig-{_e(fg.slug(name))}"><img alt="{_e(title)}"{size} src="data:{mime};base64,{data}">'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def figure_title(name: str) -> str:
    """A figure's heading and alt text in words: ``layer_scores_upos`` -> "Score per layer: upos";
    ``similarity_linear_cka`` -> "Layer similarity: linear CKA"; a name with no known prefix as it is."""
    prefixes = [p for p in FIGURE_TITLES if name == p or name.startswith(p + "_")]
    if not prefixes:
        return name
    prefix = max(prefixes, key=len)
    rest = name[len(prefix) + 1 :].replace("_cka", " CKA").replace("_", " ")
    return FIGURE_TITLES[prefix] + (f": {rest}" if rest else "")


def _verdict_html(results: pd.DataFrame) -> str:
    """The verdict box: a first line naming the best single layer of each task part (first encoder of
    each), then one sentence per task part and encoder (:func:`probing.verdict.verdict`)."""
    findings = verdict(results)
    if not findings:
        return ""
    first: dict[tuple[str, str, str], Finding] = {}
    for f in findings:
        first.setdefault((f.task, f.dataset, f.split), f)
    several = len(first) > len({f.task for f in first.values()})  # a task scored on several parts
    lead = ", ".join(
        f"{f.task}{f' ({f.dataset} {f.split})' if several else ''}: {f.layer}"
        + (" (below a baseline)" if f.beaten_by else "")
        for f in first.values()
    )
    items = "".join(f"<li>{_e(f.sentence())}</li>" for f in findings)
    return (
        f'<div class="verdict"><p><strong>Best single layer</strong> ({_e(next(iter(first.values())).encoder)}): '
        f"{_e(lead)}.</p><ul>{items}</ul></div>"
    )


def _summary_html(summary: pd.DataFrame) -> str:
    """The compact summary (task, encoder, best layer, score, CI, test against the next layer) with the
    detailed table (selectivity, mix, concatenation, seeds, baselines) behind a ``<details>``."""
    compact = [c for c in ("task", "encoder", "best layer", "score", "95% CI", "vs next") if c in summary.columns]
    return (
        _html_table(summary[compact], num_cols={"score", "95% CI"})
        + "<details><summary>Detailed table: dataset, split, metric, selectivity, scalar mix, concatenation, "
        "seeds and baselines</summary>"
        + _html_table(summary, num_cols={"score", "95% CI", "seeds", "selectivity"})
        + "</details>"
    )


def _png_css_width(raw: bytes) -> float | None:
    """Display width in CSS pixels (1/96 inch) from the PNG's pixel width and its pHYs resolution.

    A 200-dpi figure would otherwise show at twice its physical size; None when the PNG has no pHYs.
    """
    if raw[:8] != b"\x89PNG\r\n\x1a\n" or raw[12:16] != b"IHDR":
        raise InputError("not a PNG file (bad signature)")
    width_px = int.from_bytes(raw[16:20], "big")
    pos = 8
    while pos + 8 <= len(raw):
        length = int.from_bytes(raw[pos : pos + 4], "big")
        kind = raw[pos + 4 : pos + 8]
        if kind == b"pHYs" and length == 9:
            ppu = int.from_bytes(raw[pos + 8 : pos + 12], "big")
            unit = raw[pos + 16]
            return width_px / (ppu * 0.0254) * 96 if unit == 1 and ppu > 0 else None
        if kind in (b"IDAT", b"IEND"):
            return None
        pos += 12 + length
    return None


def _note_for(name: str, notes: Mapping[str, str]) -> str | None:
    if name in notes:
        return notes[name]
    prefixes = [p for p in FIGURE_NOTES if name.startswith(p)]
    return FIGURE_NOTES[max(prefixes, key=len)] if prefixes else None


def _results_display(results: pd.DataFrame) -> pd.DataFrame:
    df = results[["task", "dataset", "split", "encoder", "layer", "metric", "value", "ci_low", "ci_high", "seed"]]
    df = df.assign(_k=df["layer"].astype(str).map(layer_sort_key))
    df = df.sort_values(["task", "dataset", "split", "metric", "encoder", "_k", "seed"], kind="stable")
    return df.drop(columns="_k").reset_index(drop=True)


def write_report(
    out_dir: str | Path,
    results: pd.DataFrame,
    provenance: Mapping,
    figures: Mapping[str, str | Path] | None = None,
    tables: Mapping[str, pd.DataFrame] | None = None,
    title: str = "ELMo probing report",
    *,
    notes: Mapping[str, str] | None = None,
    links: Mapping[str, str] | None = None,
    filename: str = "report.html",
) -> Path:
    """Write ``out_dir/<filename>`` (default ``report.html``) and return its path.

    ``results``: the tidy results table (DESIGN.md). ``provenance``: nested dict of fingerprints,
    hyperparameters and versions, shown as a list. ``figures``: name -> .png/.svg file, embedded in this
    order, each with the note of :data:`FIGURE_NOTES` whose key prefixes the name (or ``notes[name]``).
    ``tables``: heading -> DataFrame, shown after the figures. ``links``: label -> relative address of a
    companion file (e.g. the occurrence explorer), listed under "Interactive".
    """
    if not isinstance(provenance, Mapping):
        raise TypeError(f"provenance: expected a dict, got {type(provenance).__name__}")
    summary = summary_table(results, provenance.get("kinds"))
    figures = dict(figures or {})
    tables = dict(tables or {})
    for name, t in tables.items():
        if not isinstance(t, pd.DataFrame):
            raise TypeError(f"table {name!r}: expected a pandas DataFrame, got {type(t).__name__}")
    notes = dict(notes or {})

    sections = [("verdict", "Verdict"), ("summary", "Summary")]
    lead_figures = {n: p for n, p in figures.items() if n == "overview"}
    figures = {n: p for n, p in figures.items() if n not in lead_figures}
    if figures:
        sections.append(("figures", "Figures"))
    if tables:
        sections.append(("tables", "Tables"))
    links = dict(links or {})
    if links:
        sections.append(("interactive", "Interactive"))
    sections += [("results", "All results"), ("provenance", "Provenance")]

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{_e(title)}</h1>",
        f'<p class="meta">{len(results)} result rows, {results["task"].nunique()} task(s); '
        "scores in percent unless stated; intervals are 95% confidence intervals.</p>",
        "<nav><ul>" + "".join(f'<li><a href="#{s}">{_e(h)}</a></li>' for s, h in sections) + "</ul></nav></header>",
        '<section id="verdict"><h2>Verdict</h2>',
        _verdict_html(results),
        *(_figure_html(name, Path(path), _note_for(name, notes)) for name, path in lead_figures.items()),
        "</section>",
        '<section id="summary"><h2>Summary</h2>',
        "<p>Per task: the best single layer of each encoder on the task's headline metric (F1 for WSD, UUAS "
        "for a structural distance probe, Root% for a depth probe, else accuracy), its score and interval, and "
        "its margin over the next layer with the paired bootstrap CI over test sentences (significant when "
        "that CI excludes zero).</p>",
        _summary_html(summary),
        "</section>",
    ]
    if figures:
        parts.append('<section id="figures"><h2>Figures</h2>')
        parts += [_figure_html(name, Path(path), _note_for(name, notes)) for name, path in figures.items()]
        parts.append("</section>")
    if tables:
        parts.append('<section id="tables"><h2>Tables</h2>')
        for name, t in tables.items():
            parts.append(f'<h3 id="table-{_e(fg.slug(name))}">{_e(name)}</h3>')
            parts.append(_html_table(t))
        parts.append("</section>")
    if links:
        parts.append('<section id="interactive"><h2>Interactive</h2><ul>')
        parts += [f'<li><a href="{_e(href)}">{_e(label)}</a></li>' for label, href in links.items()]
        parts.append("</ul></section>")
    parts += [
        '<section id="results"><h2>All results</h2>',
        "<details><summary>Every row of the results table as stored (values are fractions, not percent)</summary>",
        _html_table(_results_display(results), fmt={"value": ".4f", "ci_low": ".4f", "ci_high": ".4f"}),
        "</details></section>",
        '<section id="provenance"><h2>Provenance</h2>',
        "<details><summary>Models, corpora, settings and versions behind these numbers</summary>",
        _provenance_html(provenance),
        "</details></section>",
        f"<footer>Generated by probing {_e(probing.__version__)} (Python {_e(platform.python_version())}, "
        f"pandas {_e(pd.__version__)}, matplotlib {_e(matplotlib.__version__)}).</footer>",
        "</body></html>",
    ]
    if not filename or Path(filename).name != filename:
        raise InputError(f"filename {filename!r} must be a plain file name without directories")
    path = Path(out_dir) / filename
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
    return path


def draw_figures(
    results: pd.DataFrame,
    tables: Mapping[str, pd.DataFrame | None] | None = None,
    kinds: Mapping[str, str] | None = None,
) -> dict[str, Figure]:
    """Every layer-comparison figure the tables support, by name (a plain file stem), in report order.

    ``tables``: the run's side tables by name (:data:`probing.results.schema.SIDE_TABLES`; absent or None: no
    rows). The report chooses no figure by a metric's or a task's name: it asks each task's kind (``kinds``:
    task -> kind name, from the run's provenance; else inferred from the metrics,
    :func:`probing.tasks.task_kinds`) and each registered task option. Per task, dataset and split with the
    kind's headline: ``layer_scores_*`` (``syntax_*`` when the kind draws metrics ``beside`` its headline, e.g.
    a structural probe's Spearman correlation), then the kind's own ``figures`` hook's figures (``<stem>_*``;
    the tagging kinds': ``selectivity_*``, ``directions_*``, ``oov_glove_*``, ``oov_train_*``); the suffix is
    the task, plus dataset and split when the task was scored on several. Then each option's figures
    (:attr:`probing.tasks.TaskOption.figures`: MDL's ``codelength_*`` and ``compression_*``, the learning
    curves' ``learning_curve_*``, erasure's ``present_vs_used_*``, ...); then ``mix_weights`` when the
    ``mix_weights`` table has rows; ``tag_gains_*`` (layer 0 -> 1) for every ``per_tag`` group with both
    layers; ``overview`` when a task's kind asks for a panel (:func:`probing.tasks.overview_panels`: tagging
    and WSD); ``similarity_<measure>`` (linear CKA when present, else the first measure) when the
    ``similarity`` table has rows.
    """
    from probing.tasks.registry import TASK_OPTIONS, overview_panels, task_kinds

    given = {name: df for name, df in (tables or {}).items() if df is not None}
    agg = aggregate(results)
    all_keys = list(agg[["task", "dataset", "split"]].drop_duplicates().itertuples(index=False, name=None))
    of = task_kinds(results, kinds, strict=False)

    def metrics_of(task: str, dataset: str, split: str) -> set[str]:
        return set(agg.loc[(agg["task"] == task) & (agg["dataset"] == dataset) & (agg["split"] == split), "metric"])

    keys = [k for k in all_keys if k[0] in of and of[k[0]].headline in metrics_of(*k)]
    n_keys = {task: sum(k[0] == task for k in keys) for task, _, _ in keys}

    def suffix(task: str, dataset: str, split: str) -> str:
        return fg.slug(task if n_keys.get(task, 1) == 1 else f"{task}_{dataset}_{split}")

    out: dict[str, Figure] = {}
    for task, dataset, split in keys:
        rows = agg[(agg["task"] == task) & (agg["dataset"] == dataset) & (agg["split"] == split)]
        name = suffix(task, dataset, split)
        kind = of[task]
        beside = [m for m in kind.beside if m in set(rows["metric"])]
        if kind.layer_figures and beside:
            out[f"syntax_{name}"] = fg.layer_scores_panels(
                results, task, [kind.headline, *beside], dataset=dataset, split=split
            )
        elif kind.layer_figures:
            out[f"layer_scores_{name}"] = fg.layer_scores(results, task, kind.headline, dataset=dataset, split=split)
        if kind.figures is not None:
            for stem, fig in kind.figures(results, task, dataset, split).items():
                out[f"{fg.slug(stem)}_{name}"] = fig
    for option in TASK_OPTIONS.values():
        if option.figures is not None:
            out.update(option.figures(results, given))
    mix = given.get("mix_weights")
    if mix is not None and len(mix):
        out["mix_weights"] = fg.mix_weights(mix)
    per_tag = given.get("per_tag")
    if per_tag is not None and len(per_tag):
        groups = [
            (key, g)
            for key, g in per_tag.groupby(["task", "dataset", "split", "encoder"], sort=False)
            if {"0", "1"} <= set(g["layer"].astype(str))
        ]
        several = len({key[:3] for key, _ in groups}) < len(groups)
        for (task, dataset, split, encoder), g in groups:
            name = suffix(task, dataset, split) + (f"_{fg.slug(encoder)}" if several else "")
            out[f"tag_gains_{name}"] = fg.tag_gains(g, task, encoder=encoder)
    panels = overview_panels(results, kinds)
    if panels:
        first: dict[str, str] = {}
        for task, dataset, _ in keys:
            first.setdefault(task, dataset)
        out["overview"] = fg.overview(results, panels, datasets=first)
    similarity = given.get("similarity")
    if similarity is not None and len(similarity):
        measures = list(dict.fromkeys(similarity["measure"].astype(str)))
        measure = "linear_cka" if "linear_cka" in measures else measures[0]
        out[f"similarity_{fg.slug(measure)}"] = fg.similarity_heatmap(similarity, measure)
    return out


def build_report(
    results_dir: str | Path,
    out: str | Path | None = None,
    *,
    figures_dir: str | Path | None = None,
    formats: tuple[str, ...] = ("png", "svg"),
    title: str = "ELMo probing report",
) -> Path:
    """Redraw the figures and write the HTML report of a finished run, without re-running any probe.

    ``results_dir`` is a folder written by :func:`probing.experiment.run_experiment`: ``results.csv`` and
    ``results.json`` (required) and its side tables (each registered one used when present). Figures
    (:func:`draw_figures`) are saved in ``formats`` into ``figures_dir`` (default: ``figures/`` beside the
    report); the report embeds the PNG (else the SVG) files. ``out``: the HTML file (default
    ``results_dir/report.html``). Returns the report's path.
    """
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise FileNotFoundError(f"results folder not found: {results_dir}")
    results = read_results(results_dir)
    provenance = read_provenance(results_dir)
    tables = {name: read_side_table(results_dir, name) for name in SIDE_TABLES}
    out = Path(out) if out is not None else results_dir / "report.html"
    figures_dir = Path(figures_dir) if figures_dir is not None else out.parent / "figures"
    embed = "png" if "png" in formats else "svg"
    if embed not in formats:
        raise InputError(f"formats must include png or svg (the report embeds one of them), got {formats}")
    files = {}
    for name, fig in draw_figures(results, tables, provenance.get("kinds")).items():
        files[name] = fg.save(fig, figures_dir, name, formats=formats)[embed]
    return write_report(out.parent, results, provenance, figures=files, title=title, filename=out.name)
