"""Probes: linear classifiers on frozen activations, control tasks, baselines and statistics.

Names are exported lazily (PEP 562) so that ``import probing.probes`` does not import torch or
scikit-learn; add a module's public names to ``_EXPORTS`` to export them here.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LinearProbe": "linear",
    "ScalarMixProbe": "mix",
    "LinearProbeCV": "linear",
    "ScalarMixProbeCV": "mix",
    "bootstrap_mix_weights": "mix",
    "concat_layers": "linear",
    "ControlTask": "control",
    "selectivity": "control",
    "MajorityBaseline": "baselines",
    "MostFrequentTagBaseline": "baselines",
    "bootstrap_ci": "stats",
    "mean_and_ci_over_seeds": "stats",
    "online_codelength": "mdl",
    "control_codelength": "mdl",
    "OnlineCode": "mdl",
    "MLPProbe": "mlp",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'probing.probes' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
