"""``Elmo``: the user-facing biLM. Tokenized sentences in, every layer's vectors out.

Layer 0 is the context-free token representation, shown at both directions' width as AllenNLP
presents it (token ‖ token); layers 1..n are forward ‖ backward biLSTM outputs. Sentence boundary
tokens are removed from the output.

State policy: ``stateful=False`` (default) starts every sentence from zero state, so a sentence's
vectors never depend on its batch or on what ran before. ``stateful=True`` reproduces the reference
biLM exactly: the final LSTM state of batch row k seeds row k of the next batch, so batch order
matters. The policy is part of :attr:`Elmo.fingerprint`.

Precision: ``"fp32"`` (default) matches the reference to about 1e-6. ``"bf16"`` runs the biLSTM
matmuls of inference on bfloat16 operands (the token layer, the LSTM state and nonlinearities stay
float32): about 1.6x faster on CPUs with AVX-512 BF16 or AMX, with layers 1..n off by about 1e-2
in absolute value (see benchmarks/bench_elmo.py). A non-default precision is part of the
fingerprint. Gradients always run in float32.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from probing.errors import InputError, check_count
from probing.tokenize import tokenize

from .chars import batch_char_ids, check_sentences
from .model import BiLM, Edits, State
from .options import ElmoOptions
from .weights import init_random, load_weights, save_weights

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


class Elmo(nn.Module):
    """A biLM with every layer exposed. Build it with :meth:`from_files`, :meth:`from_pretrained`
    or :meth:`random`."""

    def __init__(self, options: ElmoOptions | dict, *, stateful: bool = False, precision: str = "fp32"):
        super().__init__()
        self.options = options if isinstance(options, ElmoOptions) else ElmoOptions.from_dict(options)
        self.bilm = BiLM(self.options)
        self.stateful = stateful
        self.source = "unsaved"
        self._state: tuple[State, State] | None = None
        self._fingerprint: str | None = None
        self.lm_head: object | None = None  # an LM head attached for probing.lm (not part of the fingerprint)
        self.checkpoint: str | None = None  # the registered name it was loaded by (finds its LM head)
        self.to_precision(precision)
        self.eval()

    @classmethod
    def from_files(
        cls, options: str | Path, weights: str | Path, *, stateful: bool = False, precision: str = "fp32"
    ) -> Elmo:
        """Load an official ``options.json`` + ``weights.hdf5`` pair."""
        model = cls(ElmoOptions.from_json(options), stateful=stateful, precision=precision)
        load_weights(model.bilm, weights)
        model.source = str(weights)
        return model

    @classmethod
    def from_pretrained(cls, name: str = "default", *, stateful: bool = False, precision: str = "fp32") -> Elmo:
        """A registered checkpoint: ``default`` (bundled, offline) or an official AllenNLP one
        (downloaded once into the cache; see ``probing download --list``)."""
        from .hub import resolve

        options, weights = resolve(name)
        model = cls.from_files(options, weights, stateful=stateful, precision=precision)
        model.source = f"{name} ({weights})"
        model.checkpoint = name
        return model

    @classmethod
    def random(
        cls, options: ElmoOptions | dict | str | Path, *, seed: int = 0, stateful: bool = False, precision: str = "fp32"
    ) -> Elmo:
        """The same architecture with seeded random weights: the control for what structure alone gives."""
        if isinstance(options, (str, Path)):
            options = ElmoOptions.from_json(options)
        model = cls(options, stateful=stateful, precision=precision)
        init_random(model.bilm, seed)
        model.source = f"random(seed={seed})"
        return model

    def save(self, options_path: str | Path, weights_path: str | Path, dtype: str = "float32") -> None:
        """Write options.json + weights.hdf5 in the official layout."""
        from .._io import atomic_open

        with atomic_open(options_path) as f:
            json.dump(self.options.to_dict(), f, indent=2)
        save_weights(self.bilm, weights_path, dtype=dtype)

    @property
    def precision(self) -> str:
        """``"fp32"`` or ``"bf16"``: the operand type of the inference matmuls."""
        return self._precision

    def to_precision(self, precision: str) -> Elmo:
        """Switch the inference precision in place (``"fp32"`` or ``"bf16"``); returns ``self``."""
        if precision not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self._precision = precision
        self._fingerprint = None
        self.bilm.clear_casts()
        return self

    @property
    def device(self) -> torch.device:
        """Where the weights are (inputs go there; :meth:`embed` returns CPU arrays from any device)."""
        return next(self.parameters()).device

    def to_device(self, device: str | None = None) -> Elmo:
        """Move the model to ``device`` (see :func:`probing.devices.resolve_device`; None = CUDA when
        available, else CPU) in place; returns ``self``. The fingerprint does not change: outputs on every
        device agree within DESIGN.md's tolerance."""
        from probing.devices import torch_device

        self.to(torch_device(device))
        self.bilm.clear_casts()
        return self

    @property
    def num_layers(self) -> int:
        """Number of output layers, the token layer included."""
        return self.options.n_layers + 1

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    @property
    def layer_names(self) -> list[str]:
        return [str(i) for i in range(self.num_layers)]

    @property
    def fingerprint(self) -> str:
        """sha256 of options, every weight, the state policy and a non-default precision (computed
        once, then cached)."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            h.update(json.dumps(self.options.to_dict(), sort_keys=True).encode())
            h.update(b"stateful" if self.stateful else b"stateless")
            if self._precision != "fp32":
                h.update(f"precision={self._precision}".encode())
            for name, tensor in sorted(self.bilm.state_dict().items()):
                h.update(name.encode())
                h.update(tensor.detach().to(torch.float32).cpu().contiguous().numpy().tobytes())
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def reset_states(self) -> None:
        """Forget the carried LSTM state (stateful mode)."""
        self._state = None

    def forward(self, sentences: Sequence[Sequence[str]], edits: Edits | None = None) -> tuple[Tensor, Tensor]:
        """One batch: ``(n_layers, B, T, output_dim)`` activations without boundaries and a ``(B, T)`` mask.

        ``edits`` intervene on biLSTM layers' outputs per direction (:data:`probing.elmo.model.Edits`).

        Parameters
        ----------
        sentences : sequence (B,) of sequences of str
            Tokenized sentences (``<S>``/``</S>`` are added here and cut from the output).
        edits : Edits, optional
            Per biLSTM layer (1..n_layers) the (forward, backward) map of its output, ``(..., P) -> (..., P)``.

        Returns
        -------
        layers : Tensor (num_layers, B, T, output_dim), float32
            ``T`` is the longest sentence's token count; layer 0 is the token embedding twice
            (``[e | e]``), layer k the biLSTM layer k as ``[forward | backward]``; zero after a sentence's end.
            The precision (``bf16``) changes the matmuls, not this dtype.
        mask : Tensor (B, T) of bool
            True at the tokens of each sentence.
        """
        sentences = check_sentences(sentences)
        if not sentences:
            return torch.zeros(self.num_layers, 0, 0, self.output_dim), torch.zeros(0, 0, dtype=torch.bool)
        ids = torch.from_numpy(batch_char_ids(sentences, self.options.max_characters_per_token)).to(self.device)
        state = self._carried_state(len(sentences)) if self.stateful else None
        tokens, fw, bw, mask, final = self.bilm(ids, state, dtype=PRECISIONS[self._precision], edits=edits)
        if self.stateful:
            self._keep_state(final)
        layers = [torch.cat([tokens, tokens], dim=-1)]
        layers += [torch.cat([f, b], dim=-1) for f, b in zip(fw, bw)]
        out = torch.stack(layers)
        lengths = mask.sum(dim=1)
        inner = torch.arange(out.size(2) - 2, device=out.device).unsqueeze(0) < (lengths - 2).unsqueeze(1)
        return out[:, :, 1:-1] * inner.unsqueeze(-1), inner

    @torch.inference_mode()
    def embed(
        self,
        sentences: str | Sequence[str | Sequence[str]],
        *,
        batch_size: int = 64,
        progress: bool = False,
        edits: Edits | None = None,
    ) -> list[np.ndarray]:
        """Every layer for each sentence: a list of float32 arrays ``(num_layers, n_tokens, output_dim)``.

        A sentence is a list of tokens or a string, tokenized by :func:`probing.tokenize.tokenize`; a single
        string is one sentence (a list of one array comes back). Stateless: sentences are batched by length
        (the result does not depend on it). Stateful: batches are taken in input order, ``batch_size``
        sentences each, as the reference does. ``edits``: as in :meth:`forward`.

        Parameters
        ----------
        sentences : str or sequence (n_sentences,) of token lists or str
            The sentences; one string is one sentence.
        batch_size, progress, edits : sentences per batch, a token progress bar, and the edits of :meth:`forward`.

        Returns
        -------
        list (n_sentences,) of ndarray (num_layers, n_tokens, output_dim), float32
            In input order; ``n_tokens`` is that sentence's length, ``num_layers`` counts the token layer.
        """
        batch_size = check_count(batch_size, "batch_size")
        if isinstance(sentences, str):
            sentences = [sentences]
        if isinstance(sentences, Sequence):
            sentences = [tokenize(s) if isinstance(s, str) else s for s in sentences]
        sentences = check_sentences(sentences)
        if self.stateful:
            order = list(range(len(sentences)))
        else:
            order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        results: list[np.ndarray | None] = [None] * len(sentences)
        bar = tqdm(total=sum(len(s) for s in sentences), unit="tok", disable=not progress, desc="embed")
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            out, _ = self([sentences[i] for i in idx], edits)
            out = out.float().cpu()
            for row, i in enumerate(idx):
                n = len(sentences[i])
                results[i] = out[:, row, :n].numpy().copy()
                bar.update(n)
        bar.close()
        return results  # type: ignore[return-value]

    def _carried_state(self, batch: int) -> tuple[State, State] | None:
        if self._state is None:
            return None
        opts = self.options
        carried = []
        for direction in self._state:
            layers = []
            for h, c in direction:
                if h.size(0) < batch:
                    h = torch.cat([h, h.new_zeros(batch - h.size(0), opts.projection_dim)])
                    c = torch.cat([c, c.new_zeros(batch - c.size(0), opts.lstm_dim)])
                layers.append((h[:batch], c[:batch]))
            carried.append(layers)
        return carried[0], carried[1]

    def _keep_state(self, final: tuple[State, State]) -> None:
        """Rows of this batch take their final state; rows beyond it keep the older one."""
        if self._state is None:
            self._state = (list(final[0]), list(final[1]))
            return
        merged = []
        for old_dir, new_dir in zip(self._state, final):
            layers = []
            for (oh, oc), (nh, nc) in zip(old_dir, new_dir):
                if oh.size(0) > nh.size(0):
                    nh = torch.cat([nh, oh[nh.size(0) :]])
                    nc = torch.cat([nc, oc[nc.size(0) :]])
                layers.append((nh, nc))
            merged.append(layers)
        self._state = (merged[0], merged[1])
