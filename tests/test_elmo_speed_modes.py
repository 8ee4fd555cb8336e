"""The fast inference path (no autograd) against the plain autograd path, and the precision modes.

The autograd path is the straightforward implementation (convolutions, padded per-step loop with
masks) that tests/test_elmo.py ties to the TensorFlow/AllenNLP activations; the inference path
(windowed-GEMM char CNN, packed biLSTM, directions in parallel, oneDNN route, bf16) must agree with it.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from probing.elmo import Elmo, ElmoOptions
from probing.elmo import model as model_mod
from probing.elmo.chars import batch_char_ids, token_char_ids

FIX = Path(__file__).parent / "fixtures" / "elmo_allennlp"
OPTIONS, WEIGHTS = FIX / "options.json", FIX / "lm_weights.hdf5"
TOL = 1e-5  # the conformance bound of tests/test_elmo.py

# the original filter bank (widths 1..7) at reduced counts, with a small LSTM
WIDE = ElmoOptions.from_dict(
    {
        "lstm": {
            "dim": 48,
            "projection_dim": 12,
            "n_layers": 2,
            "cell_clip": 3,
            "proj_clip": 3,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": 16},
            "filters": [[1, 8], [2, 8], [3, 16], [4, 16], [5, 16], [6, 32], [7, 64]],
            "n_highway": 2,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "relu",
        },
    }
)

# every length regime of the windowed char CNN: short, boundaries, tokens whose last windows no longer
# fit every filter (45..48 bytes), cut tokens, multi-byte characters; more than one chunk of 64 tokens
# so that chunks of short tokens stop early and take the padding-window response
TOKENS = [
    "a",
    "I",
    "<S>",
    "</S>",
    "the",
    "cat's",
    "naïve",
    "東京",
    "🙂",
    "x" * 44,
    "y" * 45,
    "z" * 46,
    "w" * 47,
    "v" * 48,
    "u" * 60,
    "é" * 30,
    "well-known",
    "3.14",
] + [f"t{i}" for i in range(150)]


def lines() -> list[list[str]]:
    return [line.split() for line in (FIX / "input.txt").read_text(encoding="utf-8").splitlines()]


def test_windowed_char_cnn_matches_convolutions():
    cnn = Elmo.random(WIDE, seed=3).bilm.char_cnn
    ids = torch.from_numpy(np.stack([token_char_ids(t) for t in TOKENS] + [np.zeros(50, np.int64)]))
    with torch.enable_grad():
        reference = cnn(ids).detach()
    with torch.no_grad():
        fast = cnn(ids)
    assert fast.shape == reference.shape == (len(TOKENS) + 1, 12)
    assert (fast - reference).abs().max() <= TOL  # same sums in another order: float32 rounding only


@pytest.mark.parametrize("options", [OPTIONS, WIDE], ids=["fixture", "wide-filters"])
def test_packed_inference_matches_autograd_path_with_carried_state(options):
    """Unsorted rows of very different lengths (plus an empty-looking short row), two batches with the
    state carried between them, compared output by output and state by state."""
    bilm = Elmo.random(options, seed=5).bilm
    batches = [
        [["word"] * 7, ["a"], ["The", "cat", "sat", "."] * 3, ["x"]],
        [["b"] * 3, ["long"] * 11, ["c"], ["d"] * 2],
    ]
    results = []
    for grad in (True, False):
        state, outs = None, []
        for batch in batches:
            ids = torch.from_numpy(batch_char_ids(batch))
            with torch.set_grad_enabled(grad):
                tokens, fw, bw, mask, state = bilm(ids, state)
            outs.append([tokens.detach()] + [o.detach() for o in fw + bw] + [mask])
            state = tuple([(h.detach(), c.detach()) for h, c in d] for d in state)
        results.append((outs, state))
    (ref_outs, ref_state), (fast_outs, fast_state) = results
    for ref, fast in zip(ref_outs, fast_outs):
        for r, f in zip(ref, fast):
            assert r.shape == f.shape
            assert (r.float() - f.float()).abs().max() <= TOL
    for ref_dir, fast_dir in zip(ref_state, fast_state):
        for (rh, rc), (fh, fc) in zip(ref_dir, fast_dir):
            assert (rh - fh).abs().max() <= TOL and (rc - fc).abs().max() <= TOL


def test_parallel_and_sequential_directions_agree():
    """With more than one thread the two directions run on two threads; the numbers must not move."""
    model = Elmo.from_files(OPTIONS, WEIGHTS)
    sents = lines()[:9]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        sequential = model.embed(sents, batch_size=4)
        torch.set_num_threads(2)
        parallel = model.embed(sents, batch_size=4)
    finally:
        torch.set_num_threads(before)
    for a, b in zip(sequential, parallel):
        assert np.abs(a - b).max() <= 1e-6


def test_bf16_mode_is_close_and_recorded_in_fingerprint():
    fp32 = Elmo.from_files(OPTIONS, WEIGHTS)
    bf16 = Elmo.from_files(OPTIONS, WEIGHTS, precision="bf16")
    assert bf16.precision == "bf16" and fp32.precision == "fp32"
    assert bf16.fingerprint != fp32.fingerprint
    sents = lines()
    with h5py.File(FIX / "expected_all_layers_stateless.hdf5", "r") as f:
        diffs = np.array(
            [np.abs(out - f[str(i)][...]).max(axis=(1, 2)) for i, out in enumerate(bf16.embed(sents, batch_size=8))]
        ).max(axis=0)
    assert diffs[0] <= TOL  # the token layer (char CNN) stays float32
    # bfloat16 keeps 8 bits of mantissa (relative error 2^-9 per operand): measured 1.3e-2 here on
    # activations up to ~3; the biLSTM layers must be clearly approximate (so bf16 really ran) yet close
    assert all(1e-4 < d < 0.05 for d in diffs[1:]), diffs
    bf16.to_precision("fp32")
    assert bf16.fingerprint == fp32.fingerprint  # back to fp32: the same model as before
    for a, b in zip(bf16.embed(sents[:5]), fp32.embed(sents[:5])):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16, got 'fp16'"):
        Elmo.from_files(OPTIONS, WEIGHTS, precision="fp16")


def test_bf16_weight_copies_follow_in_place_changes():
    """The bf16 copies are cached; changing a weight in place must not leave a stale copy in use."""
    model = Elmo.from_files(OPTIONS, WEIGHTS, precision="bf16")
    sents = lines()[:3]
    before = model.embed(sents)
    with torch.no_grad():
        model.bilm.forward_lstm.proj[1].mul_(0.5)
        model.bilm.backward_lstm.weight[0].mul_(0.5)
    after = model.embed(sents)
    fresh = Elmo.from_files(OPTIONS, WEIGHTS, precision="bf16")
    with torch.no_grad():
        fresh.bilm.forward_lstm.proj[1].mul_(0.5)
        fresh.bilm.backward_lstm.weight[0].mul_(0.5)
    for a, b, old in zip(after, fresh.embed(sents), before):
        assert np.array_equal(a, b) and not np.array_equal(a, old)


def test_onednn_route_is_refused_with_amx_or_when_disabled(monkeypatch):
    detect = model_mod.onednn_fp32_is_exact
    try:
        detect.cache_clear()
        monkeypatch.setattr(model_mod, "cpu_flags", lambda: {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
        assert detect() is False  # on AMX the switch computes in bfloat16
        detect.cache_clear()
        monkeypatch.setattr(model_mod, "cpu_flags", lambda: set())
        assert detect() is False  # unknown CPU: stay on the default path
        detect.cache_clear()
        monkeypatch.undo()
        monkeypatch.setenv("PROBING_ONEDNN_FP32", "0")
        assert detect() is False
    finally:
        detect.cache_clear()


def test_fast_fp32_route_keeps_float32_accuracy_and_restores_the_setting():
    before = torch.backends.mkldnn.matmul.fp32_precision
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(64, 512, generator=gen), torch.randn(512, 300, generator=gen)
    with model_mod.fast_fp32_matmuls():
        got = (a @ b).double()
    assert torch.backends.mkldnn.matmul.fp32_precision == before
    exact = a.double() @ b.double()
    # float32 with 512 terms of size ~1: errors of a few 1e-6; bfloat16 operands would give ~1e-1
    assert (got - exact).abs().max() < 1e-4
