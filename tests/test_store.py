"""probing.store: content, caching, batching, resume, corruption, locking, sharding, reading, errors.

The reference for every array is the straightforward one: each sentence encoded alone by the fake
encoder, concatenated in corpus order, cast to fp16. The fakes follow DESIGN.md's contracts.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_store_fakes import (
    FakeCorpus,
    FakeEncoder,
    FakeSentence,
    MetadataOnly,
    make_corpus,
    reference_layers,
)

from probing.errors import InputError
from probing.store import (
    Store,
    StoreCorruptError,
    StoreError,
    extract,
    length_batches,
    merge,
    plan_chunks,
    shard_range,
    store_key,
)

TESTS = Path(__file__).parent
KW = dict(chunk_tokens=40, batch_tokens=24, progress=False)


def corpus_with_empty_sentence(n: int = 30, seed: int = 0) -> FakeCorpus:
    c = make_corpus(n, seed=seed)
    c._sentences.insert(5, FakeSentence(id="empty", doc_id="d-empty", words=[]))
    return c


def expected_tokens(corpus: FakeCorpus, encoder: FakeEncoder) -> pd.DataFrame:
    """The token table of DESIGN.md, built row by row from the sentences."""
    rows = []
    for s in corpus._sentences:
        for p, w in enumerate(s.words):
            rows.append(
                {
                    "sentence_id": s.id,
                    "doc_id": s.doc_id,
                    "position": p,
                    "word": w,
                    "upos": s.upos[p] if s.upos else "",
                    "xpos": s.xpos[p] if s.xpos else "",
                    "lemma": s.lemmas[p] if s.lemmas else "",
                    "sense": " ".join(s.senses[p]) if s.senses else "",
                    "instance_id": (s.instance_ids[p] or "") if s.instance_ids else "",
                    "oov": bool(encoder.oov_mask([w])[0]),
                    "head": int(s.heads[p]) if getattr(s, "heads", None) else -1,
                    "deprel": s.deprels[p] if getattr(s, "deprels", None) else "",
                    "feats": s.feats[p] if getattr(s, "feats", None) else "",
                }
            )
    return pd.DataFrame(rows)


def assert_tokens_equal(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    for col in want.columns:
        assert got[col].tolist() == want[col].tolist(), f"token column {col!r} differs"


def chunk_sentences(corpus: FakeCorpus, chunks: list, which) -> Counter:
    """Multiset of the non-empty sentences (as word tuples) in the chunks whose index is in ``which``."""
    out = Counter()
    for i, (s0, s1, *_rows) in enumerate(chunks):
        if i in which:
            out.update(tuple(s.words) for s in corpus._sentences[s0:s1] if s.words)
    return out


def encoded(encoder: FakeEncoder) -> Counter:
    return Counter(s for batch in encoder.batches for s in batch)


def layer_region_offset(store: Store, layer: int) -> int:
    return store.layer(layer).offset


# -- content ------------------------------------------------------------------------------------------------


def test_layers_tokens_and_manifest_match_the_per_sentence_reference(tmp_path):
    corpus, enc = corpus_with_empty_sentence(), FakeEncoder()
    store = extract(enc, corpus, cache_dir=tmp_path, **KW)
    ref = reference_layers(enc, corpus)
    assert store.path == tmp_path / store_key(enc.fingerprint, corpus.fingerprint())
    for k in range(3):
        got = store.layer(k)
        assert isinstance(got, np.memmap) and got.dtype == np.float16 and got.shape == ref[k].shape
        # batching and the length sort must not change values or order: exact equality with the reference
        np.testing.assert_array_equal(got, ref[k], err_msg=f"layer {k}")
    assert_tokens_equal(store.tokens, expected_tokens(corpus, enc))
    lengths = [len(s.words) for s in corpus._sentences]
    np.testing.assert_array_equal(store.offsets, np.concatenate([[0], np.cumsum(lengths)]))

    m = store.manifest
    assert (m["n_tokens"], m["n_sentences"]) == (sum(lengths), len(lengths))
    assert m["encoder"] == {
        "name": "fake-hash",
        "fingerprint": enc.fingerprint,
        "layer_names": ["0", "1", "2"],
        "dim": 8,
    }
    assert (m["corpus"]["name"], m["corpus"]["split"], m["corpus"]["fingerprint"]) == (
        "fake",
        "test",
        corpus.fingerprint(),
    )
    assert m["versions"]["numpy"] == np.__version__ and m["versions"]["probing"] == "0.1.0"
    assert m["timings"]["run_tokens"] == sum(lengths) and m["timings"]["tokens_per_s"] > 0
    # chunks tile the rows in order, each about chunk_tokens (the last sentence may overshoot)
    rows = [c["rows"] for c in m["chunks"]]
    assert rows[0][0] == 0 and rows[-1][1] == sum(lengths)
    assert all(a[1] == b[0] for a, b in zip(rows, rows[1:]))
    assert all(40 <= r1 - r0 < 40 + 12 for r0, r1 in rows[:-1])
    for c in m["chunks"]:  # recorded hash = sha256 of that row range of the layer file, read independently
        r0, r1 = c["rows"]
        for k in range(3):
            want = hashlib.sha256(np.load(store.path / f"layer_{k:03d}.npy")[r0:r1].tobytes()).hexdigest()
            assert c["sha256"][f"layer_{k:03d}.npy"] == want
    assert not (store.path / "progress.json").exists() and not (store.path / "parts").exists()
    store.verify()
    reopened = Store.open(store.path)
    np.testing.assert_array_equal(reopened.layer("2"), ref[2])


def test_batches_are_length_sorted_bounded_and_within_one_chunk(tmp_path):
    corpus, enc = make_corpus(60, seed=3), FakeEncoder()
    store = extract(enc, corpus, cache_dir=tmp_path, chunk_tokens=50, batch_tokens=30, progress=False)
    chunks = [c["sentences"] + c["rows"] for c in store.manifest["chunks"]]
    chunk_of = {}
    for i, (s0, s1, *_r) in enumerate(chunks):
        for s in corpus._sentences[s0:s1]:
            chunk_of.setdefault(tuple(s.words), set()).add(i)
    for batch in enc.batches:
        lens = [len(s) for s in batch]
        assert lens == sorted(lens), f"batch not sorted by length: {lens}"
        assert len(batch) == 1 or len(batch) * max(lens) <= 30, f"padded batch {len(batch)}x{max(lens)} > 30"
        assert set.intersection(*(chunk_of[s] for s in batch)), "a batch mixes sentences of two chunks"
    # every sentence encoded exactly once
    assert encoded(enc) == Counter(tuple(s.words) for s in corpus._sentences)


def test_plan_batches_and_shard_ranges_on_known_inputs():
    lengths = np.array([3, 4, 2, 6, 1, 5])
    # greedy: close a chunk once it has >= 6 tokens -> [3,4] [2,6] [1,5]
    assert plan_chunks(lengths, 6) == [[0, 2, 0, 7], [2, 4, 7, 15], [4, 6, 15, 21]]
    assert plan_chunks(lengths, 100) == [[0, 6, 0, 21]]
    # by length: 1(#4) 2(#2) 3(#0) 4(#1) 5(#5) 6(#3); grow a batch while count * longest <= 8:
    # {1,2} (3*3 > 8 stops it), {3,4} (2*4 = 8), {5}, {6}; the 0-length sentence #6 is skipped
    assert list(length_batches([3, 4, 2, 6, 1, 5, 0], 8)) == [[4, 2], [0, 1], [5], [3]]
    assert list(length_batches([10], 4)) == [[0]]  # longer than batch_tokens: alone
    # chunks of one sentence (chunk_tokens=1): 4 sentences of 5 tokens into 2 shards: first rows 0,5,10,15 of
    # 20 -> owners 0,0,1,1
    assert [shard_range(np.array([5, 5, 5, 5]), i, 2, 1) for i in range(2)] == [(0, 2), (2, 4)]
    # first rows 0,10,11,12 of 13 tokens, 3 shards: owners 0,2,2,2 -> shard 1 is empty
    assert [shard_range(np.array([10, 1, 1, 1]), i, 3, 1) for i in range(3)] == [(0, 1), (1, 1), (1, 4)]
    # chunks of 10 tokens are [0, 2) and [2, 4) (first rows 0 and 10 of 20): 3 shards give owners 0 and
    # 10 * 3 // 20 = 1, so shard 2 is empty rather than a chunk split (per sentence it would be 0,0,1,2)
    assert [shard_range(np.array([5, 5, 5, 5]), i, 3, 10) for i in range(3)] == [(0, 2), (2, 4), (4, 4)]


def test_a_chunk_of_only_empty_sentences_is_stored_and_verified(tmp_path):
    sentences = [FakeSentence("a", "d", ["the", "cat", "sat"]), FakeSentence("b", "d", []), FakeSentence("c", "d", [])]
    corpus, enc = FakeCorpus(sentences), FakeEncoder()
    # 3 tokens fill chunk 0, so chunk 1 holds the two empty sentences and no rows at all
    assert plan_chunks(np.array([3, 0, 0]), 3) == [[0, 1, 0, 3], [1, 3, 3, 3]]
    store = extract(enc, corpus, cache_dir=tmp_path, chunk_tokens=3, batch_tokens=8, progress=False)
    assert [c["rows"] for c in store.manifest["chunks"]] == [[0, 3], [3, 3]]
    np.testing.assert_array_equal(store.layer(1), reference_layers(enc, corpus)[1])
    np.testing.assert_array_equal(store.offsets, [0, 3, 3, 3])
    store.verify()


# -- caching ------------------------------------------------------------------------------------------------


def test_cache_hit_reads_only_encoder_metadata_and_rewrites_nothing(tmp_path):
    corpus = make_corpus(20)
    first = extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    mtimes = {p.name: p.stat().st_mtime_ns for p in first.path.iterdir()}
    lazy = FakeEncoder()
    hit = extract(MetadataOnly(lazy), corpus, cache_dir=tmp_path, **KW)  # AssertionError if encode/oov touched
    assert hit.path == first.path and lazy.loads == 0 and lazy.batches == []
    assert {p.name: p.stat().st_mtime_ns for p in hit.path.iterdir()} == mtimes
    # chunk and batch sizes are not part of the content: still a hit
    assert (
        extract(MetadataOnly(lazy), corpus, cache_dir=tmp_path, chunk_tokens=7, batch_tokens=5, progress=False).path
        == first.path
    )


def test_a_toolkit_corpus_is_parsed_once_per_extraction(tmp_path):
    from probing.corpora.base import Corpus, Sentence

    fakes = make_corpus(25, seed=3)._sentences
    passes = []

    def stream():
        passes.append(1)
        return (Sentence(id=s.id, doc_id=s.doc_id, words=list(s.words)) for s in fakes)

    corpus = Corpus(stream, name="counted", split="test")
    fp, lengths = corpus.fingerprint_and_lengths()
    assert fp == corpus.fingerprint() and lengths.tolist() == [len(s.words) for s in fakes]
    passes.clear()
    store = extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    # parsing a big corpus costs seconds a pass: key, lengths and the sentences to encode come from one
    assert len(passes) == 1
    assert [p.name for p in tmp_path.iterdir()] == [store.path.name], "the corpus copy is removed"
    assert np.array_equal(
        store.layer(2, dtype=np.float32), reference_layers(FakeEncoder(), make_corpus(25, seed=3))[2].astype(np.float32)
    )
    passes.clear()
    extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    assert len(passes) == 1, "a cache hit reads the corpus once, for its key"


def test_key_changes_with_corpus_or_encoder_content(tmp_path):
    corpus = make_corpus(20)
    base = extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW).path
    other_enc = extract(FakeEncoder(salt="retrained"), corpus, cache_dir=tmp_path, **KW).path
    edited = make_corpus(20)
    edited._sentences[7].words[0] = "zebra" if edited._sentences[7].words[0] != "zebra" else "yak"
    edited._sentences[7].upos = None
    other_corpus = extract(FakeEncoder(), edited, cache_dir=tmp_path, **KW)
    assert len({base, other_enc, other_corpus.path}) == 3, "a changed encoder or corpus must not hit the old store"
    assert other_corpus.tokens["word"].tolist().count("zebra") + other_corpus.tokens["word"].tolist().count("yak") >= 1
    keys = {store_key("a", "b"), *(store_key("a", "b", shard=(i, 2), chunk_tokens=c) for i in (0, 1) for c in (8, 9))}
    assert len(keys) == 5, "the unsharded store and each shard under each chunk size are different stores"


# -- resume and corruption ------------------------------------------------------------------------------------


def test_crash_then_resume_encodes_only_uncommitted_chunks_and_rechecks_committed_ones(tmp_path):
    corpus = make_corpus(40, seed=1)
    ref = reference_layers(FakeEncoder(), corpus)
    with pytest.raises(RuntimeError, match="simulated crash"):
        extract(FakeEncoder(fail_after_batches=9), corpus, cache_dir=tmp_path, **KW)
    path = tmp_path / store_key(FakeEncoder().fingerprint, corpus.fingerprint())
    with pytest.raises(FileNotFoundError, match="manifest"):
        Store.open(path)
    journal = json.loads((path / "progress.json").read_text())
    done = {int(c) for c in journal["done"]}
    assert 1 <= len(done) < len(journal["chunks"]), f"expected a partial run, done={done}"
    # damage one committed chunk: resume must notice (sha256) and recompute it as well
    r0 = journal["chunks"][0][2]
    with open(path / "layer_001.npy", "r+b") as f:
        off = np.load(path / "layer_001.npy", mmap_mode="r").offset
        f.seek(off + r0 * 8 * 2 + 5)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert 0 in done
    resumed_enc = FakeEncoder()
    store = extract(resumed_enc, corpus, cache_dir=tmp_path, **KW)
    missing = set(range(len(journal["chunks"]))) - done
    assert encoded(resumed_enc) == chunk_sentences(corpus, journal["chunks"], missing | {0})
    for k in range(3):
        np.testing.assert_array_equal(store.layer(k), ref[k])
    assert_tokens_equal(store.tokens, expected_tokens(corpus, FakeEncoder()))
    assert store.manifest["timings"]["runs"] == 2 and store.manifest["timings"]["resumed_chunks"] == len(done) - 1


def test_corrupt_byte_in_finished_store_is_detected_and_only_its_chunk_recomputed(tmp_path):
    corpus = make_corpus(40, seed=2)
    store = extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    ref = [np.array(store.layer(k)) for k in range(3)]
    chunk = store.manifest["chunks"][2]
    r0 = chunk["rows"][0]
    with open(store.path / "layer_001.npy", "r+b") as f:
        f.seek(store.layer(1).offset + (r0 + 1) * 8 * 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x01]))
    with pytest.raises(StoreCorruptError, match=r"layer_001\.npy rows .* \(chunk 2\)"):
        Store.open(store.path).verify()
    enc = FakeEncoder()
    repaired = extract(enc, corpus, cache_dir=tmp_path, verify=True, **KW)
    s0, s1 = chunk["sentences"]
    assert encoded(enc) == Counter(tuple(s.words) for s in corpus._sentences[s0:s1]), "only chunk 2 re-encoded"
    repaired.verify()
    for k in range(3):
        np.testing.assert_array_equal(repaired.layer(k), ref[k])
    assert_tokens_equal(repaired.tokens, expected_tokens(corpus, enc))


def test_truncated_layer_file_is_noticed_without_verify_and_the_tail_recomputed(tmp_path):
    corpus = make_corpus(40, seed=4)
    store = extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    ref = [np.array(store.layer(k)) for k in range(3)]
    chunks = [c["sentences"] + c["rows"] for c in store.manifest["chunks"]]
    cut_row = chunks[3][2] + 2  # inside chunk 3
    os.truncate(store.path / "layer_002.npy", store.layer(2).offset + cut_row * 8 * 2)
    enc = FakeEncoder()
    fixed = extract(enc, corpus, cache_dir=tmp_path, **KW)  # no verify: the size check alone must catch it
    assert encoded(enc) == chunk_sentences(corpus, chunks, set(range(3, len(chunks))))
    for k in range(3):
        np.testing.assert_array_equal(fixed.layer(k), ref[k])
    fixed.verify()


SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from test_store_fakes import make_corpus, FakeEncoder
from probing.store import extract
corpus = make_corpus({n}, seed={seed})
enc = FakeEncoder(sleep={sleep}, log={log!r})
go = Path({go!r})
Path({ready!r}).touch()
while not go.exists():
    time.sleep(0.01)
store = extract(enc, corpus, cache_dir={cache!r}, chunk_tokens=20, batch_tokens=8, progress={progress})
print(store.path)
"""


def spawn(tmp_path: Path, name: str, n: int, seed: int, sleep: float, progress: bool = False) -> subprocess.Popen:
    code = SCRIPT.format(
        tests=str(TESTS),
        n=n,
        seed=seed,
        sleep=sleep,
        log=str(tmp_path / "encoded.jsonl"),
        go=str(tmp_path / "go"),
        ready=str(tmp_path / f"ready-{name}"),
        cache=str(tmp_path / "cache"),
        progress=progress,
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def wait_for(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_sigkill_mid_run_resumes_with_nothing_lost_or_duplicated(tmp_path):
    corpus = make_corpus(50, seed=5)
    proc = spawn(tmp_path, "a", 50, 5, sleep=0.03)
    wait_for(lambda: (tmp_path / "ready-a").exists(), 120, "the child to start")
    (tmp_path / "go").touch()
    path = tmp_path / "cache" / store_key(FakeEncoder().fingerprint, corpus.fingerprint())

    def committed() -> int:
        try:
            return len(json.loads((path / "progress.json").read_text())["done"])
        except (FileNotFoundError, json.JSONDecodeError):
            return 0

    wait_for(lambda: committed() >= 3, 120, "three committed chunks")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (path / "manifest.json").exists(), "the child finished before it was killed: test too slow to kill"
    journal = json.loads((path / "progress.json").read_text())
    done = {int(c) for c in journal["done"]}
    assert len(done) < len(journal["chunks"])

    enc = FakeEncoder()
    resumed = extract(enc, corpus, cache_dir=tmp_path / "cache", chunk_tokens=20, batch_tokens=8, progress=False)
    missing = set(range(len(journal["chunks"]))) - done
    assert encoded(enc) == chunk_sentences(corpus, journal["chunks"], missing), "re-encoded a committed chunk"
    whole = extract(
        FakeEncoder(), corpus, cache_dir=tmp_path / "uninterrupted", chunk_tokens=20, batch_tokens=8, progress=False
    )
    for k in range(3):
        np.testing.assert_array_equal(resumed.layer(k), whole.layer(k), err_msg=f"layer {k}")
    assert_tokens_equal(resumed.tokens, whole.tokens)
    np.testing.assert_array_equal(resumed.offsets, whole.offsets)
    resumed.verify()


def test_two_concurrent_extractions_of_one_key_encode_once_and_both_get_the_store(tmp_path):
    corpus = make_corpus(30, seed=6)
    procs = [spawn(tmp_path, name, 30, 6, sleep=0.02, progress=True) for name in "ab"]
    wait_for(lambda: all((tmp_path / f"ready-{n}").exists() for n in "ab"), 30, "both children to start")
    (tmp_path / "go").touch()
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    paths = {o[0].strip() for o in outs}
    assert paths == {str(tmp_path / "cache" / store_key(FakeEncoder().fingerprint, corpus.fingerprint()))}
    waited = [("waiting for another extraction" in o[1]) for o in outs]
    assert sorted(waited) == [False, True], "exactly one process should have waited for the lock"
    assert sum("store hit" in o[1] for o in outs) == 1, "the waiting process should get the cache hit"
    lines = (tmp_path / "encoded.jsonl").read_text().splitlines()
    assert Counter(tuple(json.loads(x)) for x in lines) == Counter(tuple(s.words) for s in corpus._sentences)
    store = Store.open(paths.pop())
    ref = reference_layers(FakeEncoder(), corpus)
    for k in range(3):
        np.testing.assert_array_equal(store.layer(k), ref[k])
    store.verify()


# -- shards ---------------------------------------------------------------------------------------------------


def test_shards_merge_into_exactly_the_unsharded_store(tmp_path):
    corpus = corpus_with_empty_sentence(33, seed=7)
    shards = [extract(FakeEncoder(), corpus, cache_dir=tmp_path / "c", shard=(i, 3), **KW) for i in range(3)]
    ranges = [tuple(s.manifest["shard"]["sentences"]) for s in shards]
    assert ranges[0][0] == 0 and ranges[-1][1] == len(corpus._sentences)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), f"shards not contiguous: {ranges}"
    n_tokens = sum(len(s) for s in shards)
    # shards are whole chunks (each closes at >= chunk_tokens tokens, so holds fewer than chunk_tokens plus
    # one sentence): balanced by tokens to within a chunk
    chunk = KW["chunk_tokens"] + max(len(s.words) for s in corpus._sentences)
    assert all(abs(len(s) - n_tokens / 3) < chunk for s in shards), "shards should be balanced by tokens"
    assert all(len(s) > 0 for s in shards)
    merged = merge(shards[::-1], progress=False)  # order of the argument does not matter
    whole = extract(FakeEncoder(), corpus, cache_dir=tmp_path / "single", **KW)
    assert merged.path.name == whole.path.name == merged.key
    for k in range(3):
        np.testing.assert_array_equal(merged.layer(k), whole.layer(k))
    assert_tokens_equal(merged.tokens, whole.tokens)
    np.testing.assert_array_equal(merged.offsets, whole.offsets)
    merged.verify()
    assert merged.manifest["shard"] is None and len(merged.manifest["merged_from"]) == 3
    # the merged store sits where an unsharded extract looks: a cache hit
    assert extract(MetadataOnly(FakeEncoder()), corpus, cache_dir=tmp_path / "c", **KW).path == merged.path
    with pytest.raises(StoreError, match=r"missing \[1\]"):
        merge([shards[0], shards[2]], cache_dir=tmp_path / "m2", progress=False)
    other = extract(FakeEncoder(salt="x"), corpus, cache_dir=tmp_path / "c", shard=(1, 3), **KW)
    with pytest.raises(StoreError, match="different extractions"):
        merge([shards[0], other, shards[2]], cache_dir=tmp_path / "m3", progress=False)
    with pytest.raises(StoreError, match="not a shard store"):
        merge([whole], progress=False)


def test_merge_refuses_a_corrupt_shard(tmp_path):
    corpus = make_corpus(20, seed=8)
    shards = [extract(FakeEncoder(), corpus, cache_dir=tmp_path, shard=(i, 2), **KW) for i in range(2)]
    with open(shards[1].path / "layer_000.npy", "r+b") as f:
        f.seek(shards[1].layer(0).offset + 3)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x40]))
    with pytest.raises(StoreCorruptError, match=r"layer_000\.npy: rows 0:\d+ \(chunk 0\)"):
        merge(shards, progress=False)


# -- reading --------------------------------------------------------------------------------------------------


def test_reader_api_views_gathers_filters_and_sentences(tmp_path):
    corpus, enc = corpus_with_empty_sentence(30, seed=9), FakeEncoder()
    store = extract(enc, corpus, cache_dir=tmp_path, **KW)
    ref = reference_layers(enc, corpus)
    want = expected_tokens(corpus, enc)
    assert len(store) == len(want) and store.dim == 8 and store.layer_names == ["0", "1", "2"]
    assert store.layer("1") is store.layer(1) and store.layer(-1) is store.layer(2)
    idx = np.array([7, 0, 3, 3, len(want) - 1])
    got = store.layer("2", rows=idx, dtype=np.float32)
    assert got.dtype == np.float32 and not isinstance(got, np.memmap)
    np.testing.assert_array_equal(got, ref[2][idx].astype(np.float32))
    mask = np.zeros(len(want), dtype=bool)
    mask[[1, 4]] = True
    np.testing.assert_array_equal(store.layer(0, rows=mask), ref[0][[1, 4]])
    np.testing.assert_array_equal(store.layer(0, rows=slice(2, 9), dtype="float32"), ref[0][2:9].astype(np.float32))
    np.testing.assert_array_equal(store.layer(1, dtype=np.float32), ref[1].astype(np.float32))
    t = store.as_tensor("1", rows=idx)
    assert t.dtype == torch.float32 and torch.equal(t, torch.from_numpy(ref[1][idx].astype(np.float32)))
    assert store.as_tensor(0, dtype=torch.float16).dtype == torch.float16

    np.testing.assert_array_equal(store.rows(upos="NOUN"), np.flatnonzero(want["upos"] == "NOUN"))
    both = (want["lemma"].isin(["bank", "idea"]) & (want["sense"] != "")).to_numpy()
    np.testing.assert_array_equal(store.rows(lemma=["bank", "idea"], sense_annotated=True), np.flatnonzero(both))
    # lemmas match ignoring case (issue #15: rows and the maps disagreed on "Bank"); other columns exactly
    np.testing.assert_array_equal(store.rows(lemma=["BANK", "Idea"], sense_annotated=True), np.flatnonzero(both))
    assert store.rows(upos="noun").size == 0
    np.testing.assert_array_equal(store.rows(sense_annotated=False), np.flatnonzero(want["sense"] == ""))
    np.testing.assert_array_equal(store.rows(oov=True), np.flatnonzero(want["oov"]))
    assert store.rows(upos="NOUN").dtype == np.int64 and store.rows(word="no-such-word").size == 0
    # a filter is a value or a collection of values: True is neither (it used to fail deep in list(True))
    with pytest.raises(InputError, match=r"Store.rows: upos= takes a string or a collection of strings, got True"):
        store.rows(upos=True)  # type: ignore[arg-type]

    s3 = store.sentence(3)
    assert s3["word"].tolist() == corpus._sentences[3].words
    assert s3.index.tolist() == list(range(store.offsets[3], store.offsets[4]))
    assert store.sentence(5).empty and store.n_sentences == 31  # the empty sentence keeps its index
    assert store.sentence(-1)["sentence_id"].iloc[0] == corpus._sentences[-1].id

    with pytest.raises(KeyError, match=r"no layer named 'top'.*\['0', '1', '2'\]"):
        store.layer("top")
    with pytest.raises(IndexError, match="layer index 3 out of range"):
        store.layer(3)
    with pytest.raises(IndexError, match="sentence index 31 out of range"):
        store.sentence(31)


# -- errors ---------------------------------------------------------------------------------------------------


class WrongShape(FakeEncoder):
    def encode(self, sentences):
        return [a[:, :, :-1] for a in super().encode(sentences)]


class NaNs(FakeEncoder):
    def encode(self, sentences):
        out = super().encode(sentences)
        out[0][0, 0, 0] = np.nan
        return out


class NotSentences:
    name, split = "bad", "test"

    def __iter__(self):
        return iter([["just", "a", "list"]])

    def fingerprint(self):
        return "0" * 64


def test_bad_inputs_raise_clear_errors(tmp_path):
    corpus = make_corpus(6, seed=10)
    with pytest.raises(
        StoreError, match=r"returned float32 \(3, \d+, 7\) for sentence 's\d+', expected float32 \(3, \d+, 8\)"
    ):
        extract(WrongShape(), corpus, cache_dir=tmp_path, **KW)
    with pytest.raises(
        StoreError, match=r"returned values in \[-\d.*, \d.*\] for sentence 's\d+'; the store keeps fp16"
    ):
        extract(FakeEncoder(scale=1e6), corpus, cache_dir=tmp_path, **KW)
    with pytest.raises(StoreError, match="non-finite values"):
        extract(NaNs(), corpus, cache_dir=tmp_path, **KW)
    bad = make_corpus(6, seed=10)
    bad._sentences[1].upos = bad._sentences[1].upos[:-1]
    with pytest.raises(StoreError, match=r"sentence 's1': field 'upos' has \d+ entries, expected \d+"):
        extract(FakeEncoder(), bad, cache_dir=tmp_path, **KW)
    empty = FakeCorpus([FakeSentence("e1", "d", [])], name="void")
    with pytest.raises(StoreError, match="corpus 'void' split 'test' has no tokens"):
        extract(FakeEncoder(), empty, cache_dir=tmp_path, **KW)
    with pytest.raises(StoreError, match="item 0 is a list, expected a Sentence"):
        extract(FakeEncoder(), NotSentences(), cache_dir=tmp_path, **KW)
    unkeyed = FakeEncoder()
    unkeyed.fingerprint = None
    with pytest.raises(StoreError, match="encoder.fingerprint must be a non-empty str"):
        extract(unkeyed, corpus, cache_dir=tmp_path, **KW)
    with pytest.raises(ValueError, match="chunk_tokens must be a positive int"):
        extract(FakeEncoder(), corpus, cache_dir=tmp_path, chunk_tokens=0)
    with pytest.raises(ValueError, match=r"shard must be \(i, n\)"):
        extract(FakeEncoder(), corpus, cache_dir=tmp_path, shard=(3, 3))
    with pytest.raises(FileNotFoundError, match="manifest.json: no manifest"):
        Store.open(tmp_path / "nowhere")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match=r"junk/manifest.json: invalid JSON at line 1"):
        Store.open(tmp_path / "junk")


def test_too_little_disk_fails_before_encoding_and_names_the_directory(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    corpus = make_corpus(6, seed=10)
    encoder = FakeEncoder()
    need = sum(len(s.words) for s in corpus._sentences) * 3 * 8 * 2  # tokens x layers x dim x fp16 bytes
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - need + 1, need - 1))
    assert 1024 <= need - 1 < need < 1024 * 1024
    with pytest.raises(
        OSError,
        match=rf"{tmp_path}/[0-9a-f]{{64}}: the activations of fake/test need "
        rf"{need / 1024:.1f} KiB, only {(need - 1) / 1024:.1f} KiB free \(point PROBING_CACHE",
    ):
        extract(encoder, corpus, cache_dir=tmp_path, **KW)
    assert encoder.batches == []
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - need, need))  # exactly enough
    assert len(extract(encoder, corpus, cache_dir=tmp_path, **KW)) == need // (3 * 8 * 2)


# -- memory ---------------------------------------------------------------------------------------------------

RSS_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from test_store_fakes import StreamingCorpus, FastEncoder
from probing.store import extract
store = extract(FastEncoder(dim=256), StreamingCorpus({n}), cache_dir={cache!r}, chunk_tokens=2048,
                batch_tokens=1024, progress=False)
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(len(store), hwm.split()[1])
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux /proc for VmHWM")
def test_peak_rss_grows_with_the_chunk_not_the_corpus(tmp_path):
    # VmHWM, not ru_maxrss: Linux carries the parent's (pytest's) RSS into a child's ru_maxrss at fork,
    # which would hide any growth below pytest's own size
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RSS_SCRIPT.format(tests=str(TESTS), n=n, cache=str(tmp_path / str(n)))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in (300, 1800)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    (small_tokens, small_rss), (big_tokens, big_rss) = [
        (int(a), int(b) * 1024) for a, b in (o[0].split() for o in outs)
    ]
    data_growth = (big_tokens - small_tokens) * 256 * 3 * 2  # ~47 MB more activations on disk
    assert data_growth > 40e6
    # chunk buffers are 2 x 2048 x 3 x 256 x 2 B = 6.3 MB in both runs; the corpus must not be held. Two batches
    # per chunk: the limit on encoder outputs waiting for the store must hold across chunks, not only within one
    assert big_rss - small_rss < 0.15 * data_growth, (
        f"peak RSS grew by {(big_rss - small_rss) / 1e6:.1f} MB for {data_growth / 1e6:.0f} MB more data"
    )


# -- with the real corpora ------------------------------------------------------------------------------------


def test_store_token_table_equals_the_corpus_token_table_on_bundled_semcor(tmp_path):
    from probing.corpora import load

    corpus = load("demo-semcor", "test").head(40)
    enc = FakeEncoder()
    store = extract(enc, corpus, cache_dir=tmp_path, chunk_tokens=300, batch_tokens=128, progress=False)
    want = corpus.token_table()  # probing.corpora's own table: every DESIGN.md column but oov
    assert store.manifest["corpus"]["fingerprint"] == corpus.fingerprint()
    assert_tokens_equal(store.tokens.drop(columns="oov"), want)
    assert store.tokens["oov"].tolist() == enc.oov_mask(want["word"].tolist()).tolist()
    assert (store.tokens["sense"] != "").sum() > 20, "the SemCor slice should carry sense-annotated instances"
    np.testing.assert_array_equal(store.rows(sense_annotated=True), np.flatnonzero(want["sense"] != ""))
    per_sentence = [enc.encode_one(s.words) for s in corpus]
    np.testing.assert_array_equal(store.layer(2), np.concatenate([a[2] for a in per_sentence]).astype(np.float16))
