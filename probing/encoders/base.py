"""The contract of an encoder kind (``kind = "..."`` in an experiment's ``[[encoders]]`` table).

An :class:`EncoderKind` owns everything kind-specific: its options (a typed dataclass read through
:class:`~probing._toml.Table`), how an encoder is built from them, its string shorthand (what
``probing extract --model`` and :func:`probing.encoders.get_encoder` take, e.g. ``glove:PATH``), its identity
for the stores, and its capabilities (an LM head, a biLM to intervene in), which the task kinds that read a
model ask for instead of checking classes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, is_dataclass
from typing import Any

import numpy as np

from probing._toml import Table, parse_options
from probing.errors import InputError
from probing.identity import code_identity, digest, function_identity
from probing.protocols import EncoderLike

FINGERPRINT_VERSION = "probing-encoder/1"

Build = Callable[[Any, "str | None", "str | None"], EncoderLike]
"""``build(options, name, device)``: the encoder of a kind's options, named ``name`` (None: the kind's default
name), its model run on ``device`` (None: :func:`probing.devices.resolve_device`'s default; not part of the
fingerprint)."""


def legacy_fingerprint(*parts: Any) -> str:
    """The fingerprint rule of the built-in kinds (sha256 of ``FINGERPRINT_VERSION`` and ``parts``, each after a
    NUL byte): their store keys predate encoder kinds and stay byte-identical."""
    h = hashlib.sha256(FINGERPRINT_VERSION.encode())
    for p in parts:
        h.update(b"\0")
        h.update(p if isinstance(p, bytes) else str(p).encode("utf-8"))
    return h.hexdigest()


@dataclass(frozen=True)
class EncoderKind:
    """A kind of encoder: everything kind-specific, registered with :func:`probing.encoders.register_encoder_kind`.

    ``options`` is a dataclass whose fields are the kind's keys in its ``[[encoders]]`` table (beside ``name``
    and ``kind``): read by :func:`probing._toml.parse_options` (fields of type str, int, float or bool), or by
    the kind's own ``parse(table)`` through :class:`~probing._toml.Table` where keys depend on each other;
    either way a malformed or unknown key is an error naming file, key and expectation. ``build(options, name,
    device)`` returns the :class:`~probing.protocols.EncoderLike` (see :data:`Build`). ``shorthand(text)``
    returns the options a one-string description means (``glove:PATH``), or None when the text is not this
    kind's; ``forms()`` says how those descriptions are written, for the message when none matches.

    Identity: every encoder of a kind made with ``own_fingerprint=False`` (the default, and the rule for every
    new kind) is keyed by :meth:`code_identity` as well as by its own fingerprint (:meth:`encoder` wraps it in a
    :class:`CodeKeyedEncoder`), so editing the kind's code renews its stores. The built-in kinds set
    ``own_fingerprint=True``: their store keys predate kinds and are kept byte for byte (ELMo's fingerprints
    name the code of ``probing.elmo`` through :func:`probing.encoders.elmo_code_digest`; GloVe's name its
    vectors' content, a table lookup).

    Capabilities: ``lm_head(encoder)`` is the registered checkpoint whose LM head an encoder of this kind
    scores sentences with (None when it has none; the field None: the kind never has one); ``bilm(encoder)``
    is the encoder as an ELMo biLM that :mod:`probing.analysis.intervention` can edit (the field None: the kind has no
    biLM, and its table has no ``intervene`` key).
    """

    name: str
    options: type
    build: Build
    parse: Callable[[Table], Any] | None = None
    shorthand: Callable[[str], Any] | None = None
    forms: Callable[[], str] | None = None
    lm_head: Callable[[Any], str | None] | None = None
    bilm: Callable[[Any], Any] | None = None
    own_fingerprint: bool = False
    code: tuple[str, ...] = ()
    version: int = 1

    def __post_init__(self) -> None:
        if not is_dataclass(self.options):
            raise InputError(f"encoder kind {self.name!r}: options must be a dataclass, got {self.options!r}")
        if (self.shorthand is None) != (self.forms is None):
            raise InputError(f"encoder kind {self.name!r}: give shorthand and forms together (forms names its texts)")

    def read_options(self, table: Table) -> Any:
        """The kind's options from its ``[[encoders]]`` table: ``parse(table)``, else :func:`parse_options`."""
        return self.parse(table) if self.parse is not None else parse_options(self.options, table)

    def code_identity(self) -> str:
        """The identity of the kind's code: its ``build`` and ``options`` (their modules' code,
        :func:`probing.identity.function_identity`), ``version`` and the modules listed in ``code``."""
        return digest(
            [function_identity(self.build), function_identity(self.options), code_identity(self.version, self.code)]
        )

    def encoder(self, options: Any, name: str | None = None, device: str | None = None) -> EncoderLike:
        """The encoder of ``options`` (``build``), keyed by the kind's code unless ``own_fingerprint``."""
        built = self.build(options, name, device)
        return built if self.own_fingerprint else CodeKeyedEncoder(built, self)


class CodeKeyedEncoder:
    """An encoder of a kind keyed by its code: ``inner``'s name, layers, width, vectors and OOV mask, with the
    fingerprint ``digest(kind name, the kind's code identity, inner's fingerprint)``. ``inner`` is the encoder
    the kind built."""

    def __init__(self, inner: EncoderLike, kind: EncoderKind):
        self.inner = inner
        self.name = inner.name
        self.kind = kind.name
        self.code = kind.code_identity()

    @property
    def fingerprint(self) -> str:
        """The store identity: the kind, its code and the built encoder's own fingerprint."""
        return digest({"kind": self.kind, "code": self.code, "encoder": self.inner.fingerprint})

    @property
    def layer_names(self) -> list[str]:
        return list(self.inner.layer_names)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """``inner``'s vectors.

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str
            Tokenized sentences.

        Returns
        -------
        list (n_sentences,) of ndarray (n_layers, n_tokens, dim), float32
            As :meth:`probing.protocols.EncoderLike.encode`.
        """
        return self.inner.encode(sentences)

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        """``inner``'s OOV mask.

        Parameters
        ----------
        words : sequence (n,) of str

        Returns
        -------
        ndarray (n,) of bool
            True where ``inner`` has no vector for the word.
        """
        return self.inner.oov_mask(words)

    def __repr__(self) -> str:
        return f"CodeKeyedEncoder(kind={self.kind!r}, {self.inner!r})"
