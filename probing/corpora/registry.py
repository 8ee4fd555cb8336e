"""Named datasets: where each is found, how a user gets it, and how it is read.

``load(name, split)`` looks for a dataset, in this order:

1. ``path=``: a file, the folder holding the files, or a root laid out like ``shared/data`` (or, for the
   WSD sets, Raganato's unpacked ``WSD_Evaluation_Framework``); when it is given, nothing else is searched;
2. ``$PROBING_DATA``, laid out like ``shared/data``: ``ud/en_ewt/``, ``wsd/<name>/``, ``nltk_data/``;
3. for NLTK corpora, every folder on NLTK's data path (``$NLTK_DATA``, ``~/nltk_data``, ...);
4. ``probing.paths.cache_dir()/data``, the same layout, where ``get(name)`` puts downloads;
5. for ``demo-ud`` and ``demo-semcor`` only, the slices bundled in ``probing/resources/data``.

A full dataset never falls back to its bundled demo slice. Files may be gzip-compressed (``*.gz``).

Deterministic splits made here:

- ``ptb-sample`` (NLTK's 10% Penn Treebank sample, 199 files): train = wsj_0001-wsj_0159,
  dev = wsj_0160-wsj_0179, test = wsj_0180-wsj_0199.
- ``semcor``: ``all``; or by document, in file order: the document with 0-based index ``i`` is in
  ``test`` when ``i % 5 == 4`` (70 of SemCor's 352 documents), else in ``train``.
- ``conll2000``: NLTK's ``train.txt`` and ``test.txt``.

The WSD test sets have the single split ``test``; brown, masc and semcor have ``all``.

Your own files need no registry entry: ``load`` also takes a *file spec*, ``conllu:PATH`` (CoNLL-U, every
column kept), ``text:PATH`` (one whitespace-tokenized sentence per line) or ``raganato:XML[:KEY]``
(Raganato's WSD format; the key file defaults to the ``.gold.key.txt`` beside the XML). The corpus is then
named after the file (its stem: ``my-essays.conllu`` -> ``my-essays``) and the split is a free label
(default ``all``).
"""

from __future__ import annotations

import abc
import shutil
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from probing._io import atomic_path
from probing.corpora._files import base_name, with_gz
from probing.corpora.base import Corpus, reader_version
from probing.corpora.conllu import read_conllu
from probing.corpora.nltk_tagged import has_corpus, read_nltk_tagged
from probing.corpora.raganato import read_raganato
from probing.corpora.text import read_text
from probing.errors import InputError, ProbingError
from probing.paths import cache_dir, data_dir, resources_dir

if TYPE_CHECKING:
    import pandas as pd

UD_EWT_URL = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16/{file}"
UD_EWT_FILES = {  # file name: (sha256, bytes), from shared/data/ud/en_ewt/README.md
    "en_ewt-ud-train.conllu": ("3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b", 14_203_025),
    "en_ewt-ud-dev.conllu": ("531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6", 1_805_545),
    "en_ewt-ud-test.conllu": ("e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd", 1_804_515),
}
# Published over plain http only, with no checksum from the publisher: fetched with allow_http=True,
# checked to be a zip before its first-download hash is recorded, unpacked within the caps below.
RAGANATO_URL = "http://lcl.uniroma1.it/wsdeval/data/WSD_Evaluation_Framework.zip"
RAGANATO_MAX_MEMBERS = 10_000  # the 2017 framework zip has a few hundred members
RAGANATO_MAX_BYTES = (
    256 << 20
)  # unpacked size of the files copied out (the real WSD files are tens of MB; a bomb stops here)
RAGANATO_TERMS = (
    "Raganato et al.'s WSD Evaluation Framework holds SemCor (WordNet 3.0 licence) and the Senseval-2/3 and "
    "SemEval-2007/2013/2015 test sets, research data released without a licence. Downloading it is your own "
    "choice: by doing so you accept the terms of each dataset and of http://lcl.uniroma1.it/wsdeval/ "
    "(cite Raganato et al., EACL 2017, and the task papers)."
)
# In Raganato's zip: WSD_Evaluation_Framework/{Training_Corpora/SemCor, Evaluation_Datasets/<name>}/<name>.*
RAGANATO_SETS = ("semcor", "senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015", "ALL")
BUNDLED_NOTE = "nothing to get: it is bundled with probing"


class DatasetNotFound(ProbingError, FileNotFoundError):
    """A dataset is nowhere it was looked for; the message lists the places and the command that gets it."""


class Dataset(abc.ABC):
    """One named dataset: its splits, where its files sit, how to read them and how to get them."""

    layouts: tuple[str, ...] = ()  # sub-folders of a data root ($PROBING_DATA, the cache, path=)
    path_layouts: tuple[str, ...] = ()  # further sub-folders tried under path= only
    bundled: Path | None = None

    def __init__(self, name: str, splits: tuple[str, ...], license: str, about: str) -> None:
        self.name, self.splits, self.license, self.about = name, splits, license, about

    @abc.abstractmethod
    def expected(self, split: str) -> str:
        """What a folder must hold (for messages)."""

    @abc.abstractmethod
    def holds(self, folder: Path, split: str) -> bool:
        """Whether ``folder`` has this split's files."""

    @abc.abstractmethod
    def open(self, folder: Path, split: str) -> Corpus:
        """The corpus of ``split`` from a folder that ``holds`` it."""

    @abc.abstractmethod
    def get_command(self) -> str:
        """The command a user runs to get the data."""

    @abc.abstractmethod
    def download(self) -> Path:
        """Fetch the data into the download cache; returns the folder ``load`` will then find."""

    def open_file(self, file: Path, split: str) -> Corpus:
        raise DatasetNotFound(
            f"{self.name}: path= must be a folder holding {self.expected(split)}, got the file {file}"
        )

    def extra_places(self) -> list[tuple[Path, str]]:
        """Folders searched after ``$PROBING_DATA`` and before the download cache."""
        return []

    def places(self, path: Path | None) -> list[tuple[Path, str]]:
        """Candidate folders in search order, each with why it is searched."""
        if path is not None:
            return [(path, "path=")] + [(path / sub, "path=") for sub in self.layouts + self.path_layouts]
        found: list[tuple[Path, str]] = []
        root = data_dir()
        if root is not None:
            found += [(root / sub, "$PROBING_DATA") for sub in self.layouts]
        found += self.extra_places()
        found += [(cache_dir() / "data" / sub, "download cache") for sub in self.layouts]
        if self.bundled is not None:
            found.append((self.bundled, "bundled with probing"))
        return found

    def find(self, split: str, path: Path | None = None) -> Path | None:
        for folder, _ in self.places(path):
            if folder.is_dir() and self.holds(folder, split):
                return folder
        return None

    def not_found(self, split: str, path: Path | None) -> DatasetNotFound:
        lines = [f"dataset {self.name!r} (split {split!r}) not found. Looked for {self.expected(split)} in:"]
        if path is None and data_dir() is None:
            lines.append("  $PROBING_DATA  (not set)")
        lines += [f"  {folder}  ({why})" for folder, why in self.places(path)]
        lines.append(f"Get it with:  {self.get_command()}")
        lines.append(
            "or pass path= (a folder holding the files), or set $PROBING_DATA to a folder laid out like shared/data."
        )
        return DatasetNotFound("\n".join(lines))


class ConllDataset(Dataset):
    """CoNLL-U files, one per split, named by ``file`` (``{split}`` is replaced)."""

    def __init__(
        self, name, splits, license, about, *, file: str, layout: str | None = None, bundled: Path | None = None
    ) -> None:
        super().__init__(name, splits, license, about)
        self.file = file
        self.layouts = (layout,) if layout else ()
        self.bundled = bundled

    def expected(self, split):
        return f"{self.file.format(split=split)}[.gz]"

    def holds(self, folder, split):
        return with_gz(folder / self.file.format(split=split)) is not None

    def open(self, folder, split):
        return self.open_file(with_gz(folder / self.file.format(split=split)), split)

    def open_file(self, file, split):
        return read_conllu(file, name=self.name, split=split, license=self.license)

    def get_command(self):
        return BUNDLED_NOTE if self.bundled else f"probing data get {self.name}"

    def download(self):
        if self.bundled:
            return self.bundled
        from probing.download import fetch

        dest = cache_dir() / "data" / self.layouts[0]
        hint = self.get_command()
        for file, (sha256, size) in UD_EWT_FILES.items():
            fetch(UD_EWT_URL.format(file=file), sha256=sha256, size=size, dest=dest / file, hint=hint)
        fetch(UD_EWT_URL.format(file="LICENSE.txt"), dest=dest / "LICENSE.txt", hint=hint)
        return dest


class NltkDataset(Dataset):
    """A tagged corpus in an NLTK data folder; ``fileids(split)`` picks a split's files."""

    layouts = ("nltk_data",)

    def __init__(
        self,
        name,
        splits,
        license,
        about,
        *,
        corpus: str,
        package: str,
        fileids: Callable[[str], Callable[[str], bool] | None] | None = None,
    ) -> None:
        super().__init__(name, splits, license, about)
        self.corpus, self.package, self.fileids = corpus, package, fileids

    def extra_places(self):
        import nltk.data

        return [(Path(p), "NLTK data path") for p in nltk.data.path if isinstance(p, str)]

    def expected(self, split):
        return f"corpora/{self.package}.zip or corpora/{self.package}/"

    def holds(self, folder, split):
        return has_corpus(folder, self.corpus)

    def open(self, folder, split):
        fileids = self.fileids(split) if self.fileids else None
        return read_nltk_tagged(self.corpus, folder, fileids=fileids, name=self.name, split=split, license=self.license)

    def get_command(self):
        return f"python -m nltk.downloader {self.package}   (or: probing data get {self.name})"

    def download(self):
        import nltk

        dest = cache_dir() / "data" / "nltk_data"
        if not nltk.download(self.package, download_dir=str(dest)):
            raise RuntimeError(f"nltk.download({self.package!r}, download_dir={str(dest)!r}) failed")
        return dest


class WsdDataset(Dataset):
    """A Raganato-format WSD set ``<stem>.data.xml`` + ``<stem>.gold.key.txt`` (``{split}`` is replaced)."""

    def __init__(
        self,
        name,
        splits,
        license,
        about,
        *,
        stem: str,
        raganato_dir: str | None = None,
        bundled: Path | None = None,
        documents: Callable[[str], Callable[[int], bool] | None] | None = None,
    ) -> None:
        super().__init__(name, splits, license, about)
        self.stem, self.bundled, self.documents = stem, bundled, documents
        if raganato_dir is not None:
            self.layouts = (f"wsd/{stem}",)
            self.path_layouts = (raganato_dir, f"WSD_Evaluation_Framework/{raganato_dir}")

    def _stem(self, split: str) -> str:
        return self.stem.format(split=split)

    def expected(self, split):
        stem = self._stem(split)
        return f"{stem}.data.xml[.gz] and {stem}.gold.key.txt[.gz]"

    def holds(self, folder, split):
        stem = self._stem(split)
        return with_gz(folder / f"{stem}.data.xml") is not None and with_gz(folder / f"{stem}.gold.key.txt") is not None

    def open(self, folder, split):
        return self.open_file(with_gz(folder / f"{self._stem(split)}.data.xml"), split)

    def open_file(self, file, split):
        corpus = read_raganato(file, name=self.name, split=split, license=self.license)
        keep = self.documents(split) if self.documents else None
        return corpus if keep is None else _documents_where(corpus, keep, split)

    def get_command(self):
        if self.bundled:
            return BUNDLED_NOTE
        return f"probing data get {self.name}   (downloads Raganato et al.'s framework; research use, see its terms)"

    def download(self):
        if self.bundled:
            return self.bundled
        from probing.download import fetch

        print(RAGANATO_TERMS, file=sys.stderr)
        dest = cache_dir() / "data" / "wsd"
        archive = fetch(RAGANATO_URL, hint=f"probing data get {self.name}", kind="zip", allow_http=True)
        unpack_raganato(archive, dest)
        return dest / self.stem


class TextDataset(Dataset):
    """Any plain-text file given with ``path=``; the split is a free label."""

    def expected(self, split):
        return "a text file"

    def holds(self, folder, split):
        return False

    def open(self, folder, split):
        raise DatasetNotFound(f"text: path= must be a file; {folder} is a folder")

    def open_file(self, file, split):
        return read_text(file, split=split, license=self.license)

    def get_command(self):
        return "nothing to get: pass path= to a text file, one whitespace-tokenized sentence per line"

    def download(self):
        raise InputError(f"text: {self.get_command()}")


class ArchiveError(ProbingError, ValueError):
    """A downloaded archive is not a readable zip, or exceeds the member-count or size caps."""


def unpack_raganato(archive: Path, dest: Path) -> None:
    """Copy ``<name>.data.xml`` and ``<name>.gold.key.txt`` of SemCor, the test sets and ALL out of
    Raganato's zip into ``dest/<name>/`` (the ``wsd/`` layout of shared/data). Names come from a fixed
    list, never from the archive's paths (no traversal, no links). An archive with more than
    ``RAGANATO_MAX_MEMBERS`` members, or whose wanted members unpack to more than ``RAGANATO_MAX_BYTES``, is
    refused before anything is written; so is a file that is not a zip, or one whose data fail their CRC."""
    wanted = {f"{stem}.{kind}": stem for stem in RAGANATO_SETS for kind in ("data.xml", "gold.key.txt")}
    found = set()
    again = f"delete {archive} and run probing data get again"
    try:
        with zipfile.ZipFile(archive) as zf:
            members = zf.infolist()
            if len(members) > RAGANATO_MAX_MEMBERS:
                raise ArchiveError(f"{archive}: {len(members)} members, more than {RAGANATO_MAX_MEMBERS}; {again}")
            chosen = {}
            for info in members:
                base = info.filename.rsplit("/", 1)[-1]
                if base in wanted and base not in chosen and not info.is_dir():
                    chosen[base] = info
            total = sum(info.file_size for info in chosen.values())
            if total > RAGANATO_MAX_BYTES:
                raise ArchiveError(
                    f"{archive}: its WSD files unpack to {total} bytes, more than the cap of {RAGANATO_MAX_BYTES}; "
                    f"{again}"
                )
            for base, info in chosen.items():
                with zf.open(info) as src, atomic_path(dest / wanted[base] / base) as tmp, open(tmp, "wb") as out:
                    shutil.copyfileobj(src, out)
                found.add(base)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
        raise ArchiveError(f"{archive}: not a readable zip archive ({e}); {again}") from None
    missing = sorted(set(wanted) - found)
    if missing:
        raise FileNotFoundError(f"{archive} lacks {missing}; is it Raganato's WSD_Evaluation_Framework.zip?")


def _documents_where(corpus: Corpus, keep: Callable[[int], bool], split: str) -> Corpus:
    """The sentences of the documents whose 0-based index in file order satisfies ``keep``."""

    def sentences():
        index, last = -1, None
        for s in corpus:
            if s.doc_id != last:
                index, last = index + 1, s.doc_id
            if keep(index):
                yield s

    return Corpus(
        sentences,
        name=corpus.name,
        split=split,
        source=f"{corpus.source} [{split} documents]",
        license=corpus.license,
        origin=None
        if corpus.origin is None
        else corpus.origin.with_option("documents", f"{split} {reader_version(__file__)}"),
    )


def _ptb_files(split: str) -> Callable[[str], bool]:
    lo, hi = {"train": (1, 159), "dev": (160, 179), "test": (180, 199)}[split]
    return lambda fileid: lo <= int(fileid[4:8]) <= hi


def _conll2000_files(split: str) -> Callable[[str], bool]:
    return lambda fileid: fileid == f"{split}.txt"


def _semcor_documents(split: str) -> Callable[[int], bool] | None:
    return {"all": None, "train": lambda i: i % 5 != 4, "test": lambda i: i % 5 == 4}[split]


def _wsd_test(name: str, stem: str, about: str) -> WsdDataset:
    return WsdDataset(
        name,
        ("test",),
        "research only (no licence given)",
        about,
        stem=stem,
        raganato_dir=f"Evaluation_Datasets/{stem}",
    )


_BUNDLED = resources_dir() / "data"
DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in [
        ConllDataset(
            "ud-ewt",
            ("train", "dev", "test"),
            "CC BY-SA 4.0",
            "UD English EWT v2.16 (UD upos, PTB xpos, lemmas)",
            file="en_ewt-ud-{split}.conllu",
            layout="ud/en_ewt",
        ),
        NltkDataset(
            "ptb-sample",
            ("train", "dev", "test"),
            "LDC, non-commercial (NLTK sample)",
            "NLTK's 10% Penn Treebank sample without -NONE- traces, split by file",
            corpus="treebank",
            package="treebank",
            fileids=_ptb_files,
        ),
        NltkDataset(
            "brown", ("all",), "non-commercial", "Brown corpus (Brown tags) from NLTK", corpus="brown", package="brown"
        ),
        NltkDataset(
            "conll2000",
            ("train", "test"),
            "none stated (WSJ text)",
            "CoNLL-2000 (PTB tags) from NLTK",
            corpus="conll2000",
            package="conll2000",
            fileids=_conll2000_files,
        ),
        NltkDataset(
            "masc",
            ("all",),
            "MASC (ANC): research and development use",
            "MASC tagged (PTB tags) from NLTK",
            corpus="masc_tagged",
            package="masc_tagged",
        ),
        WsdDataset(
            "semcor",
            ("all", "train", "test"),
            "WordNet 3.0 licence",
            "SemCor 3.0 with WordNet 3.0 keys; train/test split by document",
            stem="semcor",
            raganato_dir="Training_Corpora/SemCor",
            documents=_semcor_documents,
        ),
        _wsd_test("senseval2", "senseval2", "Senseval-2 all-words test set"),
        _wsd_test("senseval3", "senseval3", "Senseval-3 all-words test set"),
        _wsd_test("semeval2007", "semeval2007", "SemEval-2007 task 17 all-words test set"),
        _wsd_test("semeval2013", "semeval2013", "SemEval-2013 task 12 all-words test set"),
        _wsd_test("semeval2015", "semeval2015", "SemEval-2015 task 13 test set (Raganato's download or path= only)"),
        _wsd_test("wsd-all", "ALL", "the WSD test sets concatenated (ALL)"),
        ConllDataset(
            "demo-ud",
            ("train", "dev", "test"),
            "CC BY-SA 4.0",
            "bundled slice of UD English EWT v2.16 (probing/resources/data/README.md)",
            file="en_ewt-demo-{split}.conllu",
            bundled=_BUNDLED / "demo-ud",
        ),
        WsdDataset(
            "demo-semcor",
            ("train", "test"),
            "WordNet 3.0 licence",
            "bundled slice of SemCor, split by document (probing/resources/data/README.md)",
            stem="semcor-demo-{split}",
            bundled=_BUNDLED / "demo-semcor",
        ),
        TextDataset("text", ("all",), "", "a plain-text file, one whitespace-tokenized sentence per line"),
    ]
}


FILE_FORMATS = ("conllu", "text", "raganato")
FILE_SPEC_FORMS = "conllu:PATH, text:PATH or raganato:XML[:KEY]"


@dataclass(frozen=True)
class FileSpec:
    """A corpus in a file of the user's: ``format`` (one of :data:`FILE_FORMATS`), its ``path`` and, for
    Raganato's format, an optional gold ``key`` file. :attr:`name` is the file's stem."""

    format: str
    path: Path
    key: Path | None = None

    @property
    def name(self) -> str:
        stem = base_name(self.path)
        return stem.split(".data")[0] if self.format == "raganato" else stem

    def __str__(self) -> str:
        return f"{self.format}:{self.path}" + (f":{self.key}" if self.key else "")

    def open(self, split: str = "all") -> Corpus:
        """The corpus in the file, named :attr:`name`, with ``split`` as its label."""
        if self.format == "conllu":
            return read_conllu(self.path, name=self.name, split=split)
        if self.format == "text":
            return read_text(self.path, name=self.name, split=split)
        return read_raganato(self.path, self.key, name=self.name, split=split)


def file_spec(spec: str, base: str | Path | None = None) -> FileSpec | None:
    """The :class:`FileSpec` of ``conllu:PATH``, ``text:PATH`` or ``raganato:XML[:KEY]`` (relative paths from
    ``base``, default the current folder), or None when ``spec`` names no file format (a registry name).
    The file must exist: a FileNotFoundError names the spec and the path looked at."""
    fmt, sep, rest = spec.partition(":")
    if not sep or fmt not in FILE_FORMATS:
        return None
    if not rest:
        raise InputError(f"{spec!r}: expected {fmt}:PATH, a path after {fmt}:")
    key = None
    if fmt == "raganato" and ":" in rest and not Path(rest).expanduser().exists():
        rest, key_text = rest.rsplit(":", 1)
        key = _resolve(key_text, base)
    path = _resolve(rest, base)
    for p in (path, key):
        if p is not None and not p.is_file():
            raise FileNotFoundError(f"{spec!r}: no file {p}" + ("" if p.is_absolute() else f" (from {Path.cwd()})"))
    return FileSpec(fmt, path, key)


def _resolve(text: str, base: str | Path | None) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() or base is None else Path(base) / path


def unknown_dataset(name: str) -> str:
    """The message for a name that is neither a registered dataset nor a file spec."""
    hint = ""
    if Path(name).expanduser().is_file():
        guess = "raganato" if name.endswith((".xml", ".xml.gz")) else ("conllu" if ".conllu" in name else "text")
        hint = f" {name} is a file: write {guess}:{name}."
    return (
        f"unknown dataset {name!r}; known: {', '.join(DATASETS)}; or your own file as {FILE_SPEC_FORMS} "
        f"(the corpus is then named after the file).{hint}"
    )


def _dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise InputError(unknown_dataset(name))
    return DATASETS[name]


def load(name: str, split: str | None = None, *, path: str | Path | None = None) -> Corpus:
    """The corpus ``name``/``split``, found as the module docstring says.

    ``name`` may be a file spec (``conllu:PATH``, ``text:PATH``, ``raganato:XML[:KEY]``): the corpus is then
    named after the file and ``split`` is a free label (default ``all``). ``split`` may be omitted when the
    dataset has one split (for ``text`` it is any label, default ``all``).
    """
    spec = file_spec(name)
    if spec is not None:
        if path is not None:
            raise InputError(f"{name!r} names its file already; path= is for registered datasets")
        return spec.open(split or "all")
    ds = _dataset(name)
    if split is None:
        if "all" not in ds.splits and len(ds.splits) > 1:
            raise InputError(
                f"{name} has splits {', '.join(ds.splits)}: name one (split= in Python, --split on the command line)"
            )
        split = "all" if "all" in ds.splits else ds.splits[0]
    elif split not in ds.splits and not isinstance(ds, TextDataset):
        raise InputError(f"{name} has no split {split!r}; its splits are {', '.join(ds.splits)}")
    if path is not None:
        path = Path(path).expanduser()
        if path.is_file():
            return ds.open_file(path, split)
        if not path.exists() or isinstance(ds, TextDataset):
            raise DatasetNotFound(
                f"{name}: path= {path} is not a file" + ("" if path.exists() else " (it does not exist)")
            )
    folder = ds.find(split, path)
    if folder is None:
        raise ds.not_found(split, path)
    return ds.open(folder, split)


def available() -> pd.DataFrame:
    """One row per dataset: name, splits, found (the folder, "" if not found), license, get (the command), about."""
    rows = []
    for ds in DATASETS.values():
        if isinstance(ds, TextDataset):
            found = "(any file, via path=)"
        else:
            folders = {ds.find(split) for split in ds.splits}
            found = str(folders.pop()) if len(folders) == 1 and None not in folders else ""
        rows.append(
            {
                "name": ds.name,
                "splits": ", ".join(ds.splits),
                "found": found,
                "license": ds.license,
                "get": ds.get_command(),
                "about": ds.about,
            }
        )
    import pandas as pd

    return pd.DataFrame(rows, columns=["name", "splits", "found", "license", "get", "about"])


def get(name: str) -> Path:
    """Download ``name`` into ``cache_dir()/data`` and return the folder ``load`` will find it in.

    UD EWT comes from GitHub (tag r2.16, sha256-checked); NLTK corpora through ``nltk.download``; the WSD
    sets from Raganato et al.'s framework zip, after printing its terms (accepting them is the user's call).
    Bundled demo data needs nothing.
    """
    return _dataset(name).download()
