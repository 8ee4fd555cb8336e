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
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
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


@pytest.mark.slow  # a real local Ray (2 CPUs); a worker dies and is replaced
def test_a_shard_task_whose_worker_dies_is_retried(tmp_path, local_ray):
    """The first shard task to encode a batch kills its worker process (as an out-of-memory kill or a lost
    node would); Ray runs the task again (max_retries) and the merged store still equals a single-process
    extraction exactly (FakeEncoder's outputs do not depend on the batch)."""
    import os

    marker = tmp_path / "died"

    class DiesOnce(FakeEncoder):
        def encode(self, sentences):
            if not marker.exists():
                marker.touch()
                os._exit(1)
            return super().encode(sentences)

    kw = dict(chunk_tokens=30, batch_tokens=16, progress=False)
    corpus_factory = functools.partial(make_corpus, 24, seed=5)
    store = extract_ray(functools.partial(DiesOnce, dim=8), corpus_factory, 2, cache_dir=tmp_path / "ray", **kw)
    assert marker.exists(), "a worker must have died"
    whole = extract(FakeEncoder(dim=8), make_corpus(24, seed=5), cache_dir=tmp_path / "single", **kw)
    assert store.path.name == whole.path.name
    for k in range(3):
        np.testing.assert_array_equal(store.layer(k), whole.layer(k))
    store.verify()


@pytest.mark.slow  # a real local Ray (2 CPUs) encoding with the bundled model
def test_probing_extract_ray_shards_give_the_single_process_store(tmp_path, local_ray, capsys):
    """``probing extract --ray --shards 2`` (the bundled model, demo-ud dev, first 30 sentences, chunks of 200
    tokens): the key of a single-process extraction, the same token table, and the same values bit for bit.
    Shards are whole chunks of the single-process plan, so each shard encodes the very batches the single
    process encodes; cutting anywhere else changes the GEMM shapes of the recurrence, and with them the
    rounding (on an AVX2-only CPU by more than one fp16 step in layers 1 and 2)."""
    from probing.cli import main
    from probing.experiment import extract_activations

    args = ["extract", "--model", "default", "--corpus", "demo-ud", "--split", "dev", "--max-sentences", "30"]
    ray_args = ["--cache", str(tmp_path / "ray"), "--device", "cpu", "--ray", "--shards", "2", "--chunk-tokens", "200"]
    assert main([*args, *ray_args, "-q"]) == 0
    printed = capsys.readouterr().out
    whole = extract_activations(
        "default",
        "demo-ud",
        "dev",
        max_sentences=30,
        cache_dir=tmp_path / "one",
        device="cpu",
        progress=False,
        chunk_tokens=200,
    )
    assert f"store: {tmp_path / 'ray' / whole.path.name}" in printed
    sharded = Store.open(tmp_path / "ray" / whole.path.name)
    assert [m["index"] for m in sharded.manifest["merged_from"]] == [0, 1]
    assert sharded.tokens.equals(whole.tokens)
    for k in range(len(whole.layer_names)):
        assert np.array_equal(whole.layer(k), sharded.layer(k)), f"layer {k} differs"


RUN_TOML = """
[experiment]
name = "ray-vs-local"
seeds = [0]
bootstrap = 50
max_sentences = 40

[probe]
C = [1.0]
max_iter = 30
mix_max_iter = 30

[[encoders]]
name = "elmo"
kind = "elmo"
options = "elmo_allennlp/options.json"
weights = "elmo_allennlp/lm_weights.hdf5"

[[encoders]]
name = "glove"
kind = "glove"
vectors = "glove/tiny.glove.txt"

[[tasks]]
name = "upos"
kind = "tagging"
label = "upos"
train = "demo-ud:train"
dev = "demo-ud:dev"
test = ["demo-ud:test"]
"""


@pytest.mark.slow  # a real local Ray (2 CPUs) running two probe jobs
@pytest.mark.filterwarnings("ignore:.*stopped at max_iter")  # max_iter = 30 keeps it short; both runs alike
def test_probe_jobs_on_ray_give_the_rows_of_the_local_run(tmp_path, local_ray):
    """``run_experiment(..., ray="local")`` (``probing run --ray``) runs each uncached job as a Ray task: on the
    same stores (the Ray run's, read again by a local run after its job cache is removed) the same code and
    seeds give the results, mix weights and per-tag tables of the local run exactly; a second Ray run is
    served from the job cache without any task."""
    import shutil
    from pathlib import Path

    import pandas as pd

    from probing.experiment import parse_experiment, run_experiment
    from probing.experiment.jobs import JOBS_DIR

    fix = Path(__file__).parent / "fixtures"
    text = RUN_TOML.replace("[experiment]", f'[experiment]\ncache_dir = "{tmp_path / "cache"}"')
    exp = parse_experiment(text, base=str(fix))
    remote = run_experiment(exp, tmp_path / "out-ray", progress=False, ray="local")
    assert remote.provenance["cached_jobs"] == []
    shutil.rmtree(tmp_path / "cache" / JOBS_DIR)
    local = run_experiment(exp, tmp_path / "out-local", progress=False)
    assert local.provenance["cached_jobs"] == []
    assert all(info["cache_hit"] for info in local.provenance["stores"].values()), "the same stores"
    assert len(local.results) > 10 and set(local.results.encoder) >= {"elmo", "glove"}
    pd.testing.assert_frame_equal(remote.results, local.results, check_exact=True)
    pd.testing.assert_frame_equal(remote.mix_weights, local.mix_weights, check_exact=True)
    pd.testing.assert_frame_equal(remote.per_tag, local.per_tag, check_exact=True)
    again = run_experiment(exp, tmp_path / "again", progress=False, ray="local")
    assert sorted(again.provenance["cached_jobs"]) == ["upos/elmo", "upos/glove"]


@pytest.mark.slow  # a real local Ray (2 CPUs): 12 shard tasks and two probe jobs, ~15 s
@pytest.mark.filterwarnings("ignore:.*stopped at max_iter")  # max_iter = 30 keeps it short; both runs alike
def test_run_on_ray_extracts_its_stores_in_shard_tasks(tmp_path, local_ray):
    """``[run] backend = "ray"``, ``shards = 2``, ``chunk_tokens = 200``: each of the 6 stores (2 encoders x
    demo-ud train/dev/test, 40 sentences) is written by 2 Ray shard tasks and merged on the driver (its
    manifest lists shards 0 and 1), under the key of the local run's store (same ``chunk_tokens``) and equal to
    it bit for bit: shards are whole chunks, so they encode the very batches the local run encodes (DESIGN.md).
    The results rows then agree exactly. A second run extracts nothing and runs no job."""
    from pathlib import Path

    import pandas as pd

    from probing.experiment import parse_experiment, run_experiment

    fix = Path(__file__).parent / "fixtures"

    def experiment(name: str, head: str = ""):
        text = head + RUN_TOML.replace("[experiment]", f'[experiment]\ncache_dir = "{tmp_path / name}"')
        return parse_experiment(text, base=str(fix))

    on_ray = '[run]\nbackend = "ray"\nshards = 2\nchunk_tokens = 200\n'
    local = run_experiment(experiment("local", "[run]\nchunk_tokens = 200\n"), tmp_path / "out-local", progress=False)
    remote = run_experiment(experiment("ray", on_ray), tmp_path / "out-ray", progress=False)

    assert len(remote.provenance["stores"]) == 6
    for name, info in remote.provenance["stores"].items():
        assert (info["cache_hit"], info["ray_shards"]) == (False, 2), name
    for key, store in local.stores.items():
        sharded = remote.stores[key]
        assert sharded.path.name == store.path.name, "the merged store must carry the unsharded key"
        assert [m["index"] for m in sharded.manifest["merged_from"]] == [0, 1]
        assert sharded.tokens.equals(store.tokens)
        for k in range(len(store.layer_names)):
            assert np.array_equal(store.layer(k), sharded.layer(k)), f"{key} layer {k}"
    # the shard stores were removed after their merge: the cache holds the 6 merged stores only
    held = {p.name for p in (tmp_path / "ray").iterdir() if (p / "manifest.json").is_file()}
    assert held == {s.path.name for s in remote.stores.values()}

    assert set(local.results.encoder) >= {"elmo", "glove"}
    pd.testing.assert_frame_equal(remote.results, local.results, check_exact=True)

    again = run_experiment(experiment("ray", on_ray), tmp_path / "again", progress=False)
    assert all(info["cache_hit"] and info["ray_shards"] == 0 for info in again.provenance["stores"].values())
    assert sorted(again.provenance["cached_jobs"]) == ["upos/elmo", "upos/glove"]
    pd.testing.assert_frame_equal(again.results, remote.results, check_exact=True)


WSD_TOML = """
[experiment]
name = "wsd-on-ray"
seeds = [0]
bootstrap = 50
max_sentences = 40

[run]
chunk_tokens = 200  # several chunks of the 40 sentences, so that each store can be cut into 2 shards

[[encoders]]
name = "glove"
kind = "glove"
vectors = "glove/tiny.glove.txt"

[[tasks]]
name = "wsd"
kind = "wsd-1nn"
train = "demo-semcor:train"
test = ["demo-semcor:test"]
wordnet = "bundled"
"""


@pytest.mark.slow  # a real local Ray (2 CPUs): 4 shard tasks and one WSD job
def test_a_wsd_job_on_ray_reads_the_workers_own_wordnet(tmp_path, local_ray, monkeypatch):
    """A job's sense inventory never travels to Ray (NLTK's WordNet reader holds locks that cannot be pickled;
    here the bundled inventory is made unpicklable on the driver to stand for it): the worker resolves the
    same inventory (same fingerprint) and the WSD rows equal a local run's on the same stores exactly."""
    import shutil
    from pathlib import Path

    import pandas as pd

    from probing.experiment import parse_experiment, run_experiment
    from probing.experiment.jobs import JOBS_DIR
    from probing.wordnet import BundledInventory

    def no_pickling(self):
        raise TypeError("cannot pickle a sense inventory (as NLTK's _thread.RLock)")

    monkeypatch.setattr(BundledInventory, "__reduce__", no_pickling, raising=False)
    fix = Path(__file__).parent / "fixtures"
    text = WSD_TOML.replace("[experiment]", f'[experiment]\ncache_dir = "{tmp_path / "cache"}"')
    exp = parse_experiment(text, base=str(fix))
    remote = run_experiment(exp, tmp_path / "out-ray", progress=False, ray="local", shards=2)
    assert [info["ray_shards"] for info in remote.provenance["stores"].values()] == [2, 2]
    shutil.rmtree(tmp_path / "cache" / JOBS_DIR)
    local = run_experiment(exp, tmp_path / "out-local", progress=False)
    # glove's F1 and the two WordNet baselines (which read the inventory too)
    assert set(zip(local.results.encoder, local.results.layer, local.results.metric)) == {
        ("glove", "glove", "f1"),
        ("baseline", "wn-first-sense", "f1"),
        ("baseline", "semcor-mfs", "f1"),
    }
    pd.testing.assert_frame_equal(remote.results, local.results, check_exact=True)
