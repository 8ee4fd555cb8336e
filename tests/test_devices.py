"""Devices (issue 19, item 3): names are checked, absent hardware is a clear error, ``device="cpu"`` is the
default on a CPU machine and gives exactly the default's results, and fingerprints never depend on it.

Where a CUDA or MPS device is present, the last test compares it with the CPU within DESIGN.md's tolerance.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from probing import devices
from probing.devices import DeviceError, resolve_device, use_device
from probing.elmo import Elmo
from probing.encoders import ElmoEncoder, RandomElmoEncoder
from probing.probes.linear import LinearProbe, LinearProbeCV
from probing.probes.mix import ScalarMixProbe
from probing.probes.structural import DistanceProbe

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "elmo_allennlp"
SENTENCES = [["The", "king", "met", "the", "queen", "."], ["Hi"], ["Play", "it", "again", ",", "Sam"]]
OTHER = [
    d for d in ("cuda", "mps") if (torch.cuda.is_available() if d == "cuda" else torch.backends.mps.is_available())
]


def test_names_are_checked_and_the_default_is_cuda_when_present_else_cpu():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device(None) == resolve_device("auto") == ("cuda:0" if torch.cuda.is_available() else "cpu")
    for bad in ("gpu", "CPU", "cuda:", "cuda:x", "cuda0", "", "tpu"):
        with pytest.raises(DeviceError, match=f"got {bad!r}"):
            resolve_device(bad)


def test_absent_hardware_is_an_error_naming_the_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="'cuda' was requested, but torch finds no CUDA device"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda") == "cuda:0" and resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(DeviceError, match="'cuda:2' was requested, but this machine has 2 CUDA device"):
        resolve_device("cuda:2")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="'mps' was requested, but torch finds no MPS"):
        resolve_device("mps")


def test_use_device_sets_the_default_for_the_block_and_restores_it():
    with use_device("cpu"):
        assert resolve_device() == "cpu"
        with use_device(None):
            assert resolve_device() == resolve_device("auto")
        assert resolve_device() == "cpu"
    assert devices._default == [None]
    with pytest.raises(DeviceError, match="'gpu'"):
        with use_device("gpu"):
            pass


def test_elmo_on_explicit_cpu_equals_the_default_and_fingerprints_ignore_the_device():
    """On a CPU machine the default is the CPU: the same arrays bit for bit. The encoder fingerprint (store
    key) is the same for every device, and the built model reports where it runs."""
    default = ElmoEncoder(FIX / "options.json", FIX / "lm_weights.hdf5")
    cpu = ElmoEncoder(FIX / "options.json", FIX / "lm_weights.hdf5", device="cpu")
    cuda = ElmoEncoder(FIX / "options.json", FIX / "lm_weights.hdf5", device="cuda")  # never built here
    assert default.fingerprint == cpu.fingerprint == cuda.fingerprint
    rand = RandomElmoEncoder(FIX / "options.json", device="cpu")
    assert rand.fingerprint == RandomElmoEncoder(FIX / "options.json").fingerprint
    assert cpu.device_used is None, "nothing is built before the first encode"
    got, want = cpu.encode(SENTENCES), default.encode(SENTENCES)
    assert cpu.device_used == "cpu"
    if not torch.cuda.is_available():
        assert default.device_used == "cpu"
        for a, b in zip(got, want):
            assert a.dtype == np.float32 and np.array_equal(a, b)
    with pytest.raises(DeviceError, match="got 'gpu'"):
        ElmoEncoder(FIX / "options.json", FIX / "lm_weights.hdf5", device="gpu")


def _tagging_data(seed: int = 0, n: int = 300, d: int = 12, k: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.argmax(X[:, :k] + 0.5 * rng.normal(size=(n, k)), axis=1)
    return X, y


def test_probes_on_explicit_cpu_equal_the_default_on_a_cpu_machine():
    if torch.cuda.is_available():
        pytest.skip("the default is CUDA here; the cross-device test covers it")
    X, y = _tagging_data()
    a, b = LinearProbe(C=0.5).fit(X, y), LinearProbe(C=0.5, device="cpu").fit(X, y)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    sa = LinearProbeCV(Cs=(0.01, 1.0)).fit(X[:200], y[:200], X[200:], y[200:])
    sb = LinearProbeCV(Cs=(0.01, 1.0), device="cpu").fit(X[:200], y[:200], X[200:], y[200:])
    assert sa.l2_path_ == sb.l2_path_ and np.array_equal(sa.coef_, sb.coef_)
    layers = np.stack([X, X[:, ::-1].copy()], axis=1)  # (n, 2 layers, d)
    ma, mb = ScalarMixProbe(C=0.5).fit(layers, y), ScalarMixProbe(C=0.5, device="cpu").fit(layers, y)
    assert np.array_equal(ma.mix_weights_, mb.mix_weights_) and np.array_equal(ma.coef_, mb.coef_)
    rng = np.random.default_rng(1)
    sents = [rng.normal(size=(n, 6)).astype(np.float32) for n in (3, 4, 5, 3, 6, 4)]
    trees = [np.array([0] + list(range(1, len(s)))) for s in sents]  # a chain: word i+1 heads on word i
    da = DistanceProbe(rank=3, max_epochs=3).fit(sents, trees)
    db = DistanceProbe(rank=3, max_epochs=3, device="cpu").fit(sents, trees)
    assert np.array_equal(da.B_, db.B_)
    with pytest.raises(DeviceError, match="got 'gpu'"):
        LinearProbe(device="gpu").fit(X, y)


def test_cli_refuses_a_misspelt_device_and_names_an_absent_one(tmp_path):
    env_cmd = [sys.executable, "-m", "probing.cli", "extract", "--model", "default", "--corpus", "demo-ud"]
    env_cmd += ["--split", "dev", "--max-sentences", "2", "--cache", str(tmp_path), "-q"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    bad = subprocess.run([*env_cmd, "--device", "gpu"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "argument --device: device must be one of cpu, cuda" in bad.stderr
    if torch.cuda.is_available():
        return
    absent = subprocess.run([*env_cmd, "--device", "cuda"], capture_output=True, text=True, env=env)
    assert absent.returncode == 2
    assert "error: device 'cuda' was requested, but torch finds no CUDA device" in absent.stderr


@pytest.mark.parametrize("device", OTHER or [pytest.param("cuda", marks=pytest.mark.skip(reason="no GPU"))])
def test_a_gpu_agrees_with_the_cpu_within_tolerance(device):
    """fp32 ELMo on a GPU matches the CPU to 1e-4 relative (reduction order differs); a probe's accuracy
    to 0.1 points."""
    cpu = Elmo.from_files(FIX / "options.json", FIX / "lm_weights.hdf5")
    gpu = Elmo.from_files(FIX / "options.json", FIX / "lm_weights.hdf5").to_device(device)
    assert gpu.fingerprint == cpu.fingerprint
    for a, b in zip(cpu.embed(SENTENCES), gpu.embed(SENTENCES)):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4 * np.abs(a).max())
    X, y = _tagging_data(n=2000)
    acc_cpu = LinearProbe(C=0.5, device="cpu").fit(X[:1500], y[:1500]).score(X[1500:], y[1500:])
    acc_gpu = LinearProbe(C=0.5, device=device).fit(X[:1500], y[:1500]).score(X[1500:], y[1500:])
    assert abs(acc_cpu - acc_gpu) <= 0.001
