"""Erasing inside the biLM: an ELMo encoder whose layer ``n`` output is erased, per direction, before layer
``n + 1`` computes from it (Elazar et al.'s amnesic test, where the model computes).

In ELMo each direction's layer ``n + 1`` reads only its own direction's layer ``n`` output (its input and
the skip connection), so one eraser is fitted per direction half (``"1f"``, ``"1b"``) on a store of the
unedited model, and the two are applied inside :meth:`probing.elmo.model.BiLM.forward` (its ``edits``). The
stored layer ``n`` of the intervened encoder is the erased one, layers above it are recomputed from it, the
layers below and each layer's own recurrence are unchanged (erasing the top layer recomputes nothing, but it
is what the LM head reads). Its fingerprint covers the base encoder's and both erasers' fingerprints, so its
stores are keyed by the erasers.

:func:`lm_effect` measures what an intervention does to the LM itself (held-out perplexity per direction,
minimal-pair accuracy), beside the unedited model and against the same-rank random control.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from probing.analysis.erasure import Eraser, fit_eraser_on_store
from probing.encoders import ElmoEncoder, RandomElmoEncoder
from probing.errors import InputError
from probing.identity import code_identity, digest
from probing.protocols import CorpusLike, StoreLike
from probing.results import Intervention

if TYPE_CHECKING:
    import pandas as pd

    from probing.elmo import Elmo
    from probing.elmo.model import Edits
    from probing.lm.head import LmHead

INTERVENTION_VERSION = 1
"""Bump when an intervened encoder's output changes for a reason the code of this module does not show."""


class _Intervention:
    """What both intervened encoders share: the base encoder's layers, width and OOV mask, and the name."""

    base: ElmoEncoder | RandomElmoEncoder
    layer: int
    label: str
    method: str
    name: str

    @property
    def intervention(self) -> str:
        """The results' ``intervention`` value: ``"intervene:<layer>:<label>:<method>"``."""
        return str(Intervention(self.label, self.method, self.layer))

    @property
    def layer_names(self) -> list[str]:
        return self.base.layer_names

    @property
    def dim(self) -> int:
        return self.base.dim

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        return self.base.oov_mask(words)


class IntervenedElmoEncoder(_Intervention):
    """``base`` (an ELMo encoder) with ``forward``/``backward`` erasers on layer ``layer``'s direction halves.

    ``label`` and ``method`` only name the intervention (:attr:`intervention`, ``"intervene:1:upos:leace"``).
    """

    def __init__(
        self,
        base: ElmoEncoder | RandomElmoEncoder,
        layer: int,
        forward: Eraser,
        backward: Eraser,
        *,
        label: str = "",
        method: str = "",
        name: str | None = None,
    ):
        n_layers = base.options.n_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= n_layers:
            raise InputError(f"intervene: layer must be a biLSTM layer (1..{n_layers}), got {layer!r}")
        half = base.dim // 2
        for side, eraser in (("forward", forward), ("backward", backward)):
            if getattr(eraser, "n_features_in_", None) != half:
                raise InputError(
                    f"intervene: the {side} eraser must be fitted on a direction half of width {half} "
                    f"(layer {layer}{side[0]}), got {getattr(eraser, 'n_features_in_', 'an unfitted eraser')}"
                )
        self.base = base
        self.layer = layer
        self.erasers = (forward, backward)
        self.label = label
        self.method = method or forward.method
        self.name = name or f"{base.name}-{self.intervention}"

    @property
    def fingerprint(self) -> str:
        """The base encoder's fingerprint, the layer, both erasers' fingerprints and the code identity of
        :mod:`probing.analysis.intervention` and :mod:`probing.analysis.erasure`, which put the erasers into the biLM."""
        return digest(
            {
                "intervene": self.base.fingerprint,
                "layer": self.layer,
                "erasers": [eraser.fingerprint for eraser in self.erasers],
                "code": code_identity(INTERVENTION_VERSION, [__name__, "probing.analysis.erasure"]),
            }
        )

    @property
    def edits(self) -> Edits:
        """The biLM's ``edits`` (:data:`probing.elmo.model.Edits`): both erasers on layer ``layer``."""
        return {self.layer: (self.erasers[0].torch_transform, self.erasers[1].torch_transform)}

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """As the base encoder's ``encode``, with the erasers applied inside the biLM.

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str
            Tokenized sentences.

        Returns
        -------
        list (n_sentences,) of ndarray (num_layers, n_tokens, dim), float32
            As :meth:`probing.elmo.Elmo.embed`: ``num_layers`` = ``n_layers + 1`` (token layer first), layer
            ``layer`` holds the erased ``[forward | backward]`` output and the layers above are computed from it.
        """
        return self.base.model.embed(sentences, batch_size=self.base.batch_size, edits=self.edits)

    def __repr__(self) -> str:
        return f"IntervenedElmoEncoder(name={self.name!r}, {self.intervention}, base={self.base!r})"


def fit_intervention(
    base: ElmoEncoder | RandomElmoEncoder,
    store: StoreLike,
    layer: int,
    labels: str | Sequence | np.ndarray,
    method: str = "leace",
    *,
    rank: int | None = None,
    random_state: int | None = 0,
    **params: Any,
) -> IntervenedElmoEncoder:
    """Fit the two direction erasers of ``layer`` on ``store`` (``base``'s store of the fitting data) and a
    label per token (a token-table column or an array, as :func:`~probing.analysis.erasure.fit_eraser_on_store`).

    Parameters
    ----------
    base : ElmoEncoder or RandomElmoEncoder
        The model the erasers go into; it must have written ``store``.
    store : StoreLike
        ``base``'s activations of the fitting data, ``(n_tokens, dim)`` per layer.
    layer : int
        The biLSTM layer (1..n_layers) whose halves ``"<layer>f"``, ``"<layer>b"`` ``(n_tokens, dim // 2)``
        are erased.
    labels : str, or sequence / ndarray (n_tokens,)
        A token-table column name, or one label per store row.
    method, rank, random_state, **params : the :class:`~probing.analysis.erasure.Eraser`'s options.

    Returns
    -------
    IntervenedElmoEncoder
        With the forward and backward erasers, each on ``dim // 2`` features.
    """
    made_by = store.manifest.get("encoder", {}).get("fingerprint")
    if made_by != base.fingerprint:
        raise InputError(
            f"{store.path}: this store was written by another encoder (fingerprint {str(made_by)[:12]}), not "
            f"{base.name!r} ({base.fingerprint[:12]}); erasers must be fitted on the model they go into"
        )
    erasers = [
        fit_eraser_on_store(store, f"{layer}{d}", labels, method, rank, random_state, **params) for d in ("f", "b")
    ]
    label = labels if isinstance(labels, str) else "labels"
    return IntervenedElmoEncoder(base, layer, erasers[0], erasers[1], label=label, method=method)


class LazyIntervenedEncoder(_Intervention):
    """An :class:`IntervenedElmoEncoder` fitted on first use: its name, layers and width are known at once; its
    fingerprint or ``encode`` first extracts ``base`` on ``fit_on()`` (a corpus; cached in ``cache_dir`` as any
    store) and fits the erasers there. What the experiment file's ``intervene = {...}`` builds."""

    def __init__(
        self,
        base: ElmoEncoder | RandomElmoEncoder,
        fit_on: Callable[[], CorpusLike],
        layer: int,
        label: str,
        method: str = "leace",
        *,
        rank: int | None = None,
        cache_dir: str | os.PathLike | None = None,
        name: str | None = None,
    ):
        self.base, self.fit_on, self.layer, self.label, self.method = base, fit_on, layer, label, method
        self.rank, self.cache_dir = rank, cache_dir
        self.name = name or f"{base.name}-{self.intervention}"

    @functools.cached_property
    def fitted(self) -> IntervenedElmoEncoder:
        """The erasers fitted on the base model's store of ``fit_on`` (extracted, or read from the cache)."""
        from probing.store import extract

        store = extract(self.base, self.fit_on(), cache_dir=self.cache_dir, progress=False)
        enc = fit_intervention(self.base, store, self.layer, self.label, self.method, rank=self.rank)
        enc.name = self.name
        return enc

    @property
    def fingerprint(self) -> str:
        return self.fitted.fingerprint

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """:meth:`IntervenedElmoEncoder.encode` of :attr:`fitted` (the first call fits the erasers).

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str
            Tokenized sentences.

        Returns
        -------
        list (n_sentences,) of ndarray (num_layers, n_tokens, dim), float32
        """
        return self.fitted.encode(sentences)

    def __repr__(self) -> str:
        state = "fitted" if "fitted" in self.__dict__ else "not fitted"
        return f"LazyIntervenedEncoder(name={self.name!r}, {self.intervention}, {state}, base={self.base!r})"


# ----------------------------------------------------------------------------- the LM's behaviour

LM_EFFECT_COLUMNS = (
    "intervention",
    "measure",
    "direction",
    "value",
    "ci_low",
    "ci_high",
    "change",
    "change_ci_low",
    "change_ci_high",
    "n",
)
DIRECTIONS = ("forward", "backward", "both")


class _EditedModel:
    """An :class:`~probing.elmo.Elmo` whose biLM runs with ``edits``: what :mod:`probing.lm`'s scoring reads
    (``bilm``, ``options``, ``device``, ``precision``, ...), so the LM is scored on the intervened model."""

    def __init__(self, model: Elmo, edits: Edits):
        self._model = model
        self.bilm = functools.partial(model.bilm, edits=edits)

    def __getattr__(self, name: str) -> Any:
        if name == "_model":
            raise AttributeError(name)
        return getattr(self._model, name)


def lm_effect(
    interventions: Sequence[IntervenedElmoEncoder | LazyIntervenedEncoder],
    sentences: Iterable[str | Sequence[str]],
    pairs: str | pd.DataFrame | None = None,
    *,
    head: LmHead | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
) -> pd.DataFrame:
    """Elazar et al.'s behavioural measure: what each intervention does to the LM, beside the unedited model.

    ``interventions`` share one base ELMo (e.g. LEACE and its same-rank random control on layer 1);
    ``sentences``: held-out text (tokenized, or strings for :func:`probing.tokenize.tokenize`); ``pairs``:
    minimal pairs (``"blimp"``, ``"pairs:PATH"`` or a DataFrame with ``good``, ``bad``), or None. ``head``:
    the LM head (default: the model's own, :func:`probing.lm.score.load_model`).

    One row per (intervention, measure, direction), the unedited model first (``intervention`` ``""``):
    ``measure`` ``"perplexity"`` (``exp`` of the mean negative log-probability per prediction, each sentence's
    words plus its boundary token, as :mod:`probing.lm.score` predicts them; ``both``: the mean of the two
    directions' log-probabilities) or ``"pair_accuracy"`` (share of pairs whose good sentence scores strictly
    higher, :func:`probing.lm.pairs.pair_outcomes`; pooled over pairs, not BLiMP's mean over paradigms);
    ``value`` with a 95 % bootstrap CI over sentences or pairs (``n_boot`` draws), ``change`` = value minus the
    unedited value with a paired bootstrap CI (the same draws for both), ``n`` sentences or pairs.
    """
    import pandas as pd

    from probing.lm.pairs import load_pairs, pair_outcomes
    from probing.lm.score import iter_scores, load_model

    fitted = [e.fitted if isinstance(e, LazyIntervenedEncoder) else e for e in interventions]
    if not fitted:
        raise InputError("lm_effect: give at least one intervention (e.g. LEACE and its random control)")
    base = fitted[0].base
    others = [e.name for e in fitted if e.base.fingerprint != base.fingerprint]
    if others:
        raise InputError(
            f"lm_effect: every intervention must edit the same model as {fitted[0].name!r}; {others} do not"
        )
    tags = [e.intervention for e in fitted]
    twice = sorted({t for t in tags if tags.count(t) > 1})
    if twice:
        raise InputError(
            f"lm_effect: interventions named alike would share rows: {twice} (give each a label or method)"
        )
    model, head = load_model(base.model) if head is None else (base.model, head)
    texts = list(sentences)
    if not texts:
        raise InputError("lm_effect: no held-out sentences to score")
    pair_table = None if pairs is None else (load_pairs(pairs)[1] if isinstance(pairs, str) else pairs)
    runs: list[tuple[str, Any]] = [("", model), *((e.intervention, _EditedModel(model, e.edits)) for e in fitted)]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(texts), (n_boot, len(texts)))
    pair_draws = None if pair_table is None else rng.integers(0, len(pair_table), (n_boot, len(pair_table)))
    rows: list[dict] = []
    reference: dict[tuple[str, str], tuple[float, np.ndarray]] = {}
    for tag, scored_model in runs:
        totals = np.array(
            [
                (s.total_forward, s.total_backward, len(s.words) + 1)
                for _, s in iter_scores(texts, scored_model, head, batch_size=batch_size)
            ]
        )
        measures = [("perplexity", _perplexities(totals), _perplexities_boot(totals, draws), len(texts))]
        if pair_table is not None and pair_draws is not None:
            right = pair_outcomes(pair_table, scored_model, head, batch_size=batch_size)
            hits = right[[f"right_{d}" for d in DIRECTIONS]].to_numpy(dtype=np.float64)
            measures.append(("pair_accuracy", hits.mean(0), hits[pair_draws].mean(1), len(pair_table)))
        for measure, values, boot, n in measures:
            for j, direction in enumerate(DIRECTIONS):
                ref_value, ref_boot = reference.setdefault((measure, direction), (values[j], boot[:, j]))
                change = boot[:, j] - ref_boot
                rows.append(
                    {
                        "intervention": tag,
                        "measure": measure,
                        "direction": direction,
                        "value": float(values[j]),
                        "ci_low": float(np.percentile(boot[:, j], 2.5)),
                        "ci_high": float(np.percentile(boot[:, j], 97.5)),
                        "change": float(values[j] - ref_value),
                        "change_ci_low": float(np.percentile(change, 2.5)),
                        "change_ci_high": float(np.percentile(change, 97.5)),
                        "n": n,
                    }
                )
    return pd.DataFrame(rows, columns=list(LM_EFFECT_COLUMNS))


def _perplexities(totals: np.ndarray) -> np.ndarray:
    """Forward, backward and both perplexities ``(3,)`` from per-sentence ``(log p fw, log p bw, predictions)``."""
    return _perplexities_boot(totals, np.arange(len(totals))[None])[0]


def _perplexities_boot(totals: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The perplexities ``(n_draws, 3)`` of each resample of sentences (``draws`` ``(n_draws, n)`` row indices)."""
    sums = totals[draws].sum(axis=1)
    fw, bw, count = sums[:, 0], sums[:, 1], sums[:, 2]
    return np.exp(-np.stack([fw / count, bw / count, (fw + bw) / (2 * count)], axis=1))
