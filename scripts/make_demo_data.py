"""Regenerate the demo data bundled in ``probing/resources/data`` from a data folder laid out like shared/data.

    PROBING_DATA=/path/to/data python scripts/make_demo_data.py          # write the files
    PROBING_DATA=/path/to/data python scripts/make_demo_data.py --check  # compare with the committed files

What it writes (byte-identical on every run with the same zlib: gzip with mtime 0 and no file name):
- ``demo-ud/``: the first whole documents of each UD English EWT v2.16 file, until at least 3,000 (train),
  500 (dev) and 1,000 (test) sentences; the CoNLL-U text is copied unchanged.
- ``demo-semcor/``: 60 train and 20 test documents of SemCor (Raganato format), chosen so that both splits
  hold many instances of the polysemous lemmas play, bank, line and serve (see ``choose_documents``);
  the XML lines and key lines of those documents are copied unchanged, in corpus order.
- ``universal_tagset/``: NLTK's en-ptb and en-brown universal tag maps.
- licence texts, NOTICE files and ``README.md`` with the counts measured on the written files.
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import io
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from pathlib import Path

from probing._io import atomic_open, atomic_path
from probing.corpora.conllu import read_conllu
from probing.corpora.raganato import read_raganato
from probing.paths import data_dir, resources_dir

UD_TARGETS = {"train": 3000, "dev": 500, "test": 1000}
TARGET_LEMMAS = ("play", "bank", "line", "serve")
N_TRAIN_DOCS, N_TEST_DOCS = 60, 20
TAG_MAPS = ("en-ptb", "en-brown")

UD_NOTICE = """\
The files en_ewt-demo-{train,dev,test}.conllu.gz are slices of the Universal Dependencies English Web
Treebank (UD_English-EWT), release 2.16, GitHub UniversalDependencies/UD_English-EWT, tag r2.16:
the first whole documents of en_ewt-ud-{train,dev,test}.conllu, copied unchanged (the cut is the only
modification). Made by scripts/make_demo_data.py of the probing project.

UD English EWT is licensed under the Creative Commons Attribution-ShareAlike 4.0 International License
(CC BY-SA 4.0), full text in LICENSE.txt; these slices are distributed under the same licence.
Credit: the UD English EWT team (see https://github.com/UniversalDependencies/UD_English-EWT) and the
Linguistic Data Consortium's English Web Treebank (LDC2012T13), from which the text comes.
"""

SEMCOR_NOTICE = """\
The files semcor-demo-{train,test}.{data.xml,gold.key.txt}.gz are a subset (whole documents) of SemCor 3.0
with WordNet 3.0 sense keys, in the format of Raganato, Camacho-Collados & Navigli (2017), as converted
from the NAF files of GitHub rubenIzquierdo/wsd_corpora @ c31b9b8e. The XML and key lines of the chosen
documents are copied unchanged. Made by scripts/make_demo_data.py of the probing project.

SemCor and WordNet are distributed under the WordNet 3.0 licence, full text in LICENSE:
WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR
WARRANTIES, EXPRESS OR IMPLIED (see LICENSE for the full disclaimer). The underlying text is the Brown Corpus.
"""

TAGSET_NOTICE = """\
en-ptb.map, en-brown.map and README: the universal part-of-speech tag mappings of Slav Petrov, Dipanjan
Das and Ryan McDonald, "A Universal Part-of-Speech Tagset" (LREC 2012, https://arxiv.org/abs/1104.2086),
as distributed in NLTK's data package universal_tagset (nltk/nltk_data @ 5db857e6,
packages/taggers/universal_tagset.zip), copied unchanged. Licence: CC BY-SA 4.0 (as NLTK's data index
gives it), full text in LICENSE-CC-BY-SA-4.0.txt. probing reads them to give NLTK corpora universal tags
without the NLTK package being installed.
"""


def gzip_bytes(data: bytes) -> bytes:
    """Deterministic gzip: no file name, mtime 0, level 9."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write(data)
    return buf.getvalue()


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def ud_slice(path: Path, target: int) -> bytes:
    """The first whole documents of a CoNLL-U file holding at least ``target`` sentences, unchanged."""
    blocks = path.read_text(encoding="utf-8").split("\n\n")
    out, n = [], 0
    for block in blocks:
        if not block.strip():
            continue
        if n >= target and block.startswith("# newdoc"):
            break
        out.append(block)
        n += 1
    return ("\n\n".join(out) + "\n\n").encode("utf-8")


def semcor_documents(xml_path: Path) -> tuple[list[str], dict[str, Counter]]:
    """Document ids in corpus order and, per document, the instance counts of the target lemmas."""
    order: list[str] = []
    counts: dict[str, Counter] = {}
    with gzip.open(xml_path, "rb") as fh:
        for event, el in ET.iterparse(fh, events=("start", "end")):
            if event == "start" and el.tag == "text":
                order.append(el.get("id"))
                counts[order[-1]] = Counter()
            elif event == "end" and el.tag == "instance" and el.get("lemma") in TARGET_LEMMAS:
                counts[order[-1]][el.get("lemma")] += 1
            elif event == "end" and el.tag == "sentence":
                el.clear()
    return order, counts


def choose_documents(order: list[str], counts: dict[str, Counter]) -> dict[str, list[str]]:
    """Greedy, deterministic choice of test and train documents rich in the target lemmas.

    Picks alternate test, train, test, ... until 20 test documents, then train until 60. Each pick takes
    the unused document with the highest score sum_l n_l(doc) / (1 + N_l(split)), where n_l counts the
    document's instances of target lemma l and N_l those already in the split (so a lemma the split lacks
    weighs more); ties go to the earlier document. Each split is returned in corpus order.
    """
    chosen: dict[str, list[str]] = {"train": [], "test": []}
    totals = {"train": Counter(), "test": Counter()}
    position = {d: i for i, d in enumerate(order)}
    unused = list(order)
    wanted = {"train": N_TRAIN_DOCS, "test": N_TEST_DOCS}
    step = 0
    while any(len(chosen[split]) < n for split, n in wanted.items()):
        split = "test" if step % 2 == 0 and len(chosen["test"]) < N_TEST_DOCS else "train"
        step += 1
        best = max(
            unused, key=lambda d: (sum(counts[d][l] / (1 + totals[split][l]) for l in TARGET_LEMMAS), -position[d])
        )
        unused.remove(best)
        chosen[split].append(best)
        totals[split].update(counts[best])
    return {split: sorted(docs, key=position.__getitem__) for split, docs in chosen.items()}


def semcor_slice(xml_path: Path, key_path: Path, docs: list[str]) -> tuple[bytes, bytes]:
    """The XML (header, the documents' <text> blocks, footer) and key lines of ``docs``, unchanged."""
    wanted = set(docs)
    lines = gzip.decompress(xml_path.read_bytes()).decode("utf-8").splitlines(keepends=True)
    out = lines[:2]  # <?xml ...?> and <corpus ...>
    keep = False
    for line in lines[2:]:
        if line.startswith("<text "):
            keep = line.split('id="', 1)[1].split('"', 1)[0] in wanted
        if keep:
            out.append(line)
        if line.startswith("</text>"):
            keep = False
    out.append(lines[-1])
    if lines[-1].strip() != "</corpus>" or not lines[1].startswith("<corpus"):
        raise ValueError(f"{xml_path}: expected <corpus> on line 2 and </corpus> on the last line")
    keys = [
        line
        for line in key_path.read_text(encoding="utf-8").splitlines(keepends=True)
        if line.split(".", 1)[0] in wanted
    ]
    return "".join(out).encode("utf-8"), "".join(keys).encode("utf-8")


def corpus_counts(corpus) -> dict:
    sents = tokens = instances = 0
    docs = set()
    lemmas: Counter = Counter()
    for s in corpus:
        sents += 1
        tokens += len(s.words)
        docs.add(s.doc_id)
        if s.instance_ids is not None:
            for iid, lemma in zip(s.instance_ids, s.lemmas):
                if iid is not None:
                    instances += 1
                    if lemma in TARGET_LEMMAS:
                        lemmas[lemma] += 1
    return {"docs": len(docs), "sentences": sents, "tokens": tokens, "instances": instances, "lemmas": lemmas}


def readme(out: Path, ud: dict, semcor: dict, docs: dict[str, list[str]]) -> str:
    def size(rel: str) -> str:
        return f"{(out / rel).stat().st_size:,}"

    rows_ud = "\n".join(
        f"| `demo-ud/en_ewt-demo-{sp}.conllu.gz` | {size(f'demo-ud/en_ewt-demo-{sp}.conllu.gz')} | {c['docs']} | "
        f"{c['sentences']:,} | {c['tokens']:,} |"
        for sp, c in ud.items()
    )
    rows_sc = "\n".join(
        f"| {sp} | {size(f'demo-semcor/semcor-demo-{sp}.data.xml.gz')} + "
        f"{size(f'demo-semcor/semcor-demo-{sp}.gold.key.txt.gz')} | "
        f"{c['docs']} | {c['sentences']:,} | {c['tokens']:,} | {c['instances']:,} | "
        + " | ".join(str(c["lemmas"][l]) for l in TARGET_LEMMAS)
        + " |"
        for sp, c in semcor.items()
    )
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and p.name != "README.md")
    return f"""# Bundled demo data

Small, redistributable slices that let `probing` run its demo and examples with no download.
Everything here is rebuilt, byte for byte, by `scripts/make_demo_data.py` from a folder laid out like
`shared/data` (`PROBING_DATA=... python scripts/make_demo_data.py`; `--check` compares). Load them with
`probing.corpora.load("demo-ud", "train")` or `load("demo-semcor", "test")`. Total size of the data and
licence files: {total:,} bytes.

## demo-ud: UD English EWT v2.16 (CC BY-SA 4.0)

The first whole documents of each official file (UniversalDependencies/UD_English-EWT, tag r2.16),
until at least {UD_TARGETS["train"]:,} / {UD_TARGETS["dev"]:,} / {UD_TARGETS["test"]:,} sentences;
the CoNLL-U text is unchanged. Words are syntactic words (multiword-token lines skipped).
Licence and attribution: `demo-ud/LICENSE.txt`, `demo-ud/NOTICE`.

| file | bytes | documents | sentences | words |
|---|---|---|---|---|
{rows_ud}

## demo-semcor: SemCor 3.0, WordNet 3.0 keys (WordNet licence)

Whole documents of SemCor in the Raganato et al. (2017) format (shared/data/wsd/semcor, converted from
rubenIzquierdo/wsd_corpora @ c31b9b8e), split by document into {N_TRAIN_DOCS} train and {N_TEST_DOCS} test
documents. They were chosen greedily to hold many instances of the polysemous lemmas
{", ".join(TARGET_LEMMAS)} in both splits: picks alternate test, train, test, ... until the test split is
full, then go to train; each takes the unused document with the highest sum over those lemmas of
count / (1 + count already in the split), ties to the earlier document.
XML and key lines are unchanged. Licence: `demo-semcor/LICENSE`, `demo-semcor/NOTICE`.

| split | bytes (xml + keys) | documents | sentences | tokens | instances | {" | ".join(TARGET_LEMMAS)} |
|---|---|---|---|---|---|{"---|" * len(TARGET_LEMMAS)}
{rows_sc}

(The lemma columns count `<instance>` elements with that lemma, any part of speech.)

- train documents: {" ".join(docs["train"])}
- test documents: {" ".join(docs["test"])}

## universal_tagset: NLTK's universal tag maps (CC BY-SA 4.0)

`en-ptb.map` and `en-brown.map` from NLTK's `universal_tagset` package (Petrov, Das & McDonald 2012),
unchanged; `probing.corpora.nltk_tagged` maps native tags to the 12 universal tags with them.
Licence: `universal_tagset/NOTICE`, `universal_tagset/LICENSE-CC-BY-SA-4.0.txt`.
"""


def build(data: Path, out: Path) -> None:
    ud_dir = data / "ud" / "en_ewt"
    ud_counts = {}
    for split, target in UD_TARGETS.items():
        dest = out / "demo-ud" / f"en_ewt-demo-{split}.conllu.gz"
        write_bytes(dest, gzip_bytes(ud_slice(ud_dir / f"en_ewt-ud-{split}.conllu", target)))
        ud_counts[split] = corpus_counts(read_conllu(dest))
    write_bytes(out / "demo-ud" / "LICENSE.txt", (ud_dir / "LICENSE.txt").read_bytes())
    write_bytes(out / "demo-ud" / "NOTICE", UD_NOTICE.encode("utf-8"))

    xml_path = data / "wsd" / "semcor" / "semcor.data.xml.gz"
    key_path = data / "wsd" / "semcor" / "semcor.gold.key.txt"
    docs = choose_documents(*semcor_documents(xml_path))
    semcor_counts = {}
    for split in ("train", "test"):
        xml, keys = semcor_slice(xml_path, key_path, docs[split])
        xml_dest = out / "demo-semcor" / f"semcor-demo-{split}.data.xml.gz"
        write_bytes(xml_dest, gzip_bytes(xml))
        write_bytes(out / "demo-semcor" / f"semcor-demo-{split}.gold.key.txt.gz", gzip_bytes(keys))
        semcor_counts[split] = corpus_counts(read_raganato(xml_dest))
    with zipfile.ZipFile(data / "nltk_data" / "corpora" / "wordnet.zip") as zf:
        write_bytes(out / "demo-semcor" / "LICENSE", zf.read("wordnet/LICENSE"))
    write_bytes(out / "demo-semcor" / "NOTICE", SEMCOR_NOTICE.encode("utf-8"))

    with zipfile.ZipFile(data / "nltk_data" / "taggers" / "universal_tagset.zip") as zf:
        for name in TAG_MAPS:
            write_bytes(out / "universal_tagset" / f"{name}.map", zf.read(f"universal_tagset/{name}.map"))
        write_bytes(out / "universal_tagset" / "README", zf.read("universal_tagset/README"))
    write_bytes(out / "universal_tagset" / "LICENSE-CC-BY-SA-4.0.txt", (ud_dir / "LICENSE.txt").read_bytes())
    write_bytes(out / "universal_tagset" / "NOTICE", TAGSET_NOTICE.encode("utf-8"))

    with atomic_open(out / "README.md", "w", encoding="utf-8") as fh:
        fh.write(readme(out, ud_counts, semcor_counts, docs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=data_dir(), help="data root (default: $PROBING_DATA)")
    parser.add_argument("--out", type=Path, default=resources_dir() / "data")
    parser.add_argument("--check", action="store_true", help="rebuild in a temporary folder and compare with --out")
    args = parser.parse_args(argv)
    if args.data is None:
        parser.error("set $PROBING_DATA or pass --data: a folder laid out like shared/data")
    if not args.check:
        build(args.data, args.out)
        print(f"wrote {args.out}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        build(args.data, Path(tmp))
        rel = sorted(str(p.relative_to(tmp)) for p in Path(tmp).rglob("*") if p.is_file())
        differ = [
            r
            for r in rel
            if not (args.out / r).is_file() or not filecmp.cmp(Path(tmp) / r, args.out / r, shallow=False)
        ]
    for r in differ:
        print(f"differs: {r}", file=sys.stderr)
    print(f"{len(rel) - len(differ)} of {len(rel)} files identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
