"""probing.wordnet: POS and key parsing, the bundled subset, the index.sense reader, and NLTK agreement.

Expected keys, orders, synset names and lexnames below were looked up in NLTK WordNet 3.0
(``wn.lemmas(lemma, pos)``, ``wn.lemma_from_key(key).synset()``) and hard-coded, so they are checked
everywhere; the comparison against live NLTK runs only where NLTK WordNet is installed.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import nltk
import pytest

import probing.wordnet as wordnet
from probing.paths import resources_dir
from probing.wordnet import (
    BundledInventory,
    NltkInventory,
    WordNetLookupError,
    inventory,
    normalize_pos,
    parse_sense_key,
    short_gloss,
)

FIXTURES = Path(__file__).parent / "fixtures" / "wsd"

# (lemma, pos) -> (number of senses, first keys in WordNet order), from NLTK WordNet 3.0.
EXPECTED_SENSES = {
    ("play", "VERB"): (35, ["play%2:33:00::", "play%2:41:12::", "play%2:36:12::", "play%2:36:02::"]),
    ("bank", "NOUN"): (10, ["bank%1:17:01::", "bank%1:14:00::", "bank%1:17:00::", "bank%1:14:01::"]),
    ("bank", "v"): (8, ["bank%2:38:00::", "bank%2:35:00::", "bank%2:40:02::", "bank%2:40:03::"]),
    ("serve", "VERB"): (15, ["serve%2:42:03::", "serve%2:33:00::", "serve%2:42:01::", "serve%2:41:00::"]),
    ("hard", "ADJ"): (12, ["hard%3:00:06::", "hard%3:00:02::", "hard%3:00:01::", "hard%5:00:00:strong:00"]),
    ("hard", "ADV"): (10, ["hard%4:02:00::", "hard%4:02:05::", "hard%4:02:07::", "hard%4:02:04::"]),
    ("peculiar", "s"): (
        4,
        [
            "peculiar%5:00:00:strange:00",
            "peculiar%5:00:00:specific:00",
            "peculiar%5:00:00:unusual:00",
            "peculiar%5:00:00:characteristic:00",
        ],
    ),
    ("mouse", "n"): (4, ["mouse%1:05:00::", "mouse%1:26:00::", "mouse%1:18:00::", "mouse%1:06:00::"]),
}
# key -> (synset name, lexname, sense number), from NLTK WordNet 3.0.
EXPECTED_INFO = {
    "play%2:33:00::": ("play.v.01", "verb.competition", 1),
    "play%2:36:02::": ("act.v.03", "verb.creation", 4),
    "bank%1:14:00::": ("depository_financial_institution.n.01", "noun.group", 2),
    "serve%2:41:00::": ("service.v.01", "verb.social", 4),
    "hard%5:00:00:strong:00": ("hard.s.01", "adj.all", 4),
    "peculiar%5:00:00:strange:00": ("curious.s.01", "adj.all", 1),
    "mouse%1:06:00::": ("mouse.n.04", "noun.artifact", 4),
}


@pytest.fixture(scope="module")
def bundled() -> BundledInventory:
    return BundledInventory()


def test_normalize_pos_accepts_universal_tags_and_wordnet_letters():
    # Satellites (s) are adjectives: WordNet numbers them together with head adjectives.
    assert [normalize_pos(p) for p in ["NOUN", "VERB", "ADJ", "ADV", "n", "v", "a", "s", "r"]] == list("nvarnvaar")
    with pytest.raises(ValueError, match="'PRON'"):
        normalize_pos("PRON")


def test_parse_sense_key_and_its_errors():
    assert parse_sense_key("play%2:33:00::") == ("play", "v", 33)
    assert parse_sense_key("peculiar%5:00:00:strange:00") == ("peculiar", "a", 0)
    for bad in ["play", "play%2:33:00", "play%9:33:00::", "%2:33:00::"]:
        with pytest.raises(ValueError, match="not a WordNet sense key"):
            parse_sense_key(bad)


def test_short_gloss_cuts_at_a_word_boundary():
    long = "a hand-operated electronic device that controls the coordinates of a cursor on your computer screen"
    assert short_gloss(long) == "a hand-operated electronic device that controls the…"  # 52 chars + "…" <= 60
    assert short_gloss("very strong or vigorous") == "very strong or vigorous"


@pytest.mark.parametrize("lemma_pos", list(EXPECTED_SENSES))
def test_bundled_senses_match_wordnet(bundled, lemma_pos):
    n, first = EXPECTED_SENSES[lemma_pos]
    senses = bundled.senses(*lemma_pos)
    assert len(senses) == n and senses[: len(first)] == first
    assert bundled.first_sense(*lemma_pos) == first[0]


def test_bundled_key_facts_match_wordnet(bundled):
    for key, (synset, lexname, number) in EXPECTED_INFO.items():
        assert (bundled.synset_name(key), bundled.lexname(key), bundled.sense_number(key)) == (synset, lexname, number)
    assert bundled.gloss("play%2:33:00::") == "participate in games or sport"
    assert bundled.gloss("mouse%1:06:00::") == "a hand-operated electronic device that controls the…"


def test_bundled_lemma_spelling_is_normalized(bundled):
    # WordNet lemmas are lower case with underscores, so "Change Ringing" is change_ringing.
    assert bundled.senses("Bank", "NOUN") == bundled.senses("bank", "n")
    assert bundled.has_lemma("take place", "VERB") and bundled.senses("take place", "VERB")[0].startswith(
        "take_place%2:"
    )


def test_bundled_unknown_lemma_and_key_errors_name_them(bundled):
    with pytest.raises(WordNetLookupError, match="'qwertyuiop'.*bundled.*NLTK_DATA"):
        bundled.senses("qwertyuiop", "NOUN")
    assert not bundled.has_lemma("qwertyuiop", "NOUN")
    with pytest.raises(WordNetLookupError, match="'bank%1:99:00::'"):
        bundled.lexname("bank%1:99:00::")
    with pytest.raises(ValueError, match="not a WordNet sense key"):
        bundled.gloss("bank")


def _write_table(path: Path, rows: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    return path


def test_bundled_loader_rejects_bad_files(tmp_path):
    header = "key\tsynset\tsense_number\tlexname\tgloss"
    good = "bank%1:17:01::\tbank.n.01\t1\tnoun.object\tsloping land"
    with pytest.raises(ValueError, match="line 1: expected the header"):
        BundledInventory(_write_table(tmp_path / "a.tsv.gz", ["key\tsynset", good]))
    with pytest.raises(ValueError, match="line 3: expected 5 tab-separated fields"):
        BundledInventory(_write_table(tmp_path / "b.tsv.gz", [header, good, "bank%1:14:00::\tx.n.01\t2"]))
    with pytest.raises(ValueError, match="line 2: .*sense number 2, expected 1"):
        BundledInventory(_write_table(tmp_path / "c.tsv.gz", [header, good.replace("\t1\t", "\t2\t")]))
    (tmp_path / "e.tsv.gz").write_text(header)
    with pytest.raises(ValueError, match="e.tsv.gz: not a readable gzip"):
        BundledInventory(tmp_path / "e.tsv.gz")
    with pytest.raises(FileNotFoundError, match="make_wordnet_subset"):
        BundledInventory(tmp_path / "missing.tsv.gz")
    assert len(BundledInventory(_write_table(tmp_path / "d.tsv.gz", [header, good]))) == 1


def _nltk_pointer(monkeypatch, folder: Path):
    """An NLTK path pointer to ``folder``; NLTK only opens files under its data path, so add it there."""
    monkeypatch.setattr(nltk.data, "path", [*nltk.data.path, str(folder)])
    return nltk.data.FileSystemPathPointer(str(folder))


def test_index_sense_reader_orders_by_sense_number_and_merges_satellites(monkeypatch):
    # The fixture holds WordNet's own index.sense lines (sorted by key) for bank, hard and peculiar.
    inv = NltkInventory(root=_nltk_pointer(monkeypatch, FIXTURES / "wordnet_mini"))
    assert inv.senses("bank", "NOUN")[:4] == EXPECTED_SENSES[("bank", "NOUN")][1]
    # hard as ADJ: head adjectives (ss_type 3) and satellites (5) interleave by sense number 1..12.
    assert inv.senses("hard", "ADJ") == [
        "hard%3:00:06::",
        "hard%3:00:02::",
        "hard%3:00:01::",
        "hard%5:00:00:strong:00",
        "hard%5:00:01:effortful:00",
        "hard%3:00:00::",
        "hard%3:00:05::",
        "hard%3:00:03::",
        "hard%5:00:00:indulgent:00",
        "hard%5:00:00:alcoholic:00",
        "hard%5:00:00:bad:00",
        "hard%5:00:00:stale:00",
    ]
    assert inv.sense_number("hard%5:00:00:stale:00") == 12
    assert inv.lexname("bank%2:38:00::") == "verb.motion"  # lex_filenum 38 in lexnames(5WN)
    with pytest.raises(WordNetLookupError, match="'play'"):
        inv.senses("play", "VERB")


def test_nltk_backend_rejects_a_non_3_0_wordnet(tmp_path, monkeypatch):
    (tmp_path / "data.adj").write_text("  1 WordNet 2.1 Copyright 2005 by Princeton University.\n")
    with pytest.raises(ValueError, match="not WordNet 3.0"):
        NltkInventory(root=_nltk_pointer(monkeypatch, tmp_path))


def test_inventory_auto_falls_back_to_bundled(monkeypatch):
    monkeypatch.setattr(wordnet, "nltk_wordnet_root", lambda: None)
    monkeypatch.setattr(wordnet, "_CACHE", {})
    assert inventory("auto").name == "bundled"
    assert inventory("auto") is inventory("bundled")  # built once
    with pytest.raises(FileNotFoundError, match="NLTK_DATA"):
        inventory("nltk")
    with pytest.raises(ValueError, match="'wordnet'"):
        inventory("wordnet")


def test_lexnames_table_matches_the_wordnet_file():
    # The 45 names in lexnames(5WN) order; 0, 29 and 44 are the boundaries of the noun/verb/adj blocks.
    assert len(wordnet.LEXNAMES) == 45
    assert (wordnet.LEXNAMES[0], wordnet.LEXNAMES[3], wordnet.LEXNAMES[29], wordnet.LEXNAMES[44]) == (
        "adj.all",
        "noun.Tops",
        "verb.body",
        "adj.ppl",
    )


DEMO_SEMCOR = resources_dir() / "data" / "demo-semcor"


@pytest.mark.skipif(not DEMO_SEMCOR.is_dir(), reason="bundled demo-semcor slice not present")
def test_bundled_inventory_covers_the_demo_semcor_slice(bundled):
    """The demo runs WSD on the bundled SemCor slice without NLTK: every instance's lemma/POS and every
    gold key must be in the bundled subset (it holds all of SemCor's instance lemmas)."""
    import xml.etree.ElementTree as ET

    for split in ("train", "test"):
        with gzip.open(DEMO_SEMCOR / f"semcor-demo-{split}.data.xml.gz") as f:
            pairs = {(el.get("lemma"), el.get("pos")) for _, el in ET.iterparse(f) if el.tag == "instance"}
        assert len(pairs) > 1000, split  # thousands of lemma/POS pairs per split
        assert [p for p in pairs if not bundled.has_lemma(*p)] == []
        with gzip.open(DEMO_SEMCOR / f"semcor-demo-{split}.gold.key.txt.gz", "rt") as f:
            keys = {k for line in f for k in line.split()[1:]}
        assert [k for k in keys if k not in bundled._info] == []


NLTK_ROOT = wordnet.nltk_wordnet_root()
needs_nltk = pytest.mark.skipif(NLTK_ROOT is None, reason="NLTK WordNet data not installed (set $NLTK_DATA)")


@needs_nltk
@pytest.mark.slow
def test_bundled_and_nltk_backends_agree_with_nltk_wordnet(bundled):
    """For the lemmas above and every 50th bundled lemma/POS pair: the same keys in the same order, and the
    same synset name, lexname, gloss and sense number, as NLTK's own synset lookup (sense i of a lemma
    is ``wn.synset(f"{lemma}.{pos}.{i:02d}")``, read from WordNet's index.pos files, not index.sense)."""
    from nltk.corpus import wordnet as wn
    from nltk.corpus.reader.wordnet import WordNetError

    full = NltkInventory()
    pairs = sorted(bundled._by_lemma)[::50] + [(lemma, normalize_pos(p)) for lemma, p in EXPECTED_SENSES]
    for lemma, p in pairs:
        expected = []
        for i in range(1, 200):
            try:
                synset = wn.synset(f"{lemma}.{p}.{i:02d}")
            except WordNetError:
                break
            (key,) = [x.key() for x in synset.lemmas() if x.name().lower() == lemma]
            expected.append((key, synset.name(), synset.lexname(), short_gloss(synset.definition()), i))
        for inv in (bundled, full):
            keys = inv.senses(lemma, p)
            assert [
                (k, inv.synset_name(k), inv.lexname(k), inv.gloss(k), inv.sense_number(k)) for k in keys
            ] == expected, f"{inv.name}: {lemma}/{p}"


@needs_nltk
def test_lexnames_file_agrees():
    lines = NLTK_ROOT.join("lexnames").open().read().decode().split("\n")
    assert [line.split("\t")[1] for line in lines if line.strip()] == wordnet.LEXNAMES
