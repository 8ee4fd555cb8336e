"""ELMo inference speed: the fast path (fp32 and bf16) against a straightforward AllenNLP-style
reference, on the original architecture (2x4096_512_2048cnn_2xhighway) with random weights.

    python benchmarks/bench_elmo.py            # a few minutes
    python benchmarks/bench_elmo.py --quick    # under a minute

Sentences: UD EWT dev when $PROBING_DATA holds it, else the bundled demo-ud dev slice, or --text FILE
(one whitespace-tokenized sentence per line). The reference runs the way AllenNLP did: padded
batches in input order, the char CNN over every slot (padding included), one [x; h] @ W matmul per
LSTM step, clipping and masks. It is checked against the AllenNLP fixture before it is timed, and
the fast modes are compared with it on the same sentences. "% peak" divides the model's FLOPs
(``model_flops_per_token``, about 204 MFLOP for this architecture) by the best large fp32 GEMM
measured in the same run with the same threads.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import h5py
import numpy as np
import torch
from torch import Tensor

from probing.elmo import Elmo, ElmoOptions
from probing.elmo.chars import batch_char_ids
from probing.elmo.model import BiLM, cpu_flags, onednn_fp32_is_exact, onednn_fp32_route

ORIGINAL = {
    "lstm": {
        "dim": 4096,
        "projection_dim": 512,
        "n_layers": 2,
        "cell_clip": 3,
        "proj_clip": 3,
        "use_skip_connections": True,
    },
    "char_cnn": {
        "embedding": {"dim": 16},
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "n_characters": 262,
        "max_characters_per_token": 50,
        "activation": "relu",
    },
}
ALLENNLP_TOKENS_PER_S = 120.0  # AllenNLP's own ELMo on this machine class (2 threads, batch 64)
FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "elmo_allennlp"


# ---------------------------------------------------------------- the straightforward reference


def reference_forward(bilm: BiLM, ids: Tensor) -> Tensor:
    """All layers ``(n_layers + 1, B, T, 2P)`` of a padded batch, boundaries included, zero initial state."""
    opts, cnn = bilm.opts, bilm.char_cnn
    b, t, n = ids.shape
    mask = (ids > 0).any(-1)
    x = cnn.char_embed.weight[ids.reshape(b * t, n)].transpose(1, 2)
    act = torch.relu if opts.activation == "relu" else torch.tanh
    h = torch.cat([act(torch.nn.functional.conv1d(x, conv.weight, conv.bias).amax(-1)) for conv in cnn.convs], -1)
    for carry, transform in zip(cnn.highway_carry, cnn.highway_transform):
        g = torch.sigmoid(h @ carry.weight.t() + carry.bias)
        h = g * torch.relu(h @ transform.weight.t() + transform.bias) + (1 - g) * h
    tokens = (h @ cnn.projection.weight.t() + cnn.projection.bias).view(b, t, -1) * mask.unsqueeze(-1)
    fw = _reference_direction(bilm.forward_lstm, tokens, mask, opts, backward=False)
    bw = _reference_direction(bilm.backward_lstm, tokens, mask, opts, backward=True)
    return torch.stack([torch.cat([tokens, tokens], -1)] + [torch.cat(pair, -1) for pair in zip(fw, bw)])


def _reference_direction(direction, x: Tensor, mask: Tensor, opts: ElmoOptions, backward: bool) -> list[Tensor]:
    b, t, p = x.shape
    cell_clip = opts.cell_clip or float("inf")
    proj_clip = opts.proj_clip or float("inf")
    outputs = []
    for layer in range(opts.n_layers):
        w, bias, w_p = direction.weight[layer], direction.bias[layer], direction.proj[layer]
        h, c = x.new_zeros(b, p), x.new_zeros(b, opts.lstm_dim)
        out = torch.zeros_like(x)
        for s in range(t - 1, -1, -1) if backward else range(t):  # backward: state stays 0 over padding
            i, j, f, o = (torch.cat([x[:, s], h], 1) @ w + bias).chunk(4, 1)
            c_new = torch.clamp(torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j), -cell_clip, cell_clip)
            h_new = torch.clamp((torch.sigmoid(o) * torch.tanh(c_new)) @ w_p, -proj_clip, proj_clip)
            m = mask[:, s].unsqueeze(1)
            c, h = torch.where(m, c_new, c), torch.where(m, h_new, h)
            out[:, s] = h_new * m
        if opts.use_skip_connections and layer > 0:
            out = out + x
        outputs.append(out)
        x = out
    return outputs


@torch.inference_mode()
def reference_embed(model: Elmo, sentences: Sequence[Sequence[str]], batch_size: int) -> list[np.ndarray]:
    """``Elmo.embed`` done the AllenNLP way: batches in input order, padded to their longest sentence."""
    out = []
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        layers = reference_forward(
            model.bilm, torch.from_numpy(batch_char_ids(batch, model.options.max_characters_per_token))
        )
        out += [layers[:, k, 1 : len(s) + 1].numpy().copy() for k, s in enumerate(batch)]
    return out


# ---------------------------------------------------------------- measurements


def model_flops_per_token(opts: ElmoOptions) -> float:
    """Multiply-adds x 2 per token of the plain model (char CNN over every slot, both LSTM directions)."""
    c, p, d, slots = opts.lstm_dim, opts.projection_dim, opts.char_embed_dim, opts.max_characters_per_token
    conv = sum(2 * (slots - w + 1) * w * d * n for w, n in opts.filters)
    nf = opts.n_filters
    cnn = conv + opts.n_highway * 2 * 2 * nf * nf + 2 * nf * p
    lstm = 2 * opts.n_layers * (2 * (2 * p) * 4 * c + 2 * c * p)
    return float(cnn + lstm)


def gemm_gflops(dtype: torch.dtype, onednn: bool, size: int = 2048, repeats: int = 5) -> float:
    """Best rate of a ``size``-cubed GEMM, in GFLOPS."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=gen).to(dtype)
    b = torch.randn(size, size, generator=gen).to(dtype)
    ctx = onednn_fp32_route() if onednn else contextlib.nullcontext()
    best = float("inf")
    with ctx:
        a @ b
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best / 1e9


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def layer_diffs(got: list[np.ndarray], expected: list[np.ndarray]) -> list[float]:
    return [max(float(np.abs(g[k] - e[k]).max()) for g, e in zip(got, expected)) for k in range(got[0].shape[0])]


def fixture_diffs(precision: str) -> tuple[list[float], list[float]]:
    """Per-layer max abs difference from the AllenNLP files: (stateful batches of 3, stateless)."""
    lines = [l.split() for l in (FIXTURE / "input.txt").read_text(encoding="utf-8").splitlines()]
    out = []
    for stateful, name in ((True, "expected_all_layers.hdf5"), (False, "expected_all_layers_stateless.hdf5")):
        m = Elmo.from_files(
            FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5", stateful=stateful, precision=precision
        )
        got = [v for start in range(0, len(lines), 3) for v in m.embed(lines[start : start + 3], batch_size=3)]
        with h5py.File(FIXTURE / name, "r") as f:
            out.append(layer_diffs(got, [f[str(i)][...] for i in range(len(lines))]))
    return out[0], out[1]


def load_sentences(text: str | None) -> tuple[list[list[str]], str]:
    if text:
        lines = Path(text).read_text(encoding="utf-8").splitlines()
        return [l.split() for l in lines if l.strip()], text
    from probing.corpora import load

    if os.environ.get("PROBING_DATA"):
        try:
            return [s.words for s in load("ud-ewt", "dev")], "UD EWT dev ($PROBING_DATA)"
        except Exception as e:  # noqa: BLE001 - fall back to the bundled slice, saying why
            print(f"note: UD EWT dev not usable ({e}); using the bundled demo-ud dev slice")
    return [s.words for s in load("demo-ud", "dev")], "demo-ud dev (bundled UD EWT slice)"


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def fmt(xs: list[float]) -> str:
    return " ".join(f"{x:.1e}" for x in xs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run (fewer sentences, one repeat)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--sentences", type=int, help="sentences for the fast modes (default: all, 64 with --quick)")
    ap.add_argument("--reference-sentences", type=int, help="sentences for the reference (default 64, 32 quick)")
    ap.add_argument("--repeats", type=int, help="timed runs per fast mode (default 3, 1 with --quick)")
    ap.add_argument("--text", help="a text file, one whitespace-tokenized sentence per line")
    args = ap.parse_args(argv)
    n_fast = args.sentences or (64 if args.quick else None)
    n_ref = args.reference_sentences or (32 if args.quick else 64)
    repeats = args.repeats or (1 if args.quick else 3)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    sentences, source = load_sentences(args.text)
    random.Random(0).shuffle(sentences)
    fast_set = sentences[:n_fast] if n_fast else sentences
    ref_set = sentences[:n_ref]
    n_tok, n_ref_tok = sum(map(len, fast_set)), sum(map(len, ref_set))
    flags = cpu_flags()
    print(
        f"torch {torch.__version__}, {args.threads} threads, batch {args.batch_size}; CPU flags: "
        f"avx512_bf16={'avx512_bf16' in flags}, amx={'amx_tile' in flags}; "
        f"oneDNN fp32 route: {'on' if onednn_fp32_is_exact() else 'off'}"
    )
    slots = sum(
        (max(map(len, ref_set[i : i + args.batch_size])) + 2) * len(ref_set[i : i + args.batch_size])
        for i in range(0, len(ref_set), args.batch_size)
    )
    print(
        f"sentences: {source}; fast modes {len(fast_set)} sentences / {n_tok} tokens, reference "
        f"{len(ref_set)} / {n_ref_tok} ({100 * (1 - (n_ref_tok + 2 * len(ref_set)) / slots):.0f}% of its "
        f"slots are padding); load average (1, 5, 15 min) at start {_load()}"
    )

    peaks = {
        "fp32 MKL": gemm_gflops(torch.float32, onednn=False),
        "fp32 oneDNN": gemm_gflops(torch.float32, onednn=True) if onednn_fp32_is_exact() else 0.0,
        "bf16": gemm_gflops(torch.bfloat16, onednn=False),
    }
    peak = max(peaks["fp32 MKL"], peaks["fp32 oneDNN"])
    print("2048^3 GEMM peak (GFLOPS): " + ", ".join(f"{k} {v:.0f}" for k, v in peaks.items() if v))

    # the reference itself must reproduce AllenNLP before its speed means anything
    fixture = Elmo.from_files(FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5")
    lines = [l.split() for l in (FIXTURE / "input.txt").read_text(encoding="utf-8").splitlines()]
    with h5py.File(FIXTURE / "expected_all_layers_stateless.hdf5", "r") as f:
        ref_fix = layer_diffs(reference_embed(fixture, lines, 5), [f[str(i)][...] for i in range(len(lines))])
    print(f"reference vs AllenNLP fixture (stateless), max abs diff per layer: {fmt(ref_fix)}")

    with tempfile.TemporaryDirectory() as tmp:
        Elmo.random(ORIGINAL, seed=0).save(Path(tmp) / "options.json", Path(tmp) / "weights.hdf5")
        model = Elmo.from_files(Path(tmp) / "options.json", Path(tmp) / "weights.hdf5")
    flops = model_flops_per_token(model.options)

    reference_embed(model, ref_set[:2], args.batch_size)  # warm-up
    t0 = time.perf_counter()
    ref_out = reference_embed(model, ref_set, args.batch_size)
    ref_speed = n_ref_tok / (time.perf_counter() - t0)

    rows = []
    for precision in ("fp32", "bf16"):
        model.to_precision(precision)
        got = model.embed(ref_set, batch_size=args.batch_size)
        diffs = layer_diffs(got, ref_out)
        del got
        times = timed(lambda: model.embed(fast_set, batch_size=args.batch_size), repeats)
        best, median = n_tok / min(times), n_tok / statistics.median(times)
        rows.append((f"fast {precision}", best, median, diffs, fixture_diffs(precision)))
        print(f"  {precision}: {', '.join(f'{n_tok / t:.0f}' for t in times)} tokens/s (load {_load()})", flush=True)
    rows.insert(0, ("reference (AllenNLP way)", ref_speed, ref_speed, [0.0] * 3, None))

    print(
        f"\nELMo original architecture, random weights, {args.threads} threads, batch {args.batch_size}; "
        f"{flops / 1e6:.0f} MFLOP/token; fp32 GEMM peak {peak:.0f} GFLOPS; AllenNLP = {ALLENNLP_TOKENS_PER_S:.0f} tok/s"
    )
    head = f"{'mode':<26}{'tok/s best':>11}{'median':>8}{'x AllenNLP':>11}{'x ref':>7}{'GFLOPS':>8}{'% peak':>8}"
    print(head + "   max abs diff vs fp32 reference per layer")
    print("-" * (len(head) + 38))
    for name, best, median, diffs, _ in rows:
        print(
            f"{name:<26}{best:>11.0f}{median:>8.0f}{best / ALLENNLP_TOKENS_PER_S:>11.2f}"
            f"{best / ref_speed:>7.2f}{best * flops / 1e9:>8.1f}{100 * best * flops / 1e9 / peak:>7.0f}%"
            f"   {fmt(diffs) if name != rows[0][0] else '-'}"
        )
    print("\nAllenNLP fixture, max abs diff per layer (layer 0, 1, 2):")
    for name, _, _, _, fix in rows[1:]:
        print(f"  {name}: stateful {fmt(fix[0])}; stateless {fmt(fix[1])}")
    print(f"load average (1, 5, 15 min) at end {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
