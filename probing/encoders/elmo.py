"""The trained ELMo kind (``kind = "elmo"``): a biLM from a checkpoint name, a model folder, or an
``options.json`` + weights pair; and what both ELMo kinds share (the lazy adapter, the code digest, the
options and weights of a checkpoint or folder).

ELMo adapters are lazy: ``name``, ``fingerprint``, ``layer_names`` and ``dim`` come from the files
(options JSON, weights bytes) without building the model, so a store cache hit never loads one.
Every ELMo fingerprint also covers the source of the modules that compute the activations
(``probing/elmo``), so a change to that code can never serve stale cached vectors.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probing._io import check_sha256, file_record, is_sha256
from probing._toml import Table, resolve_path
from probing.devices import check_device_name
from probing.elmo.options import ElmoOptions
from probing.encoders.base import EncoderKind, legacy_fingerprint
from probing.errors import InputError, check_count
from probing.identity import code_identity

ELMO_COMPUTE_VERSION = 1  # bump when activations change for a reason the code below does not show
_ELMO_CODE_MODULES = ("chars", "model", "elmo", "weights", "options")


@functools.cache
def elmo_code_digest() -> str:
    """The code identity (:func:`probing.identity.code_identity`) of the ``probing.elmo`` modules that turn
    characters into activations: a comment or docstring edit keeps every store, a code edit renews them."""
    return code_identity(ELMO_COMPUTE_VERSION, [f"probing.elmo.{m}" for m in _ELMO_CODE_MODULES])


def _canonical_options(options: ElmoOptions) -> str:
    return json.dumps(options.to_dict(), sort_keys=True, separators=(",", ":"))


def _state_policy(stateful: bool) -> str:
    return "stateful" if stateful else "stateless"


class _LazyElmo:
    """Shared machinery of the ELMo adapters: layers from the options, the model built on first use."""

    kind: str  # the encoder kind (probing.encoders.ENCODER_KINDS) whose capabilities it has
    name: str
    options: ElmoOptions
    batch_size: int
    stateful: bool

    def __init__(self, device: str | None = None) -> None:
        self._model = None
        self.device = None if device is None else check_device_name(device)

    @property
    def layer_names(self) -> list[str]:
        return [str(i) for i in range(self.options.n_layers + 1)]

    @property
    def dim(self) -> int:
        return self.options.output_dim

    @property
    def loaded(self) -> bool:
        """Whether the biLM has been built (False until the first ``encode``)."""
        return self._model is not None

    @property
    def model(self):
        """The :class:`~probing.elmo.Elmo`, built now if it was not yet."""
        if self._model is None:
            self._model = self._build().to_device(self.device)
        return self._model

    @property
    def device_used(self) -> str | None:
        """The device the built model runs on (None before it is built); not part of the fingerprint."""
        return None if self._model is None else str(self._model.device)

    def _build(self):
        raise NotImplementedError

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Every layer of every sentence: float32 ``(n_layers, n_tokens, dim)`` arrays (``Elmo.embed``)."""
        return self.model.embed(sentences, batch_size=self.batch_size)

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        """All False: ELMo builds every token's vector from its characters."""
        return np.zeros(len(words), dtype=bool)

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else "not loaded"
        return f"{type(self).__name__}(name={self.name!r}, layers={self.layer_names}, dim={self.dim}, {state})"


class ElmoEncoder(_LazyElmo):
    """A trained ELMo biLM. Build it with the constructor (an ``options.json`` + ``weights.hdf5`` pair),
    :meth:`pretrained` (a registry name) or :meth:`from_model` (an ``Elmo`` already in memory).

    ``stateful=True`` carries LSTM state across batches as the reference biLM does; the vectors then
    depend on batch order, which breaks the Encoder contract's batch independence: use it only to
    reproduce reference outputs, not for probing. ``sha256`` pins the weights file: a file with another
    hash is refused (:class:`~probing._io.PinnedHashError`) before anything is computed from it.
    """

    kind = "elmo"

    def __init__(
        self,
        options_path: str | os.PathLike,
        weights_path: str | os.PathLike,
        *,
        stateful: bool = False,
        batch_size: int = 64,
        name: str | None = None,
        device: str | None = None,
        sha256: str | None = None,
    ):
        super().__init__(device)
        self.sha256 = None if sha256 is None else check_sha256(sha256, "sha256")
        self.options_path: Path | None = Path(options_path)
        self.weights_path: Path | None = Path(weights_path)
        if not self.weights_path.is_file():
            raise FileNotFoundError(f"ELMo weights file not found: {self.weights_path}")
        self.options = ElmoOptions.from_json(self.options_path)
        self.stateful = bool(stateful)
        self.batch_size = check_count(batch_size, "batch_size")
        self.name = name or "elmo"
        self.source = str(self.weights_path)
        self.checkpoint: str | None = None  # the registered name it was built from (finds its LM head)
        self._fingerprint: str | None = None
        self._model_fingerprint: str | None = None

    @classmethod
    def pretrained(
        cls,
        name: str = "default",
        *,
        stateful: bool = False,
        batch_size: int = 64,
        encoder_name: str | None = None,
        device: str | None = None,
    ) -> ElmoEncoder:
        """A registered checkpoint (``probing.elmo.hub``): ``default`` is the bundled model; official
        ones are downloaded once. The encoder is called ``elmo`` for ``default``, else ``elmo-<name>``."""
        from probing.elmo.hub import resolve

        options, weights = resolve(name)
        enc = cls(
            options,
            weights,
            stateful=stateful,
            batch_size=batch_size,
            name=encoder_name or ("elmo" if name == "default" else f"elmo-{name}"),
            device=device,
        )
        enc.source = f"{name} ({weights})"
        enc.checkpoint = name
        return enc

    @classmethod
    def from_model(
        cls, elmo, *, batch_size: int = 64, name: str | None = None, device: str | None = None
    ) -> ElmoEncoder:
        """Wrap an in-memory :class:`~probing.elmo.Elmo`; its fingerprint covers its weights. The model stays
        on its device unless ``device`` is given."""
        enc = cls.__new__(cls)
        _LazyElmo.__init__(enc, device)
        enc.options_path = None
        enc.weights_path = None
        enc.sha256 = None
        enc.options = elmo.options
        enc.stateful = elmo.stateful
        enc.batch_size = check_count(batch_size, "batch_size")
        enc.name = name or "elmo"
        enc.source = getattr(elmo, "source", "in-memory Elmo")
        enc.checkpoint = getattr(elmo, "checkpoint", None)
        enc._fingerprint = None
        enc._model_fingerprint = elmo.fingerprint
        enc._model = elmo if device is None else elmo.to_device(device)
        return enc

    @property
    def fingerprint(self) -> str:
        """sha256 of the canonical options, the weights file's sha256 (or, for :meth:`from_model`, the
        model's own fingerprint), the state policy and the ELMo code; no model is built."""
        if self._fingerprint is None:
            if self._model_fingerprint is not None:
                weights = f"model:{self._model_fingerprint}"
            else:
                record = self.weights_file
                assert record is not None  # only from_model leaves it unset, with a fingerprint
                weights = f"file:{record['sha256']}"
            self._fingerprint = legacy_fingerprint(
                "elmo", _canonical_options(self.options), weights, _state_policy(self.stateful), elmo_code_digest()
            )
        return self._fingerprint

    @property
    def weights_file(self) -> dict[str, Any] | None:
        """The weights file's path, size and sha256 (:func:`probing._io.file_record`; the pin checked), or None
        for :meth:`from_model`."""
        return None if self.weights_path is None else file_record(self.weights_path, self.sha256)

    def _build(self):
        from probing.elmo.elmo import Elmo

        assert self.options_path is not None and self.weights_path is not None  # from_model holds its model
        if self.sha256 is not None:
            file_record(self.weights_path, self.sha256)  # refuses a changed file before loading it
        model = Elmo.from_files(self.options_path, self.weights_path, stateful=self.stateful)
        model.checkpoint = self.checkpoint
        return model


def weights_in_folder(folder: Path) -> Path:
    """The weights file of a model folder (weights.hdf5, or AllenNLP's lm_weights.hdf5) beside options.json."""
    for candidate in ("weights.hdf5", "lm_weights.hdf5"):
        if (folder / candidate).is_file():
            return folder / candidate
    raise FileNotFoundError(f"{folder}: no weights.hdf5 (or lm_weights.hdf5) beside options.json")


def elmo_options_path(model: str) -> Path:
    """The options.json of a registry name, a folder holding one, or an options.json path itself.

    For a registry name only the options file is fetched, never the weights.
    """
    path = Path(model).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if not (path / "options.json").is_file():
            raise FileNotFoundError(f"{path}: no options.json in this folder")
        return path / "options.json"
    from probing.elmo import hub

    entry = hub.get(model)
    if entry.bundled is not None:
        options, _ = hub.bundled_paths(entry)
        if not options.is_file():
            raise FileNotFoundError(f"checkpoint {model!r} is bundled, but {options} is missing")
        return options
    from probing.download import fetch

    assert entry.options_url is not None  # an entry is either bundled or has both URLs (hub checks it)
    return fetch(entry.options_url, sha256=entry.options_sha256, progress=False, hint=f"probing download {model}")


VOCAB_FILES = ("vocab.txt", "vocab.txt.gz")


@functools.lru_cache(maxsize=4)
def training_vocabulary(model: str = "default") -> frozenset[str]:
    """The word vocabulary a biLM was trained with: ``vocab.txt`` (or ``vocab.txt.gz``) beside its options.

    ``probing pretrain`` exports it (the training words seen at least ``min_count`` times: the words its
    softmax predicts; every other word was an ``<UNK>`` target or never seen). ``model`` is a registry name
    (the bundled ``default`` ships one) or a folder. Case-sensitive, as training was; ``<S>``, ``</S>`` and
    ``<UNK>`` are left out.
    """
    folder = elmo_options_path(model).parent
    for name in VOCAB_FILES:
        path = folder / name
        if path.is_file():
            break
    else:
        raise FileNotFoundError(
            f"{folder}: no {' or '.join(VOCAB_FILES)} beside options.json, so the training vocabulary of "
            f"{model!r} is unknown (probing pretrain writes vocab.txt when it exports a model)"
        )
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            words = frozenset(w for w in f.read().split("\n") if w)
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise InputError(f"{path}: not a readable UTF-8 word list, one word per line ({e})") from e
    if any(" " in w or "\t" in w for w in words):
        raise InputError(f"{path}: a line holds more than one word; expected one word per line")
    return words - {"<S>", "</S>", "<UNK>"}


@dataclass(frozen=True)
class ElmoEncoderOptions:
    """The keys of a ``kind = "elmo"`` table: ``model`` (a checkpoint name; a folder is resolved into its
    ``options`` and ``weights`` files when parsed; neither: ``default``, the bundled model), or ``options`` and
    ``weights`` given together; ``stateful`` (carry LSTM state across batches, see :class:`ElmoEncoder`),
    ``batch_size`` and ``sha256`` (the pinned hash of the weights file, with ``weights`` or a folder: a
    changed file is refused)."""

    model: str | None = None
    options: Path | None = None
    weights: Path | None = None
    stateful: bool = False
    batch_size: int = 64
    sha256: str | None = None


def read_model(t: Table, *, weights: bool) -> tuple[str | None, Path | None, Path | None]:
    """``(model, options, weights)`` of an ELMo kind's table: its ``model`` (a checkpoint name, or a folder with
    options.json + weights.hdf5 relative to the experiment file, returned as its files) or its ``options`` file
    (and, when ``weights``, its ``weights`` file), each checked to exist; errors name the key."""
    options, model = t.path("options"), t.string("model", None)
    weights_path = t.path("weights") if weights else None
    if weights and (options is None) != (weights_path is None):
        raise t.fail("weights" if weights_path is None else "options", "options and weights given together")
    if options is not None and model is not None:
        raise t.fail("model", "either model or options, not both", model)
    for p, key in ((options, "options"), (weights_path, "weights")):
        if p is not None and not p.is_file():
            raise t.fail(key, "an existing file", str(p))
    from probing.elmo.hub import REGISTRY

    if model is None or model in REGISTRY:
        return model, options, weights_path
    folder = resolve_path(model, t.base)
    if not folder.is_dir():
        raise t.fail(
            "model", f"a checkpoint name ({', '.join(REGISTRY)}) or a folder with options.json + weights.hdf5", model
        )
    try:
        return None, elmo_options_path(str(folder)), weights_in_folder(folder) if weights else None
    except FileNotFoundError as e:
        raise t.fail("model", f"a folder with options.json + weights.hdf5 ({e})", model) from None


def _parse(t: Table) -> ElmoEncoderOptions:
    model, options, weights = read_model(t, weights=True)
    d = ElmoEncoderOptions()
    return ElmoEncoderOptions(
        model=model,
        options=options,
        weights=weights,
        stateful=t.boolean("stateful", d.stateful),
        batch_size=t.integer("batch_size", d.batch_size, minimum=1),
        sha256=_pinned_sha256(t, weights) if "sha256" in t.data else None,
    )


def _pinned_sha256(t: Table, weights: Path | None) -> str:
    """The table's ``sha256``: the pinned hash of its own weights file (64 hex digits)."""
    value = t.get("sha256", "64 hex digits", lambda v: isinstance(v, str) and is_sha256(v))
    if weights is None:
        raise t.fail("sha256", "only with weights = FILE or model = FOLDER (a registered checkpoint is pinned)", value)
    return value.lower()


def _shorthand(text: str) -> ElmoEncoderOptions | None:
    """A folder holding options.json and weights.hdf5 (or lm_weights.hdf5), or a checkpoint name."""
    path = Path(text).expanduser()
    if path.is_dir():
        return ElmoEncoderOptions(options=path / "options.json", weights=weights_in_folder(path))
    from probing.elmo.hub import REGISTRY

    return ElmoEncoderOptions(model=text) if text in REGISTRY else None


def _forms() -> str:
    from probing.elmo.hub import REGISTRY

    return ", ".join(REGISTRY)


def _build(o: ElmoEncoderOptions, name: str | None, device: str | None) -> ElmoEncoder:
    if o.options is not None and o.weights is not None:
        return ElmoEncoder(
            o.options,
            o.weights,
            stateful=o.stateful,
            batch_size=o.batch_size,
            name=name,
            device=device,
            sha256=o.sha256,
        )
    return ElmoEncoder.pretrained(
        o.model or "default", stateful=o.stateful, batch_size=o.batch_size, encoder_name=name, device=device
    )


def _checkpoint(encoder: ElmoEncoder) -> str | None:
    return encoder.checkpoint


def as_bilm(encoder: _LazyElmo) -> _LazyElmo:
    """Both ELMo kinds' ``bilm`` capability: their encoders are the biLMs :mod:`probing.analysis.intervention` edits."""
    return encoder


ELMO = EncoderKind(
    "elmo",
    options=ElmoEncoderOptions,
    build=_build,
    parse=_parse,
    shorthand=_shorthand,
    forms=_forms,
    lm_head=_checkpoint,
    bilm=as_bilm,
    own_fingerprint=True,
)
