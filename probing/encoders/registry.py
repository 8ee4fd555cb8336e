"""The encoder kinds an experiment file can name (``kind = "..."`` in an ``[[encoders]]`` table) and the one-string
descriptions :func:`get_encoder` takes (``probing extract --model``).

A new kind is one module that defines an :class:`~probing.encoders.base.EncoderKind` and one line in the tuple
below (or a call to :func:`register_encoder_kind` from outside the package).
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from probing.encoders.base import EncoderKind
from probing.encoders.elmo import ELMO
from probing.encoders.random_elmo import RANDOM_ELMO
from probing.encoders.static import GLOVE
from probing.encoders.static_trained import FASTTEXT, WORD2VEC
from probing.encoders.transformer import TRANSFORMER
from probing.errors import InputError
from probing.protocols import EncoderLike

ENCODER_KINDS: dict[str, EncoderKind] = {}


def register_encoder_kind(kind: EncoderKind, *, replace: bool = False) -> EncoderKind:
    """Make ``kind`` available to experiment files and :func:`get_encoder`; an existing name needs
    ``replace=True``."""
    if kind.name in ENCODER_KINDS and not replace and ENCODER_KINDS[kind.name] is not kind:
        raise InputError(f"encoder kind {kind.name!r} is already registered (pass replace=True to override it)")
    ENCODER_KINDS[kind.name] = kind
    return kind


for _kind in (ELMO, RANDOM_ELMO, GLOVE, WORD2VEC, FASTTEXT, TRANSFORMER):
    register_encoder_kind(_kind)


def encoder_kind(name: str) -> EncoderKind:
    """The registered kind ``name``; KeyError lists the known kinds."""
    try:
        return ENCODER_KINDS[name]
    except KeyError:
        raise KeyError(f"unknown encoder kind {name!r}; known: {', '.join(ENCODER_KINDS)}") from None


def get_encoder(
    model: str,
    *,
    seed: int = 0,
    stateful: bool = False,
    batch_size: int = 64,
    name: str | None = None,
    device: str | None = None,
) -> EncoderLike:
    """An encoder from a short description (what ``probing extract --model`` takes), read by the kinds'
    ``shorthand``, the latest registered kind first (so the most general, ELMo's, is asked last):

    * ``glove`` or ``glove-6b-50d``: GloVe 6B 50d; ``glove:PATH``: a GloVe/word2vec text file;
    * ``random-elmo`` (the bundled model's architecture) or ``random-elmo:MODEL`` (a registry name,
      or a folder or options.json path), seeded with ``seed``;
    * a registry name (``default``, ``small``, ``original``, ...);
    * a folder holding ``options.json`` and ``weights.hdf5``.

    ``seed``, ``stateful`` and ``batch_size`` set the options of those names where the kind has them.
    ``device`` (ELMo models; GloVe is a table lookup) is where the model runs, see
    :func:`probing.devices.resolve_device`; it is not part of the fingerprint.
    """
    given = {"seed": seed, "stateful": stateful, "batch_size": batch_size}
    kinds = list(ENCODER_KINDS.values())[::-1]
    for kind in kinds:
        options = kind.shorthand(model) if kind.shorthand is not None else None
        if options is not None:
            own = {f.name for f in fields(options)}
            return kind.encoder(replace(options, **{k: v for k, v in given.items() if k in own}), name, device)
    forms = ", ".join(kind.forms() for kind in kinds if kind.forms is not None)
    raise InputError(
        f"model {model!r} is neither a folder with options.json and weights.hdf5 nor a known name ({forms})"
    )


def lm_checkpoint(encoder: Any) -> str | None:
    """The registered checkpoint whose LM head ``encoder`` scores sentences with: its kind's ``lm_head``
    capability (None for an encoder of no registered kind or of a kind without an LM head)."""
    kind = ENCODER_KINDS.get(getattr(encoder, "kind", ""))
    return None if kind is None or kind.lm_head is None else kind.lm_head(encoder)


__all__ = ["ENCODER_KINDS", "encoder_kind", "get_encoder", "lm_checkpoint", "register_encoder_kind"]
