"""Copy an exported pretraining run into the package as the bundled default model, with its model card.

    python scripts/bundle_default_model.py RUN_DIR CORPUS_DIR --command "probing pretrain ..."

RUN_DIR is a `probing pretrain --out` folder (its export/ holds options.json, weights.hdf5, training.json);
CORPUS_DIR is the folder written by scripts/make_pretrain_corpus.py (its sources.json gives the counts).
Writes probing/resources/models/default/{options.json, weights.hdf5, training.json, vocab.txt.gz, MODEL_CARD.md}
(vocab.txt.gz: the training vocabulary, gzip without a timestamp so that the same run bundles the same bytes).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
from pathlib import Path

from probing._io import atomic_open, atomic_path
from probing.elmo import Elmo
from probing.elmo.hub import count_parameters
from probing.elmo.options import ElmoOptions

DEST = Path(__file__).resolve().parents[1] / "probing" / "resources" / "models" / "default"

LICENCES = {
    "text/1b_benchmark": "One Billion Word benchmark held-out shards (Apache-2.0; WMT11 news text, research use)",
    "text/wikitext-2": "WikiText-2 (Merity et al. 2016; Wikipedia, CC BY-SA 3.0)",
    "nltk:brown": "Brown corpus, NLTK sample (non-commercial research use); the 352 SemCor documents removed",
    "nltk:masc_tagged": "MASC (American National Corpus; education, research and development use)",
    "nltk:webtext": "NLTK webtext (no licence stated)",
}


# benchmarks/bench_pretrain.py on one thread of a 2-core AMD EPYC (2026-12-04): training tokens per CPU second
ARCHITECTURE_CHOICE = """Why this size: the package budget is 25 MB for the weights (stored as float16), and CPU time is the
other limit. `benchmarks/bench_pretrain.py` measured training speed on one thread of a 2-core AMD EPYC:

| LSTM / projection (char filters as v1) | float16 weights | tokens/s fp32 | tokens/s bf16 autocast |
|---|---|---|---|
| 512 / 128 (the v1 model) | 6.0 MB | 1,319 | 1,984 |
| 512 / 256 | 10.8 MB | 979 | 1,705 |
| 1024 / 256 (this model) | 20.3 MB | 506 | 1,114 |

1024 / 256 is the largest that fits: the same LSTM with twice the character filters stores 23.8 MB, which
with the bundled data and WordNet subset (about 3 MB compressed) would pass 25 MB in the wheel; the official
small model's 2048 character filters (LSTM 1024 / projection 128) store 27.2 MB, and a 2048-cell LSTM with
256-d projections 39.2 MB. bf16 autocast makes 1024 / 256 train at about the fp32 speed of the
512-cell model. The sweep measured speed and size only: a
quality comparison would have cost a long run per candidate."""


def lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def stored_dtype(weights: Path) -> str:
    """The dtype the weights file stores its arrays in (float16 exports load back to float32 exactly)."""
    import h5py

    dtypes: set[str] = set()
    with h5py.File(weights, "r") as f:
        f.visititems(lambda _name, obj: dtypes.add(str(obj.dtype)) if isinstance(obj, h5py.Dataset) else None)
    return "/".join(sorted(dtypes))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def licence(source: str) -> str:
    return next((v for k, v in LICENCES.items() if source.startswith(k)), "see shared/data README")


def measured(path: Path, weights_sha256: str) -> str:
    """The card's "Measured" section from bench_default_model.py's targets.json (refused for another model)."""
    t = json.loads(path.read_text())
    if t["weights_sha256"] != weights_sha256 or t["quick"]:
        sha = t["weights_sha256"]
        raise SystemExit(f"{path}: measured on weights {sha} (quick={t['quick']}), not the full run of this model")
    upos, wsd, base = t["upos_test_accuracy"], t["wsd_all_f1"], t["wsd_baselines_f1"]
    rows = "\n".join(
        f"| {layer} | {upos.get(layer, '')} | {wsd.get(layer, '')} |" for layer in sorted(set(upos) | set(wsd))
    )
    table4 = "\n".join(
        f"| {r['source']} | {r['layer']} | {r['nearest']} | "
        + (f"`{r['sense']}` ({r['kind']}) |" if r["sense"] else "no sense tag in SemCor |")
        for r in t["table4"]
    )
    values = t.get("targets_measured", {})
    met = "\n".join(
        f"| {k} | {'yes' if v else 'no'} | {values.get(k, '')} |" for k, v in t["targets"].items() if v is not None
    )
    return f"""## Measured (`benchmarks/bench_default_model.py`)
UD EWT test UPOS accuracy (linear probe, C from {{1, 10, 100}} on dev) and 1-NN WSD F1 on Raganato's ALL
(trained on all of SemCor; WordNet first sense {base.get("wn-first-sense")}, SemCor most frequent sense
{base.get("semcor-mfs")}), in %:

| layer | UPOS | WSD F1 |
|---|---|---|
{rows}

Peters et al.'s Table 4, searched over all of SemCor's occurrences of "play":

| source | layer | nearest occurrence | sense |
|---|---|---|---|
{table4}

| target (issue 20) | met | measured |
|---|---|---|
{met}

"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--command", required=True, help="the exact pretraining command(s), for the card")
    ap.add_argument("--hardware", default="2-core x86_64 CPU, 1 torch thread, shared with other jobs")
    ap.add_argument("--history", default="", help="what changed during the run (budget, threads), for the card")
    ap.add_argument(
        "--targets",
        type=Path,
        help="targets.json of benchmarks/bench_default_model.py run on this model: adds a Measured section",
    )
    args = ap.parse_args()

    export = args.run / "export"
    info = json.loads((export / "training.json").read_text())
    sources = json.loads((args.corpus / "sources.json").read_text())
    DEST.mkdir(parents=True, exist_ok=True)
    for name in ("options.json", "weights.hdf5", "training.json"):  # atomic: a running demo may be loading them
        with atomic_path(DEST / name) as tmp:
            shutil.copyfile(export / name, tmp)
    vocab = (export / "vocab.txt").read_bytes()
    with (
        atomic_open(DEST / "vocab.txt.gz", "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f,
    ):
        f.write(vocab)
    n_vocab = len(vocab.decode("utf-8").splitlines())
    Elmo.from_files(DEST / "options.json", DEST / "weights.hdf5")  # refuse to bundle what does not load
    pins = {name: sha256(DEST / name) for name in ("options.json", "weights.hdf5")}
    print(f"pin these in probing/elmo/hub.py's BUNDLED_SHA256 (checked on every load): {pins}")
    opts = ElmoOptions.from_json(DEST / "options.json")
    log = info["log"]
    last = log[-1]
    rows = "\n".join(
        f"| {e['tokens_seen']:,} | {e['train_seconds'] / 3600:.2f} | {e['train_loss']:.3f} | "
        f"{e['valid_ppl_forward']:.1f} | {e['valid_ppl_backward']:.1f} |"
        for e in log
    )
    held = sources.pop("held-out")
    excluded = sources.pop("brown_documents_excluded_as_semcor", 0)
    if "sources" in sources:  # written by make_pretrain_corpus.py since issue 20: the table is in sources.md
        corpus_table = (args.corpus / "sources.md").read_text(encoding="utf-8").strip()
        dedup = (
            f"Every training sentence whose normalised key ({sources['sentence_key'].rstrip('.')}) equals that of an evaluation "
            f"sentence ({', '.join(sources['evaluation_sets'])}) or a held-out one, or of an earlier training "
            "sentence, was removed; the table counts what each rule removed. Lower-cased sources were truecased: "
            f"{lower_first(sources['truecasing']['rule'].rstrip('.'))} (token accuracy {sources['truecasing']['token_accuracy_on_held_out']:.1%} "
            "on the held-out text lower-cased and restored)."
        )
    else:
        rows = "\n".join(f"| `{k}` | {v['sentences']:,} | {v['tokens']:,} | {licence(k)} |" for k, v in sources.items())
        corpus_table = f"| source | sentences | tokens | licence |\n|---|---|---|---|\n{rows}"
        dedup = ""
    c = info["config"]
    lm_head_md = DEST / "LM_HEAD.md"  # written by scripts/fit_lm_head.py --install
    lm_head = lm_head_md.read_text(encoding="utf-8") if lm_head_md.is_file() else ""
    card = f"""# The bundled default model: a small ELMo pretrained by `probing`

An ELMo-style biLM (Peters et al. 2018) in the official options.json + weights.hdf5 layout, trained by
`probing pretrain` on {info["train_tokens"]:,} tokens of English so that the demo shows the effects of
training offline. It is much smaller and far less trained than the official ELMo: use it to learn the
toolkit, and the official weights (`probing download original`) for conclusions about ELMo.

## Architecture
- character CNN: {opts.char_embed_dim}-d character embeddings, filters {opts.filters}, {opts.n_highway}
  highway layer(s), projection to {opts.projection_dim};
- 2 biLSTM layers per direction, {opts.lstm_dim} cells projected to {opts.projection_dim}, cell and projection
  clip {opts.cell_clip}, skip connection between the layers;
- layers seen by probes: 0 (token layer, shown at both directions' width), 1, 2: each {opts.output_dim}-d;
- {count_parameters(opts):,} parameters in the biLM (the adaptive softmax over a {n_vocab:,}-word
  vocabulary, cutoffs {c["cutoffs"]}, is used only in training and not exported);
- fingerprint (probing's model fingerprint: sha256 of the options and the stored weights, as
  `Elmo.fingerprint` computes it on every load): `{info["fingerprint"]}`.

{ARCHITECTURE_CHOICE}

## Training data
Built by `scripts/make_pretrain_corpus.py` from `shared/data` (one tokenized sentence per line). The Brown
documents that SemCor annotates ({excluded}) are left out, so the demo's SemCor test text was never seen.

{corpus_table}

{dedup}

Held-out perplexity is measured on {held["sentences"]:,} sentences ({held["tokens"]:,} tokens) drawn from the
same sources and removed from training.

## Training
- {info["tokens_seen"]:,} training tokens seen ({info["tokens_seen"] / info["train_tokens"]:.2f} epochs), in
  {info["train_seconds"] / 3600:.2f} h of training on {args.hardware}; torch {info["torch"]};
- Adam, lr {c["lr"]} with {c["warmup_tokens"]:,}-token warm-up and cosine decay to {c["min_lr_fraction"]} of it,
  batches of {c["batch_tokens"]} tokens (sentences up to {c["max_len"]} tokens), dropout {c["dropout"]},
  gradient clipping at {c["clip_norm"]}, seed {c["seed"]}; arithmetic {info.get("precision", "fp32")} (bf16: autocast
  matmuls with float32 weights and optimizer); weights stored as {stored_dtype(DEST / "weights.hdf5")} (loaded as
  float32; the fingerprint is of the stored values);
{f"- {args.history}" + chr(10) if args.history else ""}- final held-out perplexity: forward {last["valid_ppl_forward"]:.1f}, backward {last["valid_ppl_backward"]:.1f}
  (for scale: the official ELMo reaches about 40 on the One Billion Word benchmark with 93M parameters and
  ~10 epochs of 800M tokens).

| tokens seen | hours | train loss (nats) | held-out ppl forward | held-out ppl backward |
|---|---|---|---|---|
{rows}

{measured(args.targets, sha256(DEST / "weights.hdf5")) if args.targets else ""}{lm_head}## Reproduce
```
PROBING_DATA=/path/to/shared/data python scripts/make_pretrain_corpus.py --out RUN/corpus
{args.command}
probing pretrain --out RUN --export-only --export-dtype {stored_dtype(DEST / "weights.hdf5")}
python scripts/bundle_default_model.py RUN RUN/corpus --command "..."
```
RUN is the run's folder (here `{Path(args.run).name}`). The run resumes exactly (`--resume`) if interrupted; the
full configuration is in `training.json`.

## Licence
The weights are released with the package (Apache-2.0). They were trained on the text above; the Brown
sample in it is licensed for non-commercial research use, so check that licence before commercial use.
"""
    with atomic_open(DEST / "MODEL_CARD.md", encoding="utf-8") as f:
        f.write(card)
    print(f"bundled {DEST} ({(DEST / 'weights.hdf5').stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
