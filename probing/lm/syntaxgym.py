"""Targeted syntactic evaluation on SyntaxGym suites (Hu et al. 2020): region surprisals, predictions, SG score.

A suite (SyntaxGym JSON: ``meta``, ``region_meta``, ``predictions``, ``items``) has items, each with
conditions, each a sentence cut into numbered regions. A condition's regions are joined with single spaces
(empty regions left out, contents stripped, as SyntaxGym does) and tokenised as the model's tokenizer does
(:func:`probing.tokenize.tokenize`); each token is mapped back to the region its first character lies in
(the tokenizer splits inside whitespace-separated pieces only, so no token straddles two regions). A
region's surprisal is the suite's ``meta.metric`` (``sum`` by default; ``mean``, ``median``, ``max``,
``min``, ``range``) over its words' surprisals in bits, ``-log2 p``: forward ``p(word | words before it)``,
backward ``p(word | words after it)`` (:mod:`probing.lm.score`; sentence boundaries are not counted). An
empty region's sum is 0 and its mean NaN (a comparison with NaN is false).

Each prediction formula (:mod:`probing.lm.formula`) is evaluated per item and direction; ``both`` evaluates
it on the mean of the two directions' region surprisals. An item is correct when every prediction of its
suite holds (the authors' per-item results have one ``correct`` per item). A suite's accuracy is the mean
over its items; a circuit's the mean over its suites; the SG score (``overall``) the mean over suites, as
the authors' analysis (``main.upstream.py``) computes it: suites are mapped to circuits by their tag (the
name up to the first ``-``, ``_`` or digit) and ``fgd-embed3``, ``fgd-embed4`` and ``nn-nv-rpl`` are
left out of the circuits and the SG score (their exclusion ``^fgd-embed[34]|^gardenpath|^nn-nv``), though
they get rows of their own.

**Backward rows.** The backward LM's surprisal of a region conditions on the words *after* it. The suites'
predictions are written for left-to-right reading: the manipulation (an attractor, a licensor, a comma)
sits before the critical region, which the backward LM does not see when it scores that region. Where the
compared conditions share every word after each region a prediction reads (:func:`left_to_right_only`),
the backward surprisals differ only by the region's own words given the same right context, so a backward
row there measures a lexical preference, not the construction; for the agreement and reflexive suites,
whose predictions ask for opposite preferences between the same two words (``is`` below ``are`` after a
singular subject, above it after a plural one), the backward LM can hardly be right on both, and its
accuracy there falls below chance by design. Backward rows are meaningful where the right context differs
between conditions.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.errors import InputError
from probing.tokenize import tokenize

from .formula import Binary, Node, evaluate, parse_formula, regions

if TYPE_CHECKING:
    import pandas as pd

    from probing.elmo import Elmo

    from .head import LmHead

DIRECTIONS = ("forward", "backward", "both")
OVERALL = "overall"
# The authors' map from a suite's tag to its circuit (main.upstream.py)
CIRCUITS: dict[str, tuple[str, ...]] = {
    "Licensing": ("npi", "reflexive"),
    "Long-Distance Dependencies": ("fgd", "cleft"),
    "Agreement": ("number",),
    "Garden-Path Effects": ("npz", "mvrr"),
    "Gross Syntactic State": ("subordination",),
    "Center Embedding": ("center",),
}
TAG_TO_CIRCUIT = {tag: circuit for circuit, tags in CIRCUITS.items() for tag in tags}
# The authors' exclusions from every aggregate (main.upstream.py's exclude_suite_re)
EXCLUDED_SUITES = re.compile(r"^fgd-embed[34]|^gardenpath|^nn-nv")
METRICS = {
    "sum": lambda v: float(math.fsum(v)),
    "mean": lambda v: float(np.mean(v)) if len(v) else math.nan,
    "median": lambda v: float(np.median(v)) if len(v) else math.nan,
    "max": lambda v: float(max(v)) if len(v) else math.nan,
    "min": lambda v: float(min(v)) if len(v) else math.nan,
    "range": lambda v: float(max(v) - min(v)) if len(v) else math.nan,
}
REGION_COLUMNS = ("suite", "item", "condition", "region", "surprisal_forward", "surprisal_backward")
PREDICTION_COLUMNS = ("suite", "item", "prediction", "direction", "correct")
# The authors' models in their result files: id (model_corpus) -> the layer name of its reference rows
REFERENCE_MODELS = {
    "grnn": "grnn",
    "jrnn": "jrnn",
    "gpt-2-pretrained": "gpt-2",
    "gpt-2-xl-pretrained": "gpt-2-xl",
    "transformer-xl": "transformer-xl",
    "gpt-2_bllip-lg-gptbpe": "gpt-2-bllip",
    "rnng_bllip-lg": "rnng-bllip",
    "ordered-neurons_bllip-lg": "on-lstm-bllip",
    "vanilla_bllip-lg": "lstm-bllip",
    "ngram_bllip-lg": "n-gram-bllip",
}
NGRAM_MODELS = ("1gram", "ngram", "ngram-single")


@dataclass(frozen=True)
class Prediction:
    """One prediction of a suite: its 1-based ``index``, the ``formula`` text and its syntax tree."""

    index: int
    formula: str
    tree: Node


@dataclass(frozen=True)
class Item:
    """One item: its ``number`` (1-based, as in the JSON) and per condition its ``(region number, content)`` pairs."""

    number: int
    conditions: dict[str, tuple[tuple[int, str], ...]]


@dataclass(frozen=True)
class Suite:
    """A SyntaxGym suite read by :func:`load_suite`; ``source`` names the file it came from."""

    name: str
    metric: str
    region_names: dict[int, str]
    predictions: tuple[Prediction, ...]
    items: tuple[Item, ...]
    source: str

    @property
    def circuit(self) -> str | None:
        return circuit_of(self.name)


def suite_tag(name: str) -> str:
    """A suite's tag as the authors read it: its name up to the first ``-``, ``_`` or digit."""
    return re.split(r"[-_0-9]", name)[0]


def circuit_of(name: str) -> str | None:
    """The authors' circuit of suite ``name`` (None for a tag outside their map, e.g. ``nn-nv-rpl``)."""
    return TAG_TO_CIRCUIT.get(suite_tag(name))


def excluded(name: str) -> bool:
    """Whether the authors leave suite ``name`` out of circuits and the SG score."""
    return EXCLUDED_SUITES.search(name) is not None


def _bundled() -> Path:
    from probing.paths import resources_dir

    return resources_dir() / "syntaxgym"


def bundled_suites() -> list[str]:
    """The names of the 34 bundled suites of Hu et al. (2020), sorted."""
    return sorted(p.name.removesuffix(".json.gz") for p in (_bundled() / "suites").glob("*.json.gz"))


def load_suite(suite: str | Path | Suite) -> Suite:
    """A suite by bundled name (``number_src``) or path to a SyntaxGym JSON file (``.json`` or ``.json.gz``),
    checked: an ``InputError`` names the file and the field that is missing or malformed, and a prediction
    that does not parse, or reads a condition or region an item lacks, names the suite and its formula."""
    if isinstance(suite, Suite):
        return suite
    path = Path(suite)
    if isinstance(suite, str) and suite in bundled_suites():
        path = _bundled() / "suites" / f"{suite}.json.gz"
    elif not path.is_file():
        raise InputError(
            f"SyntaxGym suite {str(suite)!r} is neither a bundled suite ({', '.join(bundled_suites())}) nor a file"
        )
    try:
        raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a SyntaxGym JSON file ({e})") from None
    return parse_suite(data, str(path))


def _field(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise InputError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise InputError(f"{where}: field {key!r} must be {names}, got {value!r}")
    return value


def parse_suite(data: Any, source: str) -> Suite:
    """A :class:`Suite` from parsed SyntaxGym JSON; ``source`` names it in errors."""
    meta = _field(data, "meta", dict, source)
    name = _field(meta, "name", str, f"{source}: meta")
    metric = meta.get("metric", "sum")
    if metric not in METRICS:
        raise InputError(f"{source}: meta.metric must be one of {', '.join(METRICS)}, got {metric!r}")
    region_meta = data.get("region_meta", {})
    if not isinstance(region_meta, dict):
        raise InputError(f"{source}: field 'region_meta' must be an object (region number -> name)")
    try:
        region_names = {int(k): str(v) for k, v in region_meta.items()}
    except ValueError:
        raise InputError(f"{source}: region_meta keys must be region numbers, got {list(region_meta)}") from None
    items = []
    for i, it in enumerate(_field(data, "items", list, source)):
        where = f"{source}: items[{i}]"
        number = _field(it, "item_number", int, where)
        conditions: dict[str, tuple[tuple[int, str], ...]] = {}
        for j, cond in enumerate(_field(it, "conditions", list, where)):
            cw = f"{where}.conditions[{j}]"
            cname = _field(cond, "condition_name", str, cw)
            if cname in conditions:
                raise InputError(f"{cw}: condition {cname!r} appears twice in item {number}")
            regs = []
            for k, reg in enumerate(_field(cond, "regions", list, cw)):
                rw = f"{cw}.regions[{k}]"
                regs.append((_field(reg, "region_number", int, rw), _field(reg, "content", str, rw)))
            numbers = [r for r, _ in regs]
            if len(set(numbers)) != len(numbers):
                raise InputError(f"{cw}: region numbers repeat: {numbers}")
            conditions[cname] = tuple(regs)
        items.append(Item(number, conditions))
    if not items:
        raise InputError(f"{source}: the suite has no items")
    numbers = [it.number for it in items]
    if len(set(numbers)) != len(numbers):
        raise InputError(f"{source}: item_number repeats")
    predictions = []
    for i, pred in enumerate(_field(data, "predictions", list, source)):
        where = f"suite {name!r} ({source}), prediction {i + 1}"
        ptype = pred.get("type", "formula") if isinstance(pred, dict) else None
        if ptype != "formula":
            raise InputError(f"{where}: only predictions of type 'formula' are known, got {ptype!r}")
        formula = _field(pred, "formula", str, where)
        tree = parse_formula(formula, where)
        for it in items:
            for cond, region in sorted(regions(tree), key=str):
                if cond not in it.conditions:
                    raise InputError(
                        f"{where}: formula {formula!r} reads condition {cond!r}, which item {it.number} lacks "
                        f"(its conditions: {', '.join(it.conditions)})"
                    )
                if region is not None and region not in {r for r, _ in it.conditions[cond]}:
                    raise InputError(
                        f"{where}: formula {formula!r} reads region {region} of condition {cond!r}, which item "
                        f"{it.number} lacks"
                    )
        predictions.append(Prediction(i + 1, formula, tree))
    if not predictions:
        raise InputError(f"{source}: the suite has no predictions")
    return Suite(name, metric, region_names, tuple(predictions), tuple(items), source)


def tokens_by_region(regions_: Sequence[tuple[int, str]]) -> tuple[list[str], list[int]]:
    """A condition's sentence as the model reads it: the tokens of its regions joined with single spaces
    (contents stripped, empty regions left out), and the region number of each token."""
    spans, parts, pos = [], [], 0
    for number, content in regions_:
        text = content.strip()
        if not text:
            continue
        spans.append((pos, pos + len(text), number))
        parts.append(text)
        pos += len(text) + 1
    sentence = " ".join(parts)
    words = tokenize(sentence)
    owner, cursor = [], 0
    for w in words:
        while sentence[cursor].isspace():
            cursor += 1
        if not sentence.startswith(w, cursor):  # the tokenizer only cuts pieces; this would be a bug
            raise AssertionError(f"token {w!r} not found at character {cursor} of {sentence!r}")
        owner.append(next(n for a, b, n in spans if a <= cursor < b))
        cursor += len(w)
    return words, owner


def score_suite(suite: Suite, model: Elmo, head: LmHead, *, batch_size: int = 64) -> pd.DataFrame:
    """:func:`region_surprisal` with a loaded model and head (:func:`probing.lm.score.load_model`)."""
    import pandas as pd

    from .score import iter_scores

    sentences: dict[tuple[str, ...], int] = {}
    layout = []
    for it in suite.items:
        for cname, regs in it.conditions.items():
            words, owner = tokens_by_region(regs)
            key = tuple(words)
            if key:
                sentences.setdefault(key, len(sentences))
            layout.append((it.number, cname, regs, key, owner))
    scores: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i, s in iter_scores([list(k) for k in sentences], model, head, batch_size=batch_size):
        scores[i] = (-s.forward / math.log(2), -s.backward / math.log(2))
    agg = METRICS[suite.metric]
    rows = []
    for number, cname, regs, key, owner in layout:
        fw, bw = scores[sentences[key]] if key else (np.zeros(0), np.zeros(0))
        by_region = np.asarray(owner)
        for region, _ in regs:
            mask = by_region == region
            rows.append((suite.name, number, cname, region, agg(list(fw[mask])), agg(list(bw[mask]))))
    return pd.DataFrame(rows, columns=list(REGION_COLUMNS))


def region_surprisal(
    suite: str | Path | Suite, *, model: Elmo | str | None = None, batch_size: int = 64
) -> pd.DataFrame:
    """Region surprisals of a suite (a bundled suite's name, a path to SyntaxGym JSON, or a :class:`Suite`):
    one row per item, condition and region: ``suite``, ``item`` (1-based, as in the JSON), ``condition``,
    ``region`` (the region number), ``surprisal_forward``, ``surprisal_backward`` (bits, the suite's
    ``meta.metric`` over the region's words). ``model``: an Elmo or a registered checkpoint with an LM head
    (default ``"default"``, the bundled model)."""
    from .score import load_model

    elmo, head = load_model(model)
    return score_suite(load_suite(suite), elmo, head, batch_size=batch_size)


def _values(regions_: pd.DataFrame, direction: str) -> np.ndarray:
    fw = regions_["surprisal_forward"].to_numpy(np.float64)
    bw = regions_["surprisal_backward"].to_numpy(np.float64)
    return {"forward": fw, "backward": bw, "both": (fw + bw) / 2}[direction]


def evaluate_predictions(regions: pd.DataFrame, suite: str | Path | Suite) -> pd.DataFrame:
    """Each prediction of ``suite`` on each item and direction, from :func:`region_surprisal`'s table:
    ``suite``, ``item``, ``prediction`` (1-based, in the suite's order), ``direction`` (``forward``,
    ``backward``, ``both``: the formula on the mean of the two directions' region surprisals), ``correct``.
    A region the formula reads that the table lacks is an ``InputError`` naming suite, item and formula."""
    import pandas as pd

    s = load_suite(suite)
    missing = [c for c in REGION_COLUMNS if c not in regions.columns]
    if missing:
        raise InputError(f"region table for suite {s.name!r} lacks the column(s) {missing}")
    table = regions[regions["suite"] == s.name]
    keys = list(zip(table["item"].astype(int), table["condition"].astype(str), table["region"].astype(int)))
    columns = {d: _values(table, d) for d in DIRECTIONS}
    per_item: dict[int, dict[str, dict[tuple[str, int], float]]] = {}
    for k, (item, cond, region) in enumerate(keys):
        for d in DIRECTIONS:
            per_item.setdefault(item, {}).setdefault(d, {})[(cond, region)] = float(columns[d][k])
    rows = []
    for it in s.items:
        if it.number not in per_item:
            raise InputError(f"region table has no rows for item {it.number} of suite {s.name!r}")
        for pred in s.predictions:
            for d in DIRECTIONS:
                values = per_item[it.number][d]
                try:
                    correct = bool(evaluate(pred.tree, values))
                except KeyError as e:
                    raise InputError(
                        f"suite {s.name!r}, item {it.number}: formula {pred.formula!r} reads {e.args[0]}, which "
                        "the region table lacks"
                    ) from None
                rows.append((s.name, it.number, pred.index, d, correct))
    return pd.DataFrame(rows, columns=list(PREDICTION_COLUMNS))


def item_outcomes(predictions: pd.DataFrame) -> pd.DataFrame:
    """Per suite, item and direction: ``correct`` when every prediction holds."""
    return predictions.groupby(["suite", "item", "direction"], sort=False, as_index=False)["correct"].all()


def _comparisons(node: Node) -> list[Node]:
    if isinstance(node, Binary):
        if node.op in ("<", ">", "="):
            return [node]
        return _comparisons(node.left) + _comparisons(node.right)
    return []


def left_to_right_only(suite: str | Path | Suite) -> dict[int, float]:
    """Per prediction (1-based): the share of items in which every comparison it makes (``<``, ``>``,
    ``=``) compares conditions that share every word after each region the comparison reads, so that the
    backward LM scores those regions in the same right context and sees none of the manipulation (see the
    module's note on backward rows). 1.0: the prediction is defined for left-to-right reading only."""
    s = load_suite(suite)
    out = {}
    for pred in s.predictions:
        shared = 0
        for it in s.items:
            ok = True
            for comparison in _comparisons(pred.tree):
                reads = regions(comparison)
                conds = sorted({c for c, _ in reads})
                if any(r is None for _, r in reads):
                    ok = False
                for r in {r for _, r in reads if r is not None}:
                    after = {tuple(x.strip() for n, x in it.conditions[c] if n > r and x.strip()) for c in conds}
                    ok = ok and len(after) == 1
            shared += ok
        out[pred.index] = shared / len(s.items)
    return out


def _suite_means(outcomes: pd.DataFrame, direction: str) -> dict[str, np.ndarray]:
    sub = outcomes[outcomes["direction"] == direction]
    return {str(s): g["correct"].to_numpy(bool) for s, g in sub.groupby("suite", sort=False)}


def aggregate(per_suite: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Suite values -> ``split -> value``: ``suite:<name>`` for every suite, ``circuit:<name>`` (the mean over
    its suites) and ``overall`` (the mean over suites, the SG score), both without the authors' excluded
    suites (:func:`excluded`); no circuit or overall entry where no suite counts.

    Parameters
    ----------
    per_suite : mapping of suite name to ndarray (r,)
        The same r for every suite: 1 for a point value, ``n_boot`` for bootstrap replicates.

    Returns
    -------
    dict of split to ndarray (r,), float64
        Element-wise, so replicate j of a circuit is the mean of its suites' replicate j.
    """
    out = {f"suite:{s}": np.asarray(v, np.float64) for s, v in per_suite.items()}
    counted = {s: np.asarray(v, np.float64) for s, v in per_suite.items() if not excluded(s)}
    circuits: dict[str, list[np.ndarray]] = {}
    for s, v in counted.items():
        c = circuit_of(s)
        if c is not None:
            circuits.setdefault(c, []).append(v)
    for c in sorted(circuits):
        out[f"circuit:{c}"] = np.mean(circuits[c], axis=0)
    if counted:
        out[OVERALL] = np.mean(list(counted.values()), axis=0)
    return out


def summarize(outcomes: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Accuracy rows from :func:`item_outcomes`: ``direction``, ``split`` (``overall``, ``circuit:<name>``,
    ``suite:<name>``), ``value``, ``ci_low``, ``ci_high`` (95 % percentile bootstrap over items, resampled
    within each suite; the same replicates carried through the means) and ``n_items``."""
    import pandas as pd

    from .pairs import _interval

    rng = np.random.default_rng(seed)
    suites = list(dict.fromkeys(outcomes["suite"]))
    sizes = {s: int(((outcomes["suite"] == s) & (outcomes["direction"] == "forward")).sum()) for s in suites}
    draws = {s: rng.integers(0, sizes[s], size=(n_boot, sizes[s])) for s in suites}
    rows = []
    for d in DIRECTIONS:
        correct = _suite_means(outcomes, d)
        point = aggregate({s: np.array([correct[s].mean()]) for s in suites})
        boot = aggregate({s: correct[s][draws[s]].mean(axis=1) for s in suites})
        for split, value in point.items():
            low, high = _interval(float(value[0]), boot[split])
            members = [s for s in suites if split in (f"suite:{s}", f"circuit:{circuit_of(s)}", OVERALL)]
            members = members if split.startswith("suite:") else [s for s in members if not excluded(s)]
            rows.append((d, split, float(value[0]), low, high, sum(sizes[s] for s in members)))
    return pd.DataFrame(rows, columns=["direction", "split", "value", "ci_low", "ci_high", "n_items"])


def read_authors_results(paths: Sequence[str | Path] | None = None) -> pd.DataFrame:
    """The authors' per-item results (``model``, ``suite``, ``item`` (0-based), ``correct``) processed as
    their ``main.upstream.py`` does: ``model_name``, ``corpus`` and ``seed`` split from ``model``, and
    each n-gram model's seeds replaced by one seed whose item is correct where more than half of the
    seeds are. Default: the files bundled in ``probing/resources/syntaxgym/sg_results`` (MIT)."""
    import pandas as pd

    if paths is None:
        paths = sorted((_bundled() / "sg_results").glob("*.csv.gz"))
    frames = []
    for p in paths:
        frame = pd.read_csv(p)
        missing = {"model", "suite", "item", "correct"} - set(frame.columns)
        if missing:
            raise InputError(f"{p}: missing the column(s) {sorted(missing)} of the authors' result files")
        frames.append(frame)
    results = pd.concat(frames)
    ids = results.model.str.split("_", expand=True)
    ids = ids.reindex(columns=[0, 1, 2]).rename(columns={0: "model_name", 1: "corpus", 2: "seed"})
    results = pd.concat([results, ids], axis=1).drop(columns=["model"])
    results["seed"] = results.seed.fillna("0").astype(int)
    results["corpus"] = results.corpus.fillna("")
    for name in NGRAM_MODELS:
        voted = (
            results[results.model_name == name]
            .groupby(["model_name", "corpus", "suite", "item"])
            .agg({"correct": "mean"})
            > 0.5
        ).reset_index()
        voted["seed"] = 0
        results = pd.concat([results[results.model_name != name], voted], sort=True)
    return results


def model_id(model_name: str, corpus: str) -> str:
    """The authors' model id without its seed: ``grnn``, ``rnng_bllip-lg``."""
    return f"{model_name}_{corpus}" if corpus else model_name


def reference_table(
    suites: Sequence[str] | None = None,
    results: pd.DataFrame | None = None,
    items: Mapping[str, Sequence[int]] | None = None,
) -> pd.DataFrame:
    """The authors' models' accuracies, aggregated as their analysis does: ``model`` (the id of
    :func:`model_id`), ``split`` and ``value``. A suite's accuracy per seed is the mean of ``correct`` over
    its items; ``suite:<name>`` is the mean over seeds, ``circuit:<name>`` and ``overall`` (the SG score)
    the mean over the (seed, suite) rows of its non-excluded suites (main.upstream.py's ``suites_df``
    grouped by model). ``suites``: only these (default all the files hold); ``items``: suite -> the 1-based
    item numbers to keep (the authors' files count items from 0), for a run on the first items only."""
    import pandas as pd

    results = read_authors_results() if results is None else results
    if suites is not None:
        known = set(results.suite)
        unknown = [s for s in suites if s not in known]
        if unknown:
            raise InputError(f"the authors' results have no suite(s) {unknown}")
        results = results[results.suite.isin(list(suites))]
    if items is not None:
        keep = {(str(s), int(i) - 1) for s, numbers in items.items() for i in numbers}
        results = results[[(s, int(i)) in keep for s, i in zip(results.suite, results.item)]]
    # main.upstream.py's suites_df, then its groupings' means (pandas' grouped mean, as theirs)
    per_seed = results.groupby(["model_name", "corpus", "seed", "suite"]).correct.mean().reset_index()
    per_seed["model"] = [model_id(str(m), str(c)) for m, c in zip(per_seed.model_name, per_seed.corpus)]
    per_seed["circuit"] = per_seed.suite.map(circuit_of)
    kept = per_seed[~per_seed.suite.map(excluded)]
    parts = [
        per_seed.groupby(["model", "suite"]).correct.mean().rename(lambda s: f"suite:{s}", level=1),
        kept.dropna(subset=["circuit"])
        .groupby(["model", "circuit"])
        .correct.mean()
        .rename(lambda c: f"circuit:{c}", level=1),
        pd.concat({OVERALL: kept.groupby("model").correct.mean()}).swaplevel(),
    ]
    rows = [(str(m), str(split), float(v)) for part in parts for (m, split), v in part.items()]
    return pd.DataFrame(rows, columns=["model", "split", "value"])
