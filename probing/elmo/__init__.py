"""ELMo in PyTorch: load the official AllenNLP weights, or models pretrained by ``probing pretrain``."""

import importlib
from typing import TYPE_CHECKING, Any

from .options import ElmoOptions, OptionsError

if TYPE_CHECKING:
    from .elmo import Elmo
    from .model import ScalarMix
    from .weights import WeightsError

_HOMES = {"Elmo": "elmo", "ScalarMix": "model", "WeightsError": "weights"}


def __getattr__(name: str) -> Any:
    """Import torch-based parts on first use (PEP 562): reading options and fingerprints needs no torch."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"probing.elmo.{_HOMES[name]}"), name)


__all__ = ["Elmo", "ElmoOptions", "OptionsError", "ScalarMix", "WeightsError"]
