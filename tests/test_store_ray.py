"""probing.store.extract_ray on a local one-CPU Ray: shards as tasks, merged, equal to a plain extract."""

from __future__ import annotations

import functools

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'elmo-probing[ray]')")

import test_store_fakes  # noqa: E402
from test_store_fakes import FakeEncoder, MetadataOnly, make_corpus  # noqa: E402

from probing.store import Store, extract, extract_ray  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():
        ray.shutdown()
    # the fakes live in tests/, which Ray workers cannot import: ship them by value
    ray.cloudpickle.register_pickle_by_value(test_store_fakes)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(test_store_fakes)


@pytest.mark.slow  # starting and stopping Ray takes ~8 s of the ~10 s
def test_extract_ray_equals_a_single_process_extraction(tmp_path, local_ray):
    corpus_factory = functools.partial(make_corpus, 24, seed=11)
    encoder_factory = functools.partial(FakeEncoder, dim=8)
    kw = dict(chunk_tokens=30, batch_tokens=16, progress=False)
    store = extract_ray(encoder_factory, corpus_factory, 3, cache_dir=tmp_path / "ray", **kw)
    whole = extract(FakeEncoder(dim=8), make_corpus(24, seed=11), cache_dir=tmp_path / "single", **kw)
    assert store.path.name == whole.path.name, "the merged store must carry the unsharded key"
    assert [m["index"] for m in store.manifest["merged_from"]] == [0, 1, 2]
    for k in range(3):
        np.testing.assert_array_equal(store.layer(k), whole.layer(k))
    assert store.tokens.equals(whole.tokens)
    store.verify()
    # shard stores are removed after the merge; only the merged store remains in the cache dir
    assert [p.name for p in (tmp_path / "ray").iterdir()] == [store.path.name]
    # a second call is a cache hit on the driver: no task runs, the encoder's model is never touched
    again = extract_ray(lambda: MetadataOnly(FakeEncoder(dim=8)), corpus_factory, 3, cache_dir=tmp_path / "ray", **kw)
    assert isinstance(again, Store) and again.path == store.path
