"""The experiment file: the spec dataclasses and the checked TOML (or dict) parser.

The file names the encoders, the tasks with their data, the probe hyperparameters and the statistics::

    [experiment]
    name = "default"
    seeds = [0, 1, 2]            # control-task seeds (and probe seeds when solver = "adam")
    bootstrap = 1000             # bootstrap replicates over sentences for the 95 % CIs
    cache_dir = "cache"          # activation stores (default: probing's cache); relative to this file
    max_sentences = 500          # optional: use only the first N sentences of every split

    [probe]
    C = [0.001, 0.01, 0.1, 1, 10, 100]   # inverse L2 strengths, chosen on dev accuracy
    patience = 2                 # stop the C grid after 2 values in a row without a better dev accuracy; 0: all
    max_iter = 1000              # linear probe solver iterations (a cap: tol ends the fits)
    mix_max_iter = 1000          # scalar-mix probe iterations
    mix_refits = 0               # scalar-mix refits on bootstrap resamples of the training sentences (spread)
    tol = 1e-6                   # converged: the objective within ~1e-6 (relative) of its optimum
    solver = "lbfgs"             # or "adam" (stochastic: one fit per seed)
    control = true               # control tasks (Hewitt & Liang 2019) for every layer
    mix = true                   # learned scalar mix of all layers (or a list: the encoders that get one)
    concat = true                # concatenation of all layers (or a list of encoders, as for mix)

    [quick]                      # overrides applied by load_experiment(..., quick=True)
    max_sentences = 200
    bootstrap = 200

    [run]                        # optional: where probing run works (default: this process)
    backend = "ray"              # stores extracted in shards and probe jobs run as Ray tasks
    address = "auto"             # "local" (a Ray started for the run, the default), "auto", "ray://HEAD:10001"
    shards = 8                   # Ray tasks per store to extract (default: the CPUs Ray reports)
    chunk_tokens = 32768         # tokens encoded and written per chunk; a Ray shard is whole chunks, so a
                                 # sharded store equals the single-process one bit for bit

    [[encoders]]
    name = "elmo"
    kind = "elmo"                # an encoder kind (probing.encoders.ENCODER_KINDS): elmo | random-elmo | glove
    model = "default"            # a registry name; or options = "...", weights = "..." (or a folder of both)
    # sha256 = "..."             # with weights or a folder: the weights file's pinned hash (a changed file is refused)

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
    train = "demo-ud:train"      # "dataset:split", or {dataset = ..., split = ..., path = ...}, or a file spec
    dev = "demo-ud:dev"          # optional: without it every 10th training sentence is held out
    test = ["demo-ud:test"]
    skip_missing = false         # true: test sets that are not found are skipped (and listed in provenance)
    mdl = false                  # tagging/supersense: true adds online-codelength rows (MDL probing)

    [similarity]                 # optional: layer-similarity map, written as similarity.csv
    dataset = "demo-ud:dev"      # the tokens every encoder's layers are compared on
    encoders = ["elmo", "glove"] # default: all encoders
    measures = ["linear_cka", "debiased_cka", "svcca", "pwcca"]   # also rbf_cka, cca, pwcca_paper
    max_tokens = 20000           # tokens drawn with seed (all when fewer)
    seed = 0                     # default: the first of [experiment] seeds

An encoder kind reads its own keys (see :data:`probing.encoders.ENCODER_KINDS`), as a task kind does (see
:data:`probing.tasks.TASK_KINDS`).

Your own files go where a dataset goes, as *file specs*: ``train = "conllu:my-train.conllu"``,
``"text:PATH"``, ``"raganato:XML[:KEY]"`` (paths relative to the experiment file). The dataset is named
after the file's stem and the split after the role (``train``, ``dev``, ``test``); in the table form,
``{dataset = "conllu:PATH", split = "..."}`` names the split.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

from probing._toml import ExperimentError, Table
from probing.corpora.base import Corpus
from probing.encoders import ENCODER_KINDS, Encoder, encoder_kind
from probing.identity import option_key
from probing.store.format import CHUNK_TOKENS
from probing.tasks import TASK_KINDS, ProbeSettings, TaskKind
from probing.tasks.common import SOLVERS
from probing.tasks.options import read_task_options

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

WORDNET_KINDS = ("auto", "nltk", "bundled")
WORDNET_DEFAULT = "auto"  # a task's wordnet when it names none (NLTK's WordNet if installed, else the bundled one)
QUICK_DEFAULTS = {"max_sentences": 200, "bootstrap": 200}
SIMILARITY_DEFAULT_MEASURES = ("linear_cka", "debiased_cka", "svcca", "pwcca")
MAX_BOOTSTRAP = 100_000  # replicates; each costs one pass over the per-item scores
MAX_SHARDS = 100_000  # [run] shards, as probing extract --shards


@dataclass(frozen=True)
class DataRef:
    """One split of a named dataset (``probing.corpora.load``), optionally from an explicit ``path``."""

    dataset: str
    split: str
    path: Path | None = None
    format: str | None = None  # a file spec's format (conllu, text, raganato); ``dataset`` is then its stem
    key: Path | None = None  # the gold key file of a raganato file spec

    def __str__(self) -> str:
        return f"{self.dataset}:{self.split}"

    def load(self, max_sentences: int | None = None):
        from probing.corpora import load
        from probing.corpora.registry import FileSpec

        if self.format is not None and self.path is not None:
            corpus = FileSpec(self.format, self.path, self.key).open(self.split)
        else:
            corpus = load(self.dataset, self.split, path=self.path)
        return corpus.head(max_sentences) if max_sentences else corpus


@dataclass(frozen=True)
class CorpusRef(DataRef):
    """A DataRef over a :class:`~probing.corpora.Corpus` object given in place of a spec (in a dict
    experiment or :func:`~probing.experiment.probe_layers`): its name and split name the results."""

    corpus: Any = field(default=None, compare=False, hash=False)

    def load(self, max_sentences: int | None = None):
        return self.corpus.head(max_sentences) if max_sentences else self.corpus


def default(cls: type, name: str) -> Any:
    """The default of field ``name`` of dataclass ``cls``: the parser reads every default from the spec's
    dataclasses, so each is written once."""
    f = next(f for f in dataclass_fields(cls) if f.name == name)
    return f.default_factory() if callable(f.default_factory) else f.default


@dataclass(frozen=True)
class InterveneSpec:
    """An ELMo encoder's ``intervene = { layer = 1, label = "upos", method = "leace", fit_on = "demo-ud:train" }``:
    erase ``label`` from layer ``layer``'s output per direction inside the biLM (:mod:`probing.analysis.intervention`),
    erasers fitted on the unedited model's store of ``fit_on``; ``rank`` only for ``method = "random"``."""

    layer: int
    label: str
    fit_on: DataRef
    method: str = "leace"
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "label": self.label,
            "method": self.method,
            "fit_on": _ref_dict(self.fit_on),
            "rank": self.rank,
        }


@dataclass(frozen=True)
class EncoderSpec:
    """How to build one encoder: its name, its kind (:data:`probing.encoders.ENCODER_KINDS`) and the kind's
    options dataclass; :meth:`build` returns a lazy encoder."""

    name: str
    kind: str
    options: Any
    intervene: InterveneSpec | None = None

    def build(self, cache_dir: Path | None = None) -> Encoder:
        """The encoder; with ``intervene``, one whose erasers are fitted on first use (their store of the fitting
        data goes to ``cache_dir``, the experiment's)."""
        kind = encoder_kind(self.kind)
        base = kind.encoder(self.options, self.name)
        if self.intervene is None:
            return base
        from probing.analysis.intervention import LazyIntervenedEncoder

        iv = self.intervene
        assert kind.bilm is not None  # the parser reads intervene only for kinds with a biLM
        return LazyIntervenedEncoder(
            kind.bilm(base),
            iv.fit_on.load,
            iv.layer,
            iv.label,
            iv.method,
            rank=iv.rank,
            cache_dir=cache_dir,
            name=self.name,
        )

    def to_dict(self) -> dict[str, Any]:
        options = {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in asdict(self.options).items()
            if k != "sha256" or v is not None  # an unpinned spec reads as before
        }
        out = {"name": self.name, "kind": self.kind, **options}
        return out if self.intervene is None else {**out, "intervene": self.intervene.to_dict()}


@dataclass(frozen=True)
class TaskSpec:
    """One task: its kind, data, the encoders it probes, its baselines and its ``options``: the kind's own
    (e.g. ``label`` for tagging, ``metric`` for 1-NN WSD; see :data:`probing.tasks.TASK_KINDS`), then the value
    of each task option it sets (``mdl``, ``learning_curve``, ``erase``: :data:`probing.tasks.TASK_OPTIONS`)."""

    name: str
    kind: str
    train: DataRef | None  # None for a kind that reads the model itself (minimal-pairs): its data is an option
    test: tuple[DataRef, ...]
    dev: DataRef | None = None
    encoders: tuple[str, ...] | None = None
    baselines: tuple[str, ...] = ()
    skip_missing: bool = False
    wordnet: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The task as JSON-able values (its part of a job's key, and of provenance): an option's value by
        :func:`probing.identity.option_key`, so its fields at their defaults leave the key as it was."""
        return {
            "name": self.name,
            "kind": self.kind,
            "encoders": None if self.encoders is None else list(self.encoders),
            "baselines": list(self.baselines),
            "skip_missing": self.skip_missing,
            "wordnet": self.wordnet,
            **{name: option_key(value) for name, value in self.options.items()},
            "train": _ref_dict(self.train),
            "dev": _ref_dict(self.dev),
            "test": [_ref_dict(r) for r in self.test],
        }


@dataclass(frozen=True)
class SimilaritySpec:
    """The ``[similarity]`` table: every measure between every pair of layers of ``encoders`` on the tokens
    of ``dataset`` (:func:`probing.analysis.similarity.layer_similarity`)."""

    dataset: DataRef
    encoders: tuple[str, ...]
    measures: tuple[str, ...] = SIMILARITY_DEFAULT_MEASURES
    max_tokens: int = 20_000
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": _ref_dict(self.dataset),
            "encoders": list(self.encoders),
            "measures": list(self.measures),
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        }


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
    backend: str = "local"
    ray_address: str = "local"
    shards: int | None = None  # [run] shards: Ray tasks per store extracted on Ray (None: Ray's CPU count)
    chunk_tokens: int = CHUNK_TOKENS  # [run] chunk_tokens: tokens per extraction chunk (a Ray shard's unit)
    similarity: SimilaritySpec | None = None

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
                    ("tol", q.get("tol")),
                )
                if v is not None
            },
        )
        return replace(self, probe=probe, max_sentences=q.get("max_sentences", self.max_sentences))

    def to_dict(self) -> dict[str, Any]:
        """The resolved configuration (for provenance)."""
        return {
            "name": self.name,
            "source": None if self.source is None else str(self.source),
            "cache_dir": None if self.cache_dir is None else str(self.cache_dir),
            "max_sentences": self.max_sentences,
            "run": {
                "backend": self.backend,
                "address": self.ray_address,
                **({} if self.shards is None else {"shards": self.shards}),
                **({} if self.chunk_tokens == CHUNK_TOKENS else {"chunk_tokens": self.chunk_tokens}),
            },
            "probe": self.probe.to_dict(),
            "encoders": [e.to_dict() for e in self.encoders],
            "tasks": [t.to_dict() for t in self.tasks],
            **({} if self.similarity is None else {"similarity": self.similarity.to_dict()}),
        }


def _ref_dict(r: DataRef | None) -> dict[str, Any] | None:
    if r is None:
        return None
    out: dict[str, Any] = {"dataset": r.dataset, "split": r.split, "path": None if r.path is None else str(r.path)}
    if r.format is not None:  # only then, so the job keys of registry datasets stay as they were
        out.update(format=r.format, key=None if r.key is None else str(r.key))
    return out


def _file_ref(t: Table, where: str, spec: str, split: str) -> DataRef | None:
    """The DataRef of a file spec (``conllu:PATH``, ...), or None when ``spec`` is not one."""
    from probing.corpora.registry import file_spec

    try:
        found = file_spec(spec, t.base)
    except (OSError, ValueError) as e:
        raise ExperimentError(f"{t.source}: {where}: {e}") from None
    return None if found is None else DataRef(found.name, split, found.path, found.format, found.key)


def _data_ref(t: Table, key: str, value: Any) -> DataRef:
    from probing.corpora.registry import FILE_FORMATS

    where = f"{t.where}.{key}"
    role = key.split("[")[0]
    if isinstance(value, Corpus):
        return CorpusRef(value.name, value.split, corpus=value)
    if isinstance(value, str):
        ref = _file_ref(t, where, value, role)
        if ref is not None:
            return ref
        dataset, sep, split = value.partition(":")
        if not sep or not dataset or not split:
            raise ExperimentError(
                f"{t.source}: {where}: expected 'dataset:split' (e.g. 'demo-ud:train') or a file spec "
                f"(conllu:PATH, text:PATH, raganato:XML[:KEY]), got {value!r}"
            )
        ref = DataRef(dataset, split)
    elif isinstance(value, dict):
        sub = Table(value, where, t.source, t.base)
        dataset = sub.string("dataset")
        is_file = dataset.partition(":")[0] in FILE_FORMATS and ":" in dataset
        ref = DataRef(dataset, sub.string("split", role) if is_file else sub.string("split"), sub.path("path"))
        sub.done()
        if is_file:
            if ref.path is not None:
                raise ExperimentError(f"{t.source}: {where}.path: {ref.dataset!r} names its file already")
            return _file_ref(t, f"{where}.dataset", ref.dataset, ref.split)  # type: ignore[return-value]
    else:
        raise ExperimentError(
            f"{t.source}: {where}: expected 'dataset:split', a table with dataset, split (and path) or a Corpus, "
            f"got {value!r}"
        )
    from probing.corpora.registry import DATASETS, unknown_dataset

    if ref.dataset not in DATASETS:
        raise ExperimentError(f"{t.source}: {where}: {unknown_dataset(ref.dataset)}")
    ds = DATASETS[ref.dataset]
    if ref.split not in ds.splits and ref.dataset != "text":
        raise ExperimentError(
            f"{t.source}: {where}: dataset {ref.dataset!r} has no split {ref.split!r}; "
            f"its splits are {', '.join(ds.splits)}"
        )
    return ref


def _encoder(t: Table) -> EncoderSpec:
    kind = ENCODER_KINDS[t.string("kind", choices=tuple(ENCODER_KINDS))]
    name = t.string("name", kind.name)
    options = kind.read_options(t)
    intervene = _intervene(t.table("intervene")) if kind.bilm is not None and "intervene" in t.data else None
    t.done()
    return EncoderSpec(name=name, kind=kind.name, options=options, intervene=intervene)


def _intervene(t: Table) -> InterveneSpec:
    from probing.analysis.erasure import METHODS
    from probing.tasks.labels import LABEL_COLUMNS

    method = t.string("method", default(InterveneSpec, "method"), choices=METHODS)
    spec = InterveneSpec(
        layer=t.integer("layer", minimum=1),
        label=t.string("label", choices=LABEL_COLUMNS),
        fit_on=_data_ref(t, "fit_on", t.get("fit_on", "'dataset:split' or a data table", lambda v: True)),
        method=method,
        rank=t.integer("rank", None, minimum=1) if method == "random" else None,
    )
    t.done()
    return spec


def _task(t: Table, encoder_names: list[str]) -> TaskSpec:
    kind = task_kind_of(t)
    name = t.string("name", kind.name)
    if kind.model_identity is not None:  # reads the model, not stores: its data is one of its own keys
        spec = TaskSpec(
            name=name,
            kind=kind.name,
            train=None,
            test=(),
            encoders=t.string_list("encoders", None, choices=tuple(encoder_names)),
            options={**kind.read_options(t), **read_task_options(kind, t)},
        )
        t.done()
        return spec
    train = _data_ref(t, "train", t.get("train", "'dataset:split'", lambda v: True))
    dev_value = t.get("dev", "'dataset:split'", lambda v: True, None)
    dev = None if dev_value is None else _data_ref(t, "dev", dev_value)
    if dev is not None and not kind.allows_dev:
        raise t.fail("dev", f"no dev set (a {kind.name} task has no hyperparameter to choose)", dev_value)
    test_value = t.get(
        "test",
        "a non-empty list of 'dataset:split'",
        lambda v: (isinstance(v, list) and len(v) > 0) or isinstance(v, (str, dict)),
    )
    tests = tuple(
        _data_ref(t, f"test[{i}]", v)
        for i, v in enumerate(test_value if isinstance(test_value, list) else [test_value])
    )
    spec = TaskSpec(
        name=name,
        kind=kind.name,
        train=train,
        dev=dev,
        test=tests,
        encoders=t.string_list("encoders", None, choices=tuple(encoder_names)),
        skip_missing=t.boolean("skip_missing", default(TaskSpec, "skip_missing")),
        baselines=t.string_list("baselines", kind.baselines, choices=kind.baselines) if kind.baselines else (),
        wordnet=t.string("wordnet", WORDNET_DEFAULT, choices=WORDNET_KINDS) if kind.uses_wordnet else None,
        options={**kind.read_options(t), **read_task_options(kind, t)},
    )
    t.done()
    return spec


def _similarity(t: Table, encoder_names: list[str], seed: int) -> SimilaritySpec:
    from probing.analysis.similarity import MEASURES

    dataset = _data_ref(t, "dataset", t.get("dataset", "'dataset:split'", lambda v: True))
    encoders = t.string_list("encoders", tuple(encoder_names), choices=tuple(encoder_names))
    if len(set(encoders)) != len(encoders):
        raise t.fail("encoders", "distinct encoder names", list(encoders))
    measures = t.string_list("measures", default(SimilaritySpec, "measures"), choices=MEASURES)
    if len(set(measures)) != len(measures):
        raise t.fail("measures", "distinct measures", list(measures))
    spec = SimilaritySpec(
        dataset=dataset,
        encoders=tuple(encoders),
        measures=tuple(measures),
        max_tokens=t.integer("max_tokens", default(SimilaritySpec, "max_tokens"), minimum=4),
        seed=t.integer("seed", seed),
    )
    t.done()
    return spec


def task_kind_of(t: Table) -> TaskKind:
    """The registered task kind a ``[[tasks]]`` table names (read at parse time, so kinds registered after
    import count)."""
    return TASK_KINDS[t.string("kind", choices=tuple(TASK_KINDS))]


def _json_value(value: Any) -> str:
    """How a dict experiment's text (its provenance and sha256) records a value JSON has no form for: a
    :class:`Corpus` as ``Corpus(name:split)`` (its data is keyed by the stores' corpus fingerprints)."""
    return f"Corpus({value.name}:{value.split})" if isinstance(value, Corpus) else str(value)


def parse_experiment(
    text: str | Mapping[str, Any], *, source: str = "<string>", base: str | os.PathLike = "."
) -> Experiment:
    """Parse and validate an experiment: TOML ``text``, or the same structure as a Python dict (``source``
    then names it in errors); relative paths are taken from ``base``."""
    if isinstance(text, Mapping):
        data, text = dict(text), json.dumps(text, sort_keys=True, default=_json_value)
        if source == "<string>":
            source = "<dict>"
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ExperimentError(f"{source}: not valid TOML: {e}") from None
    top = Table(data, "", source, Path(base))
    exp = top.table("experiment")
    probe = top.table("probe")
    quick = top.table("quick")
    run = top.table("run")
    backend = run.string("backend", default(Experiment, "backend"), choices=("local", "ray"))
    ray_address = run.string("address", default(Experiment, "ray_address"))
    shards = run.integer("shards", default(Experiment, "shards"), minimum=1, maximum=MAX_SHARDS)
    chunk_tokens = run.integer("chunk_tokens", default(Experiment, "chunk_tokens"), minimum=1)
    d = ProbeSettings()
    seeds = exp.int_list("seeds", d.seeds)
    settings = ProbeSettings(
        Cs=probe.number_list("C", d.Cs),
        max_iter=probe.integer("max_iter", d.max_iter, minimum=1),
        mix_max_iter=probe.integer("mix_max_iter", d.mix_max_iter, minimum=1),
        tol=probe.number("tol", d.tol),
        patience=probe.integer("patience", d.patience, minimum=0) or None,
        solver=probe.string("solver", d.solver, choices=SOLVERS),
        seeds=seeds,
        n_boot=exp.integer("bootstrap", d.n_boot, minimum=1, maximum=MAX_BOOTSTRAP),
        control=probe.boolean("control", d.control),
        mix_refits=probe.integer("mix_refits", d.mix_refits, minimum=0),
    )
    quick_overrides = {
        "max_sentences": quick.integer("max_sentences", QUICK_DEFAULTS["max_sentences"], minimum=1),
        "bootstrap": quick.integer("bootstrap", QUICK_DEFAULTS["bootstrap"], minimum=1, maximum=MAX_BOOTSTRAP),
        "seeds": quick.int_list("seeds", None),
        "C": quick.number_list("C", None),
        "max_iter": quick.integer("max_iter", None, minimum=1),
        "mix_max_iter": quick.integer("mix_max_iter", None, minimum=1),
        "tol": quick.number("tol", None),
    }
    name = exp.string("name", Path(source).stem)
    cache_dir = exp.path("cache_dir")
    max_sentences = exp.integer("max_sentences", 0) or None

    raw_encoders = top.get(
        "encoders", "a non-empty array of tables [[encoders]]", lambda v: isinstance(v, list) and len(v) > 0
    )
    encoders = [_encoder(Table(e, f"encoders[{i}]", source, Path(base))) for i, e in enumerate(raw_encoders)]
    names = [e.name for e in encoders]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ExperimentError(f"{source}: encoders: two encoders are named {dup!r}; give each a distinct name")
    settings = replace(
        settings,
        mix=probe.boolean_or_names("mix", d.mix, choices=tuple(names)),
        concat=probe.boolean_or_names("concat", d.concat, choices=tuple(names)),
    )
    for t in (exp, probe, quick, run):
        t.done()
    raw_tasks = top.get("tasks", "a non-empty array of tables [[tasks]]", lambda v: isinstance(v, list) and len(v) > 0)
    tasks = [_task(Table(t, f"tasks[{i}]", source, Path(base)), names) for i, t in enumerate(raw_tasks)]
    evaluated = [(t.name, str(r)) for t in tasks for r in t.test]
    if len(set(evaluated)) != len(evaluated):
        twice = next(k for k in evaluated if evaluated.count(k) > 1)
        raise ExperimentError(f"{source}: tasks: task {twice[0]!r} is evaluated on {twice[1]} twice")
    similarity = None
    if "similarity" in data:
        similarity = _similarity(top.table("similarity"), names, seeds[0])
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
        backend=backend,
        ray_address=ray_address,
        shards=shards,
        chunk_tokens=chunk_tokens,
        similarity=similarity,
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
