"""The one identity rule (probing.identity): the canonical hasher's exact output (golden values: a change
here silently renews every cache, so it must be deliberate), code identity that ignores comments,
docstrings and formatting but not code, and the caches that use it."""

from __future__ import annotations

import hashlib
import importlib
import sys
import textwrap

import pytest

from probing.identity import canonical, code_identity, digest, function_identity, module_digest, source_digest


def test_the_canonical_hasher_is_sorted_compact_utf8_json():
    value = {"b": 1, "a": [1.5, "x", None], "é": True}
    assert canonical(value) == '{"a":[1.5,"x",null],"b":1,"é":true}'.encode()
    # golden: sha256 of exactly those bytes, written out so a change of the rule cannot pass unnoticed
    assert digest({"b": 1, "a": [1.5, "x", None]}) == (
        "305604ee83e8727e33b9019e359ffda01bf7e47daed975798b4ad8231b3ea8ba"
    )
    assert digest({"b": 1, "a": [1.5, "x", None]}) == hashlib.sha256(b'{"a":[1.5,"x",null],"b":1}').hexdigest()


def test_store_keys_are_the_canonical_digest_of_their_parts():
    from probing.store.format import DTYPE, FORMAT_VERSION, store_key

    parts = {"encoder": "e", "corpus": "c", "format": FORMAT_VERSION, "dtype": DTYPE.name}
    assert store_key("e", "c") == digest(parts)
    # a shard is cut on chunk boundaries, so its key names the chunk size as well
    assert store_key("e", "c", shard=(1, 4), chunk_tokens=512) == digest(
        {**parts, "shard": [1, 4], "shard_chunks": 512}
    )


CODE = '''
"""A module."""

def f(x):
    """Twice x."""
    return 2 * x  # doubled
'''


def test_code_identity_ignores_comments_docstrings_and_formatting_but_not_code():
    same = "def f(x):\n    return (2*x)\n\n\n"
    assert source_digest(CODE) == source_digest(same)
    assert source_digest(CODE) != source_digest(CODE.replace("2 * x", "3 * x"))
    assert source_digest(CODE) != source_digest(CODE.replace("def f", "def g"))
    # a function whose only statement was its docstring still differs from one with a body
    assert source_digest('def f():\n    "doc"\n') == source_digest("def f():\n    pass\n")
    assert code_identity(1, ["probing.layers"]) != code_identity(2, ["probing.layers"])
    assert code_identity(1, ["probing.layers", "probing.errors"]) == code_identity(
        1, ["probing.errors", "probing.layers"]
    )


def test_function_identity_follows_the_code_of_the_functions_module(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = tmp_path / "toy_kind_mod.py"

    def load(source: str):
        mod.write_text(textwrap.dedent(source), encoding="utf-8")
        sys.modules.pop("toy_kind_mod", None)
        return importlib.import_module("toy_kind_mod")

    first = function_identity(load(CODE).f)
    assert function_identity(load(CODE.replace("# doubled", "# times two")).f) == first  # a comment
    assert function_identity(load(CODE.replace("2 * x", "2 * x + 0")).f) != first  # the code
    assert module_digest("toy_kind_mod") == source_digest(mod.read_text())
    sys.modules.pop("toy_kind_mod", None)


def test_the_job_key_includes_the_kinds_own_code():
    from probing.experiment.jobs import kind_identity
    from probing.results import Metric
    from probing.tasks import TaskKind, TaskOutput

    m = Metric("m", "m")

    def run_a(job):
        return TaskOutput()

    def run_b(job):
        return TaskOutput(rows=[])

    a = TaskKind("k", run=run_a, metrics=(m,), headline="m")
    b = TaskKind("k", run=run_b, metrics=(m,), headline="m")
    assert kind_identity(a) != kind_identity(b)  # another function (by name, in the same module)
    assert kind_identity(a) == kind_identity(TaskKind("k", run=run_a, metrics=(m,), headline="m", overview=True))


def test_a_projection_is_cached_with_a_checksum_and_umap_learns_version(tmp_path, monkeypatch):
    import json

    import numpy as np

    from probing.views import explorer

    monkeypatch.setenv("PROBING_CACHE", str(tmp_path))
    x = np.random.default_rng(0).normal(size=(30, 5)).astype(np.float32)
    coords, used = explorer.cached_projection(x, {"k": 1}, method="pca", seed=0)
    (meta,) = (tmp_path / "projections").glob("*.json")
    record = json.loads(meta.read_text())
    assert record["identity"] == explorer.projection_identity() and "umap-learn" in record["identity"]
    npy = meta.with_suffix(".npy")
    assert record["sha256"] == hashlib.sha256(npy.read_bytes()).hexdigest()
    # a file that fails its checksum is recomputed, never served
    np.save(npy, np.zeros((30, 2)), allow_pickle=False)
    again, _ = explorer.cached_projection(x, {"k": 1}, method="pca", seed=0)
    np.testing.assert_array_equal(again, coords)
    assert not np.all(again == 0)


@pytest.mark.parametrize("name", ["probing.tasks", "probing.probes"])
def test_a_package_digest_covers_each_file_by_name(name):
    import pathlib

    root = pathlib.Path(importlib.import_module(name).__file__).parent
    files = sorted(root.rglob("*.py"))
    assert module_digest(name) == digest(
        [[f.relative_to(root).as_posix(), source_digest(f.read_text())] for f in files]
    )


def test_the_module_examples_hold():
    import doctest

    import probing.identity

    result = doctest.testmod(probing.identity, raise_on_error=False)
    assert result.attempted == 5 and result.failed == 0  # the module docstring's two, option_key's three
