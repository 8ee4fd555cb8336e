"""The ``probing`` command line, run in-process through ``probing.cli.main``, with tiny inputs: the fixture
ELMo (tests/fixtures/elmo_allennlp, Apache-2.0), the tiny GloVe fixture, slices of the bundled demo data and
a local HTTP server for downloads. Outputs are checked by value against the library or an independent
computation; user errors must exit with status 2 and a one-line message naming the culprit."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
from fixtures.download.fileserver import FileServer
from test_hub import OPTIONS, WEIGHTS, tiny_registry

from probing import download, paths
from probing.cli import COMMANDS, build_parser, main
from probing.corpora import load
from probing.elmo import Elmo, ElmoOptions, hub
from probing.experiment import Results, extract_activations
from probing.report import draw_figures
from probing.results import read_results
from probing.results.display import format_summary
from probing.store import Store

FIX = Path(__file__).parent / "fixtures"
ELMO = FIX / "elmo_allennlp"
OPTIONS_JSON = ELMO / "options.json"
WEIGHTS_H5 = ELMO / "lm_weights.hdf5"
INPUT = ELMO / "input.txt"
GLOVE = FIX / "glove" / "tiny.glove.txt"
TOL = 1e-5  # the conformance bound of tests/test_elmo.py
SEMCOR_N = 215  # the first 215 sentences of demo-semcor train hold 5 occurrences of "play"


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def env(cache_root, monkeypatch):
    monkeypatch.setenv("PROBING_CACHE", str(cache_root))
    monkeypatch.delenv("PROBING_OFFLINE", raising=False)
    monkeypatch.delenv("PROBING_DATA", raising=False)
    monkeypatch.setattr(download, "RETRY_WAIT_S", 0.0)


def cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_user_error(capsys, command: str, *argv, names: str) -> str:
    """Exit status 2, one ``probing CMD: error:`` line on stderr that contains ``names``, no traceback."""
    rc, _, err = cli(capsys, command, *argv)
    assert rc == 2, err
    assert err.startswith(f"probing {command}: error: "), err
    assert names in err, err
    assert "Traceback" not in err
    return err


def table_rows(text: str) -> list[list[str]]:
    """The body of a ``format_table`` rendering: cells split on runs of two or more spaces."""
    lines = text.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if set(line.replace(" ", "")) == {"-"})
    return [re.split(r"\s{2,}", line.strip()) for line in lines[start + 1 :]]


# -- parser ----------------------------------------------------------------------------------------


def subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_registered_command_has_a_parser_and_every_option_a_help_line(capsys):
    subs = subparsers()
    assert set(subs) == set(COMMANDS)
    for name, parser in subs.items():
        assert parser.description, f"{name}: no description"
        for action in parser._actions:
            assert action.help, f"probing {name}: option {action.option_strings or action.dest} has no help"
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


def test_bad_arguments_exit_2_through_argparse(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["embed", "--layers", "middle", "--input", "x", "--output", "y"])
    assert exit_.value.code == 2
    assert "probing embed: error: argument --layers" in capsys.readouterr().err


@pytest.fixture
def server(monkeypatch):
    srv = FileServer({"/tiny/options.json": OPTIONS, "/tiny/weights.hdf5": WEIGHTS})
    monkeypatch.setitem(hub.REGISTRY, "tiny", tiny_registry(srv)["tiny"])
    yield srv
    srv.stop()


# -- embed -----------------------------------------------------------------------------------------


def sentences() -> list[list[str]]:
    return [line.split() for line in INPUT.read_text(encoding="utf-8").splitlines()]


def test_embed_stateful_reproduces_the_allennlp_file(tmp_path, capsys):
    """``--stateful --batch-size 3`` is how the reference file was made (see test_embed.py)."""
    out = tmp_path / "out.hdf5"
    rc, stdout, _ = cli(
        capsys,
        "embed",
        "--options",
        OPTIONS_JSON,
        "--weights",
        WEIGHTS_H5,
        "--input",
        INPUT,
        "--output",
        out,
        "--batch-size",
        3,
        "--stateful",
        "-q",
    )
    assert rc == 0 and str(out) in stdout
    with h5py.File(out, "r") as got, h5py.File(ELMO / "expected_all_layers.hdf5", "r") as exp:
        assert sorted(got) == sorted(exp)
        for key in exp:
            if key != "sentence_to_index":
                assert np.abs(got[key][...] - exp[key][...]).max() <= TOL, key


@pytest.mark.parametrize("layers", ["top", "average"])
def test_embed_layers_equal_elmo_embed(tmp_path, capsys, layers):
    out = tmp_path / "out.hdf5"
    rc, _, _ = cli(
        capsys,
        "embed",
        "--options",
        OPTIONS_JSON,
        "--weights",
        WEIGHTS_H5,
        "--input",
        INPUT,
        "--output",
        out,
        "--layers",
        layers,
        "--batch-size",
        7,
        "-q",
    )
    assert rc == 0
    expected = Elmo.from_files(OPTIONS_JSON, WEIGHTS_H5).embed(sentences())
    with h5py.File(out, "r") as f:
        index = json.loads(f["sentence_to_index"][0])
        assert len(index) == len(expected)
        for i, e in enumerate(expected):
            want = e[-1] if layers == "top" else e.mean(axis=0)
            assert f[str(i)].shape == want.shape == (len(sentences()[i]), 32)
            assert np.abs(f[str(i)][...] - want).max() <= TOL


def test_embed_model_by_name_and_bf16(server, tmp_path, capsys):
    """``--model`` goes through the registry (served locally); ``--precision bf16`` reaches the model."""
    out = tmp_path / "bf16.hdf5"
    rc, stdout, _ = cli(
        capsys,
        "embed",
        "--model",
        "tiny",
        "--input",
        INPUT,
        "--output",
        out,
        "--layers",
        "top",
        "--precision",
        "bf16",
        "-q",
    )
    assert rc == 0 and "bf16" in stdout
    bf16 = Elmo.from_files(OPTIONS_JSON, WEIGHTS_H5, precision="bf16").embed(sentences())
    fp32 = Elmo.from_files(OPTIONS_JSON, WEIGHTS_H5).embed(sentences())
    with h5py.File(out, "r") as f:
        got = [f[str(i)][...] for i in range(len(bf16))]
    assert max(np.abs(g - b[-1]).max() for g, b in zip(got, bf16)) <= TOL
    assert max(np.abs(g - e[-1]).max() for g, e in zip(got, fp32)) > 1e-4


def flip_a_byte(path: Path) -> str:
    """Invert the byte in the middle of ``path`` (HDF5 keeps no checksum of its data); the new sha256."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def test_embed_records_the_weights_file_and_refuses_a_pinned_one_that_changed(tmp_path, capsys):
    """The output's ``provenance`` attribute records the --weights file's path, size and sha256 (here the
    fixture's bytes, hashed by hashlib); with ``--sha256`` (either case) pinning it, one flipped byte is
    refused before anything is computed: exit 2, a message naming the file with both hashes, no output."""
    weights = tmp_path / "weights.hdf5"
    shutil.copy(WEIGHTS_H5, weights)
    pinned = hashlib.sha256(WEIGHTS_H5.read_bytes()).hexdigest()
    out = tmp_path / "out.hdf5"
    args = ["--options", OPTIONS_JSON, "--weights", weights, "--input", INPUT, "--output", out, "-q"]
    rc, stdout, _ = cli(capsys, "embed", *args, "--sha256", pinned.upper())
    assert rc == 0 and f"sha256 {pinned}" in stdout
    with h5py.File(out, "r") as f:
        prov = json.loads(f.attrs["provenance"])
    assert prov["weights"] == {"path": str(weights.resolve()), "size": WEIGHTS_H5.stat().st_size, "sha256": pinned}
    assert prov["model"] == str(weights) and prov["layers"] == "all" and prov["stateful"] is False
    out.unlink()
    changed = flip_a_byte(weights)
    err = assert_user_error(capsys, "embed", *args, "--sha256", pinned, names=str(weights))
    assert f"sha256 {changed} is not the pinned {pinned}" in err
    assert not out.exists()
    assert_user_error(capsys, "embed", *args, "--sha256", "abc", names="--sha256: a sha256 is 64 hex digits")
    score = ["--options", OPTIONS_JSON, "--weights", weights, "--input", INPUT, "--output", tmp_path / "s.csv"]
    assert_user_error(capsys, "score", *score, "--sha256", pinned, names=str(weights))
    by_name = ["--model", "tiny", "--input", INPUT, "--output", out, "--sha256", pinned]
    assert_user_error(capsys, "embed", *by_name, names="a registered --model is pinned by the registry")


def test_embed_errors_name_the_culprit(tmp_path, capsys):
    model = ["--options", OPTIONS_JSON, "--weights", WEIGHTS_H5]
    out = ["--output", tmp_path / "o.hdf5"]
    assert_user_error(capsys, "embed", *model, "--input", tmp_path / "nope.txt", *out, names="nope.txt")
    blank = tmp_path / "blank.txt"
    blank.write_text("a sentence\n\nanother\n")
    assert_user_error(capsys, "embed", *model, "--input", blank, *out, names="line 2")
    bad = tmp_path / "options.json"
    bad.write_text('{"lstm": {"dim": 4}')
    assert_user_error(
        capsys,
        "embed",
        "--options",
        bad,
        "--weights",
        WEIGHTS_H5,
        "--input",
        INPUT,
        *out,
        names=f"{bad}: not valid JSON",
    )
    assert_user_error(capsys, "embed", "--model", "no-such-model", "--input", INPUT, *out, names="'no-such-model'")
    assert_user_error(capsys, "embed", "--model", "small", *model, "--input", INPUT, *out, names="not both")
    assert_user_error(capsys, "embed", "--input", INPUT, *out, names="--model NAME, or --options")
    assert not (tmp_path / "o.hdf5").exists()


# -- random-weights --------------------------------------------------------------------------------


def test_random_weights_official_layout_seeded(tmp_path, capsys):
    for seed in (1, 2):
        rc, _, _ = cli(
            capsys, "random-weights", "--options", OPTIONS_JSON, "--out", tmp_path / f"s{seed}", "--seed", seed
        )
        assert rc == 0
    with (
        h5py.File(WEIGHTS_H5, "r") as ref,
        h5py.File(tmp_path / "s1" / "weights.hdf5", "r") as a,
        h5py.File(tmp_path / "s2" / "weights.hdf5", "r") as b,
    ):
        shapes = {}
        ref.visititems(lambda n, o: shapes.update({n: o.shape}) if isinstance(o, h5py.Dataset) else None)
        for f in (a, b):  # the dataset names and shapes of the AllenNLP fixture file, nothing more
            found: dict = {}
            f.visititems(lambda n, o, found=found: found.update({n: o.shape}) if isinstance(o, h5py.Dataset) else None)
            assert found == shapes
        assert not np.array_equal(a["CNN_proj/W_proj"][...], b["CNN_proj/W_proj"][...])
    assert ElmoOptions.from_json(tmp_path / "s1" / "options.json") == ElmoOptions.from_json(OPTIONS_JSON)
    loaded = Elmo.from_files(tmp_path / "s1" / "options.json", tmp_path / "s1" / "weights.hdf5")
    assert loaded.fingerprint == Elmo.random(OPTIONS_JSON, seed=1).fingerprint
    assert_user_error(
        capsys, "random-weights", "--options", tmp_path / "none.json", "--out", tmp_path / "x", names="none.json"
    )


# -- download --------------------------------------------------------------------------------------


def test_download_fetches_verifies_and_lists(server, capsys):
    rc, out, _ = cli(capsys, "download", "tiny")
    assert rc == 0
    options, weights = hub.resolve("tiny", offline=True)
    assert options.read_bytes() == OPTIONS and weights.read_bytes() == WEIGHTS
    assert f"options {options}" in out and f"weights {weights}" in out
    rc, out, _ = cli(capsys, "download", "--list")
    rows = {r[0]: r for r in table_rows(out.split("\nGloVe")[0])}
    assert set(rows) == set(hub.REGISTRY)
    assert rows["tiny"][1:4] == ["32", f"{hub.count_parameters(hub.REGISTRY['tiny'].architecture) / 1e6:.1f}M", "yes"]
    assert rows["small"][1:4] == ["256", "13.6M", "no"]
    assert "glove-6b-50d" in out


def test_download_errors_are_one_line(server, capsys, monkeypatch):
    assert_user_error(capsys, "download", "nope", names="unknown ELMo checkpoint 'nope'; known: small")
    missing = hub.Checkpoint("gone", "404", server.url("/gone/options.json"), server.url("/gone/weights.hdf5"))
    monkeypatch.setitem(hub.REGISTRY, "gone", missing)
    err = assert_user_error(capsys, "download", "gone", names="HTTP error 404")
    assert server.url("/gone/options.json") in err and err.count("\n") == 1
    assert_user_error(capsys, "download", names="--list")


def test_demo_writes_to_its_own_folder_by_default():
    """issue #15: `probing demo` from the repository root overwrote the tracked figures/; its default output is
    ./probing-demo (the library default too), and scripts/refresh_figures.sh is what updates figures/."""
    import inspect

    from probing.cli import build_parser
    from probing.demo import run_demo

    assert build_parser().parse_args(["demo"]).out == "probing-demo"
    assert inspect.signature(run_demo).parameters["out_dir"].default == "probing-demo"
    script = (Path(__file__).parents[1] / "scripts" / "refresh_figures.sh").read_text()
    assert 'demo --out "$out"' in script and '"$root/figures/demo_results.csv"' in script


# -- data ------------------------------------------------------------------------------------------


def test_data_list_and_get(capsys):
    rc, out, _ = cli(capsys, "data", "list")
    rows = {r[0]: r for r in table_rows(out)}
    demo = str(paths.resources_dir() / "data" / "demo-ud")
    # the licence column (issue #15) comes from each dataset's registry entry
    assert rows["demo-ud"][1:4] == ["train, dev, test", "CC BY-SA 4.0", demo]
    assert rows["ud-ewt"][1:5] == ["train, dev, test", "CC BY-SA 4.0", "-", "probing data get ud-ewt"]
    assert rows["semcor"][2] == "WordNet 3.0 licence" and rows["senseval2"][2] == "research only (no licence given)"
    rc, out, _ = cli(capsys, "data", "get", "demo-ud")
    assert rc == 0 and out.strip() == f"demo-ud: {demo}"
    assert_user_error(capsys, "data", "get", "nope", names="unknown dataset 'nope'")


# -- extract ---------------------------------------------------------------------------------------


def test_extract_store_holds_the_model_vectors(tmp_path, capsys):
    rc, out, _ = cli(
        capsys,
        "extract",
        "--model",
        ELMO,
        "--corpus",
        "demo-ud",
        "--split",
        "test",
        "--max-sentences",
        10,
        "--cache",
        tmp_path / "stores",
        "-q",
    )
    assert rc == 0
    path = Path(re.search(r"^store: (.+)$", out, re.M).group(1))
    assert path.parent == tmp_path / "stores"
    store = Store.open(path)
    words = [s.words for s in load("demo-ud", "test").head(10)]
    assert store.n_sentences == 10 and len(store) == sum(map(len, words))
    assert f"{len(store)} tokens in 10 sentences, layers 0, 1, 2, dim 32" in out
    on_disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1024
    assert f"{on_disk:.1f} KiB on disk" in out
    expected = np.concatenate(Elmo.from_files(OPTIONS_JSON, WEIGHTS_H5).embed(words), axis=1)
    for k in range(3):  # fp16 storage: relative error up to 2**-11
        np.testing.assert_allclose(store.layer(k, dtype=np.float32), expected[k], rtol=2e-3, atol=1e-4)


def test_extract_errors(capsys):
    err = assert_user_error(
        capsys,
        "extract",
        "--model",
        ELMO,
        "--corpus",
        "ud-ewt",
        "--split",
        "test",
        "-q",
        names="dataset 'ud-ewt' (split 'test') not found",
    )
    assert "probing data get ud-ewt" in err
    assert_user_error(
        capsys, "extract", "--model", ELMO, "--corpus", "demo-ud", "--split", "nosuch", "-q", names="no split 'nosuch'"
    )
    assert_user_error(
        capsys, "extract", "--model", "nosuch", "--corpus", "demo-ud", "--split", "test", "-q", names="model 'nosuch'"
    )


# -- run and report --------------------------------------------------------------------------------

TOML = f"""
[experiment]
name = "cli"
seeds = [0]
bootstrap = 20
max_sentences = 20

[probe]
C = [1.0]
max_iter = 20
mix_max_iter = 20

[[encoders]]
name = "elmo"
kind = "elmo"
options = "{OPTIONS_JSON}"
weights = "{WEIGHTS_H5}"

[[tasks]]
name = "upos"
kind = "tagging"
label = "upos"
train = "demo-ud:train"
dev = "demo-ud:dev"
test = ["demo-ud:test"]
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, cache_root):
    root = tmp_path_factory.mktemp("run")
    (root / "exp.toml").write_text(TOML)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBING_CACHE", str(cache_root))
        mp.delenv("PROBING_DATA", raising=False)
        rc = main(["run", str(root / "exp.toml"), "--out", str(root / "out"), "-q"])
    assert rc == 0
    return root


def test_run_prints_the_summary_of_the_files_it_wrote(run_dir, capsys):
    rc, out, _ = cli(capsys, "run", run_dir / "exp.toml", "--out", run_dir / "again", "-q")
    assert rc == 0
    results = read_results(run_dir / "again")
    pd.testing.assert_frame_equal(results, read_results(run_dir / "out"))
    summary = Results(results, {}, {}, run_dir / "again").summary()
    assert list(summary.columns) == ["0", "1", "2", "mix", "concat", "majority", "most-frequent-tag"]
    assert format_summary(summary, {"upos": "accuracy"}) in out
    best = summary.loc[summary.index.get_level_values("encoder") == "elmo", ["0", "1", "2"]].iloc[0].idxmax()
    assert f"{summary.loc[('upos', 'demo-ud', 'test', 'elmo'), best]:.1f}*" in out  # the best layer is marked
    assert f"probing report {run_dir / 'again'}" in out


def test_run_errors_name_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("x = [\n")
    assert_user_error(capsys, "run", bad, "--out", tmp_path / "o", names=f"{bad}: not valid TOML")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text(TOML.replace('label = "upos"', 'label = "upos"\ncolour = "red"'))
    assert_user_error(capsys, "run", unknown, "--out", tmp_path / "o", names="tasks[0]: unknown key(s) 'colour'")
    assert_user_error(capsys, "run", tmp_path / "none.toml", "--out", tmp_path / "o", names="none.toml")
    assert not (tmp_path / "o").exists()


def test_report_from_a_results_folder(run_dir, tmp_path, capsys):
    html_path = tmp_path / "site" / "r.html"
    rc, out, _ = cli(capsys, "report", run_dir / "out", "--out", html_path)
    assert rc == 0 and out.strip() == f"wrote {html_path}"
    stems = ["layer_scores_upos", "selectivity_upos", "mix_weights", "tag_gains_upos", "overview"]
    figures = tmp_path / "site" / "figures"
    assert sorted(p.name for p in figures.iterdir()) == sorted(f"{s}.{x}" for s in stems for x in ("png", "svg"))
    html = html_path.read_text(encoding="utf-8")
    embedded = re.findall(r'<figure id="fig-([^"]+)"><img [^>]*src="data:image/png;base64,([^"]+)"', html)
    assert [name for name, _ in embedded] == ["overview", *stems[:-1]]  # the overview leads, under the verdict
    for name, data in embedded:
        assert base64.b64decode(data) == (figures / f"{name}.png").read_bytes()
    section = html[html.index('<section id="results">') :]
    section = section[: section.index("</section>")]
    assert section.count("<tr>") == 1 + len(read_results(run_dir / "out"))  # header + one row per result


def test_report_errors(tmp_path, capsys, run_dir):
    assert_user_error(capsys, "report", tmp_path / "nowhere", names="nowhere")
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(run_dir / "out" / "results.csv", partial)
    assert_user_error(capsys, "report", partial, names=str(partial / "results.json"))


def test_draw_figures_names_every_dataset_and_encoder():
    """A task scored on two test sets gets one figure per set; two encoders get a tag-gain figure each."""
    rows = [
        dict(
            task="upos",
            dataset=d,
            split="test",
            encoder=e,
            layer=lay,
            metric="accuracy",
            value=v,
            ci_low=v - 0.01,
            ci_high=v + 0.01,
            seed=0,
        )
        for d in ("a", "b")
        for e in ("elmo", "random")
        for lay, v in (("0", 0.5), ("1", 0.7))
    ]
    per_tag = pd.DataFrame(
        [
            dict(task="upos", dataset="a", split="test", encoder=e, layer=lay, tag=t, n=3, accuracy=acc, seed=0)
            for e in ("elmo", "random")
            for lay, acc in (("0", 0.5), ("1", 1.0))
            for t in ("NOUN", "VERB")
        ]
    )
    names = list(draw_figures(pd.DataFrame(rows), {"per_tag": per_tag}))
    assert names == [
        "layer_scores_upos_a_test",
        "layer_scores_upos_b_test",
        "tag_gains_upos_a_test_elmo",
        "tag_gains_upos_a_test_random",
        "overview",
    ]


# -- neighbors -------------------------------------------------------------------------------------


def test_type_neighbors_match_numpy_cosines(capsys):
    table = pd.read_csv(GLOVE, sep=" ", header=None, index_col=0)
    unit = table.to_numpy() / np.linalg.norm(table.to_numpy(), axis=1, keepdims=True)
    cos = pd.Series(unit @ unit[table.index.get_loc("play")], index=table.index).drop("play")
    expected = cos.sort_values(ascending=False).head(3)
    rc, out, _ = cli(capsys, "neighbors", "play", "--vectors", GLOVE, "-k", 3, "-q")
    assert rc == 0
    got = table_rows(out)
    assert [r[1] for r in got] == list(expected.index)
    np.testing.assert_allclose([float(r[2]) for r in got], expected.to_numpy(), atol=5e-4)


SEMCOR = ["--model", ELMO, "--corpus", "demo-semcor", "--split", "train", "--max-sentences", SEMCOR_N, "-q"]


def test_occurrence_neighbors_at_the_token_layer_are_the_same_word(capsys):
    """Layer 0 is context-free: every other "play" in the corpus has cosine 1 with the first one."""
    rc, out, _ = cli(capsys, "neighbors", "play", *SEMCOR, "--layer", 0, "-k", 4)
    assert rc == 0
    first = next(s for s in load("demo-semcor", "train") if "play" in s.words)
    query = " ".join(f"[{w}]" if i == first.words.index("play") else w for i, w in enumerate(first.words))
    assert f"query: {query}" in out
    rows = table_rows(out.split("layer 0:")[1])
    assert len(rows) == 4
    assert all(r[1] == "1.000" and r[2] == "play" and "[play]" in r[-1] for r in rows)


def test_neighbors_of_a_given_sentence_match_a_brute_force_search(capsys):
    sentence = "They play football on Sunday ."
    rc, out, _ = cli(capsys, "neighbors", "play", *SEMCOR, "--layer", 2, "-k", 1, "--sentence", sentence)
    assert rc == 0
    query = Elmo.from_files(OPTIONS_JSON, WEIGHTS_H5).embed([sentence.split()])[0][2, 1]
    store = extract_activations(str(ELMO), "demo-semcor", "train", max_sentences=SEMCOR_N, progress=False)
    layer = store.layer(2, dtype=np.float32)
    cos = layer @ query / (np.linalg.norm(layer, axis=1) * np.linalg.norm(query))
    best = int(np.argmax(cos))
    row = table_rows(out.split("layer 2:")[1])[0]
    assert row[2] == store.tokens["word"].iat[best]
    assert float(row[1]) == pytest.approx(cos[best], abs=5e-4)


def test_lemma_and_pos_filters_restrict_the_neighbours(capsys):
    """issue #15: without a filter the biLSTM layers answer with unrelated words; --lemma keeps only occurrences
    of that lemma (any case), --pos only that universal tag, and together both; the cosines are those of the
    unfiltered search restricted to the same rows."""
    sentence = "They play football on Sunday ."
    rc, out, _ = cli(
        capsys, "neighbors", "play", *SEMCOR, "--layer", 2, "-k", 3, "--sentence", sentence, "--lemma", "PLAY"
    )
    assert rc == 0
    rows = table_rows(out.split("layer 2:")[1])
    store = extract_activations(str(ELMO), "demo-semcor", "train", max_sentences=SEMCOR_N, progress=False)
    plays = np.flatnonzero(store.tokens["lemma"].str.lower() == "play")
    assert len(rows) == 3 and all(r[3] == "play" for r in rows)  # rank, cosine, word, lemma, ...
    query = Elmo.from_files(OPTIONS_JSON, WEIGHTS_H5).embed([sentence.split()])[0][2, 1]
    layer = store.layer(2, dtype=np.float32)[plays]
    cos = np.sort(layer @ query / (np.linalg.norm(layer, axis=1) * np.linalg.norm(query)))[::-1][:3]
    np.testing.assert_allclose([float(r[1]) for r in rows], cos, atol=5e-4)
    rc, out, _ = cli(capsys, "neighbors", "play", *SEMCOR, "--layer", 1, "-k", 5, "--pos", "verb")
    assert rc == 0
    tagged = store.tokens.set_index("word")["upos"]
    assert all("VERB" in set(np.atleast_1d(tagged.loc[r[2]])) for r in table_rows(out.split("layer 1:")[1]))
    assert_user_error(
        capsys, "neighbors", "play", *SEMCOR, "--lemma", "zebra", names="no occurrence with lemma 'zebra'"
    )


def test_table4_layout(capsys):
    rc, out, _ = cli(capsys, "neighbors", "play", *SEMCOR, "--table4", "--vectors", GLOVE)
    assert rc == 0
    rows = table_rows(out)
    assert rows[0][:2] == ["GloVe", "glove"] and rows[0][2].startswith("player, game, games")
    assert [r[1] for r in rows[1:]] == ["0", "1", "2"] * 2  # two source sentences x three layers
    assert all("[play]" in r[2] for r in rows[1:] if r[1] == "0")


def test_neighbors_errors(capsys):
    assert_user_error(capsys, "neighbors", "zzz", "--vectors", GLOVE, names="'zzz' is not in the vocabulary")
    assert_user_error(capsys, "neighbors", "play", *SEMCOR, "--layer", 7, names="no layer 7")
    assert_user_error(capsys, "neighbors", "xylophone", *SEMCOR, names="'xylophone' does not occur in demo-semcor")
    assert_user_error(capsys, "neighbors", "play", "--model", ELMO, names="--model needs --corpus")
    assert_user_error(capsys, "neighbors", "play", names="give --vectors")
    # a sentence that does not hold the word is refused, naming the sentence (issue #15)
    assert_user_error(
        capsys,
        "neighbors",
        "bank",
        *SEMCOR,
        "--table4",
        "--sentence",
        "we sat on the grass",
        names="'bank' does not occur",
    )
