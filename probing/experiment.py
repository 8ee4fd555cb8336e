"""One declarative probing experiment: a TOML file in, a tidy results table (and its side tables) out.

The file names the encoders, the tasks with their data, the probe hyperparameters and the statistics::

    [experiment]
    name = "default"
    seeds = [0, 1, 2]            # control-task seeds (and probe seeds when solver = "adam")
    bootstrap = 1000             # bootstrap replicates over sentences for the 95 % CIs
    cache_dir = "cache"          # activation stores (default: probing's cache); relative to this file
    max_sentences = 500          # optional: use only the first N sentences of every split

    [probe]
    C = [0.001, 0.01, 0.1, 1, 10, 100]   # inverse L2 strengths, chosen on dev accuracy
    max_iter = 100               # linear probe solver iterations
    mix_max_iter = 300           # scalar-mix probe iterations
    tol = 1e-4
    solver = "lbfgs"             # or "adam" (stochastic: one fit per seed)
    control = true               # control tasks (Hewitt & Liang 2019) for every layer
    mix = true                   # learned scalar mix of all layers
    concat = true                # concatenation of all layers

    [quick]                      # overrides applied by load_experiment(..., quick=True)
    max_sentences = 200
    bootstrap = 200

    [[encoders]]
    name = "elmo"
    kind = "elmo"                # elmo | random-elmo | glove
    model = "default"            # a registry name; or options = "...", weights = "..."

    [[encoders]]
    name = "random-elmo"
    kind = "random-elmo"
    model = "default"            # architecture from this checkpoint (or options = "...")
    seed = 0

    [[encoders]]
    name = "glove"
    kind = "glove"
    vectors = "glove-6b-50d"     # or a GloVe/word2vec text file

    [[tasks]]
    name = "upos"
    kind = "tagging"             # tagging | supersense | wsd-1nn
    label = "upos"               # token-table column (tagging only)
    train = "demo-ud:train"      # "dataset:split", or {dataset = ..., split = ..., path = ...}
    dev = "demo-ud:dev"          # optional: without it every 10th training sentence is held out
    test = ["demo-ud:test"]
    skip_missing = false         # true: test sets that are not found are skipped (and listed in provenance)

Data flows corpus -> encoder -> store -> probes -> results: activations are extracted once into the
content-addressed store (a second run is a cache hit and loads no model), and every task reads stores.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from probing._io import atomic_open, source_digest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from probing.encoders import ElmoEncoder, Encoder, RandomElmoEncoder, elmo_options_path, get_encoder
from probing.results import RESULT_COLUMNS, write_results
from probing.results import provenance as run_provenance
from probing.tasks import (
    TAGGING_BASELINES,
    WSD_BASELINES,
    Part,
    ProbeSettings,
    TaskOutput,
    column_labels,
    supersense_labels,
    tagging_baselines,
    tagging_probes,
    wsd_1nn,
    wsd_baselines,
)

ENCODER_KINDS = ("elmo", "random-elmo", "glove")
TASK_KINDS = ("tagging", "supersense", "wsd-1nn")
WORDNET_KINDS = ("auto", "nltk", "bundled")
MIX_COLUMNS = ["task", "dataset", "encoder", "layer", "weight", "seed"]
PER_TAG_COLUMNS = ["task", "dataset", "split", "encoder", "layer", "tag", "n", "accuracy", "seed"]
QUICK_DEFAULTS = {"max_sentences": 200, "bootstrap": 200}
JOBS_DIR = "jobs"  # under the cache root: one JSON per finished (task, encoder) job, keyed by its inputs


class ExperimentError(ValueError):
    """The experiment file is invalid; the message names the file, the TOML key and what was expected."""


# ----------------------------------------------------------------------------- specification


@dataclass(frozen=True)
class DataRef:
    """One split of a named dataset (``probing.corpora.load``), optionally from an explicit ``path``."""

    dataset: str
    split: str
    path: Path | None = None

    def __str__(self) -> str:
        return f"{self.dataset}:{self.split}"

    def load(self, max_sentences: int | None = None):
        from probing.corpora import load

        corpus = load(self.dataset, self.split, path=self.path)
        return corpus.head(max_sentences) if max_sentences else corpus


@dataclass(frozen=True)
class EncoderSpec:
    """How to build one encoder (see the module docstring); :meth:`build` returns a lazy encoder."""

    name: str
    kind: str
    model: str | None = None
    options: Path | None = None
    weights: Path | None = None
    vectors: str | None = None
    seed: int = 0
    stateful: bool = False
    batch_size: int = 64

    def build(self) -> Encoder:
        if self.kind == "glove":
            enc = get_encoder("glove" if self.vectors in (None, "glove-6b-50d") else f"glove:{self.vectors}")
            enc.name = self.name
            return enc
        if self.kind == "random-elmo":
            options = self.options or elmo_options_path(self.model or "default")
            return RandomElmoEncoder(options, seed=self.seed, batch_size=self.batch_size, name=self.name)
        if self.options is not None:
            return ElmoEncoder(
                self.options, self.weights, stateful=self.stateful, batch_size=self.batch_size, name=self.name
            )
        return ElmoEncoder.pretrained(
            self.model or "default", stateful=self.stateful, batch_size=self.batch_size, encoder_name=self.name
        )


@dataclass(frozen=True)
class TaskSpec:
    """One task: its kind, data, the encoders it probes and its baselines."""

    name: str
    kind: str
    train: DataRef
    test: tuple[DataRef, ...]
    dev: DataRef | None = None
    label: str | None = None
    encoders: tuple[str, ...] | None = None
    baselines: tuple[str, ...] = ()
    skip_missing: bool = False
    wordnet: str = "auto"
    metric: str = "cosine"


@dataclass(frozen=True)
class Experiment:
    """A parsed, validated experiment file (build one with :func:`load_experiment`)."""

    name: str
    encoders: tuple[EncoderSpec, ...]
    tasks: tuple[TaskSpec, ...]
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    cache_dir: Path | None = None
    max_sentences: int | None = None
    quick_overrides: dict = field(default_factory=lambda: dict(QUICK_DEFAULTS))
    source: Path | None = None
    text: str = ""

    def quick(self) -> Experiment:
        """This experiment with its ``[quick]`` overrides (fewer sentences and bootstrap replicates, ...)."""
        q = self.quick_overrides
        probe = replace(
            self.probe,
            **{
                k: v
                for k, v in (
                    ("n_boot", q.get("bootstrap")),
                    ("seeds", q.get("seeds")),
                    ("Cs", q.get("C")),
                    ("max_iter", q.get("max_iter")),
                    ("mix_max_iter", q.get("mix_max_iter")),
                )
                if v is not None
            },
        )
        return replace(self, probe=probe, max_sentences=q.get("max_sentences", self.max_sentences))

    def to_dict(self) -> dict[str, Any]:
        """The resolved configuration (for provenance)."""

        def ref(r: DataRef | None):
            return (
                None
                if r is None
                else {"dataset": r.dataset, "split": r.split, "path": None if r.path is None else str(r.path)}
            )

        return {
            "name": self.name,
            "source": None if self.source is None else str(self.source),
            "cache_dir": None if self.cache_dir is None else str(self.cache_dir),
            "max_sentences": self.max_sentences,
            "probe": self.probe.to_dict(),
            "encoders": [
                {k: (str(v) if isinstance(v, Path) else v) for k, v in e.__dict__.items()} for e in self.encoders
            ],
            "tasks": [
                {
                    **{k: v for k, v in t.__dict__.items() if k not in ("train", "dev", "test")},
                    "train": ref(t.train),
                    "dev": ref(t.dev),
                    "test": [ref(r) for r in t.test],
                }
                for t in self.tasks
            ],
        }


# ----------------------------------------------------------------------------- TOML validation


_REQUIRED = object()


class _Table:
    """A TOML table being validated: every read names its key, unknown keys are errors."""

    def __init__(self, data: Any, where: str, source: str, base: Path):
        if not isinstance(data, dict):
            raise ExperimentError(f"{source}: {where} must be a table, got {type(data).__name__} {data!r}")
        self.data, self.where, self.source, self.base = data, where, source, base
        self.used: set[str] = set()

    def fail(self, key: str, expected: str, value: Any = _REQUIRED) -> ExperimentError:
        got = "it is missing" if value is _REQUIRED else f"got {value!r}"
        where = f"{self.where}.{key}" if self.where else key
        return ExperimentError(f"{self.source}: {where}: expected {expected}, {got}")

    def get(self, key: str, expected: str, check: Callable[[Any], bool], default: Any = _REQUIRED) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is _REQUIRED:
                raise self.fail(key, expected)
            return default
        value = self.data[key]
        if not check(value):
            raise self.fail(key, expected, value)
        return value

    def string(self, key: str, default: Any = _REQUIRED, choices: tuple[str, ...] | None = None) -> Any:
        expected = f"one of {', '.join(repr(c) for c in choices)}" if choices else "a non-empty string"
        return self.get(
            key,
            expected,
            lambda v: isinstance(v, str) and v.strip() != "" and (choices is None or v in choices),
            default,
        )

    def integer(self, key: str, default: Any = _REQUIRED, minimum: int = 0) -> Any:
        return self.get(
            key,
            f"an integer >= {minimum}",
            lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
            default,
        )

    def number(self, key: str, default: Any = _REQUIRED) -> Any:
        return self.get(
            key,
            "a positive number",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
            default,
        )

    def boolean(self, key: str, default: Any = _REQUIRED) -> Any:
        return self.get(key, "true or false", lambda v: isinstance(v, bool), default)

    def path(self, key: str, default: Any = None) -> Path | None:
        value = self.string(key, default)
        return None if value is None else _resolve(value, self.base)

    def int_list(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self.get(
            key,
            "a non-empty list of distinct integers",
            lambda v: (
                isinstance(v, list)
                and v
                and len(set(map(repr, v))) == len(v)
                and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            ),
            default,
        )
        return tuple(value) if isinstance(value, list) else value

    def number_list(self, key: str, default: Any = _REQUIRED) -> Any:
        value = self.get(
            key,
            "a non-empty list of positive numbers",
            lambda v: (
                isinstance(v, list)
                and v
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in v)
            ),
            default,
        )
        return tuple(float(x) for x in value) if isinstance(value, list) else value

    def string_list(self, key: str, default: Any = _REQUIRED, choices: tuple[str, ...] | None = None) -> Any:
        expected = "a non-empty list of strings" + (f" from {', '.join(repr(c) for c in choices)}" if choices else "")
        value = self.get(
            key,
            expected,
            lambda v: (
                isinstance(v, list)
                and len(v) > 0
                and all(isinstance(x, str) and (choices is None or x in choices) for x in v)
            ),
            default,
        )
        return tuple(value) if isinstance(value, list) else value

    def table(self, key: str) -> _Table:
        self.used.add(key)
        return _Table(
            self.data.get(key, {}), f"{self.where}.{key}" if self.where else f"[{key}]", self.source, self.base
        )

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise ExperimentError(
                f"{self.source}: {self.where or 'top level'}: unknown key(s) "
                f"{', '.join(repr(k) for k in unknown)}; known keys: {', '.join(sorted(self.used))}"
            )


def _resolve(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _data_ref(t: _Table, key: str, value: Any) -> DataRef:
    where = f"{t.where}.{key}"
    if isinstance(value, str):
        dataset, sep, split = value.partition(":")
        if not sep or not dataset or not split:
            raise ExperimentError(
                f"{t.source}: {where}: expected 'dataset:split' (e.g. 'demo-ud:train'), got {value!r}"
            )
        ref = DataRef(dataset, split)
    elif isinstance(value, dict):
        sub = _Table(value, where, t.source, t.base)
        ref = DataRef(sub.string("dataset"), sub.string("split"), sub.path("path"))
        sub.done()
    else:
        raise ExperimentError(
            f"{t.source}: {where}: expected 'dataset:split' or a table with dataset, split (and path), got {value!r}"
        )
    from probing.corpora.registry import DATASETS

    if ref.dataset not in DATASETS:
        raise ExperimentError(f"{t.source}: {where}: unknown dataset {ref.dataset!r}; known: {', '.join(DATASETS)}")
    ds = DATASETS[ref.dataset]
    if ref.split not in ds.splits and ref.dataset != "text":
        raise ExperimentError(
            f"{t.source}: {where}: dataset {ref.dataset!r} has no split {ref.split!r}; "
            f"its splits are {', '.join(ds.splits)}"
        )
    return ref


def _encoder(t: _Table) -> EncoderSpec:
    kind = t.string("kind", choices=ENCODER_KINDS)
    name = t.string("name", kind)
    spec = EncoderSpec(name=name, kind=kind)
    if kind == "glove":
        spec = replace(spec, vectors=t.string("vectors", "glove-6b-50d"))
        if spec.vectors != "glove-6b-50d":
            spec = replace(spec, vectors=str(_resolve(spec.vectors, t.base)))
    else:
        options, model = t.path("options"), t.string("model", None)
        weights = t.path("weights") if kind == "elmo" else None
        if kind == "elmo" and (options is None) != (weights is None):
            raise t.fail("weights" if weights is None else "options", "options and weights given together")
        if options is not None and model is not None:
            raise t.fail("model", "either model or options, not both", model)
        for p, key in ((options, "options"), (weights, "weights")):
            if p is not None and not p.is_file():
                raise t.fail(key, "an existing file", str(p))
        spec = replace(
            spec,
            model=model if options is None else None,
            options=options,
            weights=weights,
            seed=t.integer("seed", 0) if kind == "random-elmo" else 0,
            stateful=t.boolean("stateful", False) if kind == "elmo" else False,
            batch_size=t.integer("batch_size", 64, minimum=1),
        )
        if spec.model is not None:
            from probing.elmo.hub import REGISTRY

            if spec.model not in REGISTRY:
                raise t.fail("model", f"a checkpoint name ({', '.join(REGISTRY)})", spec.model)
    t.done()
    return spec


def _task(t: _Table, encoder_names: list[str]) -> TaskSpec:
    kind = t.string("kind", choices=TASK_KINDS)
    name = t.string("name", kind)
    train = _data_ref(t, "train", t.get("train", "'dataset:split'", lambda v: True))
    dev_value = t.get("dev", "'dataset:split'", lambda v: True, None)
    dev = None if dev_value is None else _data_ref(t, "dev", dev_value)
    test_value = t.get(
        "test",
        "a non-empty list of 'dataset:split'",
        lambda v: (isinstance(v, list) and len(v) > 0) or isinstance(v, (str, dict)),
    )
    tests = tuple(
        _data_ref(t, f"test[{i}]", v)
        for i, v in enumerate(test_value if isinstance(test_value, list) else [test_value])
    )
    encoders = t.string_list("encoders", None, choices=tuple(encoder_names))
    spec = TaskSpec(
        name=name,
        kind=kind,
        train=train,
        dev=dev,
        test=tests,
        encoders=encoders,
        skip_missing=t.boolean("skip_missing", False),
    )
    if kind == "tagging":
        spec = replace(
            spec,
            label=t.string("label"),
            baselines=t.string_list("baselines", TAGGING_BASELINES, choices=TAGGING_BASELINES),
        )
    else:
        spec = replace(spec, wordnet=t.string("wordnet", "auto", choices=WORDNET_KINDS))
    if kind == "supersense":
        spec = replace(spec, baselines=t.string_list("baselines", TAGGING_BASELINES, choices=TAGGING_BASELINES))
    if kind == "wsd-1nn":
        if dev is not None:
            raise t.fail("dev", "no dev set (1-NN has no hyperparameter to choose)", dev_value)
        spec = replace(
            spec,
            baselines=t.string_list("baselines", WSD_BASELINES, choices=WSD_BASELINES),
            metric=t.string("metric", "cosine", choices=("cosine", "euclidean")),
        )
    t.done()
    return spec


def parse_experiment(text: str, *, source: str = "<string>", base: str | os.PathLike = ".") -> Experiment:
    """Parse and validate experiment TOML ``text``; relative paths are taken from ``base``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ExperimentError(f"{source}: not valid TOML: {e}") from None
    top = _Table(data, "", source, Path(base))
    exp = top.table("experiment")
    probe = top.table("probe")
    quick = top.table("quick")
    seeds = exp.int_list("seeds", (0, 1, 2))
    settings = ProbeSettings(
        Cs=probe.number_list("C", ProbeSettings.Cs),
        max_iter=probe.integer("max_iter", 100, minimum=1),
        mix_max_iter=probe.integer("mix_max_iter", 300, minimum=1),
        tol=probe.number("tol", 1e-4),
        solver=probe.string("solver", "lbfgs", choices=("lbfgs", "adam")),
        seeds=seeds,
        n_boot=exp.integer("bootstrap", 1000, minimum=1),
        control=probe.boolean("control", True),
        mix=probe.boolean("mix", True),
        concat=probe.boolean("concat", True),
    )
    quick_overrides = {
        "max_sentences": quick.integer("max_sentences", QUICK_DEFAULTS["max_sentences"], minimum=1),
        "bootstrap": quick.integer("bootstrap", QUICK_DEFAULTS["bootstrap"], minimum=1),
        "seeds": quick.int_list("seeds", None),
        "C": quick.number_list("C", None),
        "max_iter": quick.integer("max_iter", None, minimum=1),
        "mix_max_iter": quick.integer("mix_max_iter", None, minimum=1),
    }
    name = exp.string("name", Path(source).stem)
    cache_dir = exp.path("cache_dir")
    max_sentences = exp.integer("max_sentences", 0) or None
    for t in (exp, probe, quick):
        t.done()

    raw_encoders = top.get(
        "encoders", "a non-empty array of tables [[encoders]]", lambda v: isinstance(v, list) and len(v) > 0
    )
    encoders = [_encoder(_Table(e, f"encoders[{i}]", source, Path(base))) for i, e in enumerate(raw_encoders)]
    names = [e.name for e in encoders]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ExperimentError(f"{source}: encoders: two encoders are named {dup!r}; give each a distinct name")
    raw_tasks = top.get("tasks", "a non-empty array of tables [[tasks]]", lambda v: isinstance(v, list) and len(v) > 0)
    tasks = [_task(_Table(t, f"tasks[{i}]", source, Path(base)), names) for i, t in enumerate(raw_tasks)]
    keys = [(t.name, str(r)) for t in tasks for r in t.test]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ExperimentError(f"{source}: tasks: task {dup[0]!r} is evaluated on {dup[1]} twice")
    top.done()
    return Experiment(
        name=name,
        encoders=tuple(encoders),
        tasks=tuple(tasks),
        probe=settings,
        cache_dir=cache_dir,
        max_sentences=max_sentences,
        quick_overrides=quick_overrides,
        source=None,
        text=text,
    )


def load_experiment(path: str | os.PathLike, *, quick: bool = False) -> Experiment:
    """Read and validate an experiment TOML file (``"default"`` = the bundled default experiment).

    ``quick=True`` applies the file's ``[quick]`` overrides (by default at most 200 sentences per split
    and 200 bootstrap replicates). Errors name the file, the key and what was expected.
    """
    path = bundled_experiment(str(path)) if str(path) in bundled_experiments() else Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"experiment file not found: {path} (bundled: {', '.join(bundled_experiments())})")
    text = path.read_text(encoding="utf-8")
    exp = replace(parse_experiment(text, source=str(path), base=path.parent), source=path)
    return exp.quick() if quick else exp


def bundled_experiments() -> list[str]:
    """Names of the experiment files shipped in ``probing/resources/experiments``."""
    from probing.paths import resources_dir

    return sorted(p.stem for p in (resources_dir() / "experiments").glob("*.toml"))


def bundled_experiment(name: str) -> Path:
    from probing.paths import resources_dir

    return resources_dir() / "experiments" / f"{name}.toml"


# ----------------------------------------------------------------------------- running


@dataclass
class Results:
    """What :func:`run_experiment` produced: the tidy results table, the scalar-mix weights, per-tag
    accuracies, provenance, and the stores it read (keyed ``"<encoder>/<dataset>:<split>"``)."""

    results: pd.DataFrame
    mix_weights: pd.DataFrame
    per_tag: pd.DataFrame
    provenance: dict
    stores: dict
    out_dir: Path

    def summary(self) -> pd.DataFrame:
        """Headline score (F1 for WSD, accuracy otherwise) in percent, mean over seeds: one row per task,
        dataset, split and encoder, one column per layer (baselines under their own names)."""
        df = self.results
        headline = df[
            ((df["metric"] == "f1") & df["task"].str.startswith("wsd"))
            | ((df["metric"] == "accuracy") & ~df["task"].str.startswith("wsd"))
        ]
        if headline.empty:
            return pd.DataFrame()
        table = headline.groupby(["task", "dataset", "split", "encoder", "layer"], sort=False)["value"].mean() * 100
        wide = table.round(1).unstack("layer")
        return wide[sorted(wide.columns, key=_layer_key)]

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


def _layer_key(layer: str) -> tuple:
    if layer.isdigit():
        return (0, int(layer), "")
    return ({"mix": 1, "concat": 2}.get(layer, 3), 0, layer)


class _Run:
    """State of one run: encoders (lazy), corpora, stores, timings and what was skipped."""

    def __init__(self, exp: Experiment, progress: bool):
        self.exp, self.progress = exp, progress
        self.encoders = {spec.name: spec.build() for spec in exp.encoders}
        self.corpora: dict[DataRef, Any] = {}
        self.parts: dict[tuple[str, DataRef], Part] = {}
        self.store_info: dict[str, dict] = {}
        self.skipped: list[dict] = []
        self.timings: dict[str, float] = {}

    def log(self, msg: str) -> None:
        if self.progress:
            print(msg, file=sys.stderr, flush=True)

    def corpus(self, ref: DataRef):
        if ref not in self.corpora:
            self.corpora[ref] = ref.load(self.exp.max_sentences)
        return self.corpora[ref]

    def part(self, encoder: str, ref: DataRef) -> Part:
        key = (encoder, ref)
        if key not in self.parts:
            from probing.store import extract
            from probing.store.format import MANIFEST

            enc = self.encoders[encoder]
            t0 = time.time()
            self.log(f"activations: {encoder} on {ref}")
            store = extract(enc, self.corpus(ref), cache_dir=self.exp.cache_dir, progress=self.progress)
            elapsed = time.time() - t0
            hit = (store.path / MANIFEST).stat().st_mtime < t0
            self.store_info[f"{encoder}/{ref}"] = {
                "path": str(store.path),
                "key": store.key,
                "cache_hit": hit,
                "seconds": round(elapsed, 3),
                "n_sentences": store.n_sentences,
                "n_tokens": len(store),
                "corpus_fingerprint": store.manifest.get("corpus", {}).get("fingerprint"),
            }
            self.timings[f"extract {encoder}/{ref}"] = round(elapsed, 3)
            self.parts[key] = Part(ref.dataset, ref.split, store)
        return self.parts[key]

    def tests(self, task: TaskSpec, encoder: str) -> list[Part]:
        """The task's test parts; with ``skip_missing``, sets that are not found are skipped (once noted)."""
        from probing.corpora.registry import DatasetNotFound

        parts = []
        for ref in task.test:
            try:
                parts.append(self.part(encoder, ref))
            except DatasetNotFound as e:
                if not task.skip_missing:
                    raise
                note = {"task": task.name, "data": str(ref), "reason": str(e).splitlines()[0]}
                if note not in self.skipped:
                    self.skipped.append(note)
                    self.log(f"skipped {ref} for task {task.name}: not found")
        return parts


def _inventory(task: TaskSpec):
    if task.kind == "tagging":
        return None
    from probing.wordnet import inventory

    return inventory(task.wordnet)


def _job(
    task: TaskSpec,
    enc: str,
    train: Part,
    dev: Part | None,
    tests: list[Part],
    settings: ProbeSettings,
    with_baselines: bool,
    tell: Callable[[str], None],
) -> TaskOutput:
    """One encoder's probes for one task (and the task's baselines, once, with its first encoder)."""
    inventory = _inventory(task)
    out = TaskOutput()
    if task.kind == "wsd-1nn":
        out.extend(
            wsd_1nn(task.name, enc, train, tests, settings, inventory=inventory, metric=task.metric, progress=tell)
        )
        if with_baselines and task.baselines:
            out.extend(wsd_baselines(task.name, train, tests, settings, inventory=inventory, which=task.baselines))
        return out
    labels = column_labels(task.label) if task.kind == "tagging" else supersense_labels(inventory)
    out.extend(tagging_probes(task.name, enc, train, dev, tests, labels, settings, progress=tell))
    if with_baselines and task.baselines:
        out.extend(tagging_baselines(task.name, train, dev, tests, labels, settings, which=task.baselines))
    return out


@functools.cache
def probe_code_digest() -> str:
    """sha256 over the source of ``probing.probes`` and ``probing.tasks``: a cached job result is reused only
    by the code that computed it."""
    root = Path(__file__).parent
    files = sorted([*(root / "probes").glob("*.py"), *(root / "tasks").glob("*.py")])
    return source_digest(root, [f"{f.parent.name}/{f.name}" for f in files])


def _job_key(exp: Experiment, task: TaskSpec, enc: str, parts: list[Part], with_baselines: bool) -> str:
    """Identity of a job's inputs: a finished job is reused (by a resumed or repeated run) only if all match."""
    import probing

    spec = next(t for t in exp.to_dict()["tasks"] if t["name"] == task.name and t["kind"] == task.kind)
    payload = {
        "version": probing.__version__,
        "code": probe_code_digest(),
        "task": spec,
        "encoder": enc,
        "baselines": with_baselines,
        "stores": [p.store.key for p in parts],
        "settings": exp.probe.to_dict(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def run_experiment(exp: Experiment, out_dir: str | os.PathLike, *, progress: bool = True) -> Results:
    """Extract activations (cached), run every task's probes and baselines, and write into ``out_dir``:
    ``results.csv`` + ``results.json`` (with provenance), ``mix_weights.csv`` and ``per_tag.csv``.

    Each finished (task, encoder) job is kept in the cache (``<cache>/jobs``), keyed by everything it read
    (stores, task, settings, probe code): an interrupted run resumes from its finished jobs, and a repeated
    run only reassembles the tables. Provenance lists the reused jobs under ``cached_jobs``."""
    from tqdm.auto import tqdm

    t_start = time.time()
    out_dir = Path(out_dir)
    run = _Run(exp, progress)
    total = TaskOutput()
    from probing.paths import cache_dir

    jobs_dir = (exp.cache_dir or cache_dir()) / JOBS_DIR
    cached = []
    jobs = [(t, e, i == 0) for t in exp.tasks for i, e in enumerate(t.encoders or run.encoders)]
    bar = tqdm(total=len(jobs), desc="probing", unit="job", disable=not progress)
    for task, enc, first in jobs:
        train = run.part(enc, task.train)
        dev = run.part(enc, task.dev) if task.dev else None
        tests = run.tests(task, enc)
        bar.update(1)
        if not tests:
            continue
        path = jobs_dir / f"{_job_key(exp, task, enc, [train, dev, *tests] if dev else [train, *tests], first)}.json"
        if path.is_file():
            out = TaskOutput(**json.loads(path.read_text(encoding="utf-8")))
            cached.append(f"{task.name}/{enc}")
        else:
            t0 = time.time()
            out = _job(
                task, enc, train, dev, tests, exp.probe, first, lambda msg: bar.set_postfix_str(msg, refresh=True)
            )
            run.timings[f"task {task.name}/{enc}"] = round(time.time() - t0, 3)
            with atomic_open(path, "w", encoding="utf-8") as f:
                json.dump(out.__dict__, f)
        total.extend(out)
    bar.close()

    results = pd.DataFrame(total.rows, columns=RESULT_COLUMNS)
    mix = pd.DataFrame(total.mix_weights, columns=MIX_COLUMNS)
    per_tag = pd.DataFrame(total.per_tag, columns=PER_TAG_COLUMNS)
    run.timings["total"] = round(time.time() - t_start, 3)
    prov = run_provenance(
        experiment=exp.to_dict(),
        experiment_sha256=hashlib.sha256(exp.text.encode()).hexdigest(),
        experiment_toml=exp.text,
        encoders={
            name: {
                "kind": spec.kind,
                "fingerprint": run.encoders[name].fingerprint,
                "layer_names": list(run.encoders[name].layer_names),
                "dim": int(run.encoders[name].dim),
                "source": getattr(run.encoders[name], "source", None),
            }
            for name, spec in ((s.name, s) for s in exp.encoders)
        },
        stores=run.store_info,
        probe=exp.probe.to_dict(),
        seeds=list(exp.probe.seeds),
        probes=total.probes,
        skipped=run.skipped,
        cached_jobs=cached,
        timings=run.timings,
    )
    write_results(results, out_dir, prov)
    for name, table in (("mix_weights.csv", mix), ("per_tag.csv", per_tag)):
        with atomic_open(out_dir / name, "w", newline="", encoding="utf-8") as f:
            table.to_csv(f, index=False)
    res = Results(
        results=results,
        mix_weights=mix,
        per_tag=per_tag,
        provenance=prov,
        stores={f"{enc}/{ref}": p.store for (enc, ref), p in run.parts.items()},
        out_dir=out_dir,
    )
    if progress:
        hits = sum(s["cache_hit"] for s in run.store_info.values())
        run.log(
            f"{len(results)} result rows ({hits}/{len(run.store_info)} stores from the cache) in "
            f"{run.timings['total']:.1f} s -> {out_dir}"
        )
    return res


def extract_activations(
    model: str,
    corpus: str,
    split: str | None = None,
    *,
    path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    max_sentences: int | None = None,
    seed: int = 0,
    progress: bool = True,
):
    """``probing extract``: the store of ``model`` (see :func:`probing.encoders.get_encoder`) on dataset
    ``corpus``/``split`` (optionally read from ``path``), extracted once and cached."""
    from probing.corpora import load
    from probing.store import extract

    data = load(corpus, split, path=path)
    if max_sentences:
        data = data.head(max_sentences)
    return extract(get_encoder(model, seed=seed), data, cache_dir=cache_dir, progress=progress)


__all__ = [
    "DataRef",
    "EncoderSpec",
    "Experiment",
    "ExperimentError",
    "Results",
    "TaskSpec",
    "bundled_experiments",
    "extract_activations",
    "load_experiment",
    "parse_experiment",
    "run_experiment",
]
