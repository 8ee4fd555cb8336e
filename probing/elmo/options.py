"""The architecture described by an official ``options.json`` (the schema of bilm-tf and AllenNLP)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probing.errors import ProbingError

MIN_CHARACTERS = 262  # character ids run to 261 (probing.elmo.chars: 256 bytes + BOW/EOW/PAD, shifted by 1)
MAX_PARAMETERS = 2_000_000_000  # 8 GB of float32 weights; the largest official ELMo has ~94M


class OptionsError(ProbingError, ValueError):
    """options.json is missing a key, has a value of the wrong kind, or one that means nothing
    (a negative dimension, a negative clip, a model too large to allocate)."""


@dataclass(frozen=True)
class ElmoOptions:
    """Architecture of a biLM. Field names follow options.json; see ``from_dict`` for the keys."""

    char_embed_dim: int
    filters: tuple[tuple[int, int], ...]
    n_highway: int
    n_characters: int
    max_characters_per_token: int
    activation: str
    lstm_dim: int
    projection_dim: int
    n_layers: int
    cell_clip: float | None
    proj_clip: float | None
    use_skip_connections: bool

    def __post_init__(self) -> None:
        """Refuse values that are of the right type but mean nothing; the message names the options.json key."""
        positive = {
            "char_cnn.embedding.dim": self.char_embed_dim,
            "char_cnn.max_characters_per_token": self.max_characters_per_token,
            "lstm.dim": self.lstm_dim,
            "lstm.projection_dim": self.projection_dim,
            "lstm.n_layers": self.n_layers,
        }
        for key, value in positive.items():
            if value < 1:
                raise OptionsError(f"key '{key}' must be a positive integer, got {value}")
        if self.n_highway < 0:
            raise OptionsError(f"key 'char_cnn.n_highway' must be >= 0, got {self.n_highway}")
        if self.n_characters < MIN_CHARACTERS:
            raise OptionsError(
                f"key 'char_cnn.n_characters' must be at least {MIN_CHARACTERS} (the character ids of this ELMo), "
                f"got {self.n_characters}"
            )
        if not self.filters or any(w < 1 or n < 1 for w, n in self.filters):
            raise OptionsError(
                f"key 'char_cnn.filters' must be a non-empty list of [width, count] with both >= 1, got {self.filters}"
            )
        widest = max(w for w, _ in self.filters)
        if widest > self.max_characters_per_token:
            raise OptionsError(
                f"key 'char_cnn.filters' has a filter of width {widest}, wider than "
                f"'char_cnn.max_characters_per_token' = {self.max_characters_per_token}"
            )
        for key, clip in (("lstm.cell_clip", self.cell_clip), ("lstm.proj_clip", self.proj_clip)):
            if clip is not None and not (math.isfinite(clip) and clip >= 0):
                raise OptionsError(f"key '{key}' must be a finite number >= 0 (or null: no clipping), got {clip}")

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    @property
    def n_parameters(self) -> int:
        """Number of values in the biLM's weights file (the official HDF5 layout; no softmax).

        The character table stores ``n_characters - 1`` rows: the padding row is implicit.
        """
        e, f, p, c = self.char_embed_dim, self.n_filters, self.projection_dim, self.lstm_dim
        chars = (self.n_characters - 1) * e
        cnn = sum(width * e * n + n for width, n in self.filters)
        highway = self.n_highway * 2 * (f * f + f)
        projection = f * p + p
        lstm_cell = 2 * p * 4 * c + 4 * c + c * p  # input (p) and recurrent projection (p) -> 4 gates, bias, c -> p
        return chars + cnn + highway + projection + 2 * self.n_layers * lstm_cell

    def check_memory(self, source: str = "options") -> None:
        """OptionsError before allocating a model whose float32 weights exceed ``MAX_PARAMETERS`` values or
        half of this machine's physical memory (absurd sizes would otherwise try to allocate 16-200 GB)."""
        need = 4 * self.n_parameters
        try:
            ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            ram = None
        limit = min(4 * MAX_PARAMETERS, ram // 2 if ram else 4 * MAX_PARAMETERS)
        if need > limit:
            raise OptionsError(
                f"{source}: this architecture has {self.n_parameters:,} weights ({need / 2**30:.1f} GiB as float32), "
                f"more than the {limit / 2**30:.1f} GiB allowed here (lstm.dim {self.lstm_dim}, projection_dim "
                f"{self.projection_dim}, n_layers {self.n_layers}, {self.n_filters} char filters): check the "
                "options file"
            )

    @property
    def output_dim(self) -> int:
        """Width of every output layer: forward ‖ backward projections."""
        return 2 * self.projection_dim

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "options") -> ElmoOptions:
        def get(path: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
            node: Any = d
            for part in path.split("."):
                if not isinstance(node, dict) or part not in node:
                    if default is not ...:
                        return default
                    raise OptionsError(f"{source}: missing key '{path}'")
                node = node[part]
            if node is None and default is not ...:
                return default
            if not isinstance(node, kind) or isinstance(node, bool) and kind in (int, float, (int, float)):
                raise OptionsError(f"{source}: key '{path}' should be {_kind_name(kind)}, got {node!r}")
            return node

        filters = get("char_cnn.filters", list)
        try:
            filters_t = tuple((int(w), int(n)) for w, n in filters)
        except (TypeError, ValueError):
            raise OptionsError(
                f"{source}: key 'char_cnn.filters' should be a list of [width, count] pairs, got {filters!r}"
            ) from None
        activation = get("char_cnn.activation", str)
        if activation not in ("relu", "tanh"):
            raise OptionsError(f"{source}: key 'char_cnn.activation' should be 'relu' or 'tanh', got {activation!r}")
        cell_clip = get("lstm.cell_clip", (int, float), None)
        proj_clip = get("lstm.proj_clip", (int, float), None)
        fields = dict(
            char_embed_dim=get("char_cnn.embedding.dim", int),
            filters=filters_t,
            n_highway=get("char_cnn.n_highway", int),
            n_characters=get("char_cnn.n_characters", int),
            max_characters_per_token=get("char_cnn.max_characters_per_token", int),
            activation=activation,
            lstm_dim=get("lstm.dim", int),
            projection_dim=get("lstm.projection_dim", int),
            n_layers=get("lstm.n_layers", int),
            cell_clip=float(cell_clip) if cell_clip is not None and cell_clip != 0 else None,
            proj_clip=float(proj_clip) if proj_clip is not None and proj_clip != 0 else None,
            use_skip_connections=bool(get("lstm.use_skip_connections", bool, False)),
        )
        try:
            opts = cls(**fields)
        except OptionsError as e:
            raise OptionsError(f"{source}: {e}") from None
        opts.check_memory(source)
        return opts

    @classmethod
    def from_json(cls, path: str | Path) -> ElmoOptions:
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"options file not found: {path}") from None
        except json.JSONDecodeError as e:
            raise OptionsError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
        except UnicodeDecodeError as e:
            raise OptionsError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); expected a JSON file") from None
        if not isinstance(d, dict):
            raise OptionsError(f"{path}: expected a JSON object at the top level")
        return cls.from_dict(d, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        """The options.json form, as AllenNLP and bilm-tf read it."""
        return {
            "lstm": {
                "cell_clip": self.cell_clip,
                "use_skip_connections": self.use_skip_connections,
                "n_layers": self.n_layers,
                "proj_clip": self.proj_clip,
                "projection_dim": self.projection_dim,
                "dim": self.lstm_dim,
            },
            "char_cnn": {
                "embedding": {"dim": self.char_embed_dim},
                "filters": [list(f) for f in self.filters],
                "n_highway": self.n_highway,
                "n_characters": self.n_characters,
                "max_characters_per_token": self.max_characters_per_token,
                "activation": self.activation,
            },
        }


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return "a number"
    return {int: "an integer", str: "a string", list: "a list", bool: "true or false", dict: "an object"}.get(
        kind, kind.__name__
    )
