"""probing: look inside ELMo, layer by layer.

``import probing`` is light (no torch); the helpers below are imported on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {"probe_layers": "probing.experiment.helpers"}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'probing' has no attribute {name!r}")
