#!/usr/bin/env bash
# GPU check of issue 19 item 3, under 8 minutes on one GPU; prints one table.
#
#   bash benchmarks/device_check.sh            # default device: cuda
#   DEVICE=cuda:1 bash benchmarks/device_check.sh
#   DEVICE=cpu QUICK=1 bash benchmarks/device_check.sh   # a small smoke run of the script itself, anywhere
#
# 1. fixture conformance: tests/test_elmo.py and tests/test_devices.py with the models on $DEVICE
#    (the AllenNLP/TensorFlow activations to 1e-5; the GPU against the CPU within the documented tolerance);
# 2. ELMo inference throughput on the original architecture (4096-cell LSTMs, random weights), fp32 and bf16,
#    batches of 64 and 256 sentences of UD-like lengths, on $DEVICE (and the CPU at batch 64 for scale);
# 3. a linear probe fit (L-BFGS, 200k x 1024 fp32 design, 17 classes) on $DEVICE and on the CPU, with the
#    accuracy difference (expected <= 0.1 points).
set -euo pipefail
cd "$(dirname "$0")/.."
DEVICE="${DEVICE:-cuda}"
PY="${PYTHON:-python}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

t0=$(date +%s)
if [[ "${QUICK:-0}" == 1 ]]; then
  conformance="skipped (QUICK=1)"
elif PROBING_TEST_DEVICE="$DEVICE" timeout 240 "$PY" -m pytest -q -p no:cacheprovider tests/test_elmo.py tests/test_devices.py \
    >"$OUT/pytest.txt" 2>&1; then
  conformance="passed"
else
  conformance="FAILED (see below)"
fi
[[ -f "$OUT/pytest.txt" ]] && conformance="$conformance: $(tail -1 "$OUT/pytest.txt")"

DEVICE="$DEVICE" OUT="$OUT" CONFORMANCE="$conformance" T0="$t0" timeout 300 "$PY" - <<'EOF'
import os
import time

import numpy as np
import torch

from probing.devices import describe, resolve_device
from probing.elmo import Elmo, ElmoOptions
from probing.probes.linear import LinearProbe

device = resolve_device(os.environ["DEVICE"])
quick = os.environ.get("QUICK") == "1"
rows = []


def sync():
    if device.startswith("cuda"):
        torch.cuda.synchronize()


opts = ElmoOptions.from_dict(
    {
        "lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
                 "use_skip_connections": True},
        "char_cnn": {
            "embedding": {"dim": 16},
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": 2, "n_characters": 262, "max_characters_per_token": 50, "activation": "relu",
        },
    }
)
rng = np.random.default_rng(0)
words = ["the", "cat", "sat", "on", "a", "mat", "yesterday", "while", "probing", "representations", ".", ","]
lengths = np.clip(rng.gamma(2.0, 8.0, size=32 if quick else 1024).astype(int) + 1, 1, 80)  # mean ~17 words, like UD EWT
sentences = [[words[i] for i in rng.integers(0, len(words), n)] for n in lengths]
n_tokens = int(lengths.sum())
ref = None
for dev, precision, batch in [
    (device, "fp32", 64), (device, "fp32", 256), (device, "bf16", 64), (device, "bf16", 256), ("cpu", "fp32", 64)
]:
    model = Elmo.random(opts, seed=0, precision=precision).to_device(dev)
    subset = sentences if dev != "cpu" else sentences[: 8 if quick else 128]
    model.embed(subset[:batch], batch_size=batch)  # warm-up (kernels, casts)
    if dev != "cpu":
        sync()
    t = time.perf_counter()
    out = model.embed(subset, batch_size=batch)
    if dev != "cpu":
        sync()
    dt = time.perf_counter() - t
    toks = int(sum(len(s) for s in subset))
    if dev == device and precision == "fp32" and batch == 64:
        ref = out
    diff = "" if ref is None else f"max |diff| vs {device} fp32: {max(float(np.abs(a - b).max()) for a, b in zip(out, ref[: len(out)])):.2e}"
    rows.append((f"ELMo original arch, {precision}, batch {batch}", describe(dev), f"{toks / dt:,.0f} tokens/s", diff))
    del model

n, d, k = (5_000, 64, 17) if quick else (200_000, 1024, 17)
W = rng.normal(size=(d, k)).astype(np.float32)
X = rng.normal(size=(n, d)).astype(np.float32)
y = np.argmax(X @ W + 4.0 * rng.normal(size=(n, k)).astype(np.float32), axis=1)
Xt, yt = rng.normal(size=(20_000, d)).astype(np.float32), None
yt = np.argmax(Xt @ W + 4.0 * rng.normal(size=(20_000, k)).astype(np.float32), axis=1)
accs = {}
for dev in (device, "cpu"):
    t = time.perf_counter()
    probe = LinearProbe(C=1.0, max_iter=100, device=dev).fit(X, y)
    sync()
    dt = time.perf_counter() - t
    accs[dev] = probe.score(Xt, yt)
    rows.append((f"LinearProbe L-BFGS {n}x{d}, {k} classes", describe(dev), f"{dt:.1f} s fit, {probe.n_iter_} iters",
                 f"test accuracy {100 * accs[dev]:.2f}%"))
gap = abs(accs[device] - accs["cpu"]) * 100
rows.append(("probe accuracy, GPU - CPU", "", f"{gap:.3f} points", "ok (<= 0.1)" if gap <= 0.1 else "OVER 0.1"))

print()
print(f"device check on {describe(device)}, torch {torch.__version__}; total {time.time() - float(os.environ['T0']):.0f} s")
print(f"fixture conformance (tests/test_elmo.py, tests/test_devices.py on {device}): {os.environ['CONFORMANCE']}")
widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
for r in rows:
    print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
EOF
if [[ "$conformance" == FAILED* ]]; then
  tail -40 "$OUT/pytest.txt"
  exit 1
fi
