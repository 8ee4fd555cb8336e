"""Erasing inside the biLM: an ELMo encoder whose layer ``n`` output is erased, per direction, before layer
``n + 1`` computes from it (Elazar et al.'s amnesic test, where the model computes).

In ELMo each direction's layer ``n + 1`` reads only its own direction's layer ``n`` output (its input and
the skip connection), so one eraser is fitted per direction half (``"1f"``, ``"1b"``) on a store of the
unedited model, and the two are applied inside :meth:`probing.elmo.model.BiLM.forward` (its ``edits``). The
stored layer ``n`` of the intervened encoder is the erased one, layers above it are recomputed from it, the
layers below and each layer's own recurrence are unchanged. Its fingerprint covers the base encoder's and both
erasers' fingerprints, so its stores are keyed by the erasers.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from probing.encoders import ElmoEncoder, RandomElmoEncoder
from probing.erasure import Eraser, fit_eraser_on_store
from probing.errors import InputError
from probing.protocols import CorpusLike, StoreLike


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
        return f"intervene:{self.layer}:{self.label}:{self.method}"

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
        if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer < n_layers:
            raise InputError(
                f"intervene: layer must be a biLSTM layer below the top one (1..{n_layers - 1}), got {layer!r}"
            )
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
        h = hashlib.sha256(f"intervene:{self.base.fingerprint}:{self.layer}".encode())
        for eraser in self.erasers:
            h.update(eraser.fingerprint.encode())
        return h.hexdigest()

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """As the base encoder's ``encode``, with the erasers applied inside the biLM."""
        edits = {self.layer: (self.erasers[0].torch_transform, self.erasers[1].torch_transform)}
        return self.base.model.embed(sentences, batch_size=self.base.batch_size, edits=edits)

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
    label per token (a token-table column or an array, as :func:`~probing.erasure.fit_eraser_on_store`)."""
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
        return self.fitted.encode(sentences)

    def __repr__(self) -> str:
        state = "fitted" if "fitted" in self.__dict__ else "not fitted"
        return f"LazyIntervenedEncoder(name={self.name!r}, {self.intervention}, {state}, base={self.base!r})"
