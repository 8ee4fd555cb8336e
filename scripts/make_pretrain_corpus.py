"""Build the pretraining text of the bundled default model: one tokenized sentence per line.

Sources (about 6M tokens), all read from ``$PROBING_DATA`` (laid out like ``shared/data``):
  - text/1b_benchmark/1b_benchmark.{dev,test}.tokens (WMT11 news crawl, research use)
  - text/wikitext-2/{valid,test}.sents.txt (Wikipedia, CC BY-SA 3.0)
  - NLTK brown (non-commercial use only) WITHOUT the documents that SemCor annotates
    (SemCor's br-XNN file is Brown's cXNN document), so no SemCor evaluation text is seen
  - NLTK masc_tagged (ANC, research and commercial development), webtext (no licence stated)
  - NLTK raw English added for the v2 model (licences in LICENCES below): abc, movie_reviews, inaugural,
    state_union, sentence_polarity, subjectivity, pros_cons, product_reviews_1/2, nps_chat
Raw text is split into sentences by an unsupervised Punkt model trained on that text itself (no Punkt data
is needed) and tokenized with NLTK's Treebank tokenizer, whose ``\u0060\u0060``/``''`` are written back as ``"``
(as in UD EWT and the 1B benchmark).

Nothing from the evaluation data: every training sentence whose normalised key (``sentence_key``: NFKC,
case-folded, Treebank quotes as ``"``, then only letters and digits kept, so tokenization, spacing, case and
punctuation do not matter) equals the key of a sentence of UD EWT train/dev/test, SemCor, the Raganato WSD
sets (ALL, senseval2/3, semeval2007/2013), the NLTK treebank sample, conll2000, senseval, or the bundled demo
data (probing/resources/data) is dropped; so is a training sentence equal (same key) to a held-out one, or to
an earlier training sentence. sources.json reports what each rule removed per source.

Lower-cased sources (detected: under 0.5% of their tokens hold an upper-case letter; movie_reviews,
sentence_polarity, subjectivity, product_reviews_1) are kept in full and *truecased*: each token takes the
form it has most often inside sentences of the cased training text (so ``i`` -> ``I``, ``paris`` -> ``Paris``;
unseen words stay lower-case), and the first word is capitalised. Why: they are a third of the new text,
while everything the model is evaluated on (held-out, UD EWT, SemCor) is cased; raw lower-case text would
teach the LM that sentences start in lower case and names are lower-case, and dropping or down-weighting it
would waste data in a data-limited run. The truecaser's token accuracy, measured on the held-out text
lower-cased and restored, is written to sources.json.

The held-out file takes the last 500 sentences of each raw-text file (unchanged from v1, so perplexities stay
comparable); they are not in train.txt.

    PROBING_DATA=../shared/data python scripts/make_pretrain_corpus.py --out runs/corpus
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import unicodedata
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

HELD_OUT = 500
WIKI_FIXES = {"@-@": "-", "@,@": ",", "@.@": "."}
REPO = Path(__file__).resolve().parents[1]
LOWER_CASED_MAX_UPPER = 0.005

LICENCES = {
    "text/1b_benchmark": "One Billion Word benchmark held-out shards (Apache-2.0; WMT11 news text, research use)",
    "text/wikitext-2": "WikiText-2 (Merity et al. 2016; Wikipedia, CC BY-SA 3.0)",
    "nltk:brown": "Brown corpus, NLTK sample (non-commercial research use); SemCor's documents removed",
    "nltk:masc_tagged": "MASC (American National Corpus; education, research and development use)",
    "nltk:webtext": "NLTK webtext (no licence stated)",
    "nltk:abc": "ABC Science and Rural News transcripts, NLTK (no licence stated)",
    "nltk:movie_reviews": "Pang & Lee movie reviews v2.0, NLTK (CC BY 4.0)",
    "nltk:inaugural": "US inaugural addresses, NLTK (public domain)",
    "nltk:state_union": "State of the Union addresses, NLTK (public domain)",
    "nltk:sentence_polarity": "Pang & Lee sentence polarity v1.0, NLTK (CC BY 4.0)",
    "nltk:subjectivity": "Pang & Lee subjectivity v1.0, NLTK (CC BY 4.0)",
    "nltk:pros_cons": "Ganapathibhotla & Liu pros and cons, NLTK (CC BY 4.0)",
    "nltk:product_reviews_1": "Hu & Liu product reviews, NLTK (CC BY 4.0)",
    "nltk:product_reviews_2": "Ding, Liu & Yu product reviews, NLTK (CC BY 4.0)",
    "nltk:nps_chat": "NPS Chat corpus, NLTK (non-commercial, non-profit educational and research use)",
}

_QUOTES = {"``": '"', "''": '"'}
_NOT_ALNUM = re.compile(r"[\W_]+")


def sentence_key(sentence: str | Iterable[str]) -> str:
    """The normalised key two sentences share when they are "the same sentence" for deduplication.

    NFKC, case-folded, Treebank quotes mapped to ``"``, and then everything but letters and digits removed
    (spaces included), so ``Don 't stop !`` and ``don't stop`` have the same key.
    """
    words = sentence.split() if isinstance(sentence, str) else sentence
    text = "".join(_QUOTES.get(w, w) for w in words)
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).casefold())


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


# ---- evaluation sentences -------------------------------------------------------------------------------


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def conllu_sentences(path: Path) -> Iterator[list[str]]:
    """Word forms of each sentence of a CoNLL-U file (multiword-token ranges and empty nodes skipped)."""
    words: list[str] = []
    with _open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if words:
                    yield words
                words = []
            elif not line.startswith("#"):
                cols = line.split("\t")
                if cols[0].isdigit():
                    words.append(cols[1])
    if words:
        yield words


def wsd_xml_sentences(path: Path) -> Iterator[list[str]]:
    """Word forms of each ``<sentence>`` of a Raganato-format XML file (``<wf>`` and ``<instance>``)."""
    with _open(path) as f:
        for _, elem in ET.iterparse(f):
            if elem.tag == "sentence":
                yield [w.text or "" for w in elem]
                elem.clear()


def senseval_sentences(senseval) -> Iterator[list[str]]:
    """Each senseval instance's context, whole and cut at sentence-final punctuation."""
    for fid in senseval.fileids():
        for inst in senseval.instances(fid):
            words = [w[0] if isinstance(w, tuple) else w for w in inst.context]
            yield words
            cur: list[str] = []
            for w in words:
                cur.append(w)
                if w in (".", "?", "!"):
                    yield cur
                    cur = []
            if cur:
                yield cur


def evaluation_keys(data: Path) -> dict[str, set[str]]:
    """Normalised keys of every evaluation sentence, per evaluation set."""
    from nltk.corpus import conll2000, senseval, treebank

    sets: dict[str, Iterable[list[str]]] = {}
    ud = data / "ud" / "en_ewt"
    for split in ("train", "dev", "test"):
        sets[f"ud_ewt_{split}"] = conllu_sentences(ud / f"en_ewt-ud-{split}.conllu")
    wsd = data / "wsd"
    sets["semcor"] = wsd_xml_sentences(wsd / "semcor" / "semcor.data.xml.gz")
    for name in ("ALL", "senseval2", "senseval3", "semeval2007", "semeval2013"):
        sets[f"wsd_{name}"] = wsd_xml_sentences(wsd / name / f"{name}.data.xml")
    sets["nltk_treebank"] = ([w for w, t in s if t != "-NONE-"] for s in treebank.tagged_sents())
    sets["nltk_conll2000"] = conll2000.sents()
    sets["nltk_senseval"] = senseval_sentences(senseval)
    bundled = REPO / "probing" / "resources" / "data"
    for path in sorted(bundled.glob("demo-ud/*.conllu.gz")):
        sets[f"bundled_{path.name.split('.')[0]}"] = conllu_sentences(path)
    for path in sorted(bundled.glob("demo-semcor/*.data.xml.gz")):
        sets[f"bundled_{path.name.split('.')[0]}"] = wsd_xml_sentences(path)
    keys = {}
    for name, sents in sets.items():
        keys[name] = {k for k in (sentence_key(s) for s in sents) if k}
        if not keys[name]:
            raise ValueError(f"evaluation set {name}: no sentences read; is {data} laid out like shared/data?")
    return keys


# ---- training text --------------------------------------------------------------------------------------


class Tokenizer:
    """Punkt sentence splitting (trained unsupervised on the raw text given) + Treebank word tokens."""

    def __init__(self, raw_training_text: str):
        from nltk.tokenize import TreebankWordTokenizer
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        self.punkt = PunktSentenceTokenizer(raw_training_text)
        self.words = TreebankWordTokenizer()

    def tokens(self, sentence: str) -> str:
        return " ".join(_QUOTES.get(w, w) for w in self.words.tokenize(sentence))

    def sentences(self, paragraph: str) -> list[str]:
        return [t for s in self.punkt.tokenize(paragraph) if (t := self.tokens(s))]


def _xml_tag_texts(raw: str, tags: tuple[str, ...]) -> list[str]:
    pattern = "|".join(tags)
    return [m.group(2).strip() for m in re.finditer(rf"<({pattern})>(.*?)</\1>", raw, flags=re.S)]


def new_sources(tok_text: str | None = None) -> dict[str, list[str]]:
    """The NLTK raw-English sources added for the v2 model, as tokenized sentences."""
    from nltk.corpus import (
        abc,
        inaugural,
        movie_reviews,
        nps_chat,
        product_reviews_1,
        product_reviews_2,
        pros_cons,
        sentence_polarity,
        state_union,
        subjectivity,
    )

    paragraphs = {
        name: [line.strip() for fid in corpus.fileids() for line in corpus.raw(fid).splitlines() if line.strip()]
        for name, corpus in (("abc", abc), ("inaugural", inaugural), ("state_union", state_union))
    }
    tok = Tokenizer(tok_text if tok_text is not None else "\n\n".join("\n".join(p) for p in paragraphs.values()))
    out = {f"nltk:{name}": [s for p in paras for s in tok.sentences(p)] for name, paras in paragraphs.items()}
    for name, corpus in (
        ("movie_reviews", movie_reviews),
        ("sentence_polarity", sentence_polarity),
        ("subjectivity", subjectivity),
    ):  # one sentence per line, already tokenized (Treebank re-splits clitics such as "it's")
        out[f"nltk:{name}"] = [
            t for fid in corpus.fileids() for line in corpus.raw(fid).splitlines() if (t := tok.tokens(line))
        ]
    out["nltk:pros_cons"] = [
        t
        for fid in pros_cons.fileids()
        for s in _xml_tag_texts(pros_cons.raw(fid), ("Pros", "Cons"))
        if (t := tok.tokens(s))
    ]
    for name, corpus in (("product_reviews_1", product_reviews_1), ("product_reviews_2", product_reviews_2)):
        out[f"nltk:{name}"] = [  # review lines are "feature[+n],...##sentence"; titles and headers are skipped
            s
            for fid in corpus.fileids()
            for line in corpus.raw(fid).splitlines()
            if "##" in line
            for s in tok.sentences(line.split("##", 1)[1].strip())
        ]
    out["nltk:nps_chat"] = [
        t for post in nps_chat.xml_posts() if post.get("class") != "System" and (t := tok.tokens(post.text or ""))
    ]
    return out


def upper_fraction(lines: list[str]) -> float:
    tokens = [w for line in lines for w in line.split()]
    return sum(any(ch.isupper() for ch in w) for w in tokens) / max(1, len(tokens))


class Truecaser:
    """Each lower-case token takes its most frequent form in non-initial positions of cased text."""

    def __init__(self, cased_lines: Iterable[str]):
        forms: dict[str, Counter[str]] = defaultdict(Counter)
        for line in cased_lines:
            for w in line.split()[1:]:
                forms[w.lower()][w] += 1
        self.best = {low: c.most_common(1)[0][0] for low, c in forms.items()}

    def __call__(self, line: str) -> str:
        words = [self.best.get(w, w) for w in line.split()]
        for i, w in enumerate(words):
            if any(ch.isalpha() for ch in w):
                words[i] = w[0].upper() + w[1:] if w[0].isalpha() else w
                break
        return " ".join(words)


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
        " ".join(_QUOTES.get(w, w) for w in tok.tokenize(line))
        for fid in webtext.fileids()
        for line in webtext.raw(fid).splitlines()
        if line.strip()
    ]
    train.update(new_sources())

    lower_cased = [name for name, lines in train.items() if upper_fraction(lines) < LOWER_CASED_MAX_UPPER]
    truecase = Truecaser(line for name, lines in train.items() if name not in lower_cased for line in lines)
    restored = [truecase(v.lower()).split() for v in valid]
    accuracy = sum(a == b for r, v in zip(restored, valid) for a, b in zip(r, v.split())) / sum(map(len, restored))

    eval_keys = evaluation_keys(data)
    all_eval = set().union(*eval_keys.values())
    held_keys = {sentence_key(v) for v in valid}
    seen: set[str] = set()
    sources: dict[str, dict] = {}
    with open(out / "train.txt", "w", encoding="utf-8") as f:
        for name, lines in train.items():
            kept_lines = []
            removed = Counter()
            for line in lines:
                key = sentence_key(line)
                if key in all_eval:
                    removed["evaluation"] += 1
                elif key in held_keys:
                    removed["held_out"] += 1
                elif key in seen:
                    removed["duplicate"] += 1
                else:
                    seen.add(key)
                    kept_lines.append(truecase(line) if name in lower_cased else line)
            f.write("\n".join(kept_lines) + "\n")
            sources[name] = {
                "sentences": len(kept_lines),
                "tokens": sum(len(line.split()) for line in kept_lines),
                "licence": next(v for k, v in LICENCES.items() if name.startswith(k)),
                "case": "truecased (lower-cased source)" if name in lower_cased else "original",
                "removed_evaluation_overlap": removed["evaluation"],
                "removed_held_out_overlap": removed["held_out"],
                "removed_duplicates": removed["duplicate"],
            }
    (out / "valid.txt").write_text("\n".join(valid) + "\n", encoding="utf-8")
    report = {
        "sources": sources,
        "total": {
            k: sum(s[k] for s in sources.values())
            for k in (
                "sentences",
                "tokens",
                "removed_evaluation_overlap",
                "removed_held_out_overlap",
                "removed_duplicates",
            )
        },
        "held-out": {
            "sentences": len(valid),
            "tokens": sum(len(v.split()) for v in valid),
            "equal_to_an_evaluation_sentence": sum(sentence_key(v) in all_eval for v in valid),
        },
        "brown_documents_excluded_as_semcor": len(excluded),
        "evaluation_sets": {k: len(v) for k, v in eval_keys.items()},
        "sentence_key": sentence_key.__doc__.split("\n\n")[1].strip().replace("\n    ", " "),
        "truecasing": {
            "sources": lower_cased,
            "rule": Truecaser.__doc__ + " The first word is capitalised.",
            "token_accuracy_on_held_out": round(accuracy, 4),
        },
    }
    (out / "sources.json").write_text(json.dumps(report, indent=2))
    (out / "sources.md").write_text(markdown_table(report), encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "sources"}, indent=2))
    print(markdown_table(report))


def markdown_table(report: dict) -> str:
    """The model card's corpus table: source, sentences, tokens, removed overlap, licence."""
    rows = [
        "| source | sentences | tokens | removed: evaluation / held-out / duplicate | case | licence |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in report["sources"].items():
        removed = (
            f"{s['removed_evaluation_overlap']:,} / {s['removed_held_out_overlap']:,} / {s['removed_duplicates']:,}"
        )
        rows.append(
            f"| `{name}` | {s['sentences']:,} | {s['tokens']:,} | {removed} | {s['case'].split(' ')[0]} | {s['licence']} |"
        )
    t = report["total"]
    removed = f"{t['removed_evaluation_overlap']:,} / {t['removed_held_out_overlap']:,} / {t['removed_duplicates']:,}"
    rows.append(f"| total | {t['sentences']:,} | {t['tokens']:,} | {removed} | | |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
