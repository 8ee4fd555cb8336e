"""Fixtures shared by the test files: the small ELMo fixture checkpoint as a model folder, and an isolated
cache (``$PROBING_CACHE`` in a temporary folder, no ``$PROBING_DATA``, so tests never read the user's data
or reuse another test's stores)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ELMO_OPTIONS = FIXTURES / "elmo_allennlp" / "options.json"
ELMO_WEIGHTS = FIXTURES / "elmo_allennlp" / "lm_weights.hdf5"


def copy_elmo_fixture(folder: Path) -> Path:
    """``folder`` with ``options.json`` and ``weights.hdf5`` of the fixture checkpoint (a model folder as
    ``kind = "elmo"`` and ``probing.encoders.get_encoder`` take it)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(ELMO_OPTIONS, folder / "options.json")
    shutil.copy(ELMO_WEIGHTS, folder / "weights.hdf5")
    return folder


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$PROBING_CACHE`` set to ``tmp_path/cache`` and ``$PROBING_DATA`` unset for the test."""
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROBING_DATA", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def elmo_folder(tmp_path: Path, isolated_cache: Path) -> Path:
    """``tmp_path`` holding ``model/`` (the fixture checkpoint), with an isolated cache: experiment files
    written there name the encoder ``options = "model/options.json"``, ``weights = "model/weights.hdf5"``."""
    copy_elmo_fixture(tmp_path / "model")
    return tmp_path
