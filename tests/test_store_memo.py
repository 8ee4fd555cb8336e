"""Memoised corpus fingerprints (probing.store.memo): a store hit reads no corpus file; any change re-hashes.

The reference for the memoised values is the corpus's own ``fingerprint_and_lengths()`` (a full parse).
Files are given an mtime a minute in the past: a file modified within ``RACY_NS`` of its parse is never
memoised (a later write could keep its mtime on a coarse clock).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from test_store_fakes import FakeEncoder, MetadataOnly

import probing.corpora.conllu as conllu_reader
from probing.corpora import load, read_conllu
from probing.store import extract
from probing.store.memo import MEMO_DIR

ROOT = Path(__file__).resolve().parents[1]
KW = dict(chunk_tokens=40, batch_tokens=24, progress=False)
BIG = dict(chunk_tokens=1 << 16, batch_tokens=1 << 14, progress=False)

CONLLU = """# sent_id = d-1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_

# sent_id = d-2
1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tsleep\tsleep\tVERB\tVBP\t_\t0\troot\t_\t_
3\tnow\tnow\tADV\tRB\t_\t2\tadvmod\t_\t_

"""


def age(path: Path, seconds: float = 60) -> None:
    past = time.time_ns() - int(seconds * 1e9)
    os.utime(path, ns=(past, past))


def counting_parses(monkeypatch) -> list[Path]:
    """Record every parse of a CoNLL-U file (the reader's one entry point)."""
    calls: list[Path] = []
    real = conllu_reader._sentences

    def counted(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(conllu_reader, "_sentences", counted)
    return calls


def write_conllu(path: Path, text: str = CONLLU) -> Path:
    path.write_text(text, encoding="utf-8")
    age(path)
    return path


def test_a_hit_reads_no_corpus_file_and_the_memo_holds_the_parsed_values(tmp_path, monkeypatch):
    parses = counting_parses(monkeypatch)
    path = write_conllu(tmp_path / "c.conllu")
    first = extract(FakeEncoder(), read_conllu(path), cache_dir=tmp_path / "cache", **KW)
    assert len(parses) == 1, "a cold extraction parses the file once (fingerprint, lengths, copy to encode)"
    fp, lengths = read_conllu(path).fingerprint_and_lengths()
    (memo_file,) = (tmp_path / "cache" / MEMO_DIR).iterdir()
    memo = json.loads(memo_file.read_text())
    assert memo["fingerprint"] == fp == first.manifest["corpus"]["fingerprint"]
    assert memo["lengths"] == lengths.tolist() == [2, 3]
    parses.clear()
    lazy = FakeEncoder()
    hit = extract(MetadataOnly(lazy), read_conllu(path), cache_dir=tmp_path / "cache", **KW)
    assert hit.cache_hit and hit.path == first.path
    assert parses == [], "the memo gives the key: the corpus file is not read on a hit"
    # a head of the corpus is another memo (its options differ), with its own key
    head = extract(FakeEncoder(), read_conllu(path).head(1), cache_dir=tmp_path / "cache", **KW)
    assert head.path != first.path and len(head) == 2
    assert len(list((tmp_path / "cache" / MEMO_DIR).iterdir())) == 2


def test_touch_or_content_change_re_hashes_and_verify_ignores_the_memo(tmp_path, monkeypatch, capsys):
    parses = counting_parses(monkeypatch)
    path = write_conllu(tmp_path / "c.conllu")
    cache = tmp_path / "cache"
    first = extract(FakeEncoder(), read_conllu(path), cache_dir=cache, **KW)
    parses.clear()
    os.utime(path, ns=(time.time_ns() - 30 * 10**9,) * 2)  # touched: same bytes, another mtime
    again = extract(FakeEncoder(), read_conllu(path), cache_dir=cache, **KW)
    assert len(parses) == 1 and again.path == first.path and again.cache_hit, "re-hashed; same content, same store"
    parses.clear()
    extract(FakeEncoder(), read_conllu(path), cache_dir=cache, **KW)
    assert parses == [], "the re-hash was memoised"
    # same size, same mtime, new content (the word 'dog' -> 'cat'): ctime and the content differ
    st = path.stat()
    path.write_text(CONLLU.replace("\tdog\tdog\t", "\tcat\tcat\t"), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    parses.clear()
    changed = extract(FakeEncoder(), read_conllu(path), cache_dir=cache, **KW)
    assert len(parses) == 1, "the memo is not trusted: one parse gives the key, the lengths and what to encode"
    assert changed.path != first.path and changed.tokens["word"].tolist() == ["The", "cat", "Cats", "sleep", "now"]
    # verify=True never trusts the memo: it parses again
    parses.clear()
    extract(FakeEncoder(), read_conllu(path), cache_dir=cache, verify=True, **KW)
    assert len(parses) >= 1


def test_a_stale_memo_is_found_by_verify_and_replaced(tmp_path, capsys):
    path = write_conllu(tmp_path / "c.conllu")
    cache = tmp_path / "cache"
    extract(FakeEncoder(), read_conllu(path), cache_dir=cache, **KW)
    (memo_file,) = (cache / MEMO_DIR).iterdir()
    memo = json.loads(memo_file.read_text())
    # a memo claiming another fingerprint for these very files (checksum recomputed, so it looks valid)
    from probing.identity import canonical, digest

    body = {k: v for k, v in memo.items() if k != "sha256"}
    body["fingerprint"] = "0" * 64
    memo_file.write_bytes(canonical({**body, "sha256": digest(body)}))
    extract(FakeEncoder(), read_conllu(path), cache_dir=cache, verify=True, **KW)
    assert "was stale" in capsys.readouterr().err
    assert json.loads(memo_file.read_text())["fingerprint"] == read_conllu(path).fingerprint()


def test_a_corrupt_or_foreign_memo_is_ignored(tmp_path, monkeypatch):
    parses = counting_parses(monkeypatch)
    path = write_conllu(tmp_path / "c.conllu")
    cache = tmp_path / "cache"
    first = extract(FakeEncoder(), read_conllu(path), cache_dir=cache, **KW)
    (memo_file,) = (cache / MEMO_DIR).iterdir()
    memo = json.loads(memo_file.read_text())
    memo["fingerprint"] = "0" * 64  # edited without its sha256: not trusted
    memo_file.write_text(json.dumps(memo))
    parses.clear()
    assert extract(FakeEncoder(), read_conllu(path), cache_dir=cache, **KW).path == first.path
    assert len(parses) == 1
    memo_file.write_text("{not json")
    parses.clear()
    assert extract(FakeEncoder(), read_conllu(path), cache_dir=cache, **KW).path == first.path
    assert len(parses) == 1


def test_a_just_written_file_is_not_memoised(tmp_path):
    path = tmp_path / "c.conllu"
    path.write_text(CONLLU, encoding="utf-8")  # mtime = now: a write in the same clock tick could go unseen
    extract(FakeEncoder(), read_conllu(path), cache_dir=tmp_path / "cache", **KW)
    assert not (tmp_path / "cache" / MEMO_DIR).exists()


def test_semcor_split_memo_covers_data_and_key_files_and_the_split(tmp_path, monkeypatch):
    """The bundled SemCor slice: train and test (document selections of one file pair) get distinct memos
    whose values equal a full parse; editing the key file re-hashes."""
    import shutil

    import probing.corpora.raganato as raganato_reader
    from probing.paths import resources_dir

    src = resources_dir() / "data" / "demo-semcor"
    folder = tmp_path / "semcor"
    shutil.copytree(src, folder)
    for f in folder.iterdir():
        age(f)
    calls: list[int] = []
    real = raganato_reader._sentences
    monkeypatch.setattr(raganato_reader, "_sentences", lambda *a: (calls.append(1), real(*a))[1])
    data = sorted(folder.glob("*train*.data.xml*"))[0]
    cache = tmp_path / "cache"
    train = load("demo-semcor", "train", path=data)
    s1 = extract(FakeEncoder(), train, cache_dir=cache, **BIG)
    calls.clear()
    assert extract(FakeEncoder(), load("demo-semcor", "train", path=data), cache_dir=cache, **BIG).path == s1.path
    assert calls == []
    fp, lengths = load("demo-semcor", "train", path=data).fingerprint_and_lengths()
    assert s1.manifest["corpus"]["fingerprint"] == fp and s1.n_sentences == len(lengths)
    key = sorted(folder.glob("*train*.gold.key.txt*"))[0]
    os.utime(key, ns=(time.time_ns() - 20 * 10**9,) * 2)  # touched
    calls.clear()
    assert extract(FakeEncoder(), load("demo-semcor", "train", path=data), cache_dir=cache, **BIG).path == s1.path
    assert len(calls) == 1, "the key file is part of the memo's state"


def test_help_and_a_store_hit_import_no_plotting_umap_or_parquet(tmp_path):
    """``probing --help`` and ``probing extract`` on a complete store import neither matplotlib, umap nor
    pyarrow (nor torch, for the hit: a lazy encoder only reads its fingerprint)."""
    wrapper = (
        "import runpy, sys\n"
        "sys.argv = ['probing', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('probing.cli', run_name='__main__')\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "print(sorted(m for m in ('matplotlib', 'umap', 'pyarrow', 'torch') if m in sys.modules), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBING_CACHE": str(tmp_path / "cache")}
    path = tmp_path / "c.txt"
    path.write_text("The dog barks .\nCats sleep now .\n", encoding="utf-8")
    age(path)
    args = ["extract", "--model", "default", "--corpus", "text", "--path", str(path), "-q"]

    def loaded(*argv: str) -> str:
        run = subprocess.run([sys.executable, "-c", wrapper, *argv], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return run.stderr.strip().splitlines()[-1]

    assert loaded("--help") == "[]"
    assert "torch" in loaded(*args), "the cold run encodes"
    assert loaded(*args) == "[]"
