"""Headless Chromium for the browser tests: where it is missing the test skips with the reason, except in
CI (``CI=true``), where a missing browser fails the run instead of leaving it silently green."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def missing(*, bokeh: bool = False) -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    if bokeh and importlib.util.find_spec("bokeh") is None:
        return "the explore extra (bokeh) is not installed"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install 'elmo-probing[dev]')"
    if not any(shutil.which(n) for n in CHROMIUM_NAMES):
        return "no Chromium on PATH (apt-get install -y chromium)"
    return None


def require(*, bokeh: bool = False) -> str:
    """The Chromium executable; skips the calling test where it cannot run (fails it when ``CI=true``)."""
    reason = missing(bokeh=bokeh)
    if reason is not None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI=true but the browser tests cannot run: {reason}")
        pytest.skip(reason)
    return next(p for p in map(shutil.which, CHROMIUM_NAMES) if p)
