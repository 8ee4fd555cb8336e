"""The ``>>>`` examples of the main entry points hold (CI runs them with the suite). They use the bundled model
and demo data on a few sentences, in one isolated cache that the examples share (the later ones reuse the
stores the first extracts), so together they take a few seconds."""

from __future__ import annotations

import doctest
import io

import pytest

from probing.experiment import extract_activations, probe_layers, run_experiment
from probing.probes.linear import LinearProbe, LinearProbeCV
from probing.probes.mlp import MLPProbe
from probing.store import Store

EXAMPLES = [extract_activations, Store.layer, LinearProbe, LinearProbeCV, MLPProbe, probe_layers, run_experiment]


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory):
    """``$PROBING_CACHE`` in one temporary folder for every example of this file, ``$PROBING_DATA`` unset."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBING_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.delenv("PROBING_DATA", raising=False)
        yield


@pytest.mark.parametrize("obj", EXAMPLES, ids=lambda obj: obj.__qualname__)
def test_the_examples_hold(obj, shared_cache):
    """Each object's own docstring has examples (``recurse=False``: not its methods'), and every one holds."""
    tests = doctest.DocTestFinder(recurse=False).find(obj)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0, f"{obj.__qualname__} has no >>> example"
    assert result.failed == 0, report.getvalue()
