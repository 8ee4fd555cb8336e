"""Fixtures shared by the test files: the small ELMo fixture checkpoint as a model folder, and an isolated
cache (``$PROBING_CACHE`` in a temporary folder, no ``$PROBING_DATA``, so tests never read the user's data
or reuse another test's stores)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ELMO_OPTIONS = FIXTURES / "elmo_allennlp" / "options.json"
ELMO_WEIGHTS = FIXTURES / "elmo_allennlp" / "lm_weights.hdf5"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker (and the notebook kernels and subprocesses it starts) gets its share of the
    cores as its thread count: README's ``-n auto`` already runs one worker per core, and two workers of 2
    threads each on 2 cores spend much of their time waiting for each other (a notebook that ran 20 s alone
    took 308 s). Results do not depend on the thread count (tests/test_thread_count.py); tests of thread
    behaviour set their counts themselves."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    threads = str(max(1, (os.cpu_count() or 1) // int(workers)))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = threads
    import torch

    torch.set_num_threads(int(threads))


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
