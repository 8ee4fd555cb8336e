"""The fast half of the bad-input and fault campaign (issue 14): each case states what the toolkit must do.

The slow half (SIGKILL mid-run, concurrent extractions, hostile servers) is scripts/fault_campaign.sh.
Every case is a hostile or careless input that once produced a wrong result, a destroyed file or a raw
traceback; the expected behaviour is a correct result or one clear error naming the file, line or field.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from test_store_fakes import FakeEncoder, MetadataOnly, make_corpus

from probing import _io
from probing._io import UnsafePathError, atomic_path, remove_stale_temps
from probing._toml import ExperimentError
from probing.cli import main
from probing.corpora import read_conllu, read_raganato, read_text
from probing.corpora.base import CorpusFormatError
from probing.corpora.registry import ArchiveError, unpack_raganato
from probing.elmo import Elmo
from probing.elmo.embed import EmbedInputError, embed_file, read_sentences
from probing.elmo.options import ElmoOptions, OptionsError
from probing.elmo.pretrain import CheckpointError, _load_checkpoint
from probing.elmo.weights import WeightsError
from probing.errors import InputError, ProbingError
from probing.experiment import parse_experiment
from probing.probes.stats import bootstrap_ci
from probing.store import Store, StoreCorruptError, StoreError, extract, store_key
from probing.store import extraction as extraction_module

FIXTURES = Path(__file__).parent / "fixtures" / "elmo_allennlp"
KW = dict(chunk_tokens=40, batch_tokens=24, progress=False)
DEAD_PID = 4194303  # above Linux's default pid_max (4194304 is the hard cap): no process has it


def _small_store(tmp_path: Path, n: int = 30):
    corpus = make_corpus(n, seed=3)
    return corpus, extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)


def _flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


# -- the activation store ------------------------------------------------------------------------------------


def test_flipped_layer_byte_is_caught_on_the_next_hit_and_repaired(tmp_path, capsys):
    """Expected: the sampled check (its budget covers this whole small store) finds the chunk, says which
    file, and the hit serves the recomputed, correct bytes (once: only sizes were checked)."""
    corpus, store = _small_store(tmp_path)
    want = np.array(store.layer(1))
    _flip(store.path / "layer_001.npy", store.layer(1).offset + 3 * 8 * 2 + 1)
    capsys.readouterr()
    again = extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    assert "layer_001.npy" in capsys.readouterr().err, "the mismatch is reported with the file"
    np.testing.assert_array_equal(again.layer(1), want)
    again.verify()


def test_random_bytes_token_table_of_the_right_size_is_not_a_complete_store(tmp_path):
    """Expected: the token table is hashed whole on every hit; random bytes are rebuilt, not served."""
    corpus, store = _small_store(tmp_path)
    want = store.tokens.copy()
    tokens = store.path / "tokens.parquet"
    tokens.write_bytes(os.urandom(tokens.stat().st_size))
    again = extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    assert again.tokens.equals(want)
    assert Store.open(again.path).bad_files() == []


def test_sampled_check_stays_within_its_budget_but_verify_reads_everything(tmp_path):
    """Expected: with a budget of one chunk, check_sample re-hashes one chunk (of 3 layers x n chunks);
    verify() finds a damaged chunk whichever it is."""
    _, store = _small_store(tmp_path, n=60)
    n_chunks = len(store.manifest["chunks"])
    assert n_chunks >= 4
    last = store.manifest["chunks"][-1]
    _flip(store.path / "layer_002.npy", store.layer(2).offset + last["rows"][0] * 16)
    found = sum(bool(store.check_sample(budget_bytes=1, seed=s, full_below=0)) for s in range(40))
    assert 0 < found < 40, "a one-chunk sample catches the damaged chunk sometimes, not always"
    assert all(store.check_sample(budget_bytes=1, seed=s) for s in range(5)), "a small store is hashed whole"
    with pytest.raises(StoreCorruptError, match=r"layer_002\.npy rows .*Recompute them with extract"):
        store.verify()


def test_read_only_cache_serves_a_complete_store(tmp_path, monkeypatch):
    """Expected: no temp file (corpus copy) can be made in a read-only cache; the complete store is served
    anyway, without encoding; a corrupt one is reported with how to rebuild. (Simulated: tests may run as
    root, for whom chmod does not stop writes; scripts/fault_campaign.sh runs it for real.)"""
    corpus = _as_toolkit_corpus(make_corpus(30, seed=3), tmp_path)
    store = extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(extraction_module, "held_temp", refuse)
    lazy = FakeEncoder()
    hit = extract(MetadataOnly(lazy), corpus, cache_dir=tmp_path, **KW)
    assert hit.path == store.path and lazy.batches == []
    monkeypatch.setattr(extraction_module.os, "access", lambda *a: False)
    _flip(hit.path / "layer_000.npy", hit.layer(0).offset + 5)
    with pytest.raises(StoreCorruptError, match=r"read-only.*delete .*and run again"):
        extract(MetadataOnly(lazy), corpus, cache_dir=tmp_path, **KW)


def _as_toolkit_corpus(fake, tmp_path):
    """The fake corpus as a probing.corpora.Corpus (which copies itself to a temp file when extracted)."""
    from probing.corpora.base import Corpus, make_sentence

    sentences = [make_sentence("t", id=s.id, doc_id=s.doc_id, words=list(s.words)) for s in fake._sentences]
    return Corpus(lambda: iter(sentences), name="fake", split="test", source="t")


def test_planted_symlink_in_a_store_is_never_written_through(tmp_path):
    """Expected: a link planted where a layer file will go is replaced by a real file; its target is intact."""
    corpus = make_corpus(20, seed=4)
    enc = FakeEncoder()
    folder = tmp_path / "cache" / store_key(enc.fingerprint, corpus.fingerprint())
    folder.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (folder / "layer_000.npy").symlink_to(victim)
    store = extract(enc, corpus, cache_dir=tmp_path / "cache", **KW)
    assert victim.read_text() == "precious"
    assert not (store.path / "layer_000.npy").is_symlink()
    store.verify()


def test_planted_symlink_lock_is_refused_not_followed(tmp_path):
    """Expected: one clear error naming the link; the link's target (which does not exist) is not created."""
    corpus = make_corpus(10, seed=5)
    enc = FakeEncoder()
    folder = tmp_path / store_key(enc.fingerprint, corpus.fingerprint())
    folder.mkdir()
    (folder / ".lock").symlink_to(tmp_path / "created-through-link")
    with pytest.raises(UnsafePathError, match=r"\.lock is a symbolic link"):
        extract(enc, corpus, cache_dir=tmp_path, **KW)
    assert not (tmp_path / "created-through-link").exists()


def test_leftovers_of_killed_runs_are_removed_but_a_live_writers_are_kept(tmp_path):
    """Expected: a corpus copy and a temp file named with a dead pid (and old) are removed by the next
    extraction; files of a live process (this one) stay."""
    corpus, store = _small_store(tmp_path)
    old = time.time() - 60
    dead = [tmp_path / f".corpus-{DEAD_PID}-abcdefgh.jsonl", store.path / f".progress.json.{DEAD_PID}-abcdefgh.tmp"]
    live = [tmp_path / f".corpus-{os.getpid()}-abcdefgh.jsonl", store.path / f".x.{os.getpid()}-abcdefgh.tmp"]
    for p in dead + live:
        p.write_text("left over")
        os.utime(p, (old, old))
    (store.path / "manifest.json").unlink()  # an unfinished store: the next run takes the lock and cleans its folder
    extract(FakeEncoder(), _as_toolkit_corpus(corpus, tmp_path), cache_dir=tmp_path, **KW)
    extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    assert [p.exists() for p in dead] == [False, False]
    assert [p.exists() for p in live] == [True, True]


def test_atomic_path_temp_of_a_live_writer_survives_a_cleanup(tmp_path):
    """Expected: while a block is writing, remove_stale_temps leaves its temp file alone, even if old."""
    with atomic_path(tmp_path / "out.bin") as tmp:
        tmp.write_bytes(b"partial")
        os.utime(tmp, (0, 0))
        assert remove_stale_temps(tmp_path) == []
    assert (tmp_path / "out.bin").read_bytes() == b"partial"


def test_sigterm_unwinds_so_a_writers_temp_file_is_removed(tmp_path):
    """Expected: SIGTERM during an atomic write inside the CLI ends with status 143 and no temp file."""
    code = (
        "import sys, time, signal, threading\n"
        "from probing import cli\n"
        "from probing._io import atomic_path\n"
        "def slow(args):\n"
        f"    with atomic_path({str(tmp_path / 'out.txt')!r}) as tmp:\n"
        "        tmp.write_text('half'); print('ready', flush=True); time.sleep(30)\n"
        "    return 0\n"
        "cli.COMMANDS['demo'] = slow\n"
        "sys.exit(cli.main(['demo']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout.readline().strip() == b"ready"
    proc.terminate()
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 143, err
    assert b"stopped by SIGTERM" in err
    assert list(tmp_path.iterdir()) == []


class Huge(FakeEncoder):
    def encode(self, sentences):
        out = super().encode(sentences)
        out[0][1, 0, 0] = 1e38
        return out


def test_absurdly_large_feature_is_refused_naming_the_sentence(tmp_path):
    """Expected: 1e38 does not fit the store's fp16 (|x| <= 65504): refused, naming the sentence."""
    with pytest.raises(StoreError, match=r"values in \[.*1e\+38\] for sentence 's"):
        extract(Huge(), make_corpus(10), cache_dir=tmp_path, **KW)


# -- model files ---------------------------------------------------------------------------------------------


def _options(**lstm) -> dict:
    d = json.loads((FIXTURES / "options.json").read_text())
    d["lstm"].update(lstm)
    return d


@pytest.mark.parametrize(
    "lstm, key",
    [
        ({"n_layers": -1}, "lstm.n_layers"),
        ({"n_layers": 0}, "lstm.n_layers"),
        ({"dim": 0}, "lstm.dim"),
        ({"projection_dim": -16}, "lstm.projection_dim"),
        ({"cell_clip": -1}, "lstm.cell_clip"),
        ({"proj_clip": -0.5}, "lstm.proj_clip"),
    ],
)
def test_option_values_that_mean_nothing_are_refused(lstm, key):
    """Expected: an OptionsError naming the source and the key (once: accepted, producing garbage)."""
    with pytest.raises(OptionsError, match=rf"opts\.json: key '{key}' must be"):
        ElmoOptions.from_dict(_options(**lstm), source="opts.json")


def test_absurd_sizes_are_refused_before_allocating():
    """Expected: dim 1,000,000 would need ~60 GB of weights: refused from the estimate, at once."""
    t0 = time.perf_counter()
    with pytest.raises(OptionsError, match=r"GiB as float32.*check the options file"):
        Elmo(ElmoOptions.from_dict(_options(dim=1_000_000, projection_dim=4096)))
    assert time.perf_counter() - t0 < 1.0


@pytest.fixture
def weights(tmp_path) -> Path:
    path = tmp_path / "weights.hdf5"
    shutil.copy(FIXTURES / "lm_weights.hdf5", path)
    return path


def _load(path: Path, options: dict | None = None) -> Elmo:
    opts = tmp_options = path.parent / "options.json"
    tmp_options.write_text(json.dumps(options or _options()))
    return Elmo.from_files(opts, path)


def test_nan_weights_are_refused_with_the_dataset_name(weights):
    """Expected: HDF5 keeps no checksum, so values are checked: one NaN is named by its dataset."""
    with h5py.File(weights, "r+") as f:
        f["CNN_proj/W_proj"][0, 0] = np.nan
    with pytest.raises(WeightsError, match=r"dataset 'CNN_proj/W_proj' holds 1 NaN or infinite"):
        _load(weights)


def test_group_where_a_dataset_is_expected(weights):
    """Expected: a WeightsError naming the field, not h5py's AttributeError."""
    with h5py.File(weights, "r+") as f:
        del f["CNN_proj/b_proj"]
        f.create_group("CNN_proj/b_proj")
    with pytest.raises(WeightsError, match=r"'CNN_proj/b_proj' is an HDF5 Group, expected a dataset"):
        _load(weights)


def test_more_lstm_layers_in_the_weights_than_the_options_use(weights):
    """Expected: options with n_layers 1 on 2-layer weights are refused (once: the second layer was ignored)."""
    with pytest.raises(WeightsError, match=r"Cell1/LSTMCell/W_0', a layer beyond the 1 LSTM layer"):
        _load(weights, _options(n_layers=1))


def test_damaged_hdf5_is_one_clear_error(weights):
    """Expected: bytes overwritten in the file's metadata and data give a WeightsError naming the file."""
    data = bytearray(weights.read_bytes())
    for i in range(200, len(data) - 64, 997):  # leave the superblock: h5py opens the file, then reads break
        data[i : i + 8] = b"\xff" * 8
    weights.write_bytes(bytes(data))
    with pytest.raises(WeightsError, match=rf"{weights}"):
        _load(weights)


def test_truncated_and_foreign_pretrain_checkpoints(tmp_path):
    """Expected: a CheckpointError naming the file, never a torch or zip traceback."""
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    with pytest.raises(CheckpointError, match=r"foreign\.pt: not a probing pretrain checkpoint"):
        _load_checkpoint(foreign)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(foreign.read_bytes()[:200])
    with pytest.raises(CheckpointError, match=r"truncated\.pt: not a readable checkpoint"):
        _load_checkpoint(truncated)


# -- text input ----------------------------------------------------------------------------------------------


def test_bom_is_dropped_not_glued_to_the_first_token(tmp_path):
    """Expected: the first word is 'The' (once: '\\ufeffThe', whose vectors differed by up to 5.8)."""
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfThe cat sat\n")
    assert list(read_text(path))[0].words == ["The", "cat", "sat"]
    assert read_sentences(path) == ["The cat sat"]


def test_nul_byte_is_refused_with_its_line(tmp_path):
    path = tmp_path / "nul.txt"
    path.write_bytes(b"fine\nbad\x00line\n")
    with pytest.raises(CorpusFormatError, match=r"nul\.txt:2: NUL byte at column 4"):
        list(read_text(path))
    with pytest.raises(EmbedInputError, match=r"nul\.txt:2: NUL byte"):
        read_sentences(path)


def test_line_over_the_token_cap_is_refused_with_its_line(tmp_path):
    """Expected: 1,000 tokens are read; 1,001 are refused (the documented cap), before any encoding."""
    path = tmp_path / "long.txt"
    path.write_text("short line\n" + " ".join(["w"] * 1000) + "\n" + " ".join(["w"] * 1001) + "\n")
    with pytest.raises(CorpusFormatError, match=r"long\.txt:3: 1001 tokens on one line, more than 1000"):
        list(read_text(path))
    assert len(list(read_text(path).head(2))[1].words) == 1000


def test_line_over_one_mebibyte_is_refused_without_reading_it_whole(tmp_path):
    path = tmp_path / "huge.txt"
    path.write_bytes(b"x" * (3 << 20) + b"\n")
    with pytest.raises(CorpusFormatError, match=r"huge\.txt:1: line longer than 1048576 bytes"):
        list(read_text(path))


def test_truncated_gzip_is_a_clear_error(tmp_path):
    path = tmp_path / "cut.txt.gz"
    text = b"".join(b"line %d %s\n" % (i, os.urandom(8).hex().encode()) for i in range(5000))
    path.write_bytes(gzip.compress(text)[:20_000])
    with pytest.raises(CorpusFormatError, match=r"cut\.txt\.gz: truncated or corrupt gzip"):
        list(read_text(path))


def test_embed_output_equal_to_input_is_refused_and_the_input_kept(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("the cat\n")
    model = Elmo.random(FIXTURES / "options.json")
    for output in (src, tmp_path / "." / "in.txt"):
        with pytest.raises(EmbedInputError, match="is the input file"):
            embed_file(model, src, output, progress=False)
    assert src.read_text() == "the cat\n"


CONLLU_HEAD = "# sent_id = a-1\n# text = x\n"


def _token(i: int, form: str) -> str:
    """A word line whose HEAD makes a tree: word 1 is the root, every other word hangs from it."""
    return f"{i}\t{form}\t{form}\tNOUN\tNN\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_\n"


@pytest.mark.parametrize(
    "ids, line, found, expected",
    [((1, 1, 2), 4, 1, 2), ((1, 3, 2), 4, 3, 2), ((2, 1), 3, 2, 1)],
)
def test_conllu_word_ids_must_run_one_to_n(tmp_path, ids, line, found, expected):
    """Expected: a repeated, skipped or reordered word id is refused at its line (once: accepted)."""
    path = tmp_path / "bad.conllu"
    path.write_text(CONLLU_HEAD + "".join(_token(i, f"w{k}") for k, i in enumerate(ids)) + "\n")
    with pytest.raises(CorpusFormatError, match=rf"bad\.conllu:{line}: word id {found} where {expected} was expected"):
        list(read_conllu(path))


def test_conllu_multiword_ranges_and_empty_nodes_still_read(tmp_path):
    path = tmp_path / "ok.conllu"
    path.write_text(
        CONLLU_HEAD
        + "1-2\tcan't\t_\t_\t_\t_\t_\t_\t_\t_\n"
        + _token(1, "ca")
        + _token(2, "n't")
        + "2.1\tx\tx\t_\t_\t_\t_\t_\t_\t_\n"
        + _token(3, "go")
        + "\n"
    )
    assert list(read_conllu(path))[0].words == ["ca", "n't", "go"]


@pytest.mark.parametrize(
    "body, key, message",
    [
        (  # sentence ids are the bootstrap's clusters: a repeat names both texts
            '<text id="d1"><sentence id="d1.s1"><wf lemma="a" pos="DET">a</wf></sentence></text>'
            '<text id="d2"><sentence id="d1.s1"><wf lemma="b" pos="DET">b</wf></sentence></text>',
            "",
            r"t\.data\.xml: sentence id 'd1\.s1' appears twice .*'d1'.*'d2'",
        ),
        (  # issue 33; once: 'has no line in the gold key file', although it has one
            '<text id="d1"><sentence id="d1.s1"><instance id="d1.s1.t1" lemma="a" pos="NOUN">a</instance></sentence>'
            '<sentence id="d1.s2"><instance id="d1.s1.t1" lemma="b" pos="NOUN">b</instance></sentence></text>',
            "d1.s1.t1 a%1:00:00::\n",
            r"instance id 'd1\.s1\.t1' is duplicated \(first at .*d1\.s1",
        ),
    ],
    ids=["sentence", "instance"],
)
def test_duplicate_raganato_ids_are_named_as_duplicated(tmp_path, body, key, message):
    """Expected: a repeated sentence or instance id is an error that says so and where it was first."""
    (tmp_path / "t.data.xml").write_text(f'<?xml version="1.0"?><corpus lang="en" source="t">{body}</corpus>')
    (tmp_path / "t.gold.key.txt").write_text(key)
    with pytest.raises(CorpusFormatError, match=message):
        list(read_raganato(tmp_path / "t.data.xml"))


# -- archives ------------------------------------------------------------------------------------------------


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_zip_bomb_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    """Expected: wanted members that unpack past the cap are refused up front (once: 301 KiB -> 301 MiB)."""
    from probing.corpora import registry

    monkeypatch.setattr(registry, "RAGANATO_MAX_BYTES", 1 << 20)
    archive = _zip(tmp_path / "bomb.zip", {"x/semcor.data.xml": b"\0" * (2 << 20)})
    assert archive.stat().st_size < 20_000
    with pytest.raises(ArchiveError, match=r"bomb\.zip: its WSD files unpack to 2097152 bytes, more than"):
        unpack_raganato(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_too_many_members_and_non_zip_are_refused(tmp_path, monkeypatch):
    from probing.corpora import registry

    monkeypatch.setattr(registry, "RAGANATO_MAX_MEMBERS", 5)
    many = _zip(tmp_path / "many.zip", {f"f{i}": b"" for i in range(6)})
    with pytest.raises(ArchiveError, match=r"many\.zip: 6 members, more than 5"):
        unpack_raganato(many, tmp_path / "out")
    html = tmp_path / "page.zip"
    html.write_bytes(b"<!DOCTYPE html><html>Not Found</html>")
    with pytest.raises(ArchiveError, match=r"page\.zip: not a readable zip archive"):
        unpack_raganato(html, tmp_path / "out")


# -- the command line ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["extract", "--model", "glove", "--corpus", "x", "--max-sentences", "0"], "expected an integer >= 1, got 0"),
        (["extract", "--model", "glove", "--corpus", "x", "--max-sentences", "1e13"], "expected an integer, got"),
        (["extract", "--model", "glove", "--corpus", "x", "--seed", "-1"], ">= 0 and <= 4294967295, got -1"),
        (["embed", "--model", "m", "--input", "i", "--output", "o", "--batch-size", "2.5"], "expected an integer"),
        (["neighbors", "play", "-k", "nan"], "expected an integer"),
        (["pretrain", "--out", "o", "--hours", "inf"], "expected a finite number > 0"),
        (["pretrain", "--out", "o", "--checkpoint-minutes", "0"], "expected a finite number > 0"),
    ],
)
def test_numeric_arguments_are_validated_at_parse_time(argv, message, capsys):
    """Expected: argparse's exit status 2 and a message naming the option (once: 0 meant 'everything')."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_probing_error_is_one_line_with_status_2(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the cat\n")
    argv = ["embed", "--options", str(FIXTURES / "options.json"), "--weights", str(FIXTURES / "lm_weights.hdf5")]
    assert main([*argv, "--input", str(src), "--output", str(src), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is the input file" in err
    assert issubclass(EmbedInputError, ProbingError) and issubclass(StoreError, ValueError)


def test_bootstrap_count_like_1e13_is_refused():
    with pytest.raises(ValueError, match=r"n_boot must be an integer from 1 to 1,000,000, got 10000000000000"):
        bootstrap_ci(np.ones(10), n_boot=10**13)


def test_open_nofollow_refuses_a_link(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        _io.open_nofollow(tmp_path / "link", os.O_WRONLY | os.O_CREAT)
    assert not (tmp_path / "target").exists()


# -- issue 33: what the second fault campaign found ----------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, 0, 2.5, True])
def test_embed_batch_size_must_be_a_positive_integer(weights, bad):
    """Expected: one InputError naming batch_size (once: -1 returned [None] silently, 0 a range() ValueError);
    the same check as the CLI's --batch-size and the experiment file's batch_size."""
    model = _load(weights)
    with pytest.raises(InputError, match=rf"batch_size: expected an integer >= 1, got {bad!r}"):
        model.embed(["the cat"], batch_size=bad)


def test_sentence_counts_past_64_bits_are_refused_on_the_cli_in_toml_and_in_the_api(tmp_path, capsys):
    """Expected: 10**30 is refused with its range by argparse, by the experiment file and by Corpus.head
    (once: accepted, then islice's 'Stop argument' ValueError)."""
    huge = 10**30
    with pytest.raises(SystemExit) as exc:
        main(["extract", "--model", "glove", "--corpus", "x", "--max-sentences", str(huge)])
    assert exc.value.code == 2
    assert f"expected an integer >= 1 and <= {2**63 - 1}, got {huge}" in capsys.readouterr().err
    toml = '[experiment]\nmax_sentences = 99999999999999999999\n[[encoders]]\nkind = "glove"\n'
    toml += '[[tasks]]\nname = "upos"\nkind = "tagging"\nlabel = "upos"\ntrain = "demo-ud:train"\n'
    toml += 'test = ["demo-ud:test"]\n'
    with pytest.raises(ExperimentError, match=r"max_sentences: expected an integer >= 0 and <= 9223372036854775807"):
        parse_experiment(toml)
    with pytest.raises(InputError, match=r"head\(n\): expected an integer >= 0 and <= "):
        make_sentence_corpus(tmp_path).head(huge)


def make_sentence_corpus(tmp_path: Path):
    path = tmp_path / "c.txt"
    path.write_text("the cat\n")
    return read_text(path)


def test_a_small_store_is_hashed_whole_on_every_hit(tmp_path):
    """Expected: a 4 KiB block flipped anywhere in a store under FULL_CHECK_BYTES is found on every hit,
    whatever the sample budget (once: a sample found it in 5 of 40 draws of a 153 MiB store)."""
    _, store = _small_store(tmp_path, n=60)
    assert len(store.manifest["chunks"]) >= 4
    row0 = store.manifest["chunks"][2]["rows"][0]
    with open(store.path / "layer_001.npy", "r+b") as f:
        f.seek(store.layer(1).offset + row0 * store.dim * 2)
        f.write(os.urandom(4096))
    assert all(store.check_sample(budget_bytes=1, seed=s) for s in range(10))
    assert not all(store.check_sample(budget_bytes=1, seed=s, full_below=0) for s in range(40)), "sampled above"


def test_flipped_byte_in_the_bundled_weights_is_refused_on_load(tmp_path, monkeypatch):
    """Expected: the bundled model's files carry pinned sha256s, so a damaged copy is a clear error naming
    the file (once: served, with vectors off by up to 2.8); the shipped files match their pins."""
    from probing import paths
    from probing.elmo import hub

    shutil.copytree(paths.resources_dir() / "models" / "default", tmp_path / "models" / "default")
    monkeypatch.setattr(paths, "resources_dir", lambda: tmp_path)
    assert hub.resolve("default")[1] == tmp_path / "models" / "default" / "weights.hdf5"
    weights = tmp_path / "models" / "default" / "weights.hdf5"
    _flip(weights, weights.stat().st_size // 2)
    with pytest.raises(hub.BundledFileError, match=r"weights\.hdf5: sha256 .* pinned for the bundled checkpoint"):
        Elmo.from_pretrained("default")


@pytest.fixture
def file_server():
    from fixtures.download.fileserver import FileServer

    srv = FileServer({"/ok.json": b"{}"})
    yield srv
    srv.stop()


def test_redirect_to_another_scheme_is_refused_naming_its_target(file_server, tmp_path, monkeypatch):
    """Expected: http -> ftp and https -> http redirects are refused, naming the redirect target (once: the
    ftp one was followed and reported as 'cannot reach 127.0.0.1', https -> http would have been followed)."""
    import urllib.request

    from probing import download

    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    file_server.redirects["/moved.json"] = "ftp://127.0.0.1:9/moved.json"
    with pytest.raises(download.DownloadError, match=r"redirects \(HTTP 302\) to ftp://127\.0\.0\.1:9/moved\.json"):
        download.fetch(file_server.url("/moved.json"), progress=False, retries=0)
    handler = download._NoDowngrade()
    req = urllib.request.Request("https://example.org/model.hdf5")
    with pytest.raises(download.DownloadError, match=r"to http://example\.org/model\.hdf5: refused.*https to http"):
        handler.redirect_request(req, None, 301, "Moved", {}, "http://example.org/model.hdf5")
    upgrade = handler.redirect_request(
        urllib.request.Request("http://a.org/x"), None, 301, "Moved", {}, "https://a.org/x"
    )
    assert upgrade.full_url == "https://a.org/x"
    file_server.redirects["/same.json"] = "/ok.json"
    assert download.fetch(file_server.url("/same.json"), progress=False).read_bytes() == b"{}"


def _limited(code: str, limit_bytes: int, cwd: Path) -> subprocess.CompletedProcess:
    """``python -c code`` in a child under a file-size limit (``ulimit -f``); Python ignores SIGXFSZ, so a
    write past the limit fails with EFBIG."""
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, preexec_fn=limit, capture_output=True, text=True, timeout=120
    )


def test_embed_under_a_file_size_limit_is_one_line_naming_the_output(tmp_path):
    """Expected: exit 2, one line naming the output file and the limit, no temp file (once: SIGSEGV after
    thousands of lines of h5py 'Can't decrement id ref count', a 5 MB .tmp left)."""
    src = tmp_path / "in.txt"
    src.write_text("\n".join(" ".join(["the", "cat", "sat", "on", "a", "mat"] * 3) for _ in range(300)) + "\n")
    argv = ["embed", "--options", str(FIXTURES / "options.json"), "--weights", str(FIXTURES / "lm_weights.hdf5")]
    argv += ["--input", str(src), "--output", str(tmp_path / "out.hdf5"), "-q"]
    proc = _limited(f"import sys; from probing.cli import main; sys.exit(main({argv!r}))", 100_000, tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert f"cannot write {tmp_path / 'out.hdf5'}: the file would pass the file-size limit" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_extract_under_a_file_size_limit_names_the_file_and_leaves_no_store_folder(tmp_path):
    """Expected: exit 2, one line naming the layer file and the limit, no store folder left (once: '[Errno 27]
    File too large' naming nothing, and an empty store folder)."""
    src = tmp_path / "in.txt"
    src.write_text("\n".join(" ".join(["the", "cat", "sat", "on", "a", "mat"] * 3) for _ in range(300)) + "\n")
    argv = ["extract", "--model", str(FIXTURES), "--corpus", f"text:{src}", "--cache", str(tmp_path / "c"), "-q"]
    proc = _limited(f"import sys; from probing.cli import main; sys.exit(main({argv!r}))", 100_000, tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count("\n") == 1
    assert re.search(r"cannot write \S+/layer_000\.npy: .* over this process's file-size limit", proc.stderr)
    assert [p.name for p in (tmp_path / "c").iterdir() if not p.name.startswith(("corpus-memo", "."))] == []


def test_options_json_that_is_not_utf8_is_one_clear_error(tmp_path):
    """Expected: an OptionsError naming the file and the byte (once: a UnicodeDecodeError traceback)."""
    path = tmp_path / "options.json"
    path.write_bytes((FIXTURES / "options.json").read_bytes().replace(b'"relu"', b'"r\xe9lu"'))
    with pytest.raises(OptionsError, match=rf"{path}: not UTF-8 text \(byte \d+"):
        ElmoOptions.from_json(path)


def test_an_experiment_encoder_may_name_a_model_folder(tmp_path):
    """Expected: model = "a folder with options.json + weights.hdf5" (what probing pretrain exports) works in an
    experiment file as README says, relative to the file (once: 'expected a checkpoint name')."""
    from probing.encoders import ElmoEncoder
    from probing.experiment import parse_experiment

    shutil.copytree(FIXTURES, tmp_path / "export")
    toml = '[[encoders]]\nname = "mine"\nkind = "elmo"\nmodel = "export"\n'
    toml += '[[encoders]]\nname = "rand"\nkind = "random-elmo"\nmodel = "export"\n'
    toml += '[[tasks]]\nname = "upos"\nkind = "tagging"\nlabel = "upos"\ntrain = "demo-ud:train"\n'
    toml += 'test = ["demo-ud:test"]\n'
    exp = parse_experiment(toml, base=tmp_path)
    mine, rand = exp.encoders
    # the folder is resolved into the kind's options: its two files (a random ELMo reads only options.json)
    assert (mine.options.options, mine.options.weights) == (
        tmp_path / "export" / "options.json",
        tmp_path / "export" / "lm_weights.hdf5",
    )
    assert rand.options.options == tmp_path / "export" / "options.json" and not hasattr(rand.options, "weights")
    want = ElmoEncoder(FIXTURES / "options.json", FIXTURES / "lm_weights.hdf5")
    assert mine.build().fingerprint == want.fingerprint
    with pytest.raises(ExperimentError, match=r"encoders\[0\]\.model: expected a checkpoint name .* or a folder"):
        parse_experiment(toml.replace('model = "export"', 'model = "nowhere"', 1), base=tmp_path)


def test_a_killed_runs_corpus_copy_is_removed_by_a_cache_hit(tmp_path):
    """Expected: the next extraction removes a dead pid's .corpus-*.jsonl even when the corpus fingerprint is
    memoised and the store is a hit (once: cleanup ran only when the corpus was parsed); a live pid's stays."""
    (tmp_path / "c.txt").write_text("".join(" ".join(s.words) + "\n" for s in make_corpus(30, seed=3)))
    old = time.time() - 60
    os.utime(tmp_path / "c.txt", (old, old))  # not just written: its fingerprint is memoised
    corpus = read_text(tmp_path / "c.txt")
    extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    dead, live = tmp_path / f".corpus-{DEAD_PID}-abcdefgh.jsonl", tmp_path / f".corpus-{os.getpid()}-abcdefgh.jsonl"
    for p in (dead, live):
        p.write_text("left over")
        os.utime(p, (old, old))
    assert extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW).cache_hit
    assert (dead.exists(), live.exists()) == (False, True)


def test_input_that_is_not_a_regular_file_says_so(tmp_path, capsys):
    """Expected: --input /dev/null (or a folder) is 'not a regular file' (once: 'input file not found')."""
    argv = ["embed", "--options", str(FIXTURES / "options.json"), "--weights", str(FIXTURES / "lm_weights.hdf5")]
    for given, kind in (("/dev/null", "a device, pipe or socket"), (str(tmp_path), "a folder")):
        assert main([*argv, "--input", given, "--output", str(tmp_path / "o.hdf5"), "-q"]) == 2
        assert f"input file {given} is not a regular file (it is {kind})" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"embed input /dev/null is not a regular file"):
        read_sentences("/dev/null")


@pytest.mark.parametrize("y", [["a", 1, "a", 1], np.array(["a", 1, "a", 1], dtype=object)])
def test_mixed_str_and_int_labels_are_one_clear_error(y):
    """Expected: an InputError naming both label types (once: numpy's TypeError for the object array, and a
    list silently became the strings 'a', '1')."""
    from probing.probes import LinearProbe

    with pytest.raises(InputError, match=r"LinearProbe: y mixes label types str \('a'\), int \(1\)"):
        LinearProbe().fit(np.eye(4), y)


def test_edited_manifest_dim_names_the_manifest_and_how_to_rebuild(tmp_path):
    """Expected: a manifest whose dim disagrees with its encoder is named as damaged with the fix (once: 'an
    encoder's fingerprint must change ...'); extract(verify=True) rebuilds it."""
    corpus, store = _small_store(tmp_path)
    manifest = json.loads((store.path / "manifest.json").read_text())
    manifest["dim"] += 1
    (store.path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreCorruptError, match=r"manifest\.json is damaged: it says .* dim 9.*--verify.*or delete"):
        extract(FakeEncoder(), corpus, cache_dir=tmp_path, **KW)
    rebuilt = extract(FakeEncoder(), corpus, cache_dir=tmp_path, verify=True, **KW)
    assert rebuilt.dim == manifest["dim"] - 1
    rebuilt.verify()
