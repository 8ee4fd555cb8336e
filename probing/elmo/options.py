"""The architecture described by an official ``options.json`` (the schema of bilm-tf and AllenNLP)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probing.errors import ProbingError


class OptionsError(ProbingError, ValueError):
    """options.json is missing a key or has a value of the wrong kind."""


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

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

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
        return cls(
            char_embed_dim=get("char_cnn.embedding.dim", int),
            filters=filters_t,
            n_highway=get("char_cnn.n_highway", int),
            n_characters=get("char_cnn.n_characters", int),
            max_characters_per_token=get("char_cnn.max_characters_per_token", int),
            activation=activation,
            lstm_dim=get("lstm.dim", int),
            projection_dim=get("lstm.projection_dim", int),
            n_layers=get("lstm.n_layers", int),
            cell_clip=float(cell_clip) if cell_clip else None,
            proj_clip=float(proj_clip) if proj_clip else None,
            use_skip_connections=bool(get("lstm.use_skip_connections", bool, False)),
        )

    @classmethod
    def from_json(cls, path: str | Path) -> ElmoOptions:
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"options file not found: {path}") from None
        except json.JSONDecodeError as e:
            raise OptionsError(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
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
