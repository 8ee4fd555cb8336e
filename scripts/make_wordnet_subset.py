"""Build the bundled WordNet 3.0 subset ``probing/resources/wordnet/senses.tsv.gz`` from NLTK WordNet.

The subset holds every sense of each selected (lemma, part of speech), in WordNet order, with its
synset name, sense number, lexname (supersense) and a gloss shortened to 60 characters. Lemmas come
from the instances of SemCor documents in Raganato's XML format (``--semcor``, optionally limited to
``--docs``), from ``--lemmas`` files (``lemma<TAB>POS`` per line) and from the built-in showcase
list (every part of speech WordNet has for each). WordNet's LICENSE is copied beside the table and a
``manifest.json`` records the sources, counts and checksums.

    NLTK_DATA=/path/to/nltk_data python scripts/make_wordnet_subset.py \
        --semcor $PROBING_DATA/wsd/semcor/semcor.data.xml.gz --docs d000-d009
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from probing._io import atomic_open, atomic_path, sha256_file
from probing.wordnet import BUNDLED_COLUMNS, BUNDLED_PATH, NltkInventory, normalize_lemma, normalize_pos

SHOWCASE = (
    "play bank line serve run set take get make head point light mouse plant bass crane spring "
    "match fair bright hard rock bat star cell interest charge record right fire break"
).split()


def parse_docs(spec: str | None) -> set[str] | None:
    """``d000-d009,d020`` -> the set of document ids it names (None: all documents)."""
    if not spec:
        return None
    docs: set[str] = set()
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        if not hi:
            docs.add(lo)
            continue
        width, a, b = len(lo) - 1, int(lo[1:]), int(hi[1:])
        docs.update(f"{lo[0]}{i:0{width}d}" for i in range(a, b + 1))
    return docs


def semcor_pairs(path: Path, docs: set[str] | None) -> set[tuple[str, str]]:
    """(lemma, pos letter) of every <instance> in the chosen <text> elements of a Raganato XML file."""
    opener = gzip.open if path.suffix == ".gz" else open
    pairs: set[tuple[str, str]] = set()
    seen_docs: set[str] = set()
    with opener(path, "rb") as f:
        doc = None
        for event, el in ET.iterparse(f, events=("start", "end")):
            if event == "start" and el.tag == "text":
                doc = el.get("id")
                seen_docs.add(doc)
            elif event == "end" and el.tag == "instance" and (docs is None or doc in docs):
                pairs.add((normalize_lemma(el.get("lemma")), normalize_pos(el.get("pos"))))
            elif event == "end" and el.tag == "sentence":
                el.clear()
    if docs is not None and docs - seen_docs:
        raise ValueError(f"{path}: no <text> with id(s) {sorted(docs - seen_docs)[:5]}")
    return pairs


def lemma_file_pairs(path: Path) -> set[tuple[str, str]]:
    """Pairs from a file with ``lemma POS`` per line (whitespace-separated; # starts a comment)."""
    pairs = set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"{path} line {lineno}: expected 'lemma POS', got {line!r}")
        try:
            pairs.add((normalize_lemma(fields[0]), normalize_pos(fields[1])))
        except ValueError as e:
            raise ValueError(f"{path} line {lineno}: {e}") from None
    return pairs


def showcase_pairs(inv: NltkInventory) -> set[tuple[str, str]]:
    return {(lemma, p) for lemma in SHOWCASE for p in "nvar" if inv.has_lemma(lemma, p)}


def write_table(inv: NltkInventory, pairs: set[tuple[str, str]], out: Path) -> int:
    """Write every sense of every pair; returns the number of rows. Gzip has mtime 0 for reproducibility."""
    n = 0
    with atomic_path(out) as tmp, open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            text = io.TextIOWrapper(gz, encoding="utf-8", newline="\n")
            text.write("\t".join(BUNDLED_COLUMNS) + "\n")
            for lemma, p in sorted(pairs):
                for key in inv.senses(lemma, p):
                    info = inv.info(key)
                    text.write("\t".join([key, info.synset, str(info.sense_number), info.lexname, info.gloss]) + "\n")
                    n += 1
            text.flush()
            text.detach()
    return n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--semcor",
        type=Path,
        action="append",
        default=[],
        help="Raganato-format data.xml(.gz) whose instance lemmas to include (repeatable)",
    )
    ap.add_argument("--docs", help="only these <text> ids of --semcor, e.g. d000-d009,d020")
    ap.add_argument("--lemmas", type=Path, action="append", default=[], help="file of 'lemma POS' lines (repeatable)")
    ap.add_argument("--out", type=Path, default=BUNDLED_PATH)
    args = ap.parse_args(argv)

    inv = NltkInventory()
    sources: dict[str, int] = {}
    pairs = showcase_pairs(inv)
    sources["showcase"] = len(pairs)
    docs = parse_docs(args.docs)
    for path in args.semcor:
        found = semcor_pairs(path, docs)
        sources[f"{path.name} docs={args.docs or 'all'}"] = len(found)
        pairs |= found
    for path in args.lemmas:
        found = lemma_file_pairs(path)
        sources[path.name] = len(found)
        pairs |= found
    missing = sorted(p for p in pairs if not inv.has_lemma(*p))
    if missing:
        print(
            f"{len(missing)} lemma/POS pairs are not in WordNet 3.0 and are left out, e.g. {missing[:5]}",
            file=sys.stderr,
        )
        pairs -= set(missing)

    n_rows = write_table(inv, pairs, args.out)
    license_path = args.out.parent / "LICENSE"
    with atomic_open(license_path, "wb") as f:
        f.write(inv.root.join("LICENSE").open().read())
    manifest = {
        "wordnet": "3.0",
        "wordnet_index_sense_sha256": hashlib.sha256(inv.root.join("index.sense").open().read()).hexdigest(),
        "docs": args.docs,
        "lemma_sources": sources,
        "showcase_lemmas": SHOWCASE,
        "n_lemma_pos": len(pairs),
        "n_senses": n_rows,
        "columns": list(BUNDLED_COLUMNS),
        "sha256": {args.out.name: sha256_file(args.out), "LICENSE": sha256_file(license_path)},
    }
    with atomic_open(args.out.parent / "manifest.json", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(f"{args.out}: {len(pairs):,} lemma/POS pairs, {n_rows:,} senses, {args.out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
