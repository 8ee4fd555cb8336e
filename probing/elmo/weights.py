"""The official weights.hdf5 layout (bilm-tf / AllenNLP dataset names) <-> ``BiLM`` parameters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from probing.errors import ProbingError

from .._io import atomic_path
from .model import BiLM
from .options import ElmoOptions

FORGET_BIAS = 1.0


class WeightsError(ProbingError, ValueError):
    """weights.hdf5 lacks a dataset, holds one of the wrong shape or kind, non-finite values, more layers
    than options.json uses, or cannot be read (damaged HDF5)."""


def _lstm_name(direction: int, layer: int, leaf: str) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{leaf}"


def _forget_offset(opts: ElmoOptions) -> np.ndarray:
    offset = np.zeros(4 * opts.lstm_dim, dtype=np.float32)
    offset[2 * opts.lstm_dim : 3 * opts.lstm_dim] = FORGET_BIAS
    return offset


def _mapping(model: BiLM) -> Iterator[tuple[str, tuple[int, ...], Any, Callable, Callable]]:
    """Yield (dataset, stored shape, parameter, stored->param, param->stored) for every weight."""
    opts = model.opts
    cnn = model.char_cnn
    ident = lambda a: a  # noqa: E731
    yield (
        "char_embed",
        (opts.n_characters - 1, opts.char_embed_dim),
        cnn.char_embed.weight,
        lambda a: np.concatenate([np.zeros((1, a.shape[1]), a.dtype), a]),
        lambda a: a[1:],
    )
    for k, ((width, num), conv) in enumerate(zip(opts.filters, cnn.convs)):
        yield (
            f"CNN/W_cnn_{k}",
            (1, width, opts.char_embed_dim, num),
            conv.weight,
            lambda a: np.transpose(a[0], (2, 1, 0)),
            lambda a: np.transpose(a, (2, 1, 0))[None],
        )
        yield f"CNN/b_cnn_{k}", (num,), conv.bias, ident, ident
    nf = opts.n_filters
    for k in range(opts.n_highway):
        for name, lin in (("carry", cnn.highway_carry[k]), ("transform", cnn.highway_transform[k])):
            yield f"CNN_high_{k}/W_{name}", (nf, nf), lin.weight, np.transpose, np.transpose
            yield f"CNN_high_{k}/b_{name}", (nf,), lin.bias, ident, ident
    yield "CNN_proj/W_proj", (nf, opts.projection_dim), cnn.projection.weight, np.transpose, np.transpose
    yield "CNN_proj/b_proj", (opts.projection_dim,), cnn.projection.bias, ident, ident
    offset = _forget_offset(opts)
    c, p = opts.lstm_dim, opts.projection_dim
    for d, direction in enumerate((model.forward_lstm, model.backward_lstm)):
        for layer in range(opts.n_layers):
            yield _lstm_name(d, layer, "W_0"), (2 * p, 4 * c), direction.weight[layer], ident, ident
            yield (
                _lstm_name(d, layer, "B"),
                (4 * c,),
                direction.bias[layer],
                lambda a: a + offset,
                lambda a: a - offset,
            )
            yield _lstm_name(d, layer, "W_P_0"), (c, p), direction.proj[layer], ident, ident


def load_weights(model: BiLM, path: str | Path) -> None:
    """Copy every dataset of an official weights file into ``model``, checking names, kinds, shapes and values.

    HDF5 keeps no checksum, so values are checked: NaN or infinity anywhere is refused. A file with more
    LSTM or highway layers than options.json uses is refused too (the options do not describe it).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"weights file not found: {path}")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise WeightsError(f"{path}: not a readable HDF5 file ({e})") from None
    opts = model.opts
    name = "(file structure)"
    with f, torch.no_grad():
        try:
            for name, shape, param, to_param, _ in _mapping(model):
                if name not in f:
                    raise WeightsError(f"{path}: missing dataset '{name}' (expected shape {shape} from options.json)")
                ds = f[name]
                if not isinstance(ds, h5py.Dataset):
                    raise WeightsError(f"{path}: '{name}' is an HDF5 {type(ds).__name__}, expected a dataset {shape}")
                if tuple(ds.shape) != shape:
                    raise WeightsError(
                        f"{path}: dataset '{name}' has shape {tuple(ds.shape)}, options.json expects {shape}"
                    )
                raw = np.asarray(ds[...], dtype=np.float32)
                if not np.isfinite(raw).all():
                    bad = int(raw.size - np.isfinite(raw).sum())
                    raise WeightsError(f"{path}: dataset '{name}' holds {bad} NaN or infinite value(s)")
                param.copy_(torch.from_numpy(np.ascontiguousarray(to_param(raw))))
            name = "(extra layers)"
            extra = [n for n in (_lstm_name(0, opts.n_layers, "W_0"), f"CNN_high_{opts.n_highway}/W_carry") if n in f]
        except (OSError, KeyError, RuntimeError, TypeError, ValueError) as e:
            if isinstance(e, WeightsError):
                raise
            raise WeightsError(f"{path}: cannot read '{name}': the HDF5 file is damaged ({e})") from None
    if extra:
        raise WeightsError(
            f"{path}: has '{extra[0]}', a layer beyond the {opts.n_layers} LSTM layer(s) and {opts.n_highway} "
            "highway layer(s) of options.json: the options do not describe these weights"
        )


def save_weights(model: BiLM, path: str | Path, dtype: str = "float32") -> None:
    """Write ``model`` in the official layout (atomically); ``dtype='float16'`` halves the file."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        for name, _, param, _, to_stored in _mapping(model):
            value = to_stored(param.detach().float().cpu().numpy())
            f.create_dataset(name, data=np.ascontiguousarray(value).astype(dtype))


def init_random(model: BiLM, seed: int = 0) -> None:
    """Seeded random weights with TensorFlow-like initial scales (the forget bias stays at 1.0)."""
    gen = torch.Generator().manual_seed(seed)
    opts = model.opts
    with torch.no_grad():
        for name, _, param, _, _ in _mapping(model):
            if name.endswith("/B"):
                param.copy_(torch.from_numpy(_forget_offset(opts)))
            elif name.startswith(("CNN/b_", "CNN_proj/b")):
                param.zero_()
            elif name.startswith("CNN_high") and "/b_carry" in name:
                param.fill_(-2.0)
            elif "/b_" in name:
                param.zero_()
            elif name == "char_embed":
                param.uniform_(-1.0, 1.0, generator=gen)
                param[0] = 0.0
            else:
                if name.startswith("CNN/W"):
                    fan_in = param.shape[1] * param.shape[2]
                elif name.startswith(("CNN_high", "CNN_proj")):
                    fan_in = param.shape[1]
                else:
                    fan_in = param.shape[0]
                param.normal_(0.0, 1.0 / np.sqrt(fan_in), generator=gen)
