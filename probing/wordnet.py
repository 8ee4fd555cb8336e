"""WordNet 3.0 sense inventory: the senses of a lemma in WordNet order, and facts about a sense key.

Two backends answer the same questions:

* ``NltkInventory``: full WordNet 3.0 as NLTK finds it (``$NLTK_DATA``: ``corpora/wordnet.zip`` or
  ``corpora/wordnet/``). Sense lists and sense numbers come straight from WordNet's ``index.sense``
  (read once, under a second); synset names and glosses come from ``nltk.corpus.wordnet``, which
  takes a few seconds to load and is loaded only when first needed.
* ``BundledInventory``: a compact subset shipped in ``probing/resources/wordnet/senses.tsv.gz``
  (built by ``scripts/make_wordnet_subset.py``), so the demo and the tests work without NLTK data.

A sense key is WordNet's ``lemma%ss_type:lex_filenum:lex_id:head_word:head_id``. Parts of speech
may be universal tags (NOUN, VERB, ADJ, ADV) or WordNet letters (n, v, a, r, s); adjectives
include satellites, as in WordNet's own sense numbering.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import textwrap
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import IO, NamedTuple

from probing.errors import InputError, ProbingError
from probing.paths import resources_dir

BUNDLED_PATH = resources_dir() / "wordnet" / "senses.tsv.gz"
BUNDLED_COLUMNS = ("key", "synset", "sense_number", "lexname", "gloss")
GLOSS_CHARS = 60

_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r", "n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}
_SS_TYPE_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}

# The 45 lexicographer files of WordNet 3.0, indexed by the lex_filenum field of a sense key
# (lexnames(5WN)).
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession "
    "noun.process noun.quantity noun.relation noun.shape noun.state noun.substance noun.time "
    "verb.body verb.change verb.cognition verb.communication verb.competition verb.consumption "
    "verb.contact verb.creation verb.emotion verb.motion verb.perception verb.possession "
    "verb.social verb.stative verb.weather adj.ppl"
).split()


class WordNetLookupError(ProbingError, LookupError):
    """A lemma or sense key that the inventory does not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SenseInfo(NamedTuple):
    """Everything the toolkit needs to know about one sense key."""

    key: str
    lemma: str
    pos: str  # n, v, a or r (satellites are a)
    sense_number: int  # 1-based WordNet sense number of the lemma within its part of speech
    synset: str  # NLTK synset name, e.g. "play.v.01"
    lexname: str  # lexicographer file = supersense, e.g. "verb.competition"
    gloss: str  # the definition, shortened to GLOSS_CHARS characters


def normalize_pos(pos: str) -> str:
    """Map a universal tag (NOUN/VERB/ADJ/ADV) or WordNet letter (n/v/a/s/r) to n, v, a or r."""
    try:
        return _POS[pos]
    except (KeyError, TypeError):
        raise InputError(
            f"part of speech {pos!r} is not a WordNet part of speech; expected one of "
            "NOUN, VERB, ADJ, ADV or n, v, a, s, r"
        ) from None


def normalize_lemma(lemma: str) -> str:
    """WordNet's spelling of a lemma: lower case, words joined by underscores."""
    return "_".join(lemma.strip().lower().split())


def parse_sense_key(key: str) -> tuple[str, str, int]:
    """Split a sense key into (lemma, pos letter n/v/a/r, lex_filenum); ValueError if malformed."""
    lemma, sep, rest = key.partition("%")
    fields = rest.split(":")
    if not sep or not lemma or len(fields) != 5 or fields[0] not in _SS_TYPE_POS or not fields[1].isdigit():
        raise InputError(
            f"{key!r} is not a WordNet sense key; expected lemma%ss_type:lex_filenum:lex_id:head_word:head_id, "
            "e.g. 'play%2:33:00::'"
        )
    return lemma, _SS_TYPE_POS[fields[0]], int(fields[1])


def short_gloss(definition: str, width: int = GLOSS_CHARS) -> str:
    """The first ``width`` characters of a definition, cut at a word boundary with an ellipsis."""
    return textwrap.shorten(definition, width=width, placeholder="…")


class SenseInventory(ABC):
    """The senses of each (lemma, part of speech), in WordNet order, and facts about each sense key."""

    name: str

    @abstractmethod
    def _keys(self, lemma: str, pos: str) -> list[str] | None:
        """Sense keys of a normalized lemma and pos letter in sense-number order, or None if unknown."""

    @abstractmethod
    def info(self, key: str) -> SenseInfo:
        """All facts about one sense key; WordNetLookupError if the inventory lacks it."""

    @abstractmethod
    def provenance(self) -> dict:
        """Where the inventory comes from, for result files."""

    @abstractmethod
    def fingerprint(self) -> str:
        """A digest of what the inventory answers: cached results keyed by it follow a change of WordNet."""

    def senses(self, lemma: str, pos: str) -> list[str]:
        """Sense keys of ``lemma`` as ``pos``, ordered by WordNet sense number (first = most frequent)."""
        p = normalize_pos(pos)
        keys = self._keys(normalize_lemma(lemma), p)
        if keys is None:
            raise WordNetLookupError(
                f"lemma {lemma!r} with part of speech {pos!r} is not in the {self.name} sense inventory"
                + self._unknown_hint()
            )
        return list(keys)

    def has_lemma(self, lemma: str, pos: str) -> bool:
        """True if ``senses(lemma, pos)`` would succeed."""
        return self._keys(normalize_lemma(lemma), normalize_pos(pos)) is not None

    def first_sense(self, lemma: str, pos: str) -> str:
        """The sense key with WordNet sense number 1."""
        return self.senses(lemma, pos)[0]

    def lexname(self, key: str) -> str:
        """The supersense (lexicographer file) of a sense key, e.g. ``noun.artifact``."""
        return self.info(key).lexname

    def gloss(self, key: str) -> str:
        """The definition of a sense key's synset, shortened to about 60 characters."""
        return self.info(key).gloss

    def synset_name(self, key: str) -> str:
        """The NLTK name of a sense key's synset, e.g. ``play.v.01``."""
        return self.info(key).synset

    def sense_number(self, key: str) -> int:
        """WordNet sense number (1-based) of a sense key within its lemma and part of speech."""
        return self.info(key).sense_number

    def _unknown_key(self, key: str) -> WordNetLookupError:
        parse_sense_key(key)
        return WordNetLookupError(f"sense key {key!r} is not in the {self.name} sense inventory" + self._unknown_hint())

    def _unknown_hint(self) -> str:
        return ""


def nltk_wordnet_root():
    """The NLTK path pointer to WordNet (zip first, as NLTK's corpus loader does), or None."""
    import nltk

    for resource in ("corpora/wordnet.zip/wordnet/", "corpora/wordnet/"):
        try:
            return nltk.data.find(resource)
        except LookupError:
            continue
    return None


class NltkInventory(SenseInventory):
    """Full WordNet 3.0 through NLTK; see the module docstring for what is loaded when."""

    name = "nltk"

    def __init__(self, root=None):
        self.root = root if root is not None else nltk_wordnet_root()
        if self.root is None:
            raise FileNotFoundError(
                "NLTK WordNet not found: put corpora/wordnet.zip under a folder named in $NLTK_DATA "
                "(or use inventory('bundled'))"
            )
        self._check_version()
        self._by_lemma: dict[tuple[str, str], list[str]] | None = None
        self._sense_number: dict[str, int] = {}
        self._wn = None
        self._fingerprint: str | None = None

    def _check_version(self) -> None:
        with self.root.join("data.adj").open() as f:
            head = f.read(4096).decode("utf-8", "replace")
        if "WordNet 3.0 Copyright" not in head:
            raise InputError(f"{self.root}: data.adj is not WordNet 3.0 (sense keys here are WordNet 3.0 keys)")

    def _index(self) -> dict[tuple[str, str], list[str]]:
        if self._by_lemma is None:
            self._by_lemma, self._sense_number = _read_index_sense(self.root.join("index.sense").open(), str(self.root))
        return self._by_lemma

    def _keys(self, lemma: str, pos: str) -> list[str] | None:
        return self._index().get((lemma, pos))

    def _wordnet(self):
        if self._wn is None:
            from nltk.corpus import wordnet

            self._wn = wordnet
        return self._wn

    def info(self, key: str) -> SenseInfo:
        self._index()
        number = self._sense_number.get(key)
        if number is None:
            raise self._unknown_key(key)
        lemma, pos, lex_filenum = parse_sense_key(key)
        synset = self._wordnet().lemma_from_key(key).synset()
        return SenseInfo(
            key, lemma, pos, number, synset.name(), LEXNAMES[lex_filenum], short_gloss(synset.definition())
        )

    def lexname(self, key: str) -> str:
        """The supersense, from the key's lex_filenum (no need to load the synset database)."""
        self._index()
        if key not in self._sense_number:
            raise self._unknown_key(key)
        return LEXNAMES[parse_sense_key(key)[2]]

    def sense_number(self, key: str) -> int:
        self._index()
        if key not in self._sense_number:
            raise self._unknown_key(key)
        return self._sense_number[key]

    def provenance(self) -> dict:
        return {"inventory": "nltk", "wordnet": "3.0", "root": str(self.root)}

    def fingerprint(self) -> str:
        """sha256 of ``index.sense``, which fixes every lemma's senses, their order and their keys."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            with self.root.join("index.sense").open() as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            self._fingerprint = digest.hexdigest()
        return self._fingerprint


def _read_index_sense(raw: IO[bytes], where: str) -> tuple[dict[tuple[str, str], list[str]], dict[str, int]]:
    """Parse WordNet's ``index.sense`` (``key offset sense_number tag_cnt`` per line)."""
    numbered: dict[tuple[str, str], list[tuple[int, str]]] = {}
    sense_number: dict[str, int] = {}
    with raw:
        for lineno, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8"), 1):
            fields = line.split()
            try:
                key, number = fields[0], int(fields[2])
                lemma, pos, _ = parse_sense_key(key)
            except (IndexError, ValueError) as e:
                raise InputError(
                    f"{where}/index.sense line {lineno}: expected 'key offset sense_number tag_cnt' ({e})"
                ) from None
            numbered.setdefault((lemma, pos), []).append((number, key))
            sense_number[key] = number
    by_lemma = {lp: [k for _, k in sorted(pairs)] for lp, pairs in numbered.items()}
    return by_lemma, sense_number


class BundledInventory(SenseInventory):
    """The compact subset in ``senses.tsv.gz``: one row per sense key, grouped by lemma in WordNet order."""

    name = "bundled"

    def __init__(self, path: str | Path = BUNDLED_PATH):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(
                f"bundled WordNet subset not found: {self.path} (run scripts/make_wordnet_subset.py)"
            )
        self._by_lemma: dict[tuple[str, str], list[str]] = {}
        self._info: dict[str, SenseInfo] = {}
        try:
            with gzip.open(self.path, "rt", encoding="utf-8") as f:
                self._load(f)
        except (OSError, EOFError, UnicodeDecodeError) as e:
            raise InputError(f"{self.path}: not a readable gzip-compressed UTF-8 table ({e})") from None

    def _load(self, lines: Iterable[str]) -> None:
        lines = iter(lines)
        header = next(lines, "").rstrip("\n").split("\t")
        if tuple(header) != BUNDLED_COLUMNS:
            raise InputError(f"{self.path} line 1: expected the header {BUNDLED_COLUMNS}, got {tuple(header)}")
        for lineno, line in enumerate(lines, 2):
            fields = line.rstrip("\n").split("\t")
            try:
                key, synset, number, lexname, gloss = fields
                lemma, pos, _ = parse_sense_key(key)
                info = SenseInfo(key, lemma, pos, int(number), synset, lexname, gloss)
            except ValueError as e:
                raise InputError(
                    f"{self.path} line {lineno}: expected {len(BUNDLED_COLUMNS)} tab-separated fields "
                    f"{BUNDLED_COLUMNS} ({e})"
                ) from None
            keys = self._by_lemma.setdefault((lemma, pos), [])
            if info.sense_number != len(keys) + 1:
                raise InputError(
                    f"{self.path} line {lineno}: {key} has sense number {number}, expected {len(keys) + 1} "
                    "(rows must list every sense of a lemma in WordNet order)"
                )
            keys.append(key)
            self._info[key] = info

    def _keys(self, lemma: str, pos: str) -> list[str] | None:
        return self._by_lemma.get((lemma, pos))

    def info(self, key: str) -> SenseInfo:
        try:
            return self._info[key]
        except KeyError:
            raise self._unknown_key(key) from None

    def _unknown_hint(self) -> str:
        return (
            f" (it covers only {len(self._by_lemma):,} lemma/POS pairs; set $NLTK_DATA to a folder with "
            "corpora/wordnet.zip for full WordNet)"
        )

    def __len__(self) -> int:
        return len(self._info)

    def fingerprint(self) -> str:
        """sha256 of the bundled table file."""
        from probing._io import sha256_file

        return sha256_file(self.path)

    def provenance(self) -> dict:
        return {
            "inventory": "bundled",
            "wordnet": "3.0",
            "path": str(self.path),
            "n_keys": len(self._info),
            "n_lemmas": len(self._by_lemma),
        }


_CACHE: dict[str, SenseInventory] = {}


def inventory(kind: str = "auto") -> SenseInventory:
    """The shared sense inventory: ``"nltk"``, ``"bundled"``, or ``"auto"`` (NLTK WordNet if found, else bundled).

    Each kind is built once per process; NLTK's synset database is loaded only when first needed.
    """
    if kind == "auto":
        kind = "nltk" if nltk_wordnet_root() is not None else "bundled"
    if kind not in ("nltk", "bundled"):
        raise InputError(f"inventory kind {kind!r} is not one of 'auto', 'nltk', 'bundled'")
    if kind not in _CACHE:
        _CACHE[kind] = NltkInventory() if kind == "nltk" else BundledInventory()
    return _CACHE[kind]
