"""``[run] shards`` / ``probing run --shards`` parsing and checks, and the shard count a corpus is cut into
(no Ray needed: the Ray runs are in test_store_ray.py)."""

from __future__ import annotations

import numpy as np
import pytest

from probing._toml import ExperimentError
from probing.cli import main
from probing.experiment import parse_experiment, run_experiment
from probing.store import shard_range
from probing.store.distributed import shard_count

BASE = (
    '[[encoders]]\nkind = "glove"\n[[tasks]]\nname = "t"\nkind = "tagging"\nlabel = "upos"\n'
    'train = "demo-ud:train"\ntest = ["demo-ud:test"]\n'
)


def test_run_shards_key_is_parsed_and_checked():
    """``[run] shards`` is a positive integer kept on the experiment (and in its provenance dict); absent it is
    None (the runner then asks Ray for its CPU count); 0, a float or a string is an error naming run.shards."""
    assert parse_experiment(BASE).shards is None
    exp = parse_experiment('[run]\nbackend = "ray"\nshards = 3\n' + BASE)
    assert exp.shards == 3
    assert exp.to_dict()["run"] == {"backend": "ray", "address": "local", "shards": 3}
    for bad in ("0", "2.5", '"4"', "true"):
        with pytest.raises(ExperimentError, match=r"\[run\]\.shards: expected an integer >= 1"):
            parse_experiment(f"[run]\nshards = {bad}\n" + BASE)


def test_shards_without_ray_are_refused_before_any_work(tmp_path, capsys):
    """Shards only mean something on Ray: run_experiment(shards=2) on the local backend, or a bad count, is an
    error that says how to ask for Ray, raised before anything is extracted or written."""
    exp = parse_experiment(BASE.replace("[[encoders]]", f'[experiment]\ncache_dir = "{tmp_path / "c"}"\n[[encoders]]'))
    with pytest.raises(ExperimentError, match="shards needs the Ray backend"):
        run_experiment(exp, tmp_path / "out", progress=False, shards=2)
    with pytest.raises(ExperimentError, match="shards must be a positive integer, got 0"):
        run_experiment(exp, tmp_path / "out", progress=False, ray="local", shards=0)
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()
    (tmp_path / "exp.toml").write_text(BASE)
    assert main(["run", str(tmp_path / "exp.toml"), "--out", str(tmp_path / "out"), "--shards", "2"]) == 2
    assert "shards needs the Ray backend" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(tmp_path / "exp.toml"), "--out", str(tmp_path / "out"), "--ray", "--shards", "0"])
    assert "expected an integer >= 1 and <= 100000, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "lengths, asked, chunk_tokens, expected",
    [
        ([5] * 10, 4, 1, 4),  # enough balanced sentences (one per chunk): as asked
        ([5] * 3, 8, 1, 3),  # three sentences: at most three shards
        ([1, 10, 1], 3, 1, 2),  # 3 shards leave shard 1 empty (the long sentence starts in shard 0); 2 do not
        ([0, 0, 7, 0], 4, 1, 1),  # one non-empty sentence: one shard
        ([3, 0, 3], 2, 1, 2),  # an empty sentence does not count as a shard's token
        ([5] * 10, 4, 20, 3),  # chunks of 4, 4 and 2 sentences: shards never split one, so at most 3
        ([5] * 10, 4, 100, 1),  # the whole corpus is one chunk: one shard
    ],
)
def test_shard_count_gives_every_shard_a_token(lengths, asked, chunk_tokens, expected):
    """The largest count <= asked for which every shard_range shard (whole chunks) holds a token (worked out
    by hand above), checked against shard_range itself."""
    lengths = np.array(lengths)
    m = shard_count(lengths, asked, chunk_tokens)
    assert m == expected
    assert all(lengths[slice(*shard_range(lengths, i, m, chunk_tokens))].sum() > 0 for i in range(m))


def test_a_ray_worker_whose_wordnet_differs_from_the_drivers_refuses_the_job():
    """The job was keyed with the driver's inventory fingerprint: a worker that resolves another WordNet (a
    node with other NLTK data) must not run it, and the error says what to align."""
    from types import SimpleNamespace

    from probing.experiment.execute import _run_ray_job

    with pytest.raises(ExperimentError, match=r"task 'wsd': WordNet 'bundled' on this Ray worker .* \(NLTK_DATA\)"):
        _run_ray_job(None, SimpleNamespace(task="wsd"), (), "bundled", "0" * 64)
