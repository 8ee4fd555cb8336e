"""The occurrence explorer: file size, build time (cold / cached), first paint; sense separation per layer.

(a) ``explore()`` on a store for 3 lemmas (all forms), 3 layers, at most ``--max-points`` points:
    the HTML file's size, build time with an empty projection cache (UMAP's numba compilation
    included) and with a warm one, and the time to first paint in headless Chromium (network off):
    navigation start to the browser's first-contentful-paint, and to Bokeh's "document idle" (the
    panels drawn).
(b) Leave-one-out 1-NN sense accuracy (95% bootstrap CI) per layer for the demo lemmas (one form and
    POS each, as the sense views show them) on the bundled SemCor slice: the bundled ELMo, the random
    ELMo and GloVe 6B 50d. GloVe gives one vector per word form, so with one form every occurrence
    ties and its score IS the chance level (the probability that two occurrences share a sense).

    PROBING_DATA=/work/shared/data python benchmarks/bench_explore.py                # (a) on SemCor train
    python benchmarks/bench_explore.py --corpus demo-semcor --lemmas play serve time  # (a) bundled data
    python benchmarks/bench_explore.py --skip-size                                    # only (b)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def first_paint(html: Path) -> tuple[float, float]:
    """(first-contentful-paint ms, document-idle ms) after navigation start, headless Chromium offline."""
    import screenshot_explorer as shot
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shot.find_chromium(), args=shot.CHROMIUM_ARGS)
        page, requests = shot.open_page(browser, html)
        page.wait_for_function("() => performance.getEntriesByName('first-contentful-paint').length", timeout=60000)
        fcp = page.evaluate("() => performance.getEntriesByName('first-contentful-paint')[0].startTime")
        idle = page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => r(performance.now())))"
        )  # after open_page waited for the canvases: an upper bound on "drawn"
        browser.close()
    if requests:
        raise RuntimeError(f"the page fetched {requests}")
    return float(fcp), float(idle)


def bench_size(args) -> None:
    from probing.experiment import extract_activations
    from probing.views.explorer import explore
    from probing.wordnet import inventory

    store = extract_activations(args.model, args.corpus, args.split, progress=False)
    gloss = inventory("auto").gloss
    out = Path(tempfile.mkdtemp(prefix="bench-explore-"))
    os.environ["PROBING_CACHE"] = str(out / "cache")
    times = []
    for _ in range(2):
        t = time.perf_counter()
        ex = explore(store, args.lemmas, [0, 1, 2], all_forms=True, gloss=gloss, max_points=args.max_points)
        path = ex.save(out / "explorer.html")
        times.append(time.perf_counter() - t)
    fcp, idle = first_paint(path)
    size = path.stat().st_size
    print(f"\n(a) explorer: {args.model} on {args.corpus}/{args.split}, lemmas {', '.join(args.lemmas)} (all forms)")
    print(f"{'points':>8} {'panels':>7} {'file MiB':>9} {'cold s':>8} {'cached s':>9} {'FCP ms':>8} {'drawn ms':>9}")
    print(
        f"{len(ex.points):>8} {len(ex.panels):>7} {size / 2**20:>9.2f} {times[0]:>8.1f} {times[1]:>9.1f} "
        f"{fcp:>8.0f} {idle:>9.0f}"
    )
    print(f"   methods {ex.settings['method_used']}")
    shutil.rmtree(out)


def bench_scores(args) -> None:
    from probing.experiment import extract_activations
    from probing.glove import Vectors
    from probing.views.senses import lemma_rows, sense_separation

    glove = Vectors.glove_6b_50d()
    print("\n(b) leave-one-out 1-NN sense accuracy [95% bootstrap CI], demo-semcor train, one form + POS per lemma")
    print(
        f"{'occurrences':<26} {'n':>4} {'chance':>7}  {'encoder':<12} {'layer 0':>17} {'layer 1':>17} {'layer 2':>17}"
    )
    stores = {name: extract_activations(name, "demo-semcor", "train", progress=False) for name in args.encoders}
    for lemma in args.score_lemmas:
        for name, store in stores.items():
            sel = lemma_rows(store.tokens, lemma)
            senses = store.tokens["sense"].to_numpy()[sel.rows]
            cells = []
            for layer in range(3):
                r = sense_separation(store.layer(layer, rows=sel.rows, dtype=np.float32), senses)
                cells.append(f"{r.score:.2f} [{r.ci_low:.2f},{r.ci_high:.2f}]")
            print(f"{sel.label:<26} {r.n:>4} {r.chance:>7.2f}  {name:<12} " + " ".join(f"{c:>17}" for c in cells))
        vectors, oov = glove.lookup(store.tokens["word"].to_numpy()[sel.rows].tolist())
        r = sense_separation(vectors[~oov], senses[~oov])
        print(
            f"{sel.label:<26} {r.n:>4} {r.chance:>7.2f}  {'glove':<12} {r.score:.2f} [{r.ci_low:.2f},{r.ci_high:.2f}]"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--corpus", default="semcor")
    ap.add_argument("--split", default="train")
    ap.add_argument("--lemmas", nargs="+", default=["make", "take", "give"])
    ap.add_argument("--max-points", type=int, default=2000)
    ap.add_argument("--encoders", nargs="+", default=["default", "random-elmo"])
    ap.add_argument("--score-lemmas", nargs="+", default=["play", "serve", "time", "play:NOUN"])
    ap.add_argument("--skip-size", action="store_true")
    ap.add_argument("--skip-scores", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not args.skip_size:
        bench_size(args)
    if not args.skip_scores:
        bench_scores(args)


if __name__ == "__main__":
    main()
