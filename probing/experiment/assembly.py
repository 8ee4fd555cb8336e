"""Assembling a run: the jobs' outputs into the results table and its side tables, with provenance, written
atomically into the output folder; and :class:`Results`, what :func:`~probing.experiment.run_experiment`
returns."""

from __future__ import annotations

import dataclasses
import hashlib
import html
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from probing.encoders import Encoder
from probing.experiment.spec import DataRef, Experiment
from probing.results import (
    INTERVENTION,
    RESULT_COLUMNS,
    SIDE_TABLES,
    metric,
    sort_layers,
    write_results,
    write_side_table,
)
from probing.results import provenance as run_provenance
from probing.store.reader import Store
from probing.tasks import TASK_KINDS, TaskOutput, headline_metrics
from probing.tasks.options import set_options


def _empty(name: str) -> pd.DataFrame:
    return pd.DataFrame(columns=list(SIDE_TABLES[name].columns))


@dataclass
class Results:
    """What :func:`run_experiment` produced: the tidy results table, provenance, the stores it read (see
    :meth:`store`) and every registered side table by name (``tables``; empty where the run wrote none): the
    scalar-mix weights and per-tag accuracies (:attr:`mix_weights`, :attr:`per_tag`), the layer-similarity
    table of the ``[similarity]`` table (:attr:`similarity`), the learning curves and data-efficiency rows of
    tasks with ``learning_curve`` or ``mdl`` (:attr:`learning_curve`, :attr:`data_efficiency`) and the tables
    of the task options registered from outside."""

    results: pd.DataFrame
    provenance: dict
    stores: dict[tuple[str, str, str], Store]
    out_dir: Path
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame:
        """Side table ``name`` (:data:`probing.results.schema.SIDE_TABLES`): its rows, or none."""
        return self.tables[name] if name in self.tables else _empty(name)

    @property
    def mix_weights(self) -> pd.DataFrame:
        return self.table("mix_weights")

    @property
    def per_tag(self) -> pd.DataFrame:
        return self.table("per_tag")

    @property
    def similarity(self) -> pd.DataFrame:
        return self.table("similarity")

    @property
    def learning_curve(self) -> pd.DataFrame:
        return self.table("learning_curve")

    @property
    def data_efficiency(self) -> pd.DataFrame:
        return self.table("data_efficiency")

    def store(self, encoder: str, dataset: str, split: str) -> Store:
        """The store of ``encoder``'s activations on ``dataset``/``split`` that the run read."""
        try:
            return self.stores[(encoder, dataset, split)]
        except KeyError:
            known = ", ".join(f"({e!r}, {d!r}, {s!r})" for e, d, s in self.stores)
            raise KeyError(f"no store for ({encoder!r}, {dataset!r}, {split!r}); the run read: {known}") from None

    @property
    def headlines(self) -> dict[str, str]:
        """The headline metric of each task (from its kind, as recorded in provenance)."""
        return headline_metrics(self.results, self.provenance.get("headlines"))

    def summary(self) -> pd.DataFrame:
        """Headline score (per task kind: F1 for WSD, accuracy for tagging, ...) in percent where the metric
        is a fraction, mean over seeds: one row per task, dataset, split and encoder, one column per layer
        (baselines under their own names)."""
        df = self.results
        if df.empty:
            return pd.DataFrame()
        heads = self.headlines
        headline = df[df["metric"] == df["task"].map(heads)]
        keys = ["task", "dataset", "split", "encoder", "layer"]
        if (df[INTERVENTION] != "").any():  # erase runs: one row per intervention beside the unerased one
            keys.insert(4, INTERVENTION)
        table = headline.groupby(keys, sort=False)["value"].mean()
        scale = np.array([metric(heads[t]).scale for t in table.index.get_level_values("task")])
        wide = (table * scale).round(1).unstack("layer")
        return wide[sort_layers(wide.columns)]

    def __repr__(self) -> str:
        head = (
            f"Results({len(self.results)} rows, {self.results['task'].nunique()} tasks, "
            f"{len(self.stores)} stores, written to {str(self.out_dir)!r})"
        )
        return f"{head}\n{self.summary().to_string(na_rep='')}"

    def _repr_html_(self) -> str:
        table = self.summary().to_html(na_rep="", float_format="{:.1f}".format)
        return (
            f"<p><b>Probing results</b>: {len(self.results)} rows in {html.escape(str(self.out_dir))} "
            f"(scores in percent, mean over seeds)</p>{table}"
        )


@dataclass
class RunRecord:
    """What a run did, for its provenance: the encoders and the stores it read (with what each cost),
    skipped data, warnings (each issued once), timings, resolved WordNet inventories and reused jobs."""

    encoders: dict[str, Encoder]
    progress: bool = True
    stores: dict[tuple[str, DataRef], Store] = field(default_factory=dict)
    store_info: dict[str, dict] = field(default_factory=dict)
    skipped: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    inventories: dict[str, Any] = field(default_factory=dict)
    cached: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def log(self, msg: str) -> None:
        if self.progress:
            print(msg, file=sys.stderr, flush=True)

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)
            warnings.warn(msg, UserWarning, stacklevel=3)


def probe_warnings(probes: list[dict], Cs: tuple[float, ...]) -> list[str]:
    """Plain-language warnings about the fitted probes' notes: a C chosen at an end of a grid of several
    values (the best C may lie beyond it: extend the grid that way), and fits that stopped at max_iter."""
    out = []
    edges = {min(Cs): "smallest", max(Cs): "largest"} if len(Cs) > 1 else {}
    at_edge = [p for p in probes if p.get("C") in edges]
    for side in ("smallest", "largest"):
        hit = [p for p in at_edge if edges[p["C"]] == side]
        if hit:
            what = ", ".join(f"{p['task']}/{p['encoder']}/{p['layer']}" for p in hit[:6])
            more = f" and {len(hit) - 6} more" if len(hit) > 6 else ""
            direction = "smaller" if side == "smallest" else "larger"
            out.append(
                f"{len(hit)} probe(s) chose the {side} C of the grid {list(Cs)} ({what}{more}): the best C may be "
                f"{direction}; extend [probe] C that way (results.json lists each probe's dev accuracy per C)"
            )
    stuck = [p for p in probes if p.get("converged") is False]
    if stuck:
        what = ", ".join(f"{p['task']}/{p['encoder']}/{p['layer']}" for p in stuck[:6])
        more = f" and {len(stuck) - 6} more" if len(stuck) > 6 else ""
        out.append(
            f"{len(stuck)} probe fit(s) stopped at max_iter before converging ({what}{more}): raise "
            "[probe] max_iter (or mix_max_iter for the scalar mix) or loosen tol"
        )
    return out


@dataclass(frozen=True)
class JobResult:
    """One job's output as :func:`assemble` reads it: its rows get ``intervention`` (``""`` for none: the
    plain job of a plain encoder), and an option's extra run (``extra``: an erase run) keeps no side tables."""

    output: TaskOutput
    intervention: str = ""
    extra: bool = False


def _tagged(out: TaskOutput, intervention: str, extra: bool) -> TaskOutput:
    """``out``'s rows with their ``intervention``; an option's extra run keeps no side-table rows (the side
    tables have no intervention column, and its rows share the encoder name of the plain ones)."""
    if not intervention:
        return out
    rows = [{**r, "intervention": intervention} for r in out.rows]
    return TaskOutput(rows=rows, probes=out.probes) if extra else dataclasses.replace(out, rows=rows)


def _weights_file(encoder: Any) -> dict[str, Any]:
    """``{"weights": {"path", "size", "sha256"}}`` of the file an ELMo encoder's weights come from (an
    intervened encoder's: its base's), or nothing for an encoder without one."""
    record = getattr(getattr(encoder, "base", encoder), "weights_file", None)
    return {} if record is None else {"weights": record}


def assemble(
    exp: Experiment,
    run: RunRecord,
    outputs: list[JobResult],
    similarity: pd.DataFrame | None,
    out_dir: Path,
) -> Results:
    """The results of ``exp`` from its jobs' ``outputs`` in plan order, and its ``[similarity]`` table (None without one): the tables,
    the probe warnings and provenance, written into ``out_dir`` (a stale side table of an earlier run of the
    folder is removed)."""
    from probing.devices import describe, resolve_device

    total = TaskOutput()
    for done in outputs:
        total.extend(_tagged(done.output, done.intervention, done.extra))
    for msg in probe_warnings(total.probes, exp.probe.Cs):
        run.warn(msg)
    results = pd.DataFrame(total.rows, columns=RESULT_COLUMNS)
    tables = {
        name: pd.DataFrame(total.tables.get(name, []), columns=list(table.columns))
        for name, table in SIDE_TABLES.items()
    }
    tables["similarity"] = _empty("similarity") if similarity is None else similarity
    for option in dict.fromkeys(option for task in exp.tasks for option, _ in set_options(task.options)):
        if option.finish is not None:
            option.finish(tables)
    run.timings["total"] = round(time.time() - run.started, 3)
    prov = run_provenance(
        experiment=exp.to_dict(),
        experiment_sha256=hashlib.sha256(exp.text.encode()).hexdigest(),
        experiment_toml=exp.text,
        encoders={
            spec.name: {
                "kind": spec.kind,
                "fingerprint": run.encoders[spec.name].fingerprint,
                "layer_names": list(run.encoders[spec.name].layer_names),
                "dim": int(run.encoders[spec.name].dim),
                "source": getattr(run.encoders[spec.name], "source", None),
                **_weights_file(run.encoders[spec.name]),
            }
            for spec in exp.encoders
        },
        stores=run.store_info,
        probe=exp.probe.to_dict(),
        seeds=list(exp.probe.seeds),
        headlines={t.name: TASK_KINDS[t.kind].headline for t in exp.tasks},
        kinds={t.name: t.kind for t in exp.tasks},
        wordnet={name: inv.provenance() | {"fingerprint": inv.fingerprint()} for name, inv in run.inventories.items()},
        probes=total.probes,
        skipped=run.skipped,
        warnings=run.warnings,
        cached_jobs=run.cached,
        timings=run.timings,
        device=describe(resolve_device()),
    )
    write_results(results, out_dir, prov)
    for name, table in SIDE_TABLES.items():  # a stale table of an earlier run of the folder goes
        if table.always or not tables[name].empty or (name == "similarity" and similarity is not None):
            write_side_table(tables[name], out_dir, name)
        else:
            (out_dir / table.file).unlink(missing_ok=True)
    res = Results(
        results=results,
        provenance=prov,
        stores={(enc, ref.dataset, ref.split): store for (enc, ref), store in run.stores.items()},
        out_dir=out_dir,
        tables=tables,
    )
    if run.progress:
        hits = sum(s["cache_hit"] for s in run.store_info.values())
        run.log(
            f"{len(results)} result rows ({hits}/{len(run.store_info)} stores from the cache) in "
            f"{run.timings['total']:.1f} s -> {out_dir}"
        )
    return res
