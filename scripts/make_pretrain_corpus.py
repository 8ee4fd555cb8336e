"""Build the pretraining text of the bundled default model: one tokenized sentence per line.

Sources (about 3M tokens), all read from ``$PROBING_DATA`` (laid out like ``shared/data``):
  - text/1b_benchmark/1b_benchmark.{dev,test}.tokens (WMT11 news crawl, research use)
  - text/wikitext-2/{valid,test}.sents.txt (Wikipedia, CC BY-SA 3.0)
  - NLTK brown (non-commercial use only) WITHOUT the documents that SemCor annotates
    (SemCor's br-XNN file is Brown's cXNN document), so no SemCor evaluation text is seen
  - NLTK masc_tagged (ANC, research and commercial development)
  - NLTK webtext (no licence stated)
Nothing from the evaluation data: UD EWT, the treebank sample, conll2000, SemCor, the WSD test sets.

The held-out file takes the last 500 sentences of each raw-text file; they are not in train.txt.

    PROBING_DATA=../shared/data python scripts/make_pretrain_corpus.py --out runs/corpus
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
from pathlib import Path

HELD_OUT = 500
WIKI_FIXES = {"@-@": "-", "@,@": ",", "@.@": "."}


def semcor_brown_ids(semcor_xml: Path) -> set[str]:
    """Brown file ids (e.g. ``ca01``) of the documents in SemCor."""
    with gzip.open(semcor_xml, "rt", encoding="utf-8") as f:
        names = re.findall(r'<text [^>]*source="[^"]*/br-(\w\d\d)\.naf"', f.read())
    return {"c" + n for n in names}


def raw_text(path: Path) -> list[str]:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        words = [WIKI_FIXES.get(w, w) for w in line.split()]
        if words:
            lines.append(" ".join(words))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("PROBING_DATA"), help="data root (default $PROBING_DATA)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    if not args.data:
        ap.error("give --data or set $PROBING_DATA")
    data = Path(args.data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import nltk

    nltk.data.path.insert(0, str(data / "nltk_data"))
    from nltk.corpus import brown, masc_tagged, webtext
    from nltk.tokenize import TreebankWordTokenizer

    train: dict[str, list[str]] = {}
    valid: list[str] = []
    for rel in (
        "text/1b_benchmark/1b_benchmark.dev.tokens",
        "text/1b_benchmark/1b_benchmark.test.tokens",
        "text/wikitext-2/valid.sents.txt",
        "text/wikitext-2/test.sents.txt",
    ):
        lines = raw_text(data / rel)
        train[rel] = lines[:-HELD_OUT]
        valid += lines[-HELD_OUT:]
    excluded = semcor_brown_ids(data / "wsd/semcor/semcor.data.xml.gz")
    kept = [f for f in brown.fileids() if f not in excluded]
    train["nltk:brown"] = [" ".join(s) for s in brown.sents(kept)]
    train["nltk:masc_tagged"] = [" ".join(w for w in s if w.strip()) for s in masc_tagged.sents()]
    tok = TreebankWordTokenizer()
    train["nltk:webtext"] = [
        " ".join(tok.tokenize(line))
        for fid in webtext.fileids()
        for line in webtext.raw(fid).splitlines()
        if line.strip()
    ]

    counts = {}
    with open(out / "train.txt", "w", encoding="utf-8") as f:
        for name, lines in train.items():
            lines = [line for line in lines if line.strip()]
            f.write("\n".join(lines) + "\n")
            counts[name] = {"sentences": len(lines), "tokens": sum(len(line.split()) for line in lines)}
    (out / "valid.txt").write_text("\n".join(valid) + "\n", encoding="utf-8")
    counts["held-out"] = {"sentences": len(valid), "tokens": sum(len(v.split()) for v in valid)}
    counts["brown_documents_excluded_as_semcor"] = len(excluded)
    (out / "sources.json").write_text(json.dumps(counts, indent=2))
    print(json.dumps(counts, indent=2))


if __name__ == "__main__":
    main()
