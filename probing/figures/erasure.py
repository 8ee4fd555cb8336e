"""Present vs used (issue 30): is a property that a probe finds in a layer also used by the model?

:func:`present_vs_used` draws, for one task and each property erased in its rows (the results'
``intervention`` column, :data:`probing.results.schema.INTERVENTION`):

* **present**: the probe accuracy of the property itself per layer (the task named as the property, e.g. the
  ``upos`` task for ``erase:upos:leace``), and what a probe reads after the erasure when that task was run
  erased too;
* **used**: the drop in the task's headline metric per layer when the property is erased (unedited minus
  erased, in points) for the eraser and for its same-rank random control (Elazar et al.'s control), beside each
  other; ``erase:`` rows are compared with the same encoder's unedited rows, ``intervene:<n>:`` rows (erased
  inside the biLM) with the unedited rows of the encoder they were made from (``bases``, else the unedited
  encoder whose layers below ``n`` score exactly as the intervened one's: they are the same vectors);
* **the LM** (with an :func:`probing.analysis.intervention.lm_effect` table): the change in held-out perplexity per
  direction for each intervention, beside its random control.

Error bars are 95 % intervals. A drop's interval combines the two rows' bootstrap half-widths as if they
were independent (``sqrt(a**2 + b**2)`` on each side); both rows are scored on the same test sentences, so
this is wider than a paired interval would be. The LM's intervals are paired (:func:`~probing.analysis.intervention.lm_effect`).
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from probing.errors import InputError
from probing.figures.style import OKABE_ITO, STYLE, check_columns, listing, new_figure
from probing.results import Intervention, layer_sort_key
from probing.results import metric as metric_info
from probing.results.aggregate import aggregate
from probing.results.schema import INTERVENTION
from probing.results.tables import validate_results

ERASED_COLOUR = OKABE_ITO["vermillion"]
CONTROL_COLOUR = "0.55"
LM_COLUMNS = ("intervention", "measure", "direction", "change", "change_ci_low", "change_ci_high")


def erased_properties(results: pd.DataFrame, task: str) -> list[str]:
    """The properties erased in ``task``'s rows, in order of appearance."""
    df = validate_results(results)
    tags = df.loc[(df["task"] == task) & (df[INTERVENTION] != ""), INTERVENTION].unique()
    return list(dict.fromkeys(Intervention.parse(str(t)).label for t in tags))


def _aggregate_all(results: pd.DataFrame) -> pd.DataFrame:
    """:func:`aggregate` of each intervention's rows apart, with the ``intervention`` column kept."""
    df = validate_results(results)
    parts = [
        aggregate(g.assign(**{INTERVENTION: ""})).assign(**{INTERVENTION: tag})
        for tag, g in df.groupby(INTERVENTION, sort=False)
    ]
    return pd.concat(parts, ignore_index=True)


def _base_of(agg: pd.DataFrame, encoder: str, below: int, bases: Mapping[str, str] | None) -> str | None:
    """The unedited encoder an ``intervene:<below>`` encoder was made from: ``bases[encoder]``, else the one
    whose rows on the layers below ``below`` equal the intervened encoder's exactly (None when not one)."""
    if bases and encoder in bases:
        return bases[encoder]
    plain = agg[agg[INTERVENTION] == ""]
    mine = agg[(agg["encoder"] == encoder) & agg["layer"].isin([str(k) for k in range(below)])]
    if mine.empty:
        return None
    keys = ["task", "dataset", "split", "layer", "metric"]
    found = []
    for name, rows in plain.groupby("encoder"):
        if name == encoder:
            continue
        joined = mine.merge(rows, on=keys, suffixes=("", "_base"))
        if len(joined) == len(mine) and np.array_equal(joined["value"], joined["value_base"]):
            found.append(str(name))
    return found[0] if len(found) == 1 else None


def _drops(
    agg: pd.DataFrame, task: str, dataset: str, split: str, metric: str, prop: str, bases: Mapping[str, str] | None
) -> pd.DataFrame:
    """One row per (where, method, encoder, layer): ``drop`` = unedited minus erased (metric units, a drop is
    positive when higher is better) and its interval ``lo``, ``hi``."""
    sel = agg[(agg["task"] == task) & (agg["dataset"] == dataset) & (agg["split"] == split) & (agg["metric"] == metric)]
    plain = sel[sel[INTERVENTION] == ""].set_index(["encoder", "layer"])
    sign = 1.0 if metric_info(metric).higher_is_better else -1.0
    rows = []
    erased = sel[(sel[INTERVENTION] != "") & sel["layer"].str.fullmatch(r"\d+[fb]?")]
    for tag, g in erased.groupby(INTERVENTION, sort=False):
        iv = Intervention.parse(str(tag))
        where, label, method = iv.where, iv.label, iv.method
        if label != prop:
            continue
        for r in g.itertuples(index=False):
            if iv.layer is None:
                base: str | None = str(r.encoder)
            else:
                base = _base_of(agg, str(r.encoder), iv.layer, bases)
                if base is not None and int(str(r.layer).rstrip("fb")) < iv.layer:
                    continue  # below the intervened layer nothing changed
            if base is None or (base, r.layer) not in plain.index:
                continue
            ref = plain.loc[(base, r.layer)]
            drop = sign * (float(ref["value"]) - float(r.value))
            half_lo = np.hypot(float(ref["value"]) - float(ref["ci_low"]), float(r.value) - float(r.ci_low))
            half_hi = np.hypot(float(ref["ci_high"]) - float(ref["value"]), float(r.ci_high) - float(r.value))
            rows.append((where, method, base, str(r.layer), drop, drop - half_hi, drop + half_lo))
    return pd.DataFrame(rows, columns=["where", "method", "encoder", "layer", "drop", "lo", "hi"])


def _present(agg: pd.DataFrame, prop: str, dataset: str, split: str) -> pd.DataFrame:
    """The property's own task (named ``prop``): its headline per (intervention, encoder, layer)."""
    sel = agg[agg["task"] == prop]
    if sel.empty:
        return sel
    if ((sel["dataset"] == dataset) & (sel["split"] == split)).any():
        sel = sel[(sel["dataset"] == dataset) & (sel["split"] == split)]
    else:  # the property's task may be scored on another test set than the task's
        first = sel.iloc[0]
        sel = sel[(sel["dataset"] == first["dataset"]) & (sel["split"] == first["split"])]
    metric = "accuracy" if "accuracy" in set(sel["metric"]) else str(sel["metric"].iloc[0])
    return sel[sel["metric"] == metric]


def _draw_present(ax: Axes, rows: pd.DataFrame, prop: str, agg: pd.DataFrame, bases: Mapping[str, str] | None) -> None:
    """The property's probe per layer: each encoder that was erased (``erase:`` rows) or intervened on, unedited
    and after each eraser; an intervened encoder's line is drawn beside the encoder it was made from."""
    metric = str(rows["metric"].iloc[0])
    scale = metric_info(metric).scale
    lines: list[tuple[str, str, pd.DataFrame]] = []  # (base encoder, method or "", rows)
    for (tag, enc), g in rows.groupby([INTERVENTION, "encoder"], sort=False):
        if not tag:
            continue
        iv = Intervention.parse(str(tag))
        if iv.layer is None:
            lines.append((str(enc), iv.method, g))
        else:
            base = _base_of(agg, str(enc), iv.layer, bases)
            if base is not None:
                lines.append((base, f"{iv.method}, in biLM", g))
    shown = list(dict.fromkeys(base for base, _, _ in lines))
    plain = rows[(rows[INTERVENTION] == "") & rows["encoder"].isin(shown)]
    lines = [(str(enc), "", g) for enc, g in plain.groupby("encoder", sort=False)] + lines
    for enc, method, g in lines:
        g = g[g["layer"].str.fullmatch(r"\d+")].sort_values("layer", key=lambda s: s.map(layer_sort_key))
        x = g["layer"].astype(int).to_numpy()
        v = g["value"].to_numpy() * scale
        err = np.vstack([v - g["ci_low"].to_numpy() * scale, g["ci_high"].to_numpy() * scale - v])
        colour = OKABE_ITO["blue"] if not method else CONTROL_COLOUR if method.startswith("random") else ERASED_COLOUR
        name = f"after {method}" if method else "unedited"
        ax.errorbar(
            x,
            v,
            yerr=np.nan_to_num(err),
            color=colour,
            linestyle=":" if "in biLM" in method else "--" if method else "-",
            marker="o",
            capsize=3,
            label=name if len(shown) == 1 else f"{enc}, {name}",
            gid=f"present-{method.replace(', in biLM', '-biLM') or 'unedited'}-{enc}",
        )
    ax.set_xlabel("layer")
    ax.set_xticks(sorted({int(v) for v in rows["layer"] if str(v).isdigit()}))
    ax.set_ylabel(f"{prop} probe, {metric_info(metric).label}")
    ax.set_title(f"present: {prop} per layer")
    ax.legend(frameon=False, fontsize=8)


def _draw_used(ax: Axes, drops: pd.DataFrame, task: str, metric: str, prop: str) -> None:
    scale = metric_info(metric).scale
    groups = list(
        dict.fromkeys(
            (w, e, lay)
            for w, e, lay in sorted(
                drops[["where", "encoder", "layer"]].itertuples(index=False, name=None),
                key=lambda k: (k[0] != "erase", k[0], k[1], layer_sort_key(k[2])),
            )
        )
    )
    methods = list(dict.fromkeys(sorted(drops["method"], key=lambda m: (m == "random", m))))
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(groups))
    for j, method in enumerate(methods):
        sub = drops[drops["method"] == method].set_index(["where", "encoder", "layer"])
        have = [g in sub.index for g in groups]
        v = np.array([sub.loc[g, "drop"] if h else np.nan for g, h in zip(groups, have)]) * scale
        lo = np.array([sub.loc[g, "lo"] if h else np.nan for g, h in zip(groups, have)]) * scale
        hi = np.array([sub.loc[g, "hi"] if h else np.nan for g, h in zip(groups, have)]) * scale
        ax.bar(
            x + (j - (len(methods) - 1) / 2) * width,
            v,
            width,
            yerr=np.nan_to_num(np.vstack([v - lo, hi - v])),
            color=CONTROL_COLOUR if method == "random" else ERASED_COLOUR,
            label=f"{method} (same-rank control)" if method == "random" else method,
            capsize=3,
            zorder=2,
            gid=f"used-{method}",
        )
    one_encoder = len({g[1] for g in groups}) == 1
    ax.set_xticks(
        x,
        [
            ("" if one_encoder else f"{enc}\n") + (f"layer {lay}" if where == "erase" else f"layer {lay}\nin biLM")
            for where, enc, lay in groups
        ],
    )
    inside = sorted({where.partition(":")[2] for where, _, _ in groups if where != "erase"})
    if inside:
        ax.set_xlabel(
            f"in biLM: {prop} erased from layer {', '.join(inside)} inside the model, the layers above recomputed"
        )
    ax.axhline(0, color="0.3", linewidth=0.8)
    unit = "points" if scale == 100 else metric_info(metric).label
    ax.set_ylabel(f"drop in {task} {metric} ({unit})")
    ax.set_title(f"used: {task} when {prop} is erased")
    ax.legend(frameon=False, fontsize=8)


def _draw_lm(ax: Axes, lm: pd.DataFrame, prop: str) -> None:
    rows = lm[(lm["measure"] == "perplexity") & (lm["intervention"] != "")]
    rows = rows[[Intervention.parse(str(t)).label == prop for t in rows["intervention"]]]
    tags = list(dict.fromkeys(rows["intervention"]))
    directions = list(dict.fromkeys(rows["direction"]))
    width = 0.8 / max(1, len(tags))
    x = np.arange(len(directions))
    for j, tag in enumerate(tags):
        sub = rows[rows["intervention"] == tag].set_index("direction").loc[directions]
        iv = Intervention.parse(str(tag))
        where, method = iv.where, iv.method
        v = sub["change"].to_numpy()
        ax.bar(
            x + (j - (len(tags) - 1) / 2) * width,
            v,
            width,
            yerr=np.vstack([v - sub["change_ci_low"].to_numpy(), sub["change_ci_high"].to_numpy() - v]),
            color=CONTROL_COLOUR if method == "random" else ERASED_COLOUR,
            label=f"{method}, {where.replace(':', ' ')}",
            capsize=3,
            zorder=2,
            gid=f"lm-{tag}",
        )
    ax.set_xticks(x, directions)
    ax.axhline(0, color="0.3", linewidth=0.8)
    ax.set_ylabel("change in perplexity")
    ax.set_title(f"the LM when {prop} is erased")
    ax.legend(frameon=False, fontsize=8)


def present_vs_used(
    results: pd.DataFrame,
    task: str,
    metric: str,
    *,
    dataset: str | None = None,
    split: str | None = None,
    lm: pd.DataFrame | None = None,
    bases: Mapping[str, str] | None = None,
) -> Figure:
    """One row of panels per property erased in ``task``'s rows: present (the property's own probe per
    layer), used (the drop in ``task``'s ``metric``, its headline, per layer: eraser vs random control)
    and, with ``lm`` (an :func:`~probing.analysis.intervention.lm_effect` table), the LM's perplexity change.
    ``bases``: intervened encoder -> the encoder it was made from (else found, see the module docstring)."""
    agg = _aggregate_all(results)
    sel = agg[agg["task"] == task]
    if sel.empty:
        raise InputError(f"present_vs_used: no rows of task {task!r}; tasks are {listing(agg['task'])}")
    dataset = dataset or str(sel["dataset"].iloc[0])
    split = split or str(sel.loc[sel["dataset"] == dataset, "split"].iloc[0])
    props = erased_properties(results, task)
    if not props:
        raise InputError(
            f"present_vs_used: task {task!r} has no erased rows (intervention column empty): run it with "
            "erase = {...} in its [[tasks]] table or with an encoder's intervene = {...}"
        )
    if lm is not None:
        check_columns(lm, LM_COLUMNS, "present_vs_used: lm")
    panels = []
    for prop in props:
        present = _present(agg, prop, dataset, split)
        drops = _drops(agg, task, dataset, split, metric, prop, bases)
        has_lm = lm is not None and any(
            t and Intervention.parse(str(t)).label == prop
            for t in lm.loc[lm["measure"] == "perplexity", "intervention"]
        )
        panels.append((prop, present, drops, has_lm))
    n_cols = max(1 + (not p.empty) + h for _, p, _, h in panels)
    with matplotlib.rc_context(STYLE):
        fig = new_figure(4.2 * n_cols, 3.5 * len(panels))
        axes = fig.subplots(len(panels), n_cols, squeeze=False)
        for row, (prop, present, drops, has_lm) in zip(axes, panels):
            col = 0
            if not present.empty:
                _draw_present(row[col], present, prop, agg, bases)
                col += 1
            if drops.empty:
                row[col].text(0.5, 0.5, "no unedited rows to compare with", ha="center", transform=row[col].transAxes)
            else:
                _draw_used(row[col], drops, task, metric, prop)
            col += 1
            if has_lm:
                assert lm is not None
                _draw_lm(row[col], lm, prop)
                col += 1
            for ax in row[col:]:
                ax.set_visible(False)
        fig.suptitle(f"{task} ({dataset}/{split}): present vs used")
    return fig


def erasure_figures(results: pd.DataFrame, task: str, dataset: str, split: str, metric: str) -> dict[str, Figure]:
    """The ``erase`` option's figures (:mod:`probing.tasks.erase`) for erased rows: ``{"present_vs_used": ...}`` (on ``metric``, the task's
    headline) when ``task`` has erased or intervened rows on (dataset, split), else nothing."""
    df = validate_results(results)
    mine = df[(df["task"] == task) & (df["dataset"] == dataset) & (df["split"] == split)]
    if not (mine[INTERVENTION] != "").any():
        return {}
    return {"present_vs_used": present_vs_used(results, task, metric, dataset=dataset, split=split)}
