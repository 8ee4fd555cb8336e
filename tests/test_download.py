"""probing.download.fetch against a local HTTP server serving the ELMo reference fixture files."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path

import pytest
from fixtures.download.fileserver import FileServer

from probing import download
from probing.download import ChecksumError, DownloadError, OfflineError, SizeMismatchError, fetch

FIXTURES = Path(__file__).parent / "fixtures" / "elmo_allennlp"
WEIGHTS = (FIXTURES / "lm_weights.hdf5").read_bytes()
OPTIONS = (FIXTURES / "options.json").read_bytes()
WEIGHTS_SHA = hashlib.sha256(WEIGHTS).hexdigest()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PROBING_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PROBING_OFFLINE", raising=False)
    monkeypatch.setattr(download, "RETRY_WAIT_S", 0.0)
    return tmp_path / "cache"


@pytest.fixture
def server():
    srv = FileServer({"/elmo/lm_weights.hdf5": WEIGHTS, "/elmo/options.json": OPTIONS, "/other/options.json": OPTIONS})
    yield srv
    srv.stop()


def test_clean_download_is_verified_cached_and_recorded(server, cache):
    url = server.url("/elmo/lm_weights.hdf5")
    path = fetch(url, sha256=WEIGHTS_SHA, size=len(WEIGHTS), progress=False)
    assert path.read_bytes() == WEIGHTS, "the cached file must hold exactly the served bytes"
    assert path.parent == cache / "downloads", "files live under $PROBING_CACHE/downloads"
    assert path.name.startswith("lm_weights-") and path.suffix == ".hdf5", f"keeps the basename: {path.name}"
    assert sorted(p.name for p in path.parent.glob("*.part")) == [], "no partial file is left behind"
    ledger = json.loads((cache / "downloads" / "ledger.json").read_text())
    assert ledger[url]["sha256"] == WEIGHTS_SHA and ledger[url]["size"] == len(WEIGHTS)
    assert fetch(url, progress=False) == path
    assert len(server.requests) == 1, "a second fetch of a cached file must not send a request"


def test_same_basename_under_two_urls_gets_two_files(server):
    a = fetch(server.url("/elmo/options.json"), progress=False)
    b = fetch(server.url("/other/options.json"), progress=False)
    assert a != b, "the short URL hash must keep same-named files apart"
    assert a.name.startswith("options-") and b.name.endswith(".json")


def test_interrupted_transfer_resumes_with_range(server):
    half = len(WEIGHTS) // 2
    server.drop_after["/elmo/lm_weights.hdf5"] = half
    path = fetch(server.url("/elmo/lm_weights.hdf5"), progress=False)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == WEIGHTS_SHA, "resumed file must equal the original"
    assert [r.range for r in server.requests] == [None, f"bytes={half}-"], "the retry asks only for the rest"


def test_interruption_past_retries_keeps_part_and_next_call_resumes(server):
    url = server.url("/elmo/lm_weights.hdf5")
    half = len(WEIGHTS) // 2
    server.drop_after["/elmo/lm_weights.hdf5"] = half
    with pytest.raises(DownloadError, match="interrupted 1 times") as err:
        fetch(url, progress=False, retries=0)
    part = download.cache_path(url).with_name(download.cache_path(url).name + ".part")
    assert str(part) in str(err.value), "the error says where the partial download is kept"
    assert part.read_bytes() == WEIGHTS[:half], "the bytes received before the drop are kept"
    assert fetch(url, sha256=WEIGHTS_SHA, progress=False).read_bytes() == WEIGHTS
    assert server.requests[-1].range == f"bytes={half}-"


def test_server_ignoring_range_restarts_from_scratch(server):
    url = server.url("/elmo/lm_weights.hdf5")
    half = len(WEIGHTS) // 2
    server.drop_after["/elmo/lm_weights.hdf5"] = half
    with pytest.raises(DownloadError, match="interrupted"):
        fetch(url, progress=False, retries=0)
    server.ignore_range = True
    path = fetch(url, sha256=WEIGHTS_SHA, progress=False)
    assert path.read_bytes() == WEIGHTS
    assert [r.range for r in server.requests] == [None, f"bytes={half}-"], "one Range request, answered with 200"


def test_unvalidated_part_is_discarded_not_resumed(server):
    """A .part with no record of the interrupted transfer (planted, corrupted, left by a kill) restarts:
    resuming from it would splice its bytes onto the genuine rest and, with no pinned hash, record that."""
    url = server.url("/elmo/options.json")
    final = download.cache_path(url)
    final.parent.mkdir(parents=True)
    final.with_name(final.name + ".part").write_bytes(b"x" * 10)
    assert fetch(url, progress=False).read_bytes() == OPTIONS
    assert [r.range for r in server.requests] == [None], "no Range request from an unvalidated partial"
    assert download.recorded(url)["sha256"] == hashlib.sha256(OPTIONS).hexdigest()


def test_corrupted_validated_part_is_discarded(server):
    """A partial whose bytes changed after the interruption no longer matches its record: start over."""
    url = server.url("/elmo/lm_weights.hdf5")
    half = len(WEIGHTS) // 2
    server.drop_after["/elmo/lm_weights.hdf5"] = half
    with pytest.raises(DownloadError, match="interrupted"):
        fetch(url, progress=False, retries=0)
    part = download.cache_path(url).with_name(download.cache_path(url).name + ".part")
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    assert fetch(url, progress=False).read_bytes() == WEIGHTS
    assert [r.range for r in server.requests] == [None, None]


def test_corrupted_download_names_both_hashes_and_keeps_nothing(server, cache):
    url = server.url("/elmo/lm_weights.hdf5")
    bad = bytearray(WEIGHTS)
    bad[1234] ^= 0xFF
    server.files["/elmo/lm_weights.hdf5"] = bytes(bad)
    with pytest.raises(ChecksumError) as err:
        fetch(url, sha256=WEIGHTS_SHA, progress=False)
    msg = str(err.value)
    assert url in msg and WEIGHTS_SHA in msg and hashlib.sha256(bad).hexdigest() in msg, msg
    assert "run the same command again" in msg.lower()
    assert [p.name for p in (cache / "downloads").glob("lm_weights*") if not p.name.endswith(".lock")] == []


def test_corrupted_cached_file_is_removed_then_refetched(server):
    url = server.url("/elmo/lm_weights.hdf5")
    path = fetch(url, progress=False)
    path.write_bytes(WEIGHTS[:-1] + b"\x00")  # same size, one byte flipped
    with pytest.raises(ChecksumError, match=WEIGHTS_SHA) as err:
        fetch(url, progress=False)
    assert "recorded at its first download" in str(err.value)
    assert not path.exists(), "a corrupted cached file is removed"
    assert fetch(url, progress=False).read_bytes() == WEIGHTS, "the next call downloads a fresh copy"
    assert len(server.requests) == 2


def test_ledger_catches_a_changed_upstream_file_until_forgotten(server):
    url = server.url("/elmo/options.json")
    first = fetch(url, progress=False)
    assert download.recorded(url)["sha256"] == hashlib.sha256(OPTIONS).hexdigest()
    changed = OPTIONS.replace(b"}", b" }", 1)
    server.files["/elmo/options.json"] = changed
    first.unlink()
    with pytest.raises(ChecksumError) as err:
        fetch(url, progress=False)
    msg = str(err.value)
    assert hashlib.sha256(OPTIONS).hexdigest() in msg and hashlib.sha256(changed).hexdigest() in msg
    assert "forget(" in msg, "the message says how to accept a legitimate upstream change"
    assert download.forget(url) is True
    assert fetch(url, progress=False).read_bytes() == changed
    assert download.recorded(url)["sha256"] == hashlib.sha256(changed).hexdigest()


def test_size_mismatch_announced_by_server(server):
    url = server.url("/elmo/options.json")
    with pytest.raises(SizeMismatchError, match=f"expected {len(OPTIONS) + 1} bytes.*announces {len(OPTIONS)}"):
        fetch(url, size=len(OPTIONS) + 1, progress=False)
    assert not download.cache_path(url).exists()


def test_size_mismatch_of_cached_file(server):
    url = server.url("/elmo/options.json")
    fetch(url, progress=False)
    with pytest.raises(SizeMismatchError, match=f"expected 5 bytes, found {len(OPTIONS)}"):
        fetch(url, size=5, progress=False)


def test_cached_file_is_served_with_the_server_gone(server):
    url = server.url("/elmo/lm_weights.hdf5")
    path = fetch(url, progress=False)
    server.stop()  # the port is now closed: any connection attempt would fail
    assert fetch(url, progress=False) == path
    assert fetch(url, progress=False, offline=True).read_bytes() == WEIGHTS


def test_offline_with_file_present_sends_no_request(server, monkeypatch):
    url = server.url("/elmo/options.json")
    fetch(url, progress=False)
    monkeypatch.setenv("PROBING_OFFLINE", "1")
    assert fetch(url, progress=False).read_bytes() == OPTIONS
    assert len(server.requests) == 1, "offline: the server sees only the first download"


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_offline_with_file_absent_is_a_clear_error(server, monkeypatch, how):
    url = server.url("/elmo/options.json")
    if how == "environment":
        monkeypatch.setenv("PROBING_OFFLINE", "1")
    with pytest.raises(OfflineError) as err:
        fetch(url, progress=False, offline=True if how == "argument" else None, hint="probing download tiny")
    msg = str(err.value)
    assert url in msg and str(download.cache_path(url)) in msg and "probing download tiny" in msg, msg
    assert isinstance(err.value, FileNotFoundError)
    assert server.requests == [], "offline mode must not contact the server"


def test_http_error_names_status_and_url(server):
    server.status["/elmo/options.json"] = 403
    with pytest.raises(DownloadError, match=r"HTTP error 403 .*" + server.url("/elmo/options.json")):
        fetch(server.url("/elmo/options.json"), progress=False)
    with pytest.raises(DownloadError, match="HTTP error 404"):
        fetch(server.url("/missing.bin"), progress=False)


def test_transient_server_error_is_retried(server):
    server.status["/elmo/options.json"] = 503
    with pytest.raises(DownloadError, match="interrupted 3 times .*HTTP 503"):
        fetch(server.url("/elmo/options.json"), progress=False, retries=2)
    assert len(server.requests) == 3, "two retries after the first 503"


def test_unreachable_host_is_a_clear_error(server):
    url = server.url("/elmo/options.json")
    server.stop()
    with pytest.raises(DownloadError, match=f"cannot reach 127.0.0.1:{server.port} to fetch {url}"):
        fetch(url, progress=False)


def test_concurrent_fetches_download_once(server):
    url = server.url("/elmo/lm_weights.hdf5")
    server.seconds_per_chunk = 0.02  # ~0.15 s in flight, so the second fetch waits on the lock
    results, errors = [], []

    def worker():
        try:
            results.append(fetch(url, progress=False).read_bytes())
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [WEIGHTS] * 3
    assert len(server.requests) == 1, "the lock makes the other fetches reuse the first download"


def test_explicit_dest(server, tmp_path):
    dest = tmp_path / "models" / "w.hdf5"
    assert fetch(server.url("/elmo/lm_weights.hdf5"), dest=dest, progress=False) == dest
    assert dest.read_bytes() == WEIGHTS


@pytest.mark.parametrize(
    "kwargs, message",
    [({"url": "ftp://host/x"}, "only http"), ({"url": "http://h/x", "sha256": "abc"}, "64 hex digits")],
)
def test_bad_arguments(kwargs, message):
    url = kwargs.pop("url")
    with pytest.raises(ValueError, match=message):
        fetch(url, progress=False, **kwargs)


def test_malformed_ledger_is_reported(server, cache):
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / "ledger.json").write_text("{not json")
    with pytest.raises(DownloadError, match="ledger.json is not valid JSON"):
        fetch(server.url("/elmo/options.json"), progress=False)


# -- hostile servers (issue 14) -------------------------------------------------------------------------------


def test_html_error_page_is_never_pinned_as_the_file(server):
    """Expected: an HTML page served for a .hdf5 URL is refused and NOT recorded (trust on first use must
    not pin it), so the genuine file is accepted once the server is fixed."""
    url = server.url("/elmo/lm_weights.hdf5")
    server.files["/elmo/lm_weights.hdf5"] = b"<!DOCTYPE html><html><body>503 Service Unavailable</body></html>"
    with pytest.raises(download.UnexpectedContentError, match=r"is an HTML page .*expected a hdf5 file"):
        fetch(url, progress=False)
    assert download.recorded(url) is None and not download.cache_path(url).exists()
    server.files["/elmo/lm_weights.hdf5"] = WEIGHTS
    assert fetch(url, progress=False).read_bytes() == WEIGHTS
    assert download.recorded(url)["sha256"] == WEIGHTS_SHA


def test_wrong_magic_for_the_expected_kind_is_refused(server):
    """Expected: bytes that do not start like a zip are not accepted as one, even if not HTML."""
    server.files["/data/archive.zip"] = b"\x1f\x8b" + b"\0" * 100
    with pytest.raises(download.UnexpectedContentError, match=r"not a zip file"):
        fetch(server.url("/data/archive.zip"), progress=False)


def test_plain_http_to_a_remote_host_is_refused_without_a_pinned_hash():
    """Expected: refused before any connection (nothing protects an unpinned file over http)."""
    with pytest.raises(DownloadError, match="refusing plain-http http://example.invalid/a.zip"):
        fetch("http://example.invalid/a.zip", progress=False)


def test_drip_feeding_server_is_cut_off_as_stalled(server, monkeypatch):
    """Expected: a server sending ~20 bytes/s is stopped by stall detection within a few seconds (the
    socket timeout alone never fires: every read gets a byte), with a message that says so."""
    monkeypatch.setattr(download, "STALL_S", 0.5)
    monkeypatch.setattr(download, "STALL_BYTES", 1000)
    server.drip_seconds = 0.05
    t0 = time.monotonic()
    with pytest.raises(DownloadError, match=r"interrupted 1 times \(last: stalled: \d+ bytes in"):
        fetch(server.url("/elmo/options.json"), progress=False, retries=0)
    assert time.monotonic() - t0 < 5


def test_server_that_never_answers_times_out(server, monkeypatch):
    monkeypatch.setattr(download, "TIMEOUT_S", 0.3)
    server.silent_seconds = 3.0
    t0 = time.monotonic()
    with pytest.raises(DownloadError, match=r"interrupted 1 times .*(no answer within|timed out)"):
        fetch(server.url("/elmo/options.json"), progress=False, retries=0)
    assert time.monotonic() - t0 < 3


def test_planted_symlink_part_is_not_written_through(server, tmp_path):
    """Expected: a link planted at the .part path is discarded (unvalidated), its target left intact."""
    url = server.url("/elmo/options.json")
    part = download.cache_path(url).with_name(download.cache_path(url).name + ".part")
    part.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    part.symlink_to(victim)
    assert fetch(url, progress=False).read_bytes() == OPTIONS
    assert victim.read_bytes() == b"precious"
