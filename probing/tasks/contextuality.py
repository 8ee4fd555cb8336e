"""The ``contextuality`` task kind: Ethayarajh's (2019) geometry of each layer, and the mono/poly test.

Per encoder, layer and test part (any corpus, any encoder: only the store is read), the rows are

* ``self-similarity``: the mean over words of a word's self-similarity (the mean cosine between its
  occurrences in different sentences), over words that occur in at least ``min_contexts`` (5) sentences;
  CI: bootstrap over words;
* ``intra-sentence-similarity``: the mean over sentences of two or more words of the mean cosine of a word to
  its sentence's mean vector; CI: bootstrap over sentences;
* ``explained-variance``: the mean over the same words of ``σ1² / Σ σi²`` of a word's uncentred occurrence
  matrix; CI: bootstrap over words;
* each also ``-adjusted``: minus its anisotropy baseline. Both cosine statistics take the mean cosine of
  ``baseline_pairs`` (1000) token pairs drawn uniformly from different sentences (Ethayarajh's baseline), the
  same pairs in every layer; the explained variance of a word takes that of as many tokens drawn uniformly as
  it has occurrences (the share is at least 1/n for n rows, so the baseline matches n). The baselines' own
  sampling spread is not in the CIs.
* ``mono-poly-accuracy`` (``mono_poly = true``, the default): words are the (lemma, part of speech) pairs of
  nouns, verbs, adjectives and adverbs in the task's WordNet that occur in ``min_contexts`` sentences;
  monosemous = one WordNet sense. Each part's words are balanced by drawing as many of the larger class as the
  smaller has (seed ``seeds[0]``), so chance is 50 %. A threshold on self-similarity is chosen on the
  ``train`` part's words (highest accuracy) and scored on each test part's words (Garí Soler & Apidianaki
  2021's setting, with a threshold instead of their logistic regression on the one feature; their ELMo
  scored 0.69, the frequency baseline 0.77); the features are rounded to 6 decimals first, so float rounding
  does not separate words. The task's first encoder adds the baseline (encoder
  ``baseline``, layer ``log-frequency``): the same threshold on the log of a word's share of all the job's
  tokens (train and test parts together, so a word has one frequency whichever part it is scored in).

The counts behind each row (words, occurrences, sentences, the baselines' values, mono and poly words) are the
job's probe notes (``results.json``). Words are the token table's word forms as written (case kept); the mono/poly
words are (lemma, part of speech) groups, whose occurrences may differ in form ("bank", "banks"), so even a
static encoder's self-similarity is below 1 there: its mono/poly row measures inflection, a useful control.
Tokens the encoder flags out of vocabulary (the store's ``oov`` column) are left out of every statistic and
baseline: a zero vector has no direction, so the word sets differ between encoders by their OOV words (the
counts say by how much).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.analysis.contextuality import (
    MIN_OCCURRENCES,
    balanced_subset,
    best_threshold,
    intra_sentence_similarity,
    max_explainable_variance,
    pair_cosines,
    random_pairs,
    self_similarity,
    threshold_predict,
    word_groups,
)
from probing.results import BASELINE_ENCODER, Metric
from probing.tasks.common import Job, Part, TaskError, TaskKind, TaskOutput, fraction_row

if TYPE_CHECKING:
    from collections.abc import Mapping

    from probing.protocols import StoreLike
    from probing.wordnet import SenseInventory

_COSINE, _SIGNED = (-1.0, 1.0), (-2.0, 2.0)
SELF_SIMILARITY = Metric(
    "self-similarity", "self-similarity (mean cosine of a word's occurrences)", False, _COSINE, False
)
INTRA_SENTENCE = Metric(
    "intra-sentence-similarity", "intra-sentence similarity (cosine to the sentence mean)", False, _COSINE, False
)
EXPLAINED_VARIANCE = Metric("explained-variance", "maximum explainable variance (%)", True, (0.0, 1.0), False)
CONTEXTUALITY_METRICS = (
    SELF_SIMILARITY,
    Metric("self-similarity-adjusted", "self-similarity minus anisotropy", False, _SIGNED, False),
    INTRA_SENTENCE,
    Metric("intra-sentence-similarity-adjusted", "intra-sentence similarity minus anisotropy", False, _SIGNED, False),
    EXPLAINED_VARIANCE,
    Metric("explained-variance-adjusted", "maximum explainable variance minus baseline (%)", True, _COSINE, False),
    Metric("mono-poly-accuracy", "monosemous vs polysemous accuracy (%)", True, (0.0, 1.0)),
)
CONTENT_POS = ("NOUN", "VERB", "ADJ", "ADV")
LOG_FREQUENCY = "log-frequency"
FEATURE_DECIMALS = 6  # the mono/poly features are rounded to this many decimals before a threshold is chosen


@dataclass(frozen=True)
class ContextualityOptions:
    """The keys of a ``kind = "contextuality"`` table besides the data: ``min_contexts`` (the fewest
    sentences a word must occur in), ``baseline_pairs`` (random token pairs of the cosine baseline) and
    ``mono_poly`` (the mono/poly classification; needs lemmas and parts of speech)."""

    min_contexts: int = MIN_OCCURRENCES
    baseline_pairs: int = 1000
    mono_poly: bool = True

    def __post_init__(self) -> None:
        if self.min_contexts < 2:
            raise TaskError(f"min_contexts must be at least 2 (pairs in different sentences), got {self.min_contexts}")
        if self.baseline_pairs < 1:
            raise TaskError(f"baseline_pairs must be a positive integer, got {self.baseline_pairs}")


@dataclass
class _Words:
    """One part's words: their rows and the baseline draws, shared by every layer."""

    part: Part
    sentence: np.ndarray  # (n_rows,) sentence index of each row
    groups: dict[str, np.ndarray]
    pairs: tuple[np.ndarray, np.ndarray]
    random_rows: dict[str, np.ndarray]
    sentence_rows: list[np.ndarray]
    sentence_ids: list[str]


def _sentence_of_rows(store: StoreLike) -> np.ndarray:
    offsets = np.asarray(store.offsets)
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def _words(task: str, part: Part, options: ContextualityOptions, seed: int) -> _Words:
    store = part.store
    sentence = _sentence_of_rows(store)
    kept = np.flatnonzero(_in_vocabulary(store))
    words = [w if k else "" for w, k in zip(store.tokens["word"].astype(str), _in_vocabulary(store))]
    groups = word_groups(words, sentence, options.min_contexts)
    groups.pop("", None)
    if not groups:
        raise TaskError(
            f"task {task!r}: no word of {part.dataset}/{part.split} occurs in {options.min_contexts} or more "
            "sentences (min_contexts)"
        )
    rng = np.random.default_rng(seed)
    random_rows = {w: kept[rng.integers(0, len(kept), size=len(r))] for w, r in groups.items()}
    ids = store.tokens["sentence_id"].astype(str).to_numpy()
    by_sentence = np.split(kept, np.flatnonzero(np.diff(sentence[kept])) + 1)
    long = [rows for rows in by_sentence if len(rows) >= 2]
    a, b = random_pairs(sentence[kept], options.baseline_pairs, seed)
    return _Words(part, sentence, groups, (kept[a], kept[b]), random_rows, long, [str(ids[r[0]]) for r in long])


def _in_vocabulary(store: StoreLike) -> np.ndarray:
    """Rows the encoder has a vector for: the token table's ``oov`` flag unset (a GloVe or word2vec OOV row is
    zeros, which has no direction; fastText's n-gram and a transformer's unknown-piece rows are left out too)."""
    return ~store.tokens["oov"].astype(bool).to_numpy()


def layer_statistics(x: np.ndarray, words: _Words) -> dict[str, Any]:
    """Every statistic of one layer of ``words.part``: per-item scores and baselines.

    Parameters
    ----------
    x : ndarray (n_rows, d)
        The layer, row i = token i of the part's store.
    words : the part's words, sentences and baseline draws.

    Returns
    -------
    dict
        ``words`` (n_words,), ``self-similarity``, ``explained-variance`` and ``explained-variance-baseline``
        (n_words,), ``intra-sentence-similarity`` (n_sentences,), ``cosine-baseline`` (float).
    """
    x = np.asarray(x, dtype=np.float64)
    names = list(words.groups)
    self_sim = np.array([self_similarity(x[r], words.sentence[r]) for r in words.groups.values()])
    mev = np.array([max_explainable_variance(x[r]) for r in words.groups.values()])
    mev_base = np.array([max_explainable_variance(x[words.random_rows[w]]) for w in names])
    intra = np.array([intra_sentence_similarity(x[r]) for r in words.sentence_rows])
    cosine_base = float(np.mean(pair_cosines(x, *words.pairs)))
    return {
        "words": np.array(names, dtype=object),
        "self-similarity": self_sim,
        "explained-variance": mev,
        "explained-variance-baseline": mev_base,
        "intra-sentence-similarity": intra,
        "cosine-baseline": cosine_base,
    }


def _geometry_rows(task: str, encoder: str, layer: str, words: _Words, stats: dict, job: Job) -> list[dict]:
    seed, n_boot = job.settings.seeds[0], job.settings.n_boot
    part, by_word, by_sentence = words.part, stats["words"], np.array(words.sentence_ids, dtype=object)
    if len(by_sentence) == 0:
        raise TaskError(f"task {task!r}: {part.dataset}/{part.split} has no sentence of two or more words")
    base = stats["cosine-baseline"]
    scores = {
        "self-similarity": (stats["self-similarity"], by_word),
        "self-similarity-adjusted": (stats["self-similarity"] - base, by_word),
        "intra-sentence-similarity": (stats["intra-sentence-similarity"], by_sentence),
        "intra-sentence-similarity-adjusted": (stats["intra-sentence-similarity"] - base, by_sentence),
        "explained-variance": (stats["explained-variance"], by_word),
        "explained-variance-adjusted": (stats["explained-variance"] - stats["explained-variance-baseline"], by_word),
    }
    return [fraction_row(task, part, encoder, layer, metric, s, g, seed, n_boot) for metric, (s, g) in scores.items()]


def _lemma_keys(part: Part, inventory: SenseInventory) -> list[str]:
    """Each token's ``"lemma\tPOS"`` for a content word whose lemma the inventory holds, else ``""``."""
    tokens = part.store.tokens
    return [
        f"{lemma}\t{pos}" if pos in CONTENT_POS and lemma and inventory.has_lemma(lemma, pos) else ""
        for lemma, pos in zip(tokens["lemma"].astype(str), tokens["upos"].astype(str))
    ]


def sense_words(
    part: Part, inventory: SenseInventory, min_contexts: int
) -> tuple[dict[str, np.ndarray], dict[str, bool], dict[str, int]]:
    """The (lemma, part of speech) words of ``part`` for the mono/poly test: their rows (tokens the encoder has a
    vector for), whether each is polysemous (more than one WordNet sense), and every word's token count (all
    tokens, whatever the encoder: the frequency baseline must not depend on the encoder).

    Returns
    -------
    groups : dict of str to ndarray of int
        ``"lemma\tPOS"`` -> its rows in the part's store.
    poly : dict of str to bool
    counts : dict of str to int
    """
    keys = _lemma_keys(part, inventory)
    counts = dict(Counter(k for k in keys if k))
    known = [k if ok else "" for k, ok in zip(keys, _in_vocabulary(part.store))]
    groups = word_groups(known, _sentence_of_rows(part.store), min_contexts)
    groups.pop("", None)
    poly = {k: len(inventory.senses(*k.split("\t"))) > 1 for k in groups}
    return groups, poly, counts


def _balanced(groups: Mapping[str, np.ndarray], poly: Mapping[str, bool], seed: int) -> list[str]:
    names = list(groups)
    return [names[i] for i in balanced_subset(np.array([poly[k] for k in names], dtype=bool), seed)]


def mono_poly_rows(job: Job, train: Part) -> TaskOutput:
    """``mono-poly-accuracy`` per layer on each test part, and the log-frequency baseline's."""
    task, seed, n_boot = job.task, job.settings.seeds[0], job.settings.n_boot
    opts = ContextualityOptions(**job.options)
    if job.inventory is None:
        raise TaskError(f"task {task!r}: the mono/poly test needs a WordNet (the task's wordnet key)")
    parts = {"train": train, **{f"test{i}": p for i, p in enumerate(job.tests)}}
    found = {name: sense_words(p, job.inventory, opts.min_contexts) for name, p in parts.items()}
    chosen = {name: _balanced(g, poly, seed) for name, (g, poly, _) in found.items()}
    for name, keys in chosen.items():
        if not keys:
            p = parts[name]
            raise TaskError(
                f"task {task!r}: {p.dataset}/{p.split} has no monosemous or no polysemous content word (lemma and "
                f"part of speech in WordNet) in {opts.min_contexts} or more sentences; set mono_poly = false for "
                "data without lemmas"
            )
    out = TaskOutput()
    for name in parts:
        groups, poly, _ = found[name]
        out.probes.append(
            {
                "task": task,
                "encoder": job.encoder,
                "data": f"{parts[name].dataset}/{parts[name].split}",
                "mono_poly_words": len(chosen[name]),
                "monosemous_found": sum(not poly[k] for k in groups),
                "polysemous_found": sum(poly[k] for k in groups),
            }
        )
    features: dict[str, dict[str, np.ndarray]] = {name: {} for name in parts}
    for layer in train.store.layer_names:
        for name, p in parts.items():
            x = np.asarray(p.store.layer(layer), dtype=np.float64)
            sentence = _sentence_of_rows(p.store)
            groups = found[name][0]
            features[name][layer] = np.array([self_similarity(x[groups[k]], sentence[groups[k]]) for k in chosen[name]])
    columns = [(job.encoder, layer) for layer in train.store.layer_names]
    if job.with_baselines and LOG_FREQUENCY in job.baselines:
        columns.append((BASELINE_ENCODER, LOG_FREQUENCY))
        total = Counter[str]()
        for _, _, counts in found.values():
            total.update(counts)
        n_tokens = sum(len(p.store) for p in parts.values())
        for name in parts:  # one frequency per word, over all the job's parts (the parts differ in size)
            features[name][LOG_FREQUENCY] = np.log(np.array([total[k] for k in chosen[name]]) / n_tokens)
    labels = {name: np.array([found[name][1][k] for k in chosen[name]], dtype=bool) for name in parts}
    for name in parts:  # float rounding must not separate words (a static layer's self-similarities are all 1)
        features[name] = {k: np.round(v, FEATURE_DECIMALS) for k, v in features[name].items()}
    for encoder, layer in columns:
        t, below = best_threshold(features["train"][layer], labels["train"])
        for i, part in enumerate(job.tests):
            name = f"test{i}"
            correct = threshold_predict(features[name][layer], t, below) == labels[name]
            groups_ = np.array(chosen[name], dtype=object)
            out.rows.append(
                fraction_row(task, part, encoder, layer, "mono-poly-accuracy", correct, groups_, seed, n_boot)
            )
    return out


def contextuality(job: Job) -> TaskOutput:
    """The kind's ``run``: every statistic of every layer on each test part (see the module docstring)."""
    opts = ContextualityOptions(**job.options)
    seed = job.settings.seeds[0]
    out = TaskOutput()
    words = {f"test{i}": _words(job.task, p, opts, seed) for i, p in enumerate(job.tests)}
    for layer in job.tests[0].store.layer_names:
        job.progress(f"{job.task} {job.encoder} layer {layer}")
        for w in words.values():
            stats = layer_statistics(w.part.store.layer(layer), w)
            out.rows += _geometry_rows(job.task, job.encoder, layer, w, stats, job)
            out.probes.append(
                {
                    "task": job.task,
                    "encoder": job.encoder,
                    "layer": layer,
                    "test": f"{w.part.dataset}/{w.part.split}",
                    "n_words": len(w.groups),
                    "n_occurrences": int(sum(len(r) for r in w.groups.values())),
                    "n_sentences": len(w.sentence_rows),
                    "min_contexts": opts.min_contexts,
                    "cosine_baseline": stats["cosine-baseline"],
                    "explained_variance_baseline": float(np.mean(stats["explained-variance-baseline"])),
                }
            )
    if opts.mono_poly:
        out.extend(mono_poly_rows(job, job.train_part()))
    return out


def _figures(results, task: str, dataset: str, split: str):
    """Ethayarajh's layout: each statistic per layer, one line per encoder (:mod:`probing.figures.ladder`)."""
    from probing.figures.ladder import contextuality_figure

    return {"contextuality": contextuality_figure(results, task, dataset, split)}


CONTEXTUALITY = TaskKind(
    "contextuality",
    run=contextuality,
    metrics=CONTEXTUALITY_METRICS,
    headline="self-similarity",
    options=ContextualityOptions,
    baselines=(LOG_FREQUENCY,),
    uses_wordnet=True,
    allows_dev=False,
    figures=_figures,
    layer_figures=False,  # the kind's own figure draws every statistic per layer (the headline's is its first panel)
)
