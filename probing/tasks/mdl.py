"""The MDL option of a classification kind (Voita & Titov 2020), :data:`MDL`: ``mdl = true`` and its keys in a
``[[tasks]]`` table (:func:`parse_mdl`, an :class:`MDLOptions`), and the online-codelength rows of one layer
(:func:`mdl_rows`) on the kind's training :class:`~probing.tasks.labels.Items`. A kind offers it by naming
``"mdl"`` among its ``task_options`` and calling :func:`mdl_rows` for each layer in its ``run`` when
``job.options["mdl"]`` is set (``tagging`` and ``supersense`` do).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.probes.mdl import FRACTIONS, control_codelength, online_codelength
from probing.results import make_row
from probing.results.metrics import MDL as MDL_METRICS
from probing.results.schema import DATA_EFFICIENCY_TABLE
from probing.tasks.common import (
    Part,
    ProbeSettings,
    TaskError,
    TaskOutput,
    quiet_fit,
)
from probing.tasks.labels import Items
from probing.tasks.options import TaskOption

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from probing._toml import Table


MDL_PROBES = ("linear", "mlp")


MDL_EPSILON = 0.5  # bits per token: the loss at which SDL and eSC are read off the online code


@dataclass(frozen=True)
class MDLOptions:
    """The MDL option's value: the probe (``"linear"`` or ``"mlp"``) and how many of the experiment's seeds get
    their own codelength, always in the job key; the MLP's ``hidden_layers`` and ``width`` (set for the MLP
    only) and ``epsilon`` (set only when the file gives ``mdl_epsilon``; None: :data:`MDL_EPSILON`)."""

    probe: str
    seeds: int
    hidden_layers: int | None = None
    width: int | None = None
    epsilon: float | None = None


def mdl_fractions(n_sentences: int) -> tuple[float, ...]:
    """Voita & Titov's block fractions (:data:`probing.probes.mdl.FRACTIONS`) less the leading ones whose
    block would hold no sentence (``int(f * n_sentences) < 1``: fewer than 1000 training sentences), so
    the first block is the first non-empty one."""
    kept = tuple(f for f in FRACTIONS if int(f * n_sentences) >= 1)
    if len(kept) < 2:
        raise TaskError(f"online codelength needs at least 2 blocks; {n_sentences} training sentences give {kept}")
    return kept


def mdl_rows(
    task: str,
    encoder: str,
    layer: str,
    train: Part,
    tr: Items,
    dv: Items,
    X_tr,
    X_dv,
    settings: ProbeSettings,
    options: MDLOptions,
) -> TaskOutput:
    """Online-codelength rows of one layer on the training items (Voita & Titov 2020), and a note per seed.

    One set of rows per seed in the first ``options.seeds`` of ``settings.seeds``: ``codelength_kbits``,
    ``uniform_kbits``, ``compression`` (:func:`probing.probes.mdl.online_codelength`) and ``control-codelength_kbits``
    (:func:`~probing.probes.mdl.control_codelength` on the control task of the same seed). The seed draws the
    sentence order (and the control labels); the dev items stop each block's training early: the linear
    probe picks its L2 strength from ``settings.Cs`` per block by dev cross-entropy, the MLP stops on dev loss
    (without a dev split, the task's held-out tenth of the training sentences is the dev set and is not coded).
    Each seed also gives ``data_efficiency`` rows: Whitney et al.'s SDL (``sdl_kbits``) and eSC
    (``esc_sentences``) at ``options.epsilon`` bits per token (:data:`MDL_EPSILON` by default).
    X_tr, X_dv: (n_train, d), (n_dev, d) activations of the items ``tr``, ``dv``."""
    probe = options.probe
    kwargs: dict[str, Any] = {
        "probe": probe,
        "X_dev": X_dv,
        "fractions": mdl_fractions(len(np.unique(tr.groups))),
        "max_iter": settings.max_iter,
    }
    if probe == "linear":
        kwargs["Cs"] = settings.Cs
    else:
        kwargs.update(hidden_layers=options.hidden_layers or 1, width=options.width or 256)
    out = TaskOutput()
    for seed in settings.seeds[: options.seeds]:
        code, ok = quiet_fit(online_codelength, X_tr, tr.y, tr.groups, y_dev=dv.y, seed=seed, **kwargs)
        control, control_ok = quiet_fit(
            control_codelength,
            X_tr,
            tr.y,
            tr.words.tolist(),
            tr.groups,
            control_seed=seed,
            words_dev=dv.words.tolist(),
            seed=seed,
            **kwargs,
        )
        values = {**code.metrics(), "control-codelength_kbits": control.codelength_kbits}
        out.rows += [
            make_row(task, train.dataset, train.split, encoder, layer, name, value, seed=seed)
            for name, value in values.items()
        ]
        epsilon = float(MDL_EPSILON if options.epsilon is None else options.epsilon)
        sdl, complete = code.surplus_description_length(epsilon)
        esc = code.sample_complexity(epsilon)
        for measure, value, bound in (
            ("sdl_kbits", sdl / 1000, "" if complete else "lower"),
            ("esc_sentences", esc, ""),
        ):
            out.table("data_efficiency").append(
                {
                    "task": task,
                    "dataset": train.dataset,
                    "split": train.split,
                    "encoder": encoder,
                    "layer": layer,
                    "reference_encoder": "",
                    "reference_layer": "",
                    "at_fraction": math.nan,
                    "ratio": math.nan,
                    "measure": measure,
                    "epsilon": epsilon,
                    "value": value,
                    "bound": bound,
                    "seed": seed,
                }
            )
        out.probes.append(
            {
                "task": task,
                "encoder": encoder,
                "layer": layer,
                "seed": seed,
                "mdl": code.params,
                "mdl_control": control.params,
                "mdl_block_tokens": code.block_tokens.tolist(),
                "converged": ok and control_ok,
            }
        )
    return out


def parse_mdl(t: Table) -> MDLOptions | None:
    """The MDL keys: ``mdl`` (false), ``mdl_probe`` ("linear" | "mlp"), ``mdl_seeds`` (1: how many of the
    experiment's seeds get their own codelength), ``mdl_hidden_layers`` (1 | 2) and ``mdl_width`` (256) for
    the MLP, ``mdl_epsilon`` (:data:`MDL_EPSILON` bits per token: where SDL and eSC are read). None without
    ``mdl = true``."""
    on = t.boolean("mdl", False)
    probe = t.string("mdl_probe", "linear", choices=MDL_PROBES)
    seeds = t.integer("mdl_seeds", 1, minimum=1)
    hidden = t.integer("mdl_hidden_layers", 1, minimum=1, maximum=2)
    width = t.integer("mdl_width", 256, minimum=1)
    epsilon = t.number("mdl_epsilon", MDL_EPSILON)
    if not on:
        for key in ("mdl_probe", "mdl_seeds", "mdl_hidden_layers", "mdl_width", "mdl_epsilon"):
            if key in t.data:
                raise t.fail(key, "mdl = true beside it (the key has no effect without it)", t.data[key])
        return None
    if probe != "mlp":
        for key in ("mdl_hidden_layers", "mdl_width"):
            if key in t.data:
                raise t.fail(key, 'mdl_probe = "mlp" beside it (the linear probe has no hidden layers)', t.data[key])
    mlp = probe == "mlp"
    return MDLOptions(
        probe=probe,
        seeds=seeds,
        hidden_layers=hidden if mlp else None,
        width=width if mlp else None,
        epsilon=float(epsilon) if "mdl_epsilon" in t.data else None,
    )


def mdl_work(settings: ProbeSettings, layer_names: Sequence[str], options: MDLOptions) -> dict[str, int]:
    """An online code's units of work per single layer (step ``mdl <layer>``): one fit per C, block and seed,
    and as many again for the control task's code."""
    code = len(settings.Cs) * len(FRACTIONS) * 2 * min(options.seeds, len(settings.seeds))
    return {f"mdl {n}": code for n in layer_names}


def mdl_figures(results: pd.DataFrame, tables: Mapping[str, pd.DataFrame]) -> dict[str, Figure]:
    """Per task and data with MDL rows (its training split): ``codelength_*`` (the control task's beside it)
    and ``compression_*``."""
    from probing import figures as fg

    rows = results[results["metric"] == "codelength_kbits"]
    out = {}
    for (task, dataset, split), name in fg.group_names(rows).items():
        group = results[(results["task"] == task) & (results["dataset"] == dataset) & (results["split"] == split)]
        out[f"codelength_{name}"] = fg.codelength_by_layer(group)
        if "compression" in set(group["metric"]):
            out[f"compression_{name}"] = fg.compression_by_layer(group)
    return out


MDL = TaskOption(
    "mdl",
    MDLOptions,
    parse=parse_mdl,
    metrics=MDL_METRICS,
    tables=(DATA_EFFICIENCY_TABLE,),
    work=mdl_work,
    figures=mdl_figures,
)
