"""All-words WSD data in the format of Raganato, Camacho-Collados & Navigli (2017): ``NAME.data.xml``
plus ``NAME.gold.key.txt`` (``.gz`` read transparently).

Both files are streamed: the XML with ``iterparse`` (each sentence is cleared once read) and the key file
in step with it (Raganato's key files list instances in document order; out-of-order lines are held
until their instance comes). ``<wf>`` and ``<instance>`` elements become tokens; ``lemmas`` and ``upos``
are their ``lemma`` and ``pos`` attributes (the 12 universal tags of Petrov et al., e.g. ``NOUN``, ``.``);
instances get ``instance_ids`` and ``senses`` (all gold keys of their key line, in file order), other
tokens ``None`` and ``()``. The doc id is the enclosing ``<text id>``. An instance without a key line,
or a key line whose instance is not in the XML, is a CorpusFormatError naming the file and line.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from probing.corpora._files import base_name, numbered_lines, open_binary, require_file, with_gz
from probing.corpora.base import Corpus, CorpusFormatError, Origin, Sentence, make_sentence, reader_version


class _GoldKeys:
    """Reads a gold key file alongside the XML, one ``id key1 [key2 ...]`` line per instance."""

    def __init__(self, path: Path, data_path: Path) -> None:
        self.path = path
        self.data_path = data_path
        self._lines = self._read()
        self._pending: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._taken: dict[str, str] = {}  # instance id -> where in the XML it was first met

    def _read(self) -> Iterator[tuple[int, str, tuple[str, ...]]]:
        for lineno, line in numbered_lines(self.path):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 2:
                raise CorpusFormatError(
                    f"{self.path}:{lineno}: expected an instance id and at least one sense key, got {line.strip()!r}"
                )
            yield lineno, parts[0], tuple(parts[1:])

    def take(self, instance_id: str, where: str) -> tuple[str, ...]:
        """The keys of ``instance_id``; reads ahead in the key file as far as needed."""
        if instance_id in self._taken:
            raise CorpusFormatError(
                f"{where}: instance id {instance_id!r} is duplicated (first at {self._taken[instance_id]}); "
                "instance ids must be unique"
            )
        self._taken[instance_id] = where
        if instance_id in self._pending:
            return self._pending.pop(instance_id)[1]
        for lineno, key_id, keys in self._lines:
            if key_id == instance_id:
                return keys
            self._hold(lineno, key_id, keys)
        raise CorpusFormatError(f"{where}: instance {instance_id!r} has no line in the gold key file {self.path}")

    def _hold(self, lineno: int, key_id: str, keys: tuple[str, ...]) -> None:
        if key_id in self._pending:
            raise CorpusFormatError(
                f"{self.path}:{lineno}: second key line for instance {key_id!r} "
                f"(first at line {self._pending[key_id][0]})"
            )
        self._pending[key_id] = (lineno, keys)

    def finish(self) -> None:
        """After the last sentence: any key line left over names an instance the XML does not have."""
        for lineno, key_id, keys in self._lines:
            self._hold(lineno, key_id, keys)
        if self._pending:
            key_id, (lineno, _) = min(self._pending.items(), key=lambda kv: kv[1][0])
            raise CorpusFormatError(
                f"{self.path}:{lineno}: key line for instance {key_id!r}, which is not in {self.data_path} "
                f"(or was already given a key line); {len(self._pending)} such line(s) in all"
            )


def _sentence(el: ET.Element, doc_id: str, path: Path, keys: _GoldKeys) -> Sentence:
    sent_id = el.get("id")
    if not sent_id:
        raise CorpusFormatError(f"{path}: a <sentence> in text {doc_id!r} has no id attribute")
    where = f"{path} (sentence {sent_id!r})"
    words: list[str] = []
    lemmas: list[str] = []
    upos: list[str] = []
    senses: list[tuple[str, ...]] = []
    instance_ids: list[str | None] = []
    for tok in el:
        if tok.tag not in ("wf", "instance"):
            raise CorpusFormatError(f"{where}: unexpected element <{tok.tag}>; expected <wf> or <instance>")
        words.append(tok.text or "")
        lemmas.append(tok.get("lemma", ""))
        upos.append(tok.get("pos", ""))
        if tok.tag == "instance":
            iid = tok.get("id")
            if not iid:
                raise CorpusFormatError(f"{where}: <instance> {len(words) - 1} has no id attribute")
            instance_ids.append(iid)
            senses.append(keys.take(iid, where))
        else:
            instance_ids.append(None)
            senses.append(())
    return make_sentence(
        str(path),
        id=sent_id,
        doc_id=doc_id,
        words=words,
        upos=upos,
        lemmas=lemmas,
        senses=senses,
        instance_ids=instance_ids,
    )


def _sentences(data_path: Path, key_path: Path) -> Iterator[Sentence]:
    keys = _GoldKeys(key_path, data_path)
    doc_id: str | None = None
    seen: dict[str, str] = {}  # sentence id -> its text: ids key the bootstrap's clusters, so they must be unique
    with open_binary(data_path) as fh:
        try:
            for event, el in ET.iterparse(fh, events=("start", "end")):
                if event == "start":
                    if el.tag == "text":
                        doc_id = el.get("id")
                        if not doc_id:
                            raise CorpusFormatError(f"{data_path}: a <text> element has no id attribute")
                    continue
                if el.tag == "sentence":
                    if doc_id is None:
                        raise CorpusFormatError(f"{data_path}: <sentence id={el.get('id')!r}> is outside a <text>")
                    sent_id = el.get("id") or ""
                    if sent_id in seen:
                        raise CorpusFormatError(
                            f"{data_path}: sentence id {sent_id!r} appears twice (in text {seen[sent_id]!r} and "
                            f"in text {doc_id!r}); sentence ids must be unique"
                        )
                    seen[sent_id] = doc_id
                    yield _sentence(el, doc_id, data_path, keys)
                    el.clear()
                elif el.tag == "text":
                    el.clear()
                    doc_id = None
        except ET.ParseError as e:
            line, col = e.position
            raise CorpusFormatError(f"{data_path}:{line}: malformed XML (column {col}): {e.msg}") from None
    keys.finish()


def gold_key_path(data_path: Path) -> Path | None:
    """The key file beside ``NAME.data.xml[.gz]``: ``NAME.gold.key.txt`` or ``NAME.gold.key.txt.gz``."""
    stem = data_path.name.split(".data.xml")[0]
    return with_gz(data_path.with_name(f"{stem}.gold.key.txt"))


def read_raganato(
    data_path: str | Path,
    key_path: str | Path | None = None,
    *,
    name: str | None = None,
    split: str = "all",
    license: str = "",
) -> Corpus:
    """Stream a Raganato-format WSD corpus; the key file defaults to the one beside the XML."""
    data = require_file(data_path)
    if key_path is None:
        found = gold_key_path(data)
        if found is None:
            raise FileNotFoundError(
                f"no gold key file beside {data}: expected {data.name.split('.data.xml')[0]}.gold.key.txt[.gz]"
            )
        key = found
    else:
        key = require_file(key_path)
    return Corpus(
        lambda: _sentences(data, key),
        name=name or base_name(data).split(".data")[0],
        split=split,
        source=str(data),
        license=license,
        origin=Origin((data, key), reader_version(__file__)),
    )
