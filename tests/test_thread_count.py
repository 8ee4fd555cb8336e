"""The same numbers at 1 and 2 threads, in fresh processes: an ELMo store and a probe fit on it.

A run's thread count is fixed when its process starts (``OMP_NUM_THREADS``); the in-process tests
(tests/test_probes_linear.py, tests/test_probes_scale.py) switch ``torch.set_num_threads`` inside one process,
which does not cover what a library decides at start-up. This test runs the extraction and a probe fit in
fresh processes at 1 and 2 threads on this CPU's own code paths and compares the bytes.

Not covered, and stated in DESIGN.md and the guide: with oneDNN's AVX2 kernels (an AVX2-only CPU, or
``ONEDNN_MAX_CPU_ISA=AVX2`` here) float32 GEMMs of 5 to 11 rows, which the biLSTM's last steps multiply,
round differently at 1 and 2 threads, so a store's layers 1 and 2 differ in their last bits
(``benchmarks/bench_thread_count.py --paths avx2`` shows the quick run's ``upos`` mix row move by 0.07 points).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = """
import sys
import numpy as np
from probing.experiment import extract_activations
from probing.probes import LinearProbeCV

out = sys.argv[1]
store = extract_activations(
    "default", "demo-ud", "dev", max_sentences=30, cache_dir=out + "/cache", device="cpu", progress=False,
    chunk_tokens=200,
)
layers = [np.asarray(store.layer(k)) for k in range(len(store.layer_names))]
y = store.tokens["upos"].to_numpy()
probe = LinearProbeCV(Cs=[0.1, 1.0], max_iter=30, tol=1e-6).fit(layers[1][:300], y[:300])
np.savez(out + "/out.npz", *layers, coef=probe.coef_)
"""


def _run(tmp: Path, threads: int) -> dict[str, np.ndarray]:
    """Extract and fit in a fresh process with ``threads`` threads; the arrays it saved."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    tmp.mkdir()
    subprocess.run([sys.executable, "-c", SCRIPT, str(tmp)], env=env, check=True, timeout=600)
    with np.load(tmp / "out.npz", allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.slow  # two fresh processes, each loading the bundled model (about 5 s each)
@pytest.mark.filterwarnings("ignore:.*max_iter")
def test_a_store_and_a_probe_fit_are_the_same_bytes_at_1_and_2_threads(tmp_path):
    """Every layer of the store (30 sentences in chunks of 200 tokens) and the fitted probe's weights: equal
    bit for bit at 1 and 2 threads."""
    one, two = _run(tmp_path / "one", 1), _run(tmp_path / "two", 2)
    assert sorted(one) == ["arr_0", "arr_1", "arr_2", "coef"]
    for name in one:
        assert np.array_equal(one[name], two[name]), f"{name} differs between 1 and 2 threads"
