"""Pretraining: it learns, it resumes exactly, and its export is what the engine loads."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from probing.cli import main as cli_main
from probing.elmo import Elmo
from probing.elmo.pretrain import PretrainConfig, Pretrainer

TINY = {
    "lstm": {
        "dim": 32,
        "projection_dim": 16,
        "n_layers": 2,
        "cell_clip": 3,
        "proj_clip": 3,
        "use_skip_connections": True,
    },
    "char_cnn": {
        "embedding": {"dim": 4},
        "filters": [[1, 8], [2, 8], [3, 16]],
        "n_highway": 1,
        "n_characters": 262,
        "max_characters_per_token": 50,
        "activation": "relu",
    },
}


def toy_language(n: int, seed: int) -> list[str]:
    """Sentences from a tiny grammar: determiners agree with nouns, verbs follow subjects.

    A biLM can learn this quickly; a unigram model cannot predict the next word from it.
    """
    rng = random.Random(seed)
    nouns = {"sg": ["cat", "dog", "bird", "child"], "pl": ["cats", "dogs", "birds", "children"]}
    verbs = {"sg": ["sees", "likes", "chases"], "pl": ["see", "like", "chase"]}
    out = []
    for _ in range(n):
        num = rng.choice(["sg", "pl"])
        det = "a" if num == "sg" else "some"
        obj_num = rng.choice(["sg", "pl"])
        obj_det = "a" if obj_num == "sg" else "some"
        out.append(f"{det} {rng.choice(nouns[num])} {rng.choice(verbs[num])} {obj_det} {rng.choice(nouns[obj_num])} .")
    return out


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, Path, Path]:
    (tmp_path / "train.txt").write_text("\n".join(toy_language(400, 0)) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(toy_language(60, 1)) + "\n")
    (tmp_path / "options.json").write_text(json.dumps(TINY))
    return tmp_path / "train.txt", tmp_path / "valid.txt", tmp_path / "options.json"


def config(corpus, **kw) -> PretrainConfig:
    train, valid, options = corpus
    base = dict(
        train=[str(train)],
        valid=str(valid),
        options=str(options),
        batch_tokens=256,
        vocab_size=100,
        min_count=1,
        cutoffs=[10],
        lr=1e-2,
        warmup_tokens=500,
        eval_every_tokens=10**9,
        threads=1,
        seed=0,
    )
    base.update(kw)
    return PretrainConfig(**base)


def test_training_lowers_held_out_perplexity(corpus, tmp_path):
    trainer = Pretrainer(config(corpus, max_tokens=30_000), tmp_path / "run", progress=False)
    before = trainer.evaluate()
    trainer.run()
    after = trainer.evaluate()
    # The toy vocabulary has 19 words + boundaries; untrained, perplexity is near that size. After
    # ~300 steps both LMs must have learned agreement and word order: at least a 3x drop each.
    assert before[0] > 12 and before[1] > 12
    assert after[0] < before[0] / 3 and after[1] < before[1] / 3
    log = (tmp_path / "run" / "log.csv").read_text().splitlines()
    assert log[0].startswith("tokens_seen,") and len(log) >= 2


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_resume_equals_uninterrupted_run(corpus, tmp_path, precision):
    full = Pretrainer(config(corpus, max_tokens=6_000, precision=precision), tmp_path / "full", progress=False)
    full.run()
    part = Pretrainer(config(corpus, max_tokens=6_000, precision=precision), tmp_path / "part", progress=False)
    part.run(max_steps=7)  # an interruption mid-epoch: checkpoint written on the way out
    assert 0 < part.tokens_seen < 6_000
    resumed = Pretrainer(config(corpus), tmp_path / "part", resume=True, progress=False)
    assert resumed.tokens_seen == part.tokens_seen and resumed.config.max_tokens == 6_000
    assert resumed.precision == precision
    resumed.run()
    assert resumed.tokens_seen == full.tokens_seen
    for (name, a), (_, b) in zip(full.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), name  # same data order, dropout masks and optimizer state: bit-exact


def test_bf16_training_tracks_fp32(corpus, tmp_path):
    """bf16 autocast changes the arithmetic, not the optimisation: on the same batches from the same
    initialisation, its first loss is the fp32 loss to bf16 accuracy (8-bit mantissa: a few 1e-3 relative
    per op; 2% allowed), and after 150 steps the held-out perplexities agree within 10%; the weights it
    trains, its loss and its export stay float32."""
    runs = {}
    for precision in ("fp32", "bf16"):
        trainer = Pretrainer(
            config(corpus, max_tokens=15_000, precision=precision), tmp_path / precision, progress=False
        )
        chars, targets = trainer.make_batch(range(16), trainer.train)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            first, f_nll, _ = trainer.model(chars, targets)
        assert first.dtype == f_nll.dtype == torch.float32
        trainer.run()
        runs[precision] = (float(first.detach()), trainer)
    (loss32, fp32), (loss16, bf16) = runs["fp32"], runs["bf16"]
    assert abs(loss16 - loss32) <= 0.02 * loss32
    assert not torch.equal(fp32.model.bilm.forward_lstm.weight[0], bf16.model.bilm.forward_lstm.weight[0])
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())
    for a, b in zip(fp32.evaluate(), bf16.evaluate()):
        assert np.isfinite(b) and abs(np.log(b) - np.log(a)) < 0.1
    assert fp32.evaluate()[0] < 6  # both learned the toy grammar (untrained: about 20)
    export = bf16.export(tmp_path / "export")
    info = json.loads((export / "training.json").read_text())
    assert info["precision"] == "bf16" and info["config"]["precision"] == "bf16"
    import h5py

    with h5py.File(export / "weights.hdf5", "r") as f:
        dtypes = set()
        f.visititems(lambda _n, d: dtypes.add(d.dtype) if isinstance(d, h5py.Dataset) else None)
    assert dtypes == {np.dtype("float32")}


def test_precision_auto_and_bad_value(corpus, tmp_path):
    from probing.elmo.pretrain import native_bf16

    trainer = Pretrainer(config(corpus, max_tokens=300, precision="auto"), tmp_path / "auto", progress=False)
    assert trainer.precision == ("bf16" if native_bf16() else "fp32")  # auto resolves by the probe, once
    trainer.run()
    assert torch.load(tmp_path / "auto" / "checkpoint.pt", weights_only=True)["precision"] == trainer.precision
    with pytest.raises(ValueError, match="precision: expected one of"):
        config(corpus, precision="fp16")


def test_existing_run_needs_resume(corpus, tmp_path):
    Pretrainer(config(corpus, max_tokens=300), tmp_path / "r", progress=False).run()
    with pytest.raises(FileExistsError, match="--resume"):
        Pretrainer(config(corpus), tmp_path / "r", progress=False)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        Pretrainer(config(corpus), tmp_path / "none", resume=True, progress=False)


def test_export_round_trip(corpus, tmp_path):
    trainer = Pretrainer(config(corpus, max_tokens=2_000), tmp_path / "run", progress=False)
    trainer.run()
    export = trainer.export(tmp_path / "export")
    loaded = Elmo.from_files(export / "options.json", export / "weights.hdf5")
    sents = [s.split() for s in toy_language(5, 7)] + [["unseen", "words", "too"]]
    expected = trainer.elmo().embed(sents)
    for got, exp in zip(loaded.embed(sents), expected):
        assert got.shape == (3, len(exp[0]), 32)
        assert np.abs(got - exp).max() <= 1e-5  # both directions, all layers
    # the forget-gate bias is stored without TensorFlow's run-time +1.0
    import h5py

    with h5py.File(export / "weights.hdf5", "r") as f:
        stored = f["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B"][...]
    live = trainer.model.bilm.forward_lstm.bias[0].detach().numpy()
    np.testing.assert_allclose(stored[64:96], live[64:96] - 1.0, atol=1e-6)
    np.testing.assert_allclose(stored[:64], live[:64], atol=0)
    info = json.loads((export / "training.json").read_text())
    assert info["tokens_seen"] == trainer.tokens_seen and info["fingerprint"] == loaded.fingerprint


def test_float16_export_records_the_fingerprint_of_what_is_stored(corpus, tmp_path):
    """float16 rounds the weights, so the stored model is not the trained one: training.json (and the model
    card made from it) must name the model that every later load sees."""
    trainer = Pretrainer(config(corpus, max_tokens=2_000), tmp_path / "run", progress=False)
    trainer.run()
    export = trainer.export(tmp_path / "export", dtype="float16")
    loaded = Elmo.from_files(export / "options.json", export / "weights.hdf5")
    info = json.loads((export / "training.json").read_text())
    assert info["fingerprint"] == loaded.fingerprint != trainer.elmo().fingerprint


def test_cli_pretrain_and_export(corpus, tmp_path, capsys):
    train, valid, options = corpus
    out = tmp_path / "cli"
    assert (
        cli_main(
            [
                "pretrain",
                "--train",
                str(train),
                "--valid",
                str(valid),
                "--options",
                str(options),
                "--out",
                str(out),
                "--max-tokens",
                "500",
                "--threads",
                "1",
                "--batch-tokens",
                "256",
            ]
        )
        == 0
    )
    assert (out / "export" / "weights.hdf5").exists() and (out / "checkpoint.pt").exists()
    assert cli_main(["pretrain", "--out", str(tmp_path / "missing"), "--resume"]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_resume_on_another_number_of_threads(corpus, tmp_path):
    """--resume keeps the checkpoint's thread count unless --threads is given (the machine changed): the run
    continues from its checkpoint, and the new count is recorded for the next resume."""
    train, valid, options = corpus
    out = str(tmp_path / "run")
    before = torch.get_num_threads()
    try:
        common = ["--batch-tokens", "256", "--out", out]
        args = ["pretrain", "--train", str(train), "--valid", str(valid), "--options", str(options), *common]
        assert cli_main([*args, "--max-tokens", "500", "--threads", "1"]) == 0
        first = json.loads((Path(out) / "export" / "training.json").read_text())
        assert cli_main(["pretrain", "--resume", *common, "--max-tokens", "1000"]) == 0
        kept = json.loads((Path(out) / "export" / "training.json").read_text())
        assert kept["threads"] == 1 and kept["tokens_seen"] > first["tokens_seen"] >= 500
        assert cli_main(["pretrain", "--resume", *common, "--max-tokens", "1500", "--threads", "2"]) == 0
        moved = json.loads((Path(out) / "export" / "training.json").read_text())
        assert moved["threads"] == 2 and moved["tokens_seen"] > kept["tokens_seen"]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
