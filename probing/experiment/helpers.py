"""``probe_layers``: one call from data to a tidy results table, for notebooks and coursework; and
``fit_layer_probes``: one fitted :class:`LinearProbe` per layer of a store, to run on new vectors.

It builds an experiment as a plain dict (the same structure as an experiment TOML file, with
:class:`~probing.corpora.Corpus` objects where a file names data), checks it with
:func:`~probing.experiment.parse_experiment` and runs it with :func:`~probing.experiment.run_experiment`,
so a one-liner gets the same probes, control tasks, baselines, confidence intervals and caching as
``probing run``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from probing.corpora.base import Corpus
from probing.encoders import ENCODER_KINDS
from probing.errors import InputError
from probing.experiment.runner import run_experiment
from probing.experiment.spec import parse_experiment
from probing.probes.linear import LinearProbe
from probing.protocols import StoreLike

Data = str | Corpus
QUICK_PROBE: dict[str, Any] = {"C": [0.01, 1.0, 100.0], "mix": False, "concat": False}
"""``probe_layers``'s ``[probe]`` defaults unless ``thorough=True``: every layer and its control task, over a
coarse C grid (steps of 100 across the range where probes of ELMo, GloVe and a random ELMo land)."""


def _encoder_table(encoder: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(encoder, Mapping):
        return dict(encoder)
    if encoder in ENCODER_KINDS:
        return {"name": encoder, "kind": encoder}  # the kind's defaults (ELMo kinds: the bundled model)
    from probing.elmo.hub import REGISTRY

    if encoder in REGISTRY:
        return {"name": encoder, "kind": "elmo", "model": encoder}
    raise InputError(
        f"unknown encoder {encoder!r}: give an encoder kind ({', '.join(ENCODER_KINDS)}), a checkpoint name "
        f"({', '.join(REGISTRY)}) or an [[encoders]] table as a dict"
    )


def _spec(value: Data, role: str) -> Data:
    if isinstance(value, (str, Corpus)):
        return value
    raise InputError(f"{role}: expected a corpus spec ('demo-ud:train', 'conllu:PATH', ...) or a Corpus, got {value!r}")


def probe_layers(
    train: Data,
    test: Data | Sequence[Data],
    *,
    label: str = "upos",
    encoders: Sequence[str | Mapping[str, Any]] = ("elmo",),
    dev: Data | None = None,
    kind: str = "tagging",
    probe: Mapping[str, Any] | None = None,
    seeds: Sequence[int] = (0,),
    bootstrap: int = 1000,
    max_sentences: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    progress: bool = True,
    thorough: bool = False,
) -> pd.DataFrame:
    """Probe every layer of each encoder for ``label`` and return the tidy results table.

    By default each layer gets a probe and a control task, with C chosen from ``QUICK_PROBE``'s grid
    ``[0.01, 1, 100]``: UPOS on demo-ud (52k training, 7.7k dev, 13k test tokens) with
    ``encoders=["elmo", "glove"]`` and the stores cached took 284 s (277 CPU s) on a shared 2-core machine.
    On a few hundred training sentences ELMo's probes often pick 0.01, the grid's end, and the run warns:
    pass ``probe={"C": [0.001, 0.01, 0.1, 1]}`` to look below it.
    ``thorough=True`` adds the scalar mix, the concatenation of all layers and the
    experiment file's full grid ``[0.001 ... 100]``: with these the same call on an 82k-token corpus with
    ``encoders=["elmo", "glove"]`` took 20 minutes on a 2-core laptop, 6-7 of them in each of the mix and
    the concatenation. ``benchmarks/bench_probe_layers.py`` times both settings on demo-ud. ``probe`` keys
    override either (``probe={"mix": True}`` adds only the mix).

    ``train``, ``dev`` and ``test`` (one or a list) are corpus specs (``"demo-ud:train"``,
    ``"conllu:my.conllu"``, ``"text:PATH"``, ``"raganato:XML[:KEY]"``) or :class:`~probing.corpora.Corpus`
    objects. ``label`` is a tagging label (``upos``, ``xpos``, ``deprel``, ``feats:Number``, ...; ignored for
    other ``kind``). ``encoders``: ``elmo`` (the bundled default), ``random-elmo``, ``glove``, a checkpoint
    name, or ``[[encoders]]`` tables as dicts. ``probe`` is the ``[probe]`` table (``C``, ``max_iter``,
    ``control``, ``mix``, ``concat``, ...). Without ``out_dir`` the files are written to a temporary folder
    that is removed. Columns: ``task, dataset, split, encoder, layer, metric, value, ci_low, ci_high, seed``.

    Examples
    --------
    UPOS from the bundled model's layers on 40 sentences of each split of the bundled UD slice (one C, no
    control task, 10 bootstrap replicates: a quick look, not a finding):

    >>> results = probe_layers(
    ...     "demo-ud:train",
    ...     "demo-ud:test",
    ...     max_sentences=40,
    ...     probe={"C": [1.0], "max_iter": 500, "control": False},
    ...     bootstrap=10,
    ...     progress=False,
    ... )
    >>> accuracy = results[results.metric == "accuracy"].set_index(["encoder", "layer"]).value
    >>> accuracy.index.tolist()
    [('elmo', '0'), ('elmo', '1'), ('elmo', '2'), ('baseline', 'majority'), ('baseline', 'most-frequent-tag')]
    >>> bool(accuracy["elmo"].min() > accuracy["baseline"].max())
    True
    """
    tests = [test] if isinstance(test, (str, Corpus)) else list(test)
    if not tests:
        raise InputError("test: give at least one test corpus")
    tables = [_encoder_table(e) for e in encoders]
    task: dict[str, Any] = {"name": label if kind == "tagging" else kind, "kind": kind}
    if kind == "tagging":
        task["label"] = label
    task["train"] = _spec(train, "train")
    if dev is not None:
        task["dev"] = _spec(dev, "dev")
    task["test"] = [_spec(t, "test") for t in tests]
    experiment: dict[str, Any] = {"name": "probe_layers", "seeds": list(seeds), "bootstrap": bootstrap}
    if max_sentences:
        experiment["max_sentences"] = max_sentences
    if cache_dir is not None:
        experiment["cache_dir"] = str(Path(cache_dir).expanduser().resolve())
    settings = {**({} if thorough else QUICK_PROBE), **(probe or {})}
    spec = {"experiment": experiment, "probe": settings, "encoders": tables, "tasks": [task]}
    exp = parse_experiment(spec, source="probe_layers()")
    if out_dir is not None:
        return run_experiment(exp, out_dir, progress=progress).results
    with tempfile.TemporaryDirectory(prefix="probing-") as tmp:
        return run_experiment(exp, tmp, progress=progress).results


def fit_layer_probes(
    store: StoreLike, layers: Sequence[str], label: str = "upos", *, C: float = 1.0, max_iter: int = 100
) -> dict[str, LinearProbe]:
    """One :class:`LinearProbe` per layer (or half, ``"1f"``) on the store's labelled tokens (column ``label``)."""
    tokens = store.tokens
    if label not in tokens.columns:
        raise InputError(f"the store's token table has no column {label!r}")
    y = tokens[label].fillna("").astype(str).to_numpy()
    rows = np.flatnonzero(y != "")
    if len(rows) == 0:
        raise InputError(f"{store}: no token has a {label!r} label")
    return {
        layer: LinearProbe(C=C, max_iter=max_iter).fit(store.layer(layer, rows=rows, dtype=np.float32), y[rows])
        for layer in layers
    }
