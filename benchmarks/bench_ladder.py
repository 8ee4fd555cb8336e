"""The ladder table and figure of a finished run (issue 41): each encoder's best single layer and its 95 % CI on
every task's headline metric, encoders in ladder order, and the training record of the static twins.

    probing run probing/resources/experiments/ladder.toml --out runs/ladder
    python benchmarks/bench_ladder.py runs/ladder            # prints the table, writes runs/ladder/figures/ladder.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from probing.figures.ladder import best_layers, ladder_figure
from probing.figures.style import save
from probing.results import metric as metric_info
from probing.results.tables import read_results
from probing.tasks.registry import headline_metrics

ORDER = ["word2vec", "fasttext", "glove", "random-elmo", "elmo", "minilm"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a finished run's output folder")
    ap.add_argument("--order", default=",".join(ORDER), help="encoders in ladder order")
    ap.add_argument("--twins", type=Path, default=None, help="folder holding <method>/training.json")
    args = ap.parse_args()
    results = read_results(args.run)
    provenance = json.loads((args.run / "results.json").read_text())
    heads = headline_metrics(results, provenance.get("headlines"))
    kinds = provenance.get("kinds", {})
    heads = {t: m for t, m in heads.items() if kinds.get(t) != "contextuality"}
    order = args.order.split(",")
    table = []
    for task, metric in heads.items():
        scale = metric_info(metric).scale
        for r in best_layers(results, task, metric, order).to_dict("records"):
            table.append(
                {
                    "task": task,
                    "metric": metric,
                    "encoder": r["encoder"],
                    "best layer": r["layer"],
                    "value": round(r["value"] * scale, 1),
                    "95% CI": f"{r['ci_low'] * scale:.1f}-{r['ci_high'] * scale:.1f}",
                }
            )
    pd.set_option("display.width", 200)
    print(pd.DataFrame(table).to_string(index=False))
    save(ladder_figure(results, heads, order), args.run / "figures", "ladder", formats=("png",))
    if args.twins is not None:
        for method in ("word2vec", "fasttext"):
            record = args.twins / method / "training.json"
            if record.is_file():
                r = json.loads(record.read_text())
                print(
                    f"{method}: {r['corpus_words']:,} words, vocabulary {r['vocabulary']:,}, dim "
                    f"{r['params']['vector_size']}, {r['params']['epochs']} epochs: {r['seconds']['wall']:.0f} s wall, "
                    f"{r['seconds']['cpu']:.0f} s CPU"
                )


if __name__ == "__main__":
    main()
