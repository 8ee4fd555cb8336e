"""Does ELMo's surprisal predict human reading times? Natural Stories (Futrell et al. 2021), per direction.

The corpus (CC BY-NC-SA 4.0: never bundled) is read from ``$PROBING_DATA/naturalstories/`` (the layout of
the authors' repository) or downloaded from the authors' repository at a pinned commit into the cache by
:func:`get_naturalstories` (``probing data get naturalstories``): resumable, each file's content checked
(its header) and its sha256 recorded at the first download and checked on every later use
(:func:`probing.download.fetch`).

Words are the corpus's tokens as shown to the readers (``all_stories.tok``: punctuation attached,
``owners.``), joined by (story, zone) to the mean reading times of ``processed_wordinfo.tsv``, whose story 3
already has the RT of the blank token shown after position 230 removed: the join is by zone, never by row
position, and a zone without exactly one RT row is an error. Sentences end at a token ending in ``.``, ``!``
or ``?`` (before closing quotes or brackets). Each sentence is scored by the biLM (stateless, as
:mod:`probing.lm.score`); a corpus token's surprisal (bits) is the sum over the model's tokens it splits into
(``owners.`` = ``owners`` + ``.``), forward (left context) and backward (right context); ``both`` is their
mean. Predictors beside it: word length (characters of the word without surrounding punctuation), log
unigram frequency (``ln(count + 1)``, Google Books 1990-, ``freqs-1.tsv``) and, as spillover, the same
predictors of the ``spillover`` previous words.

Metrics, per direction: ``delta-loglik``, the held-out log-likelihood per word of a linear regression of
mean reading time on surprisal (the word's and its spillover words') with the baseline predictors, minus
that of the same regression without surprisal (Wilcox et al. 2020), over ``folds`` folds of whole stories
(story s in fold ``(s - 1) % folds``), each fold's words scored by the fits on the other folds (ordinary
least squares by ``statsmodels``; the held-out density is normal with the training fit's residual standard
error, R's ``sigma(model)``), 95 % bootstrap CI over words; and ``pearson-r``, Brain-Score's Pearson
correlation between surprisal and mean reading time over words not first in their sentence (its split-half
ceiling is 0.858; values here are not normalised by it), 95 % bootstrap CI over words. Reference rows:
GPT-3 (davinci) from the corpus's own log-probabilities (``all_stories_gpt3.csv``: a word's surprisal the
sum over its BPE tokens; the first word of each story has none) and a unigram model (surprisal
``-log2(count + 1)`` up to a constant, which neither metric sees).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from probing.errors import InputError, ProbingError
from probing.tokenize import tokenize

if TYPE_CHECKING:
    import pandas as pd

    from probing.elmo import Elmo

    from .head import LmHead

NATURALSTORIES_COMMIT = "4700daad696e942f5aba23c957a7423d0de66612"
NATURALSTORIES_URL = "https://raw.githubusercontent.com/languageMIT/naturalstories/" + NATURALSTORIES_COMMIT + "/{path}"
# the files read, and how each must start (the content check after a download)
NATURALSTORIES_FILES = {
    "naturalstories_RTS/processed_wordinfo.tsv": "word\tzone\titem\tnItem\tmeanItemRT",
    "naturalstories_RTS/all_stories.tok": "word\tzone\titem",
    "freqs/freqs-1.tsv": "1.1.whole\t1\t",
    "probs/all_stories_gpt3.csv": "token,logprob,offset",
    "LICENSE.txt": "",
}
OPTIONAL_FILES = ("probs/all_stories_gpt3.csv", "LICENSE.txt")
BRAIN_SCORE_CEILING = 0.858
DIRECTIONS = ("forward", "backward", "both")
_SENTENCE_END = re.compile(r"[.!?][\"'’”)\]]*$")


class NaturalStoriesNotFound(ProbingError, FileNotFoundError):
    """The corpus is in none of the places searched; the message lists them and how to get it."""


def naturalstories_places() -> list[Path]:
    """Where the corpus is looked for: ``$PROBING_DATA/naturalstories/``, then the download cache."""
    from probing.paths import cache_dir, data_dir

    root = data_dir()
    return ([root / "naturalstories"] if root is not None else []) + [cache_dir() / "data" / "naturalstories"]


def _complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in NATURALSTORIES_FILES if f not in OPTIONAL_FILES)


def find_naturalstories() -> Path:
    for place in naturalstories_places():
        if _complete(place):
            return place
    listed = "\n".join(f"  {p}" for p in naturalstories_places())
    raise NaturalStoriesNotFound(
        f"Natural Stories not found. Looked in:\n{listed}\nGet it with:  probing data get naturalstories"
    )


def check_header(path: Path, start: str) -> None:
    """InputError naming ``path`` when it does not start with ``start`` (a wrong or truncated file)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        head = f.read(len(start))
    if head != start:
        raise InputError(
            f"{path}: expected a file starting with {start!r}, found {head!r}; remove it (and its recorded hash: "
            "probing.download.forget(URL)) and fetch it again"
        )


def get_naturalstories(url: str | None = None, dest: Path | None = None, *, progress: bool = True) -> Path:
    """Download the corpus's files (``url`` with ``{path}``; default ``NATURALSTORIES_URL``, the authors'
    repository at a pinned commit) into
    ``dest`` (default ``<cache>/data/naturalstories``), resumably; each file's first bytes are checked and its
    sha256 recorded at the first download and checked at every later one. Returns the folder."""
    from probing.download import fetch
    from probing.paths import cache_dir

    url = url if url is not None else NATURALSTORIES_URL
    dest = dest if dest is not None else cache_dir() / "data" / "naturalstories"
    for path, start in NATURALSTORIES_FILES.items():
        file = fetch(url.format(path=path), dest=dest / path, hint="probing data get naturalstories", progress=progress)
        if start:
            check_header(file, start)
    return dest


def _tsv(path: Path, **kwargs) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_csv(path, sep="\t", quoting=3, keep_default_na=False, **kwargs)
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a tab-separated table ({e})") from None


def _columns(table: pd.DataFrame, needed: Sequence[str], path: Path) -> None:
    missing = [c for c in needed if c not in table.columns]
    if missing:
        raise InputError(f"{path}: missing the column(s) {missing}; found {list(table.columns)}")


def read_corpus(folder: str | Path | None = None) -> pd.DataFrame:
    """One row per word, in reading order: ``story``, ``zone``, ``word`` (as shown), ``rt`` (mean reading
    time, ms), ``sentence`` (0-based within the story), ``first_in_sentence``, ``length``, ``log_frequency``,
    ``surprisal_gpt3`` (bits; NaN without the GPT-3 file or for a story's first word), ``surprisal_unigram``.
    ``folder``: the corpus's layout (default :func:`find_naturalstories`)."""
    import pandas as pd

    root = Path(folder) if folder is not None else find_naturalstories()
    tok_path = root / "naturalstories_RTS" / "all_stories.tok"
    rt_path = root / "naturalstories_RTS" / "processed_wordinfo.tsv"
    freq_path = root / "freqs" / "freqs-1.tsv"
    for p in (tok_path, rt_path, freq_path):
        if not p.is_file():
            raise InputError(f"{root}: missing {p.relative_to(root)} (the Natural Stories layout)")
    tokens = _tsv(tok_path)
    _columns(tokens, ["word", "zone", "item"], tok_path)
    rts = _tsv(rt_path)
    _columns(rts, ["zone", "item", "meanItemRT"], rt_path)
    per_zone = rts.groupby(["item", "zone"]).size()
    if (per_zone > 1).any():
        item, zone = per_zone[per_zone > 1].index[0]
        raise InputError(f"{rt_path}: story {item}, zone {zone} has {per_zone.max()} rows; one per zone expected")
    words = tokens.merge(rts[["item", "zone", "meanItemRT"]], on=["item", "zone"], how="left", validate="one_to_one")
    if words.meanItemRT.isna().any():
        item, zone = words.loc[words.meanItemRT.isna(), ["item", "zone"]].iloc[0]
        raise InputError(f"{rt_path}: no reading time for story {item}, zone {zone} of {tok_path.name}")
    words = words.sort_values(["item", "zone"], kind="stable").reset_index(drop=True)
    words = words.rename(columns={"item": "story", "meanItemRT": "rt"})
    words["rt"] = pd.to_numeric(words.rt, errors="raise")
    sentence, first = [], []
    for _, story in words.groupby("story", sort=False):
        s, start = 0, True
        for w in story.word:
            sentence.append(s)
            first.append(start)
            start = bool(_SENTENCE_END.search(str(w)))
            s += start
    words["sentence"], words["first_in_sentence"] = sentence, first
    words["length"] = [len(str(w).strip("\"'’‘“”.,;:!?()[]-")) or len(str(w)) for w in words.word]
    freqs = _tsv(freq_path, header=None)
    if freqs.shape[1] < 4:
        raise InputError(f"{freq_path}: expected token code, order, token, count (tab-separated)")
    # the word without surrounding punctuation (code s.z.word), else the whole token (s.z.whole: ``Mr.``)
    counts = {str(code): float(c) for code, c in zip(freqs[0], freqs[3])}
    keys = [f"{s}.{z}" for s, z in zip(words.story, words.zone)]
    missing = [k for k in keys if f"{k}.word" not in counts and f"{k}.whole" not in counts]
    if missing:
        raise InputError(f"{freq_path}: no frequency for {len(missing)} word(s), e.g. {missing[0]}.word")
    count = np.array([counts.get(f"{k}.word", counts.get(f"{k}.whole", math.nan)) for k in keys])
    words["log_frequency"] = np.log(count + 1)
    words["surprisal_unigram"] = -np.log2(count + 1)
    gpt3 = root / "probs" / "all_stories_gpt3.csv"
    words["surprisal_gpt3"] = read_gpt3(gpt3, words) if gpt3.is_file() else np.nan
    return words[
        [
            "story",
            "zone",
            "word",
            "rt",
            "sentence",
            "first_in_sentence",
            "length",
            "log_frequency",
            "surprisal_gpt3",
            "surprisal_unigram",
        ]
    ]


def read_gpt3(path: Path, words: pd.DataFrame) -> np.ndarray:
    """GPT-3's surprisal (bits) of each word of ``words`` (n rows: story, in reading order): its BPE tokens
    grouped into the story's whitespace words (a token starting with a space starts a word) and their
    log-probabilities summed, aligned by position within each story, whose word counts must agree.

    Returns
    -------
    ndarray (n,), float64
        NaN for a story's first word (GPT-3 gives its first token no log-probability).
    """
    import pandas as pd

    table = pd.read_csv(path, keep_default_na=False)
    _columns(table, ["token", "logprob", "story"], path)
    out = np.full(len(words), np.nan)
    for story, idx in words.groupby("story", sort=False).indices.items():
        toks = table[table.story == int(story) - 1]
        sums: list[float] = []
        for i, (tok, lp) in enumerate(zip(toks.token, toks.logprob)):
            value = float(lp) if lp != "" else math.nan
            if i == 0 or str(tok).startswith(" "):
                sums.append(value)
            else:
                sums[-1] += value
        if len(sums) != len(idx):
            raise InputError(f"{path}: story {story} has {len(sums)} words, the reading-time table {len(idx)}")
        out[idx] = -np.array(sums) / math.log(2)
    return out


def score_words(
    words: pd.DataFrame, model: Elmo, head: LmHead, *, batch_size: int = 64
) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward surprisal (bits) of each corpus word, each ``(n,)``: the sum over the model's
    tokens the word splits into, each sentence scored alone.

    Parameters
    ----------
    words : DataFrame
        :func:`read_corpus`'s table (``story``, ``sentence``, ``word``), n rows.
    model : Elmo
        The biLM (:func:`probing.lm.score.load_model`).
    head : LmHead
        Its LM head.
    batch_size : int
        Sentences per biLM batch.

    Returns
    -------
    forward, backward : ndarray (n,), float64
    """
    from .score import iter_scores

    groups = list(words.groupby(["story", "sentence"], sort=False).indices.values())
    sentences, owners = [], []
    for idx in groups:
        toks, owner = [], []
        for i in idx:
            pieces = tokenize(str(words.word.iat[i])) or [str(words.word.iat[i])]
            toks += pieces
            owner += [i] * len(pieces)
        sentences.append(toks)
        owners.append(np.array(owner))
    fw, bw = np.zeros(len(words)), np.zeros(len(words))
    for k, s in iter_scores(sentences, model, head, batch_size=batch_size):
        np.add.at(fw, owners[k], -s.forward / math.log(2))
        np.add.at(bw, owners[k], -s.backward / math.log(2))
    return fw, bw


def _lagged(words: pd.DataFrame, columns: Sequence[str], spillover: int) -> pd.DataFrame:
    """``columns`` and their values ``1..spillover`` words back within the story (NaN before its start)."""
    out = {}
    for c in columns:
        for lag in range(spillover + 1):
            out[f"{c}_{lag}"] = words.groupby("story", sort=False)[c].shift(lag)
    import pandas as pd

    return pd.DataFrame(out, index=words.index)


def delta_loglik_per_word(
    words: pd.DataFrame, surprisal: str, *, spillover: int = 2, folds: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """Held-out per-word log-likelihood gain of adding ``surprisal`` (a column of ``words``) and its
    spillover to the baseline regression (length and log frequency, with theirs), over ``folds`` folds of
    stories. Returns the gain per word and the words' row positions, each ``(m,)``: words whose predictors
    are all defined (not the first ``spillover`` words of a story, nor words without a surprisal).

    Returns
    -------
    gain : ndarray (m,), float64
        ``log N(rt | full fit) - log N(rt | baseline fit)`` per held-out word, in nats.
    rows : ndarray (m,), int
        Their positions in ``words``.
    """
    from scipy.stats import norm
    from statsmodels.regression.linear_model import OLS

    base = _lagged(words, ["length", "log_frequency"], spillover)
    extra = _lagged(words, [surprisal], spillover)
    ok = np.isfinite(base.to_numpy()).all(1) & np.isfinite(extra.to_numpy()).all(1) & np.isfinite(words.rt.to_numpy())
    rows = np.flatnonzero(ok)
    stories = words.story.to_numpy()[rows]
    y = words.rt.to_numpy(np.float64)[rows]
    x_base = np.column_stack([np.ones(len(rows)), base.to_numpy(np.float64)[rows]])
    x_full = np.column_stack([x_base, extra.to_numpy(np.float64)[rows]])
    fold = (stories.astype(int) - 1) % folds
    if len(set(fold)) < 2:
        raise InputError(f"delta-loglik needs stories in at least 2 folds, got {len(set(stories))} story/stories")
    gain = np.full(len(rows), np.nan)
    for k in sorted(set(fold)):
        test, train = fold == k, fold != k
        ll = []
        for x in (x_full, x_base):
            fit = OLS(y[train], x[train]).fit()
            ll.append(norm.logpdf(y[test], x[test] @ fit.params, math.sqrt(fit.scale)))
        gain[test] = ll[0] - ll[1]
    return gain, rows


def pearson_words(words: pd.DataFrame, surprisal: str) -> np.ndarray:
    """The words Brain-Score's Pearson r reads: not first in their sentence, with a surprisal.

    Returns
    -------
    ndarray (m,), int
        Their positions in ``words``.
    """
    keep = ~words.first_in_sentence.to_numpy(bool) & np.isfinite(words[surprisal].to_numpy(np.float64))
    return np.flatnonzero(keep)


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of each row pair: ``x``, ``y`` (r, m) -> (r,)."""
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    return (xc * yc).sum(-1) / np.sqrt((xc * xc).sum(-1) * (yc * yc).sum(-1))


def metrics(
    words: pd.DataFrame,
    surprisal: str,
    *,
    spillover: int = 2,
    folds: int = 10,
    n_boot: int = 1000,
    seed: int = 0,
    delta_loglik: bool = True,
) -> dict[str, tuple[float, float, float, int]]:
    """``{"delta-loglik": (value, ci_low, ci_high, n_words), "pearson-r": (...)}`` for a surprisal column:
    ΔLogLik per word (nats) and Pearson r, each with a 95 % percentile bootstrap over words
    (``delta_loglik=False``: Pearson r only, e.g. for a predictor already in the baseline)."""
    from .pairs import _interval

    rng = np.random.default_rng(seed)
    out = {}
    if delta_loglik:
        gain, _ = delta_loglik_per_word(words, surprisal, spillover=spillover, folds=folds)
        draws = rng.integers(0, len(gain), size=(n_boot, len(gain)))
        dll = float(gain.mean())
        out["delta-loglik"] = (dll, *_interval(dll, gain[draws].mean(axis=1)), len(gain))
    keep = pearson_words(words, surprisal)
    x, y = words[surprisal].to_numpy(np.float64)[keep], words.rt.to_numpy(np.float64)[keep]
    r = float(_pearson(x, y))
    draws = rng.integers(0, len(keep), size=(n_boot, len(keep)))
    out["pearson-r"] = (r, *_interval(r, _pearson(x[draws], y[draws])), len(keep))
    return out
