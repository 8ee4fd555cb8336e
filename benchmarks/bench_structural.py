"""Structural probes (Hewitt & Manning 2019) on UD EWT: train -> test, layer by layer, with baselines.

Rows: the bundled default ELMo's layers 0, 1, 2; the random ELMo of the same shape (layer 1); GloVe 6B
50d; the linear-position baseline (|i - j| distances, left-branching depths); and the random-tree
control task on the default model's layer 1 (selectivity = layer 1 - control). Metrics: UUAS and DSpr.
(distance probe), Root% and NSpr. (depth probe), with 95% bootstrap CIs over test sentences. Also the
fit time per probe (threads as given) and the peak RSS of the process. Stores are extracted (or found
in the cache) first.

    PROBING_DATA=/work/shared/data python benchmarks/bench_structural.py            # full EWT train
    PROBING_DATA=/work/shared/data python benchmarks/bench_structural.py --quick    # 3000 train / 500 dev sentences

Reference expectation (ELMo studies): layer 1 > layer 2 > layer 0 on all four metrics. Anchors
(Hewitt & Manning 2019, PTB, the 5.5B ELMo): ELMo1 UUAS 77.0 / DSpr. 0.83 vs 59.8 / 0.73 for a
random BiLSTM over layer 0 (their "ProjLSTM" baseline row).
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from probing.corpora import registry
from probing.encoders import get_encoder
from probing.probes.structural import (
    DepthProbe,
    DistanceProbe,
    StoreSentences,
    position_depths,
    position_distances,
    random_trees,
    scores_with_ci,
    store_punct,
    store_trees,
)
from probing.store import extract


def stores(model: str) -> dict:
    enc = get_encoder(model)
    return {split: extract(enc, registry.load("ud-ewt", split), progress=False) for split in ("train", "dev", "test")}


def peak_rss_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def fmt(metric: str, v: float, lo: float, hi: float) -> str:
    scale = 100 if metric in ("uuas", "root_acc") else 1
    digits = 1 if scale == 100 else 3
    return f"{v * scale:.{digits}f} [{lo * scale:.{digits}f}, {hi * scale:.{digits}f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="first 3000 train and 500 dev sentences (test in full)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--tasks", default="distance,depth")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n_train, n_dev = (3000, 500) if args.quick else (None, None)

    t0 = time.perf_counter()
    by_model = {m: stores(m) for m in ("default", "random-elmo", "glove")}
    print(f"stores ready in {time.perf_counter() - t0:.0f} s; threads {args.threads}", flush=True)
    ref = by_model["default"]
    trees = {s: store_trees(ref[s])[slice(n)] for s, n in (("train", n_train), ("dev", n_dev), ("test", None))}
    punct = store_punct(ref["test"])
    lengths = [len(h) for h in trees["test"]]
    print(
        f"train {len(trees['train'])} sentences, dev {len(trees['dev'])}, test {len(trees['test'])} "
        f"({sum(lengths)} words)",
        flush=True,
    )
    rows = [
        ("ELMo layer 0", "default", 0),
        ("ELMo layer 1", "default", 1),
        ("ELMo layer 2", "default", 2),
        ("random ELMo layer 1", "random-elmo", 1),
        ("GloVe 6B 50d", "glove", 0),
        ("control: random trees, layer 1", "default", 1),
        ("linear position", None, None),
    ]
    table: dict[str, dict[str, str]] = {}
    for task in args.tasks.split(","):
        for name, model, layer in rows:
            cell = table.setdefault(name, {})
            if model is None:
                pred = position_distances(lengths) if task == "distance" else position_depths(lengths)
                test_trees, fit_s, epochs = trees["test"], 0.0, 0
            else:
                st = by_model[model]
                X = {s: StoreSentences(st[s], layer) for s in ("train", "dev", "test")}
                fit_trees = {s: trees[s] for s in ("train", "dev", "test")}
                if name.startswith("control"):
                    fit_trees = {
                        s: random_trees([len(h) for h in t], seed=k) for k, (s, t) in enumerate(fit_trees.items())
                    }
                cls = DistanceProbe if task == "distance" else DepthProbe
                probe = cls(seed=0)
                train_X = [X["train"][i] for i in range(len(fit_trees["train"]))] if n_train else X["train"]
                dev_X = [X["dev"][i] for i in range(len(fit_trees["dev"]))] if n_dev else X["dev"]
                t = time.perf_counter()
                probe.fit(train_X, fit_trees["train"], dev_X, fit_trees["dev"])
                fit_s, epochs = time.perf_counter() - t, probe.n_epochs_
                pred, test_trees = probe.predict(X["test"]), fit_trees["test"]
            for metric, v, lo, hi in scores_with_ci(task, pred, test_trees, punct, n_boot=args.n_boot):
                cell[metric] = fmt(metric, v, lo, hi)
            cell[f"fit_{task}"] = f"{fit_s:.0f} s / {epochs} ep"
            print(f"{task:8s} {name:32s} {cell}  peak RSS {peak_rss_mib():.0f} MiB", flush=True)

    cols = ["uuas", "dspr", "fit_distance", "root_acc", "nspr", "fit_depth"]
    print()
    print("| row | UUAS % | DSpr. | fit (dist.) | Root % | NSpr. | fit (depth) |")
    print("|---|---|---|---|---|---|---|")
    for name, cell in table.items():
        print(f"| {name} | " + " | ".join(cell.get(c, "") for c in cols) + " |")
    print(f"\npeak RSS {peak_rss_mib():.0f} MiB; total {time.perf_counter() - t0:.0f} s; threads {args.threads}")
    print("Hewitt & Manning 2019 (PTB, 5.5B ELMo): ELMo1 UUAS 77.0 / DSpr. 0.83; random BiLSTM 59.8 / 0.73")


if __name__ == "__main__":
    main()
