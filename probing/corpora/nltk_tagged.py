"""POS-tagged corpora in NLTK's on-disk formats: treebank, brown, conll2000, masc_tagged.

Each corpus is read with the same NLTK reader class and options as ``nltk.corpus.<name>``, from an NLTK
data folder holding ``corpora/<name>.zip`` or ``corpora/<name>/``; that folder is added to
``nltk.data.path`` (NLTK only opens files below its data path). Native tags go to ``xpos``; ``upos`` gets
the 12 universal tags of Petrov et al. through NLTK's ``universal_tagset`` maps (``en-ptb`` for
treebank, conll2000 and masc_tagged; ``en-brown`` for brown; a copy is bundled, unknown tags map to
``X`` as in ``nltk.tag.map_tag``). The doc id is the NLTK fileid; the sentence id is ``<fileid>:<n>``
with ``n`` the sentence's index in NLTK's ``tagged_sents(fileid)``.

Dropped, because they are not words of the text: treebank tokens tagged ``-NONE-`` (traces and empty
elements such as ``*-1`` or ``0``), and tokens whose word is empty (22 in masc_tagged, from items like
``_-``). A sentence left with no token is skipped. A token without a tag (masc_tagged has 67, items
without ``_``) gets ``""`` for xpos and upos.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from probing.corpora.base import Corpus, Origin, Sentence, make_sentence, reader_version
from probing.errors import InputError
from probing.paths import resources_dir


@dataclass(frozen=True)
class NltkCorpusSpec:
    """How ``nltk.corpus`` opens one tagged corpus (nltk/corpus/__init__.py); ``reader`` is a class name in
    ``nltk.corpus.reader`` (resolved when used, so importing this module does not import NLTK)."""

    subdir: str
    reader: str
    fileids: str | tuple[str, ...]
    tag_map: str
    options: dict = field(default_factory=dict)
    drop_tags: frozenset[str] = frozenset()

    @property
    def package(self) -> str:
        return self.subdir.split("/")[0]


NLTK_CORPORA: dict[str, NltkCorpusSpec] = {
    "treebank": NltkCorpusSpec(
        "treebank/combined",
        "BracketParseCorpusReader",
        r"wsj_.*\.mrg",
        "en-ptb",
        {"tagset": "wsj", "encoding": "ascii"},
        frozenset({"-NONE-"}),
    ),
    "brown": NltkCorpusSpec(
        "brown",
        "CategorizedTaggedCorpusReader",
        r"c[a-z]\d\d",
        "en-brown",
        {"cat_file": "cats.txt", "tagset": "brown", "encoding": "ascii"},
    ),
    "conll2000": NltkCorpusSpec(
        "conll2000",
        "ConllChunkCorpusReader",
        ("train.txt", "test.txt"),
        "en-ptb",
        {"chunk_types": ("NP", "VP", "PP"), "tagset": "wsj", "encoding": "ascii"},
    ),
    "masc_tagged": NltkCorpusSpec(
        "masc_tagged",
        "CategorizedTaggedCorpusReader",
        r"(spoken|written)/.*\.txt",
        "en-ptb",
        {"cat_file": "categories.txt", "tagset": "wsj", "encoding": "utf-8", "sep": "_"},
    ),
}


@functools.cache
def universal_map(name: str) -> dict[str, str]:
    """NLTK's ``universal_tagset/<name>.map`` (bundled copy) as a dict from native tag to universal tag."""
    path = resources_dir() / "data" / "universal_tagset" / f"{name}.map"
    mapping: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            fine, coarse = line.strip().split("\t")
            mapping[fine] = coarse
    return mapping


def has_corpus(nltk_dir: Path, corpus: str) -> bool:
    """Whether ``nltk_dir`` holds ``corpora/<package>.zip`` or ``corpora/<package>/``."""
    package = NLTK_CORPORA[corpus].package
    return (nltk_dir / "corpora" / f"{package}.zip").is_file() or (nltk_dir / "corpora" / package).is_dir()


def open_reader(corpus: str, nltk_dir: str | Path):
    """The NLTK reader for ``corpus`` rooted in ``nltk_dir``, exactly as ``nltk.corpus`` would build it."""
    import nltk.corpus.reader
    import nltk.data

    if corpus not in NLTK_CORPORA:
        raise InputError(f"unknown NLTK corpus {corpus!r}; expected one of {sorted(NLTK_CORPORA)}")
    spec = NLTK_CORPORA[corpus]
    root_dir = str(Path(nltk_dir).expanduser().resolve())
    if root_dir not in nltk.data.path:
        nltk.data.path.append(root_dir)
    for resource in (f"corpora/{spec.package}.zip/{spec.subdir}/", f"corpora/{spec.subdir}"):
        try:
            root = nltk.data.find(resource, paths=[root_dir])
            break
        except LookupError:
            continue
    else:
        raise FileNotFoundError(
            f"NLTK cannot open corpora/{spec.subdir} under {root_dir}: expected corpora/{spec.package}.zip or "
            f"corpora/{spec.subdir}/ (NLTK also refuses folders that other accounts can write to: chmod go-w)"
        )
    return getattr(nltk.corpus.reader, spec.reader)(root, spec.fileids, **spec.options)


def _sentences(corpus: str, reader, fileids: list[str]) -> Iterator[Sentence]:
    spec = NLTK_CORPORA[corpus]
    mapping = universal_map(spec.tag_map)
    for fileid in fileids:
        for n, tagged in enumerate(reader.tagged_sents(fileid)):
            kept = [(w, t or "") for w, t in tagged if w and t not in spec.drop_tags]
            if not kept:
                continue
            words = [w for w, _ in kept]
            xpos = [t for _, t in kept]
            upos = [mapping.get(t, "X") if t else "" for t in xpos]
            sid = f"{fileid}:{n}"
            yield make_sentence(f"{corpus} file {fileid}", id=sid, doc_id=fileid, words=words, upos=upos, xpos=xpos)


def read_nltk_tagged(
    corpus: str,
    nltk_dir: str | Path,
    *,
    fileids: Sequence[str] | Callable[[str], bool] | None = None,
    name: str | None = None,
    split: str = "all",
    license: str = "",
) -> Corpus:
    """Stream an NLTK tagged corpus from the NLTK data folder ``nltk_dir``.

    ``fileids`` restricts it to some files: a list, or a predicate on NLTK's fileids (in NLTK's order).
    """
    reader = open_reader(corpus, nltk_dir)
    available = reader.fileids()
    if fileids is None:
        chosen = list(available)
    elif callable(fileids):
        chosen = [f for f in available if fileids(f)]
    else:
        unknown = sorted(set(fileids) - set(available))
        if unknown:
            raise FileNotFoundError(f"{corpus} under {nltk_dir} has no file(s) {unknown[:5]}")
        chosen = list(fileids)
    return Corpus(
        lambda: _sentences(corpus, reader, chosen),
        name=name or corpus,
        split=split,
        source=f"{Path(nltk_dir) / 'corpora' / NLTK_CORPORA[corpus].subdir} (NLTK {corpus})",
        license=license,
        origin=_origin(corpus, reader, chosen),
    )


def _origin(corpus: str, reader, fileids: list[str]) -> Origin | None:
    """The files NLTK reads ``fileids`` from (the package's zip, or each file of an unzipped folder) and the
    bundled tag map."""
    root = reader.root
    zipped = getattr(root, "zipfile", None)
    if zipped is not None:
        files: tuple[Path, ...] = (Path(zipped.filename),)
    elif isinstance(getattr(root, "path", None), str):
        files = tuple(Path(root.path) / f for f in fileids)
    else:
        return None
    tag_map = resources_dir() / "data" / "universal_tagset" / f"{NLTK_CORPORA[corpus].tag_map}.map"
    return Origin(
        (*files, tag_map), reader_version(__file__, "nltk"), (("corpus", corpus), ("fileids", " ".join(fileids)))
    )
