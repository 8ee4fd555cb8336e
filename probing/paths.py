"""Where the toolkit keeps downloads and caches; every location can be overridden."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of all caches: ``$PROBING_CACHE``, else ``$XDG_CACHE_HOME/probing``, else ``~/.cache/probing``."""
    env = os.environ.get("PROBING_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "probing"


def data_dir() -> Path | None:
    """User data root from ``$PROBING_DATA`` (corpora laid out as in ``shared/data``), or None."""
    env = os.environ.get("PROBING_DATA")
    return Path(env).expanduser() if env else None


def resources_dir() -> Path:
    """Files bundled inside the package: the default model and the demo data."""
    return Path(__file__).parent / "resources"
