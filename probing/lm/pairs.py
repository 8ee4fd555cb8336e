"""Minimal pairs: does the LM give the grammatical sentence the higher probability? (BLiMP and your own pairs)

A pair is right in a direction when the good sentence's total log-probability (words plus the boundary
prediction, :func:`probing.lm.sentence_scores`) is strictly higher than the bad one's; ``both`` compares the
mean of the two directions' totals. Aggregation: a paradigm's accuracy is over its pairs, a phenomenon's the
mean over its paradigms (Warstadt et al.'s BLiMP, TACL 2020), ``overall`` the share of all pairs, and
``mean-over-groups`` the mean over all paradigms, which is BLiMP's "overall" (the same value when every
paradigm has as many pairs, as in BLiMP; not for agreement items grouped by attractors, 361 pairs without and 6
with three). Confidence intervals: a percentile bootstrap over pairs, resampled within each paradigm, the same
replicates carried through the means. Coverage: the share of pairs whose differing words (the multiset
difference of the two token lists) are all in the head's vocabulary; ``accuracy_covered`` is the accuracy on
those pairs.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from probing.errors import InputError, ProbingError
from probing.tokenize import tokenize

if TYPE_CHECKING:
    import pandas as pd

    from probing.elmo import Elmo

    from .head import LmHead

BLIMP_URL = "https://raw.githubusercontent.com/alexwarstadt/blimp/3e56b06fcabca9b30822fc66435fca6b1aa40bb1/BLiMP.zip"
BLIMP_SHA256 = "172a1a714d72e72a89e8384dd531483f3d0f8a9aee3d33dccaf7992d8cecbb73"  # shared/data/blimp/BLiMP.zip
BLIMP_SIZE = 2_354_164
BLIMP_PARADIGMS = 67
# The data files label animate_subject_passive/_trans "s-selection"; the authors' results (models_summary.jsonl)
# count them under argument_structure, which gives their 12 phenomena
BLIMP_PHENOMENON = {"s-selection": "argument_structure"}
DIRECTIONS = ("forward", "backward", "both")
PAIR_COLUMNS = ("good", "bad", "group", "phenomenon")
OVERALL = "overall"
MEAN_OVER_GROUPS = "mean-over-groups"
ROW_COLUMNS = (
    "task",
    "dataset",
    "split",
    "encoder",
    "layer",
    "level",
    "group",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "n_pairs",
    "seed",
)


class BlimpNotFound(ProbingError, FileNotFoundError):
    """BLiMP.zip is in none of the places searched; the message lists them and how to get it."""


def blimp_places() -> list[Path]:
    """Where ``BLiMP.zip`` is looked for: ``$PROBING_DATA/blimp/``, then the download cache."""
    from probing.paths import cache_dir, data_dir

    root = data_dir()
    return ([root / "blimp" / "BLiMP.zip"] if root is not None else []) + [cache_dir() / "data" / "blimp" / "BLiMP.zip"]


def find_blimp() -> Path:
    for place in blimp_places():
        if place.is_file():
            return place
    listed = "\n".join(f"  {p}" for p in blimp_places())
    raise BlimpNotFound(f"BLiMP.zip not found. Looked in:\n{listed}\nGet it with:  probing data get blimp")


def get_blimp() -> Path:
    """Download BLiMP.zip (the authors' GitHub repository at a pinned commit; sha256-checked) into the cache."""
    from probing.download import fetch
    from probing.paths import cache_dir

    dest = cache_dir() / "data" / "blimp" / "BLiMP.zip"
    return fetch(BLIMP_URL, sha256=BLIMP_SHA256, size=BLIMP_SIZE, dest=dest, hint="probing data get blimp")


def read_blimp(path: str | Path | None = None, paradigms: Sequence[str] | None = None) -> pd.DataFrame:
    """BLiMP's pairs: ``good``, ``bad``, ``group`` (the paradigm UID), ``phenomenon`` (``linguistics_term``, grouped
    as in the authors' results: see ``BLIMP_PHENOMENON``),
    in the archive's order, from ``path`` (BLiMP.zip or its unpacked ``data/`` folder) or :func:`find_blimp`.
    ``paradigms``: keep only these UIDs."""
    import pandas as pd

    source = Path(path) if path is not None else find_blimp()
    files: dict[str, bytes] = {}
    if source.is_dir():
        for f in sorted(source.glob("*.jsonl")):
            files[f.name] = f.read_bytes()
    else:
        try:
            with zipfile.ZipFile(source) as z:
                for name in sorted(z.namelist()):
                    if name.endswith(".jsonl") and "/." not in name and not name.startswith("__MACOSX"):
                        files[name] = z.read(name)
        except zipfile.BadZipFile as e:
            raise InputError(f"{source}: not a zip archive ({e})") from e
    rows = []
    for name, data in files.items():
        for i, line in enumerate(data.decode("utf-8").splitlines()):
            if not line.strip():
                continue
            rec = _record(line, f"{source}:{name}", i + 1, ("sentence_good", "sentence_bad", "UID", "linguistics_term"))
            if paradigms is None or rec["UID"] in paradigms:
                term = BLIMP_PHENOMENON.get(rec["linguistics_term"], rec["linguistics_term"])
                rows.append((rec["sentence_good"], rec["sentence_bad"], rec["UID"], term))
    if not rows:
        raise InputError(f"{source}: no BLiMP pairs found" + (f" for paradigms {list(paradigms)}" if paradigms else ""))
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def read_pairs(path: str | Path) -> pd.DataFrame:
    """Your own pairs: a CSV (header row) or JSONL file with ``good``, ``bad``, optional ``group`` (default
    ``all``) and optional ``phenomenon`` (groups of groups, aggregated as BLiMP's phenomena; default none).
    Returns ``good``, ``bad``, ``group``, ``phenomenon``."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InputError(f"pairs file not found: {path}")
    text = path.read_text(encoding="utf-8")
    records: list[tuple[int, Mapping]] = []
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        records = [
            (i + 1, _record(line, str(path), i + 1, ("good", "bad")))
            for i, line in enumerate(text.splitlines())
            if line.strip()
        ]
    else:
        reader = csv.DictReader(io.StringIO(text))
        missing = [c for c in ("good", "bad") if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: the header must name good and bad (optional group); found {reader.fieldnames}")
        records = [(i + 2, r) for i, r in enumerate(reader)]
    rows = []
    for line, r in records:
        good, bad = r.get("good"), r.get("bad")
        if not isinstance(good, str) or not isinstance(bad, str) or not good.strip() or not bad.strip():
            raise InputError(f"{path}, line {line}: good and bad must be non-empty sentences")
        group = r.get("group") or "all"
        phenomenon = r.get("phenomenon") or None
        rows.append((good, bad, str(group), None if phenomenon is None else str(phenomenon)))
    if not rows:
        raise InputError(f"{path}: no pairs")
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def load_pairs(data: str) -> tuple[str, pd.DataFrame]:
    """``"blimp"`` or ``"pairs:PATH"`` -> (dataset name, pairs)."""
    if data == "blimp":
        return "blimp", read_blimp()
    if data.startswith("pairs:"):
        path = Path(data.removeprefix("pairs:"))
        return path.stem, read_pairs(path)
    raise InputError(f"minimal-pairs data must be 'blimp' or 'pairs:PATH', got {data!r}")


def _record(line: str, where: str, number: int, fields: Sequence[str]) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}, line {number}: not JSON ({e.msg})") from None
    if not isinstance(rec, dict):
        raise InputError(f"{where}, line {number}: expected a JSON object")
    missing = [f for f in fields if f not in rec]
    if missing:
        raise InputError(f"{where}, line {number}: missing {', '.join(missing)}")
    return rec


def aggregate(
    per_group: Mapping[str, np.ndarray],
    phenomenon: Mapping[str, str | None],
    sizes: Mapping[str, float | np.ndarray],
) -> dict[tuple[str, str], np.ndarray]:
    """Per-paradigm values (each an array: a point value or bootstrap replicates) aggregated:
    ``(level, name) -> value`` for every paradigm, every phenomenon (the mean over its paradigms, as the BLiMP
    authors do), ``overall`` (the share of all pairs: the paradigms' values weighted by ``sizes``) and
    ``mean-over-groups`` (the mean over all paradigms: the BLiMP authors' overall).

    Parameters
    ----------
    per_group : mapping of paradigm to ndarray (r,)
        The same r for every paradigm: 1 for a point value, ``n_boot`` for bootstrap replicates.
    phenomenon : mapping of paradigm to str or None
        Its phenomenon; a paradigm mapped to None (or absent) counts only in ``overall`` and
        ``mean-over-groups``.
    sizes : mapping of paradigm to float or ndarray (r,)
        The number of pairs its value is a share of (per replicate where that varies, e.g. the covered
        pairs of ``accuracy_covered``); a paradigm of size 0 (its value NaN) adds nothing to ``overall``.

    Returns
    -------
    dict of (level, name) to ndarray (r,), float64
        ``level`` is ``"paradigm"``, ``"phenomenon"``, ``"overall"`` or ``"mean-over-groups"`` (named like
        their level); each entry is element-wise, so replicate j of a phenomenon is the mean of its paradigms'
        replicate j. ``overall`` is NaN where every size is 0.
    """
    arrays = {g: np.asarray(v, dtype=np.float64) for g, v in per_group.items()}
    out: dict[tuple[str, str], np.ndarray] = {("paradigm", g): v for g, v in arrays.items()}
    by_phen: dict[str, list[np.ndarray]] = {}
    for g, v in arrays.items():
        p = phenomenon.get(g)
        if p is not None:
            by_phen.setdefault(p, []).append(v)
    for p, values in by_phen.items():
        out[("phenomenon", p)] = np.mean(values, axis=0)
    weights = {g: np.broadcast_to(np.asarray(sizes[g], dtype=np.float64), v.shape) for g, v in arrays.items()}
    pairs = np.sum(list(weights.values()), axis=0)
    right = np.sum([np.where(weights[g] > 0, weights[g] * v, 0.0) for g, v in arrays.items()], axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[(OVERALL, OVERALL)] = np.where(pairs > 0, right / pairs, np.nan)
    out[(MEAN_OVER_GROUPS, MEAN_OVER_GROUPS)] = np.mean(list(arrays.values()), axis=0)
    return out


def differing_words(good: Sequence[str], bad: Sequence[str]) -> list[str]:
    """The tokens of one sentence that the other lacks (multiset difference, both ways)."""
    g, b = Counter(good), Counter(bad)
    return sorted(((g - b) + (b - g)).elements())


def pair_outcomes(pairs: pd.DataFrame, model: Elmo, head: LmHead, *, batch_size: int = 64) -> pd.DataFrame:
    """Per pair: ``right_forward``, ``right_backward``, ``right_both`` (good strictly higher) and ``covered``."""
    from .score import iter_scores

    tokens = {s: tokenize(s) for s in dict.fromkeys([*pairs.good, *pairs.bad])}
    sentences = list(tokens)
    totals = {
        sentences[i]: (s.total_forward, s.total_backward)
        for i, s in iter_scores([tokens[s] for s in sentences], model, head, batch_size=batch_size)
    }
    out = pairs.copy()
    g = np.array([totals[s] for s in pairs.good])
    b = np.array([totals[s] for s in pairs.bad])
    out["right_forward"] = g[:, 0] > b[:, 0]
    out["right_backward"] = g[:, 1] > b[:, 1]
    out["right_both"] = g.mean(1) > b.mean(1)
    out["covered"] = [
        all(w in head.index for w in differing_words(tokens[x], tokens[y])) for x, y in zip(pairs.good, pairs.bad)
    ]
    return out


def minimal_pairs(
    data: str | pd.DataFrame = "blimp",
    model: Elmo | str | None = None,
    softmax: str | Path | None = None,
    vocab: str | Path | None = None,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
) -> pd.DataFrame:
    """Score minimal pairs and aggregate them: one row per (direction, level, group, metric) with
    ``metric`` in accuracy / coverage / accuracy_covered and a 95% bootstrap CI over pairs; ``layer`` is the
    direction (forward, backward, both), ``level`` paradigm / phenomenon / overall (the share of all pairs) /
    mean-over-groups (the mean over groups, BLiMP's overall). ``data``: ``"blimp"``,
    ``"pairs:PATH"`` or a DataFrame with good, bad, group[, phenomenon]."""
    from .score import load_model

    dataset, pairs = ("pairs", data) if not isinstance(data, str) else load_pairs(data)
    if "phenomenon" not in pairs:
        pairs = pairs.assign(phenomenon=None)
    if "group" not in pairs:
        pairs = pairs.assign(group="all")
    elmo, head = load_model(model, softmax, vocab)
    outcomes = pair_outcomes(pairs, elmo, head, batch_size=batch_size)
    return summarize(outcomes, dataset=dataset, encoder=elmo.source, n_boot=n_boot, seed=seed)


def summarize(outcomes: pd.DataFrame, *, dataset: str, encoder: str, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The tidy rows of :func:`minimal_pairs` from per-pair outcomes (see :func:`pair_outcomes`)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    groups = list(dict.fromkeys(outcomes.group))
    phenomenon = {g: p for g, p in zip(outcomes.group, outcomes.phenomenon)}
    index = {g: np.flatnonzero((outcomes.group == g).to_numpy()) for g in groups}
    draws = {g: rng.integers(0, len(ix), size=(n_boot, len(ix))) for g, ix in index.items()}
    covered = outcomes.covered.to_numpy(bool)
    rows = []
    for direction in DIRECTIONS:
        right = outcomes[f"right_{direction}"].to_numpy(bool)
        metrics = {
            "accuracy": {g: (right[ix], None) for g, ix in index.items()},
            "coverage": {g: (covered[ix], None) for g, ix in index.items()},
            "accuracy_covered": {g: (right[ix], covered[ix]) for g, ix in index.items()},
        }
        for metric, per_group in metrics.items():
            points = {g: np.array([_rate(v, m)]) for g, (v, m) in per_group.items()}
            boots = {g: _boot_rates(v, m, draws[g]) for g, (v, m) in per_group.items()}
            # the pairs each rate is over: the group's, or its covered ones (per replicate)
            point_sizes = {g: len(v) if m is None else m.sum() for g, (v, m) in per_group.items()}
            boot_sizes = {g: len(v) if m is None else m[draws[g]].sum(axis=1) for g, (v, m) in per_group.items()}
            point, boot = aggregate(points, phenomenon, point_sizes), aggregate(boots, phenomenon, boot_sizes)
            counts = {("paradigm", g): len(ix) for g, ix in index.items()}
            for key, value in point.items():
                level, name = key
                low, high = _interval(float(value[0]), boot[key])
                everything = level in (OVERALL, MEAN_OVER_GROUPS)
                n = counts.get(key, sum(len(index[g]) for g in groups if everything or phenomenon[g] == name))
                rows.append(
                    (
                        "minimal-pairs",
                        dataset,
                        "test",
                        encoder,
                        direction,
                        level,
                        name,
                        metric,
                        float(value[0]),
                        low,
                        high,
                        n,
                        seed,
                    )
                )
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def _interval(value: float, replicates: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval, widened to hold ``value`` (as the results contract needs; a percentile
    interval can miss its point by rounding when every replicate is equal); NaN where nothing was scored."""
    finite = replicates[np.isfinite(replicates)]
    if not np.isfinite(value) or finite.size == 0:
        return float("nan"), float("nan")
    low, high = np.percentile(finite, [2.5, 97.5])
    return min(float(low), value), max(float(high), value)


def _rate(values: np.ndarray, mask: np.ndarray | None) -> float:
    if mask is not None:
        values = values[mask]
    return float(values.mean()) if len(values) else float("nan")


def _boot_rates(values: np.ndarray, mask: np.ndarray | None, draws: np.ndarray) -> np.ndarray:
    """The rate in each bootstrap replicate (rows of ``draws``: indices into ``values``)."""
    picked = values[draws].astype(np.float64)
    if mask is None:
        return picked.mean(axis=1)
    m = mask[draws]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (picked * m).sum(axis=1) / m.sum(axis=1)


def reference_rows(
    summary: str | Path | None = None,
    human: str | Path | None = None,
    paradigms: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The authors' models (5-gram, LSTM, Transformer-XL, GPT-2) from ``models_summary.jsonl`` and, with
    ``human`` (``human_validation_summary.csv``), human agreement, as rows like :func:`minimal_pairs`' (encoder
    ``reference``, layer ``5-gram``, ``lstm``, ``txl``, ``gpt2``, ``human``; accuracy, no CI), recomputed from
    the per-paradigm rows with :func:`aggregate` over ``paradigms`` (default all 67; a subset gives the
    references of the same paradigms a run scored). Default files: the copies bundled with probing
    (``probing/resources/blimp``, CC BY 4.0). A paradigm's human value is ``accepted / 5`` (the share of its
    five validation items the annotators' majority accepted; the mean over the 67 is the published 96.4 %)."""
    import pandas as pd

    from probing.paths import resources_dir

    bundled = resources_dir() / "blimp"
    if summary is None:
        summary, human = bundled / "models_summary.jsonl", bundled / "human_validation_summary.csv"
    models = {"ngram": "5-gram", "lstm": "lstm", "txl": "txl", "gpt2": "gpt2"}
    per_paradigm, phenomenon = read_models_summary(summary)
    if human is not None:
        for uid, accepted in read_human_summary(human).items():
            if uid in per_paradigm:
                per_paradigm[uid]["human"] = accepted
        models["human"] = "human"
    if paradigms is not None:
        unknown = sorted(set(paradigms) - set(per_paradigm))
        if unknown:
            raise InputError(f"{summary}: no reference rows for paradigm(s) {unknown}")
        per_paradigm = {g: per_paradigm[g] for g in paradigms}
    rows = []
    for key, layer in models.items():
        # every BLiMP paradigm has 1,000 pairs (and 5 human validation items): the share of all pairs is the
        # mean over paradigms
        agg = aggregate(
            {g: np.array([v[key]]) for g, v in per_paradigm.items()}, phenomenon, dict.fromkeys(per_paradigm, 1.0)
        )
        for (level, name), value in agg.items():
            rows.append(
                (
                    "minimal-pairs",
                    "blimp",
                    "test",
                    "reference",
                    layer,
                    level,
                    name,
                    "accuracy",
                    float(value[0]),
                    np.nan,
                    np.nan,
                    1000 if level == "paradigm" else np.nan,
                    0,
                )
            )
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def read_human_summary(path: str | Path) -> dict[str, float]:
    """BLiMP's ``human_validation_summary.csv``: paradigm UID -> ``accepted / 5`` (see :func:`reference_rows`)."""
    out = {}
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        if not {"Condition", "accepted"} <= set(reader.fieldnames or []):
            raise InputError(f"{path}: expected the columns Condition and accepted, found {reader.fieldnames}")
        for i, r in enumerate(reader):
            try:
                out[r["Condition"]] = int(r["accepted"]) / 5
            except ValueError:
                raise InputError(f"{path}, line {i + 2}: accepted must be an integer, got {r['accepted']!r}") from None
    return out


def read_models_summary(path: str | Path) -> tuple[dict[str, dict[str, float]], dict[str, str | None]]:
    """The per-paradigm rows of BLiMP's ``models_summary.jsonl``: UID -> {model: accuracy}, UID -> phenomenon."""
    per_paradigm: dict[str, dict[str, float]] = {}
    phenomenon: dict[str, str | None] = {}
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        rec = _record(line, str(path), i + 1, ("UID", "linguistics_term"))
        if rec["UID"] == OVERALL:
            continue
        per_paradigm[rec["UID"]] = {k: float(v) for k, v in rec.items() if k not in ("UID", "linguistics_term")}
        phenomenon[rec["UID"]] = rec["linguistics_term"]
    return per_paradigm, phenomenon
