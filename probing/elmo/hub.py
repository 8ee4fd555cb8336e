"""Registry of ELMo checkpoints: the four official AllenNLP biLMs and the model bundled with the package.

``resolve(name)`` gives local ``(options.json, weights.hdf5)`` paths, downloading official files into
the cache through ``probing.download.fetch`` (resumable, verified, offline-aware).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from probing import paths
from probing._io import sha256_file
from probing.download import cache_path, fetch
from probing.elmo.options import ElmoOptions
from probing.errors import InputError, ProbingError

if TYPE_CHECKING:
    import pandas as pd

S3 = "https://allennlp.s3.amazonaws.com/models/elmo"
_CHAR_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))
_ONE_BILLION = "1B Word Benchmark (~800M tokens of WMT 2011 news)"
_FIVE_BILLION = "5.5B tokens (Wikipedia 1.9B + WMT 2008-2012 news crawl 3.6B)"


class UnknownCheckpointError(ProbingError, ValueError):
    """The name is not in the registry; the message lists the known names."""


class BundledFileError(ProbingError, ValueError):
    """A bundled model file does not have the sha256 pinned in the registry (damaged or replaced)."""


class ArchitectureMismatchError(ProbingError, ValueError):
    """A downloaded options.json does not describe the architecture its registry entry promises."""


@dataclass(frozen=True)
class Checkpoint:
    """One ELMo biLM: where its two files come from, and what architecture they hold.

    Official checkpoints have URLs and a known ``architecture``; the bundled model has ``bundled``, a
    folder under ``probing.paths.resources_dir()`` holding ``options.json`` and ``weights.hdf5``.
    An LM head, where one is published: ``softmax_url`` + ``vocab_url`` (the official layout, fetched by
    ``probing download NAME --with-softmax``), or ``head``, a file in the bundled folder (an adaptive head).
    """

    name: str
    description: str
    options_url: str | None = None
    weights_url: str | None = None
    architecture: ElmoOptions | None = None
    options_sha256: str | None = None
    weights_sha256: str | None = None
    bundled: str | None = None
    softmax_url: str | None = None
    vocab_url: str | None = None
    head: str | None = None

    def __post_init__(self) -> None:
        remote = self.options_url is not None and self.weights_url is not None
        if remote == (self.bundled is not None) or (self.options_url is None) != (self.weights_url is None):
            raise InputError(f"checkpoint {self.name!r}: give both options_url and weights_url, or bundled, not both")
        if (self.softmax_url is None) != (self.vocab_url is None):
            raise InputError(f"checkpoint {self.name!r}: give both softmax_url and vocab_url, or neither")

    @property
    def dim(self) -> int | None:
        """Width of each output layer (forward and backward projections side by side)."""
        return self.architecture.output_dim if self.architecture else None

    @property
    def n_params(self) -> int | None:
        return count_parameters(self.architecture) if self.architecture else None


def count_parameters(opts: ElmoOptions) -> int:
    """Number of values in the biLM's weights file (``opts.n_parameters``; the official HDF5 layout)."""
    return opts.n_parameters


def _official(name: str, tag: str, description: str, softmax: bool = False) -> Checkpoint:
    """An AllenNLP checkpoint; its architecture is read off the tag, e.g. ``2x1024_128_2048cnn_1xhighway``.
    ``softmax``: AllenNLP publishes the LM softmax and vocabulary in the checkpoint's folder (the former
    ``elmo-perplexities`` command's defaults; only for ``original``)."""
    m = re.fullmatch(r"(\d+)x(\d+)_(\d+)_(\d+)cnn_(\d+)xhighway(?:_[\w.]+)?", tag)
    if m is None or int(m.group(4)) != sum(n for _, n in _CHAR_FILTERS):
        raise InputError(f"unexpected ELMo checkpoint tag {tag!r}")
    n_layers, lstm_dim, projection_dim, _, n_highway = map(int, m.groups())
    architecture = ElmoOptions(
        char_embed_dim=16,
        filters=_CHAR_FILTERS,
        n_highway=n_highway,
        n_characters=262,
        max_characters_per_token=50,
        activation="relu",
        lstm_dim=lstm_dim,
        projection_dim=projection_dim,
        n_layers=n_layers,
        cell_clip=3.0,
        proj_clip=3.0,
        use_skip_connections=True,
    )
    base = f"{S3}/{tag}/elmo_{tag}"
    head = {"softmax_url": f"{base}_softmax_weights.hdf5", "vocab_url": f"{S3}/{tag}/vocab-2016-09-10.txt"}
    return Checkpoint(
        name,
        description,
        f"{base}_options.json",
        f"{base}_weights.hdf5",
        architecture=architecture,
        **(head if softmax else {}),
    )


BUNDLED_SHA256 = {
    "options.json": "dde777193ee9dde9e588264ef2b872e2dd2765c7366327b3fe14e6143d6b911a",
    "weights.hdf5": "1e731e5851914c60c138534e11d7115453bbd578de24021c3e0777223ed02d86",
}
"""The bundled model's files, pinned: checked on every load (HDF5 keeps no checksum of its own, so a flipped
byte would otherwise change the vectors silently). scripts/bundle_default_model.py prints new values."""

REGISTRY: dict[str, Checkpoint] = {
    c.name: c
    for c in (
        _official(
            "small",
            "2x1024_128_2048cnn_1xhighway",
            f"smallest official ELMo: LSTM 1024 / projection 128, 1 highway layer; {_ONE_BILLION}",
        ),
        _official(
            "medium", "2x2048_256_2048cnn_1xhighway", f"LSTM 2048 / projection 256, 1 highway layer; {_ONE_BILLION}"
        ),
        _official(
            "original",
            "2x4096_512_2048cnn_2xhighway",
            f"the ELMo of Peters et al. (2018): LSTM 4096 / projection 512, 2 highway layers; {_ONE_BILLION}",
            softmax=True,
        ),
        _official(
            "original-5.5b",
            "2x4096_512_2048cnn_2xhighway_5.5B",
            f"same architecture as 'original', trained on {_FIVE_BILLION}",
        ),
        Checkpoint(
            "default",
            "the model bundled with the package (pretrained with `probing pretrain`); no download",
            bundled="models/default",
            head="lm_head.npz",
            options_sha256=BUNDLED_SHA256["options.json"],
            weights_sha256=BUNDLED_SHA256["weights.hdf5"],
        ),
    )
}


def names(registry: Mapping[str, Checkpoint] | None = None) -> list[str]:
    return list(REGISTRY if registry is None else registry)


def get(name: str, registry: Mapping[str, Checkpoint] | None = None) -> Checkpoint:
    """The registry entry ``name``; an unknown name is an error that lists the known ones."""
    registry = REGISTRY if registry is None else registry
    if name not in registry:
        raise UnknownCheckpointError(f"unknown ELMo checkpoint {name!r}; known: {', '.join(registry)}")
    return registry[name]


def bundled_paths(entry: Checkpoint) -> tuple[Path, Path]:
    folder = paths.resources_dir() / (entry.bundled or "")
    return folder / "options.json", folder / "weights.hdf5"


def resolve(
    name: str,
    *,
    offline: bool | None = None,
    progress: bool = True,
    registry: Mapping[str, Checkpoint] | None = None,
) -> tuple[Path, Path]:
    """Local ``(options_path, weights_path)`` of checkpoint ``name``, downloading what is missing.

    ``offline`` (default ``$PROBING_OFFLINE``) forbids the network: files must already be cached.
    A downloaded options.json is checked against the architecture the registry promises before the
    (large) weights file is fetched.
    """
    entry = get(name, registry)
    if entry.bundled is not None:
        options, weights = bundled_paths(entry)
        missing = [str(p) for p in (options, weights) if not p.is_file()]
        if missing:
            official = [n for n, c in (REGISTRY if registry is None else registry).items() if c.bundled is None]
            raise FileNotFoundError(
                f"checkpoint {name!r} is bundled with the package, but {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} missing: reinstall the package, or use a "
                f"downloadable checkpoint ({', '.join(official)})"
            )
        for path, want in ((options, entry.options_sha256), (weights, entry.weights_sha256)):
            if want is not None and (found := sha256_file(path)) != want:
                raise BundledFileError(
                    f"{path}: sha256 {found} differs from the {want} pinned for the bundled checkpoint {name!r}: "
                    "the file is damaged or was replaced; reinstall the package (or git checkout the file)"
                )
        return options, weights
    hint = f"probing download {name}"
    assert entry.options_url is not None and entry.weights_url is not None  # checked when the entry is made
    options = fetch(entry.options_url, sha256=entry.options_sha256, offline=offline, progress=False, hint=hint)
    if entry.architecture is not None:
        _check_architecture(entry, options)
    weights = fetch(entry.weights_url, sha256=entry.weights_sha256, offline=offline, progress=progress, hint=hint)
    return options, weights


def download(
    name: str, *, with_softmax: bool = False, registry: Mapping[str, Checkpoint] | None = None
) -> tuple[Path, Path]:
    """Fetch checkpoint ``name`` into the cache with a progress bar (``probing download NAME``);
    ``with_softmax``: its LM softmax and vocabulary too (see :func:`resolve_head`)."""
    if with_softmax:
        resolve_head(name, progress=True, registry=registry)
    return resolve(name, progress=True, registry=registry)


def has_head(name: str, registry: Mapping[str, Checkpoint] | None = None) -> bool:
    entry = get(name, registry)
    return entry.softmax_url is not None or entry.head is not None


def resolve_head(
    name: str,
    *,
    offline: bool | None = None,
    progress: bool = True,
    registry: Mapping[str, Checkpoint] | None = None,
) -> tuple[Path, Path | None]:
    """Local files of checkpoint ``name``'s LM head: ``(softmax.hdf5, vocab.txt)`` for an official one
    (downloaded into the cache; resumable, content-checked, hashed at first download), ``(head.npz, None)``
    for the bundled one. A checkpoint without a published head is an error naming those with one."""
    entry = get(name, registry)
    known = [n for n, c in (REGISTRY if registry is None else registry).items() if c.softmax_url or c.head]
    if entry.head is not None:
        path = paths.resources_dir() / (entry.bundled or "") / entry.head
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {name!r} has no LM head file yet ({path} is missing)")
        return path, None
    if entry.softmax_url is None or entry.vocab_url is None:
        raise InputError(
            f"checkpoint {name!r} has no published LM softmax; checkpoints with one: {', '.join(known) or 'none'}"
        )
    hint = f"probing download {name} --with-softmax"
    vocab = fetch(entry.vocab_url, offline=offline, progress=False, hint=hint)
    softmax = fetch(entry.softmax_url, offline=offline, progress=progress, hint=hint)
    return softmax, vocab


def describe(registry: Mapping[str, Checkpoint] | None = None) -> pd.DataFrame:
    """One row per checkpoint: name, dim, n_params, description, available (usable offline now),
    options and weights (URLs, or the bundled paths)."""
    rows = []
    for entry in (REGISTRY if registry is None else registry).values():
        if entry.bundled is not None:
            options, weights = bundled_paths(entry)
            available = options.is_file() and weights.is_file()
            arch = ElmoOptions.from_json(options) if options.is_file() else None
            dim, n_params = (arch.output_dim, count_parameters(arch)) if arch else (None, None)
            sources = (str(options), str(weights))
        else:
            assert entry.options_url is not None and entry.weights_url is not None  # checked when the entry is made
            available = cache_path(entry.options_url).is_file() and cache_path(entry.weights_url).is_file()
            dim, n_params = entry.dim, entry.n_params
            sources = (entry.options_url, entry.weights_url)
        rows.append(
            {
                "name": entry.name,
                "dim": dim,
                "n_params": n_params,
                "description": entry.description,
                "available": available,
                "options": sources[0],
                "weights": sources[1],
            }
        )
    import pandas as pd

    df = pd.DataFrame(rows)
    return df.astype({"dim": "Int64", "n_params": "Int64", "available": bool})


def _check_architecture(entry: Checkpoint, options: Path) -> None:
    """The fields named in the checkpoint's tag must match the downloaded options.json."""
    found = ElmoOptions.from_json(options)
    fields = ("n_layers", "lstm_dim", "projection_dim", "n_filters", "n_highway")
    diffs = [
        f"{f}: expected {getattr(entry.architecture, f)}, found {getattr(found, f)}"
        for f in fields
        if getattr(found, f) != getattr(entry.architecture, f)
    ]
    if diffs:
        raise ArchitectureMismatchError(
            f"{options} (from {entry.options_url}) does not describe checkpoint {entry.name!r}: "
            f"{'; '.join(diffs)}. The server's file or the registry entry is wrong; "
            f"delete the file to refetch it."
        )
