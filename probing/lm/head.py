"""LM heads: the output softmax that turns a biLM's top layer into next-word log-probabilities.

One head serves both directions (as in bilm-tf): the forward LM feeds it the first half of the top layer,
the backward LM the second half. Two kinds:

- :class:`SoftmaxHead`, a full softmax ``W`` ``(V, d)``, ``b`` ``(V,)``: the official layout
  (HDF5 datasets ``softmax/W``, ``softmax/b``; a vocabulary file with one token per line, line i = row i);
- :class:`AdaptiveHead`, an adaptive softmax (Grave et al. 2017, ``torch.nn.AdaptiveLogSoftmaxWithLoss``)
  stored as an ``.npz`` file (loaded with ``allow_pickle=False``): the bundled model's compact head.

Every vocabulary holds ``<S>``, ``</S>`` and ``<UNK>``; a word outside it is scored as ``<UNK>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from probing.elmo import hub
from probing.errors import InputError, ProbingError

BOS, EOS, UNK = "<S>", "</S>", "<UNK>"
_CELLS = 1 << 24  # logits computed at once by a full softmax (64 MB of float32)


class NoHeadError(ProbingError, ValueError):
    """The model has no LM head, so it cannot score text; the message says how to get one."""


class LmHead:
    """A vocabulary and a map from top-layer halves ``(N, d)`` to the log-probability of target ids ``(N,)``."""

    def __init__(self, vocab: Sequence[str], source: str):
        self.vocab = list(vocab)
        self.source = source
        self.index = {w: i for i, w in enumerate(self.vocab)}
        missing = [t for t in (BOS, EOS, UNK) if t not in self.index]
        if missing:
            raise InputError(f"{source}: the vocabulary lacks {', '.join(missing)} (every LM vocabulary needs them)")
        self.unk = self.index[UNK]

    @property
    def dim(self) -> int:
        raise NotImplementedError

    def ids(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Target ids ``(n,)`` of ``words`` (``<UNK>`` for a word outside the vocabulary) and ``in_vocab`` ``(n,)``.

        Parameters
        ----------
        words : sequence (n,) of str

        Returns
        -------
        ids : ndarray (n,) of int64
            Vocabulary rows, ``<UNK>``'s where the word is outside the vocabulary.
        in_vocab : ndarray (n,) of bool
            True where the word is in the vocabulary.
        """
        found = [self.index.get(w) for w in words]
        in_vocab = np.array([i is not None for i in found], dtype=bool)
        return np.array([self.unk if i is None else i for i in found], dtype=np.int64), in_vocab

    def log_probs(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """Natural-log probability ``(N,)`` of each target id given its hidden vector (float32).

        Parameters
        ----------
        hidden : Tensor (N, d)
            One direction half of the top layer per prediction, d = :attr:`dim`; any float dtype
            (computed in float32).
        targets : Tensor (N,) of int64
            Vocabulary ids to score, on ``hidden``'s device.

        Returns
        -------
        Tensor (N,), float32
            ``log p(targets[i] | hidden[i])``, on ``hidden``'s device.
        """
        raise NotImplementedError

    def _check_dim(self, hidden: Tensor) -> None:
        if hidden.size(-1) != self.dim:
            raise InputError(
                f"LM head {self.source} expects vectors of width {self.dim}, the model's direction halves are "
                f"{hidden.size(-1)} wide: the head belongs to another model"
            )


class SoftmaxHead(LmHead):
    """A full softmax over the vocabulary: ``log_softmax(h W^T + b)[target]``."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, vocab: Sequence[str], source: str = "softmax"):
        super().__init__(vocab, source)
        if weight.ndim != 2 or bias.shape != (weight.shape[0],):
            raise InputError(
                f"{source}: softmax/W must be (V, d) and softmax/b (V,), got {weight.shape} and {bias.shape}"
            )
        if weight.shape[0] != len(self.vocab):
            raise InputError(
                f"{source}: softmax/W has {weight.shape[0]} rows but the vocabulary has {len(self.vocab)} tokens"
            )
        self.weight = torch.from_numpy(np.ascontiguousarray(weight, dtype=np.float32))
        self.bias = torch.from_numpy(np.ascontiguousarray(bias, dtype=np.float32))

    @classmethod
    def from_files(cls, softmax: str | Path, vocab: str | Path) -> SoftmaxHead:
        """The official layout: HDF5 ``softmax/W`` ``(V, d)`` and ``softmax/b`` ``(V,)``, vocab one token a line."""
        import h5py

        softmax, vocab = Path(softmax), Path(vocab)
        for path in (softmax, vocab):
            if not path.is_file():
                raise InputError(f"LM head file not found: {path}")
        try:
            with h5py.File(softmax, "r") as f:
                if "softmax/W" not in f or "softmax/b" not in f:
                    raise InputError(f"{softmax}: expected the datasets softmax/W and softmax/b, found {list(f)}")
                weight, bias = np.asarray(f["softmax/W"]), np.asarray(f["softmax/b"])
        except OSError as e:
            raise InputError(f"{softmax}: not a readable HDF5 softmax file ({e})") from e
        return cls(weight, bias, read_vocab(vocab), source=str(softmax))

    @property
    def dim(self) -> int:
        return int(self.weight.size(1))

    def log_probs(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """:meth:`LmHead.log_probs` by a full softmax, in chunks of about 2**24 logits.

        Parameters
        ----------
        hidden : Tensor (N, d)
            d = :attr:`dim`; any float dtype (computed in float32).
        targets : Tensor (N,) of int64
            Vocabulary ids, on ``hidden``'s device.

        Returns
        -------
        Tensor (N,), float32
            ``log_softmax(hidden @ W.T + b)[i, targets[i]]``.
        """
        self._check_dim(hidden)
        weight, bias = self.weight.to(hidden.device), self.bias.to(hidden.device)
        hidden = hidden.float()
        step = max(1, _CELLS // weight.size(0))
        out = []
        for start in range(0, hidden.size(0), step):
            logits = torch.addmm(bias, hidden[start : start + step], weight.t())
            tgt = targets[start : start + step]
            out.append(logits.gather(1, tgt.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=1))
        return torch.cat(out) if out else hidden.new_zeros(0)


class AdaptiveHead(LmHead):
    """An adaptive softmax (frequent words in a head cluster, rarer ones in low-rank tail clusters)."""

    def __init__(self, module: nn.AdaptiveLogSoftmaxWithLoss, vocab: Sequence[str], source: str = "adaptive"):
        super().__init__(vocab, source)
        if module.n_classes != len(self.vocab):
            raise InputError(f"{source}: the softmax has {module.n_classes} classes, the vocabulary {len(self.vocab)}")
        self.module = module.eval()

    @property
    def dim(self) -> int:
        return int(self.module.in_features)

    def log_probs(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """:meth:`LmHead.log_probs` by the adaptive softmax (without autograd).

        Parameters
        ----------
        hidden : Tensor (N, d)
            d = :attr:`dim`; any float dtype (computed in float32).
        targets : Tensor (N,) of int64
            Vocabulary ids, on ``hidden``'s device.

        Returns
        -------
        Tensor (N,), float32
            The log-probability of each target (head cluster, then its tail cluster when it is a rare word).
        """
        self._check_dim(hidden)
        if hidden.size(0) == 0:
            return hidden.new_zeros(0)
        module = self.module.to(hidden.device)
        with torch.inference_mode():
            return module(hidden.float(), targets).output

    def save(self, path: str | Path, dtype: str = "float16") -> None:
        """Write the head as ``.npz``: cutoffs, div_value, every parameter in ``dtype``, the vocabulary."""
        from probing._io import atomic_path

        arrays: dict[str, np.ndarray] = {
            "cutoffs": np.asarray(self.module.cutoffs[:-1], dtype=np.int64),
            "div_value": np.asarray(self.module.div_value, dtype=np.float64),
            "vocab": np.asarray(self.vocab, dtype=str),
        }
        for name, p in self.module.state_dict().items():
            arrays[f"param/{name}"] = p.detach().cpu().numpy().astype(dtype)
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: str | Path) -> AdaptiveHead:
        """Read a head written by :meth:`save` (no pickle)."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except (OSError, ValueError) as e:
            raise InputError(f"{path}: not an adaptive LM head file ({e})") from e
        for key in ("cutoffs", "div_value", "vocab", "param/head.weight"):
            if key not in data:
                raise InputError(f"{path}: missing {key!r} (not an adaptive LM head file)")
        vocab = [str(w) for w in data["vocab"]]
        head_weight = data["param/head.weight"]
        cutoffs = [int(c) for c in data["cutoffs"]]
        module = nn.AdaptiveLogSoftmaxWithLoss(
            head_weight.shape[1], len(vocab), cutoffs, div_value=float(data["div_value"]), head_bias=False
        )
        state = {
            k.removeprefix("param/"): torch.from_numpy(v.astype(np.float32))
            for k, v in data.items()
            if k.startswith("param/")
        }
        try:
            module.load_state_dict(state)
        except RuntimeError as e:
            raise InputError(f"{path}: the parameters do not fit the stored cutoffs ({e})") from e
        return cls(module, vocab, source=str(path))


def read_vocab(path: str | Path) -> list[str]:
    """One token per line (line i = softmax row i); a blank line is an error naming it."""
    words = Path(path).read_text(encoding="utf-8").splitlines()
    for i, w in enumerate(words):
        if not w.strip():
            raise InputError(f"{path}, line {i + 1}: empty token (a vocabulary has one token per line)")
    return [w.strip() for w in words]


def load_head(name: str, *, registry: Mapping[str, hub.Checkpoint] | None = None) -> LmHead | None:
    """The LM head of checkpoint ``name`` (its files found by :func:`probing.elmo.hub.resolve_head`, which
    downloads an official one if needed), or None when it has none."""
    if not hub.has_head(name, registry):
        return None
    try:
        first, vocab = hub.resolve_head(name, registry=registry)
    except FileNotFoundError:
        return None
    return AdaptiveHead.load(first) if vocab is None else SoftmaxHead.from_files(first, vocab)
