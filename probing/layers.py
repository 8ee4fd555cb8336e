"""Layer names, including the forward and backward halves of a biLSTM layer.

A stored biLM layer ``"n"`` (n >= 1) is the concatenation ``[forward | backward]`` of the two directions'
outputs at that layer (:meth:`probing.elmo.Elmo.forward` concatenates ``torch.cat([f, b], -1)``), so its
first ``dim // 2`` columns are the forward LSTM (which has read the sentence up to and including the word)
and the last ``dim // 2`` the backward LSTM (the word and everything after it). The one name for a half is
the layer's name plus ``f`` or ``b``: ``"1f"``, ``"1b"``, ``"2f"``, ... The store, probes, views, the
experiment file and result rows all use these names; ``"1"`` itself is both directions.

Layer ``"0"`` (the character CNN's context-free vector, shown twice to match the width) and non-numbered
layers (``"glove"``) have no halves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from probing.errors import InputError

DIRECTIONS = {"f": "forward", "b": "backward"}
# how to read a probe on one half (the report and notebook 07 show it beside the directions figure)
DIRECTIONS_NOTE = """\
ELMo is two language models, not one: a forward LSTM that reads the sentence left to right and a backward
LSTM that reads it right to left, trained separately and concatenated only at the output. Layer "1f" is
the forward half of layer 1 (the word and its LEFT context), "1b" the backward half (the word and its
RIGHT context), "1" both. No unit ever sees both sides at once: that is what "shallowly bidirectional"
means. A probe on one half shows how much of a property one side of the context decides. For part of
speech the left neighbour often decides ("the ___" is a noun or adjective, "to ___" a verb) and the right
one too ("___ of" is a noun), so each half alone is already good and the concatenation gains only what
the two sides add together; a large gap between the halves says the property is mostly decided on one
side, and a gain of "both" over the better half is what the shallow concatenation buys. Compare each half
with layer 0 (no context) to see what one side of the context adds at all."""

_HALF = re.compile(r"^(\d+)([fb])$")
_NUMBERED = re.compile(r"^\d+$")


class LayerError(InputError, KeyError):
    """A layer name that the store or encoder does not have (a KeyError for callers of ``layer_index``)."""

    def __str__(self) -> str:  # KeyError quotes its message; show it as written
        return str(self.args[0]) if self.args else ""


def split_direction(name: str) -> tuple[str, str | None]:
    """``"1f"`` -> ``("1", "f")``; ``"1"`` or ``"glove"`` -> (the name, None)."""
    m = _HALF.match(name)
    return (m[1], m[2]) if m else (name, None)


def is_half(name: object) -> bool:
    """Whether ``name`` names one direction's half of a layer (``"1f"``, ``"2b"``, ...)."""
    return isinstance(name, str) and _HALF.match(name) is not None


def has_halves(name: str) -> bool:
    """Whether the stored layer ``name`` is a biLSTM layer ``[forward | backward]`` (a number >= 1)."""
    return bool(_NUMBERED.match(name)) and int(name) >= 1


def direction_names(layer_names: Sequence[str]) -> list[str]:
    """The half names of every biLSTM layer among ``layer_names``: ``["0", "1", "2"]`` -> ``1f 1b 2f 2b``."""
    return [f"{n}{d}" for n in layer_names if has_halves(n) for d in DIRECTIONS]


def resolve(name: str, layer_names: Sequence[str], dim: int, where: object = "") -> tuple[int, slice]:
    """(index of the stored layer, its columns) for a layer name or a half name.

    ``dim`` is the stored width; a half is ``[:dim // 2]`` (forward) or ``[dim // 2:]`` (backward).
    ``where`` (a path, an encoder) goes into error messages.
    """
    names = list(layer_names)
    at = f" in {where}" if where else ""
    if name in names:
        return names.index(name), slice(None)
    base, direction = split_direction(name)
    if direction is None:
        raise LayerError(
            f"no layer named {name!r}{at}; layers are {names}"
            + (f", halves {direction_names(names)}" if direction_names(names) else "")
        )
    if base not in names:
        raise LayerError(f"no layer named {base!r} (for the half {name!r}){at}; layers are {names}")
    if not has_halves(base):
        raise LayerError(
            f"layer {base!r}{at} has no {DIRECTIONS[direction]} half: only biLSTM layers (1, 2, ...) are "
            "[forward | backward]; layer 0 is the context-free token vector shown twice"
        )
    if dim % 2:
        raise LayerError(f"layer {base!r}{at} has odd width {dim}, so it is not [forward | backward]")
    half = dim // 2
    return names.index(base), slice(0, half) if direction == "f" else slice(half, dim)
