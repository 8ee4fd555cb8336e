"""probing: look inside ELMo, layer by layer.

``import probing`` is light (no torch); the helpers below are imported on first use.
"""

from __future__ import annotations

import os
from typing import Any

# MKL's float32 GEMMs split their work across threads differently with the thread count on some code paths
# (AVX2: an ELMo store at 1 and 2 threads differed in 0.04 % of its values, and a probe fit then moved by
# up to 0.07 points). Strict conditional numerical reproducibility makes every GEMM give the same bits for
# any thread count, at no measurable cost here. MKL reads the variable at its first call, so it is set on
# import, before probing runs anything; a user's own setting wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

__version__ = "0.1.0"

_LAZY = {"probe_layers": "probing.experiment.helpers"}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'probing' has no attribute {name!r}")
