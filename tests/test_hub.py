"""probing.elmo.hub: the official registry's data (LM heads included), and resolve/describe against a local HTTP
server."""

from __future__ import annotations

import dataclasses
import io
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from fixtures.download.fileserver import FileServer

from probing import cli, download, paths
from probing.download import OfflineError, UnexpectedContentError
from probing.elmo import hub
from probing.elmo.hub import ArchitectureMismatchError, Checkpoint, UnknownCheckpointError
from probing.elmo.options import ElmoOptions
from probing.errors import InputError
from probing.lm import SoftmaxHead
from probing.lm.head import load_head

FIXTURES = Path(__file__).parent / "fixtures" / "elmo_allennlp"
OPTIONS = (FIXTURES / "options.json").read_bytes()
WEIGHTS = (FIXTURES / "lm_weights.hdf5").read_bytes()
TINY = ElmoOptions.from_json(FIXTURES / "options.json")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROBING_OFFLINE", raising=False)
    monkeypatch.setattr(download, "RETRY_WAIT_S", 0.0)
    return tmp_path / "cache"


@pytest.fixture
def server():
    srv = FileServer({"/tiny/options.json": OPTIONS, "/tiny/weights.hdf5": WEIGHTS})
    yield srv
    srv.stop()


def tiny_registry(server: FileServer, architecture: ElmoOptions = TINY) -> dict[str, Checkpoint]:
    entry = Checkpoint(
        "tiny",
        "the AllenNLP test biLM",
        server.url("/tiny/options.json"),
        server.url("/tiny/weights.hdf5"),
        architecture=architecture,
    )
    return {"tiny": entry}


def test_official_names_and_urls():
    assert hub.names() == ["small", "medium", "original", "original-5.5b", "default"]
    # The URLs AllenNLP publishes (allennlp.org/elmo, AllenNLP's Elmo docs).
    assert hub.REGISTRY["small"].options_url == (
        "https://allennlp.s3.amazonaws.com/models/elmo/2x1024_128_2048cnn_1xhighway/"
        "elmo_2x1024_128_2048cnn_1xhighway_options.json"
    )
    assert hub.REGISTRY["original-5.5b"].weights_url == (
        "https://allennlp.s3.amazonaws.com/models/elmo/2x4096_512_2048cnn_2xhighway_5.5B/"
        "elmo_2x4096_512_2048cnn_2xhighway_5.5B_weights.hdf5"
    )
    tags = {
        "small": "2x1024_128_2048cnn_1xhighway",
        "medium": "2x2048_256_2048cnn_1xhighway",
        "original": "2x4096_512_2048cnn_2xhighway",
        "original-5.5b": "2x4096_512_2048cnn_2xhighway_5.5B",
    }
    for name, tag in tags.items():
        entry = hub.REGISTRY[name]
        assert entry.options_url == f"{hub.S3}/{tag}/elmo_{tag}_options.json"
        assert entry.weights_url == f"{hub.S3}/{tag}/elmo_{tag}_weights.hdf5"


def test_dims_and_parameter_counts_match_the_published_table():
    # allennlp.org/elmo: parameters (millions) 13.6 / 28.0 / 93.6 / 93.6; output = 2 x projection.
    published = {"small": (256, 13.6), "medium": (512, 28.0), "original": (1024, 93.6), "original-5.5b": (1024, 93.6)}
    for name, (dim, millions) in published.items():
        entry = hub.REGISTRY[name]
        assert entry.dim == dim, name
        assert round(entry.n_params / 1e6, 1) == millions, (name, entry.n_params)
    # Exact counts worked by hand for 'small': chars 261*16 + CNN 16*12320+2048 + highway 2*(2048^2+2048)
    # + projection 2048*128+128 + 4 LSTM cells (256*4096 + 4096 + 1024*128).
    assert hub.REGISTRY["small"].n_params == 4176 + 199168 + 8392704 + 262272 + 4 * 1183744 == 13_593_296


def test_count_parameters_equals_the_values_stored_in_a_weights_file():
    with h5py.File(FIXTURES / "lm_weights.hdf5", "r") as f:
        stored = []
        f.visititems(lambda _, obj: stored.append(obj.size) if isinstance(obj, h5py.Dataset) else None)
    assert hub.count_parameters(TINY) == sum(stored) == 105_120


def test_resolve_downloads_then_works_offline(server):
    registry = tiny_registry(server)
    options, weights = hub.resolve("tiny", registry=registry, progress=False)
    assert options.read_bytes() == OPTIONS and weights.read_bytes() == WEIGHTS
    assert [r.path for r in server.requests] == ["/tiny/options.json", "/tiny/weights.hdf5"]
    assert hub.resolve("tiny", registry=registry, offline=True) == (options, weights)
    assert hub.download("tiny", registry=registry) == (options, weights)
    assert len(server.requests) == 2, "cached checkpoints are resolved without any request"


def test_wrong_architecture_is_caught_before_the_weights_download(server):
    registry = tiny_registry(server, dataclasses.replace(TINY, projection_dim=32))
    with pytest.raises(ArchitectureMismatchError, match="projection_dim: expected 32, found 16"):
        hub.resolve("tiny", registry=registry, progress=False)
    assert [r.path for r in server.requests] == ["/tiny/options.json"], "weights must not be fetched"


def test_offline_and_not_cached_names_the_download_command(server):
    with pytest.raises(OfflineError, match="probing download tiny"):
        hub.resolve("tiny", registry=tiny_registry(server), offline=True)
    assert server.requests == []


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(UnknownCheckpointError, match="'big'.*small, medium, original, original-5.5b, default"):
        hub.resolve("big")


def test_default_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "resources_dir", lambda: tmp_path / "resources")
    expected = tmp_path / "resources" / "models" / "default" / "options.json"
    with pytest.raises(FileNotFoundError, match=f"{expected} and .*weights.hdf5 are missing.*small"):
        hub.resolve("default")


def test_default_bundled_model(tmp_path, monkeypatch, server):
    folder = tmp_path / "resources" / "models" / "default"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "options.json", folder / "options.json")
    shutil.copy(FIXTURES / "lm_weights.hdf5", folder / "weights.hdf5")
    monkeypatch.setattr(paths, "resources_dir", lambda: tmp_path / "resources")
    unpinned = {"default": Checkpoint("default", "the fixture model as the bundled one", bundled="models/default")}
    assert hub.resolve("default", registry=unpinned) == (folder / "options.json", folder / "weights.hdf5")
    with pytest.raises(hub.BundledFileError, match="options.json: sha256 .* differs from the .* pinned"):
        hub.resolve("default", offline=True)  # the registry's entry pins the shipped files' hashes
    row = hub.describe().set_index("name").loc["default"]
    assert (row["dim"], row["n_params"], row["available"]) == (32, 105_120, True), "read from the bundled files"


def test_describe_lists_the_registry(server):
    df = hub.describe()
    assert list(df.columns) == ["name", "dim", "n_params", "description", "available", "options", "weights"]
    assert list(df["name"]) == hub.names()
    small = df.set_index("name").loc["small"]
    assert (small["dim"], small["n_params"], small["available"]) == (256, 13_593_296, False), "fresh cache"
    registry = tiny_registry(server)
    assert not hub.describe(registry)["available"].item()
    hub.resolve("tiny", registry=registry, progress=False)
    assert hub.describe(registry)["available"].item(), "available once both files are cached"


def test_checkpoint_needs_urls_or_a_bundled_folder():
    with pytest.raises(ValueError, match="both options_url and weights_url, or bundled"):
        Checkpoint("x", "d", options_url="http://h/o.json")
    with pytest.raises(ValueError, match="not both"):
        Checkpoint("x", "d", "http://h/o.json", "http://h/w.hdf5", bundled="models/x")


# LM heads: the published softmax next to 'original', and download --with-softmax against the local server

HEAD_VOCAB = "<S>\n</S>\n<UNK>\nthe\ncat\n"


def softmax_bytes(n: int = 5, dim: int = 16) -> bytes:
    """A small softmax file in exactly the official layout: HDF5 softmax/W (V, d) and softmax/b (V,), float32."""
    buf = io.BytesIO()
    rng = np.random.default_rng(0)
    with h5py.File(buf, "w") as f:
        f["softmax/W"] = rng.standard_normal((n, dim)).astype(np.float32)
        f["softmax/b"] = rng.standard_normal(n).astype(np.float32)
    return buf.getvalue()


@pytest.fixture
def head_server():
    srv = FileServer(
        {
            "/tiny/options.json": OPTIONS,
            "/tiny/weights.hdf5": WEIGHTS,
            "/tiny/softmax_weights.hdf5": softmax_bytes(),
            "/tiny/vocab.txt": HEAD_VOCAB.encode(),
        }
    )
    yield srv
    srv.stop()


def head_registry(server: FileServer) -> dict[str, Checkpoint]:
    entry = Checkpoint(
        "tiny",
        "the AllenNLP test biLM with a synthetic softmax",
        server.url("/tiny/options.json"),
        server.url("/tiny/weights.hdf5"),
        architecture=ElmoOptions.from_json(FIXTURES / "options.json"),
        softmax_url=server.url("/tiny/softmax_weights.hdf5"),
        vocab_url=server.url("/tiny/vocab.txt"),
    )
    return {"tiny": entry}


def test_the_published_softmax_sits_next_to_the_original_checkpoint():
    # allennlp/commands/elmo_perplexities.py (AllenNLP 0.x): DEFAULT_SOFTMAX_FILE and DEFAULT_VOCAB_FILE
    tag = "2x4096_512_2048cnn_2xhighway"
    entry = hub.REGISTRY["original"]
    assert entry.softmax_url == f"https://allennlp.s3.amazonaws.com/models/elmo/{tag}/elmo_{tag}_softmax_weights.hdf5"
    assert entry.vocab_url == f"https://allennlp.s3.amazonaws.com/models/elmo/{tag}/vocab-2016-09-10.txt"
    assert [n for n, c in hub.REGISTRY.items() if c.softmax_url] == ["original"]
    with pytest.raises(InputError, match="'small' has no published LM softmax; checkpoints with one: original"):
        hub.resolve_head("small")


def test_download_with_softmax_then_load_the_head_offline(head_server):
    reg = head_registry(head_server)
    hub.download("tiny", with_softmax=True, registry=reg)
    assert sorted(r.path for r in head_server.requests) == sorted(head_server.files)
    softmax, vocab = hub.resolve_head("tiny", offline=True, registry=reg)
    assert softmax.read_bytes() == head_server.files["/tiny/softmax_weights.hdf5"]
    head = load_head("tiny", registry=reg)
    assert isinstance(head, SoftmaxHead) and head.vocab == HEAD_VOCAB.split() and head.dim == 16
    assert len(head_server.requests) == 4, "a cached head is resolved without any request"
    assert download.recorded(head_server.url("/tiny/softmax_weights.hdf5")) is not None, "first-use hash recorded"


def test_an_interrupted_softmax_download_resumes(head_server):
    head_server.drop_after["/tiny/softmax_weights.hdf5"] = 1000
    softmax, _ = hub.resolve_head("tiny", registry=head_registry(head_server))
    assert softmax.read_bytes() == head_server.files["/tiny/softmax_weights.hdf5"]
    ranges = [r.range for r in head_server.requests if r.path == "/tiny/softmax_weights.hdf5"]
    assert ranges == [None, "bytes=1000-"]


def test_an_html_page_instead_of_the_softmax_is_refused(head_server):
    head_server.files["/tiny/softmax_weights.hdf5"] = b"<html><body>Access denied</body></html>"
    with pytest.raises(UnexpectedContentError, match="HTML page"):
        hub.resolve_head("tiny", registry=head_registry(head_server))


def test_offline_and_not_cached_names_the_command(head_server):
    with pytest.raises(OfflineError, match="probing download tiny --with-softmax"):
        hub.resolve_head("tiny", offline=True, registry=head_registry(head_server))


def test_cli_download_with_softmax(head_server, monkeypatch, capsys):
    monkeypatch.setattr(hub, "REGISTRY", head_registry(head_server))
    assert cli.main(["download", "tiny", "--with-softmax"]) == 0
    out = capsys.readouterr().out
    softmax, vocab = hub.resolve_head("tiny", offline=True)
    assert f"LM head {softmax}" in out and f"vocab   {vocab}" in out
