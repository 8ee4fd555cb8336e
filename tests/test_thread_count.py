"""The same numbers at 1 and 2 threads, on the code paths of an AVX2-only CPU as well.

MKL's float32 GEMMs may split their work by thread count on some code paths (its AVX2 kernels among them),
so an ELMo store extracted at 1 and at 2 threads differed in 0.04 % of its values on such a CPU, and a
probe fit on the same store at 1 and 2 threads gave other weights (issue 43: a row of the quick default run
moved by 0.07 points). ``import probing`` sets MKL's strict conditional numerical reproducibility
(``MKL_CBWR=AUTO,STRICT``) before the first GEMM. These tests run the extraction and a probe fit in fresh
processes at 1 and 2 threads, once on this CPU's own code paths and once restricted to AVX2 (torch's
kernels, MKL's and oneDNN's, by their documented environment variables), and compare the bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}

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


def _run(tmp: Path, threads: int, extra: dict[str, str]) -> dict[str, np.ndarray]:
    """Extract and fit in a fresh process with ``threads`` threads; the arrays it saved."""
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}  # what a user's fresh shell has
    env.update(extra, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    tmp.mkdir()
    subprocess.run([sys.executable, "-c", SCRIPT, str(tmp)], env=env, check=True, timeout=600)
    with np.load(tmp / "out.npz", allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.slow  # four fresh processes, each loading the bundled model (about 10 s each)
@pytest.mark.filterwarnings("ignore:.*max_iter")
@pytest.mark.parametrize("paths", ["native", "avx2"])
def test_a_store_and_a_probe_fit_are_the_same_bytes_at_1_and_2_threads(tmp_path, paths):
    """Every layer of the store and the fitted probe's weights: equal bit for bit. Without strict
    reproducibility (``MKL_CBWR`` unset, as before) the probe's weights differ at 1 and 2 threads on the
    AVX2 paths, in the 7th significant digit; the L-BFGS path would carry that further on a longer fit."""
    extra = AVX2 if paths == "avx2" else {}
    one, two = _run(tmp_path / "one", 1, extra), _run(tmp_path / "two", 2, extra)
    assert sorted(one) == sorted(two)
    for name in one:
        assert np.array_equal(one[name], two[name]), f"{name} differs between 1 and 2 threads ({paths})"
