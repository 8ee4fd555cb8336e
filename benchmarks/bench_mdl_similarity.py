"""MDL probing and layer similarity on UD English EWT with the bundled model, random ELMo and GloVe.

(a) UPOS online codelength (Voita & Titov 2020) and compression for the bundled model's layers 0/1/2,
    the random-weight ELMo's layers and GloVe, for the linguistic task and the control task (Hewitt &
    Liang), with the time per layer (one thread); then, for the bundled model's layers under 3 seeds,
    whether the layer ranking is stable for accuracy (an MLP-1 probe, seeded init and order, early-stopped
    on dev, accuracy on test) and for codelength (the seed permutes the sentences into blocks).
(b) linear CKA, debiased CKA, SVCCA and PWCCA between all those layers on 20,000 UD EWT train tokens
    (RBF CKA on 5,000), with time and peak RSS of a fresh process doing only that.

Needs PROBING_DATA (ud/en_ewt) and extracts/uses the stores in the probing cache.

    python benchmarks/bench_mdl_similarity.py            # all 12,544 training sentences
    python benchmarks/bench_mdl_similarity.py --quick    # a seeded 25 % of the training sentences
    python benchmarks/bench_mdl_similarity.py --part cka
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import torch
from threadpoolctl import threadpool_limits

from probing.analysis.similarity import layer_similarity
from probing.corpora.registry import load
from probing.encoders import get_encoder
from probing.probes.linear import LinearProbe
from probing.probes.mdl import control_codelength, online_codelength
from probing.probes.mlp import MLPProbe
from probing.store import extract

ENCODERS = ("default", "random-elmo", "glove")
ANCHOR = (
    "Anchor, Voita & Titov 2020 Table 1 (PTB, 45 XPOS tags, 5.5B ELMo, MLP-2, reference units: later blocks in nats,\n"
    "kbits = bits/1024): codelength 173 / 96 / 115 kbits for layers 0 / 1 / 2, compression 29.5 / 53.06 / 44.3;\n"
    "control task 302 / 515 / 717 kbits."
)


def peak_rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stores(split: str) -> dict:
    corpus = load("ud-ewt", split)
    return {m: extract(get_encoder(m), corpus, progress=False) for m in ENCODERS}


def layers():
    for enc in ENCODERS:
        for k in ("glove",) if enc == "glove" else ("0", "1", "2"):
            yield enc, k


def part_mdl(args) -> None:
    train, dev, test = stores("train"), stores("dev"), stores("test")
    tok = train["default"].tokens
    sent = tok["sentence_id"].to_numpy()
    rows = np.arange(len(tok))
    if args.quick:
        ids = np.unique(sent)
        keep = np.random.default_rng(0).choice(ids, size=len(ids) // 4, replace=False)
        rows = np.flatnonzero(np.isin(sent, keep))
    y, g, words = tok["upos"].to_numpy()[rows], sent[rows], tok["word"].to_numpy()[rows].tolist()
    y_dev, words_dev = dev["default"].tokens["upos"].to_numpy(), dev["default"].tokens["word"].tolist()
    y_test = test["default"].tokens["upos"].to_numpy()
    K = len(np.unique(np.concatenate([y, y_dev])))
    print(f"UD EWT train: {len(np.unique(g))} sentences, {len(y)} tokens, K = {K} UPOS tags; dev {len(y_dev)} tokens")
    print(f"probe: {args.probe}; fractions 0.1 % .. 100 %; early stopping / C choice on UD EWT dev\n")

    def fit_kwargs():
        return dict(probe=args.probe, n_classes=K, Cs=args.Cs, hidden_layers=1, width=args.width)

    out = []
    for enc, k in layers():
        X = train[enc].layer(k, rows=rows, dtype=np.float32)
        Xd = dev[enc].layer(k, dtype=np.float32)
        t = time.perf_counter()
        task = online_codelength(X, y, g, X_dev=Xd, y_dev=y_dev, seed=0, **fit_kwargs())
        t_task = time.perf_counter() - t
        t = time.perf_counter()
        ctrl = control_codelength(X, y, words, g, X_dev=Xd, words_dev=words_dev, seed=0, **fit_kwargs())
        t_ctrl = time.perf_counter() - t
        acc = LinearProbe(C=1.0, max_iter=300).fit(X, y).score(test[enc].layer(k, dtype=np.float32), y_test)
        ref = task.with_reference_units()
        row = dict(
            encoder=enc,
            layer=k,
            test_acc=100 * acc,
            kbits=task.codelength_kbits,
            compression=task.compression,
            control_kbits=ctrl.codelength_kbits,
            control_compr=ctrl.compression,
            ref_units_kbits=ref.codelength_kbits,
            ref_units_compr=ref.compression,
            uniform_kbits=task.uniform_kbits,
            sec_task=t_task,
            sec_control=t_ctrl,
        )
        out.append(row)
        print(f"  {enc}:{k} done ({t_task:.0f} s + {t_ctrl:.0f} s)", flush=True)
    frame = pd.DataFrame(out)
    print("\n(a) UPOS online codelength (bits, kbits = 1000 bits) and compression = uniform / online")
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print("ref_units_*: the reference's arithmetic (later blocks in nats, kbits = bits / 1024).")
    print(ANCHOR)

    print("\nSeed stability, bundled model's layers 0/1/2 (seeds 0, 1, 2)")
    seeds = []
    Xt = {k: test["default"].layer(k, dtype=np.float32) for k in ("0", "1", "2")}
    for seed in (0, 1, 2):
        for k in ("0", "1", "2"):
            X = train["default"].layer(k, rows=rows, dtype=np.float32)
            Xd = dev["default"].layer(k, dtype=np.float32)
            code = online_codelength(X, y, g, X_dev=Xd, y_dev=y_dev, seed=seed, **fit_kwargs())
            mlp = MLPProbe(hidden_layers=1, width=args.width, random_state=seed).fit(X, y, Xd, y_dev)
            seeds.append(
                dict(seed=seed, layer=k, mlp_test_acc=100 * mlp.score(Xt[k], y_test), kbits=code.codelength_kbits)
            )
    sf = pd.DataFrame(seeds)
    print(sf.pivot(index="seed", columns="layer", values=["mlp_test_acc", "kbits"]).to_string(float_format="%.2f"))
    for metric, best_is_low in (("mlp_test_acc", False), ("kbits", True)):
        ranks = {
            s: tuple(sf[sf.seed == s].sort_values(metric, ascending=best_is_low).layer.tolist()) for s in (0, 1, 2)
        }
        stable = len(set(ranks.values())) == 1
        print(f"  ranking by {metric} (best first): {ranks} -> {'stable' if stable else 'NOT stable'}")


def part_cka(args) -> None:
    train = stores("train")
    n = 20_000
    t = time.perf_counter()
    frame = layer_similarity(
        {"elmo": train["default"], "random-elmo": train["random-elmo"], "glove": train["glove"]},
        measures=("linear_cka", "debiased_cka", "svcca", "pwcca"),
        max_tokens=n,
        seed=0,
    )
    secs = time.perf_counter() - t
    t = time.perf_counter()
    rbf = layer_similarity(
        {"elmo": train["default"], "random-elmo": train["random-elmo"], "glove": train["glove"]},
        measures=("rbf_cka",),
        max_tokens=5000,
        seed=0,
    )
    secs_rbf = time.perf_counter() - t
    print(f"(b) layer similarity on {n} UD EWT train tokens (seed 0): {secs:.1f} s for 4 measures x 49 pairs;")
    print(f"    rbf_cka on 5000 tokens: {secs_rbf:.1f} s; peak RSS of this process {peak_rss_mib():.0f} MiB")
    for m, f in pd.concat([frame, rbf]).groupby("measure", sort=False):
        f = f.assign(a=f.encoder_a + ":" + f.layer_a, b=f.encoder_b + ":" + f.layer_b)
        order = list(dict.fromkeys(f.a))
        print(f"\n{m} (n_tokens {f.n_tokens.iloc[0]}; row = a, column = b)")
        print(f.pivot(index="a", columns="b", values="value").loc[order, order].to_string(float_format="%.3f"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a seeded 25 %% of the training sentences")
    ap.add_argument("--part", choices=("all", "mdl", "cka"), default="all")
    ap.add_argument("--probe", choices=("linear", "mlp"), default="linear")
    ap.add_argument("--width", type=int, default=256, help="MLP hidden width")
    ap.add_argument("--Cs", type=float, nargs="*", default=None, help="linear probe: C grid chosen on dev")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", UserWarning)
    with threadpool_limits(limits=args.threads):
        if args.part in ("all", "cka"):
            if args.part == "all":  # a fresh process, so that its peak RSS is the similarity computation's alone
                subprocess.run([sys.executable, __file__, "--part", "cka", "--threads", str(args.threads)], check=True)
            else:
                part_cka(args)
        if args.part in ("all", "mdl"):
            print(flush=True)
            part_mdl(args)


if __name__ == "__main__":
    main()
