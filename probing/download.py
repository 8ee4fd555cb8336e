"""Fetch files over HTTP(S) into the cache: resumable, verified, safe under concurrency, offline-aware.

A file is downloaded to ``<final>.part``, resumed with an HTTP Range request after an interruption,
checked (size, sha256, and that its first bytes are what its kind of file starts with: an HTML error
page is never an archive) and only then renamed onto its final name, so a file under its final name is
always complete. When no sha256 is known in advance, the hash of the first complete download that passes
these checks is recorded in a small JSON ledger and every later copy is checked against it.

Only https is used unless the sha256 is pinned, the host is this machine, or ``allow_http=True``; a
redirect is followed only to http(s), never from https to http (the error names the redirect target). A
partial download is resumed only if its bytes still hash to what was recorded when it was interrupted
(``<final>.part.json``); any other ``.part`` is discarded. Every socket operation (connect, each read)
times out after ``TIMEOUT_S``, and a transfer that brings fewer than ``STALL_BYTES`` in ``STALL_S``
seconds is cut off as stalled, so a server that drips bytes cannot hang a command.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import ipaddress
import json
import logging
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import IO
from urllib.parse import unquote, urlparse

from tqdm import tqdm

from probing import __version__, paths
from probing._io import atomic_open, open_nofollow, remove_stale_temps
from probing.errors import InputError, ProbingError

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
TIMEOUT_S = 60.0  # connect, and each read
STALL_S = 60.0
STALL_BYTES = 16 << 10  # fewer bytes than this in STALL_S seconds: the transfer has stalled
RETRY_WAIT_S = 1.0
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_TRANSFER_ERRORS = (http.client.HTTPException, ConnectionError, TimeoutError, ssl.SSLError)
_SHA256 = re.compile(r"[0-9a-f]{64}")


class DownloadError(ProbingError, OSError):
    """A file could not be fetched; the message names the URL and what to do about it."""


class ChecksumError(DownloadError):
    """A file's sha256 differs from the expected one (given, or recorded at its first download)."""


class SizeMismatchError(DownloadError):
    """A file's size differs from the expected one."""


class OfflineError(DownloadError, FileNotFoundError):
    """The file is not in the cache and network access is disabled."""


class UnexpectedContentError(DownloadError):
    """The server sent something that is not the kind of file expected (an HTML page instead of an archive)."""


class _NoDowngrade(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to http or https, and never from https to http: a redirect that would weaken
    the transfer (https -> http, http -> ftp) is a DownloadError naming its target."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        old, new = urlparse(req.full_url).scheme, urlparse(newurl).scheme
        if new not in ("http", "https") or (old == "https" and new == "http"):
            raise DownloadError(
                f"{req.full_url} redirects (HTTP {code}) to {newurl}: refused, a download may not move from "
                f"{old} to {new}; fetch {newurl} yourself if you trust it"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_NoDowngrade)


class _Interrupted(Exception):
    """A transfer stopped early; what arrived is kept in the ``.part`` file and can be resumed."""


_MAGIC: dict[str, tuple[bytes, ...]] = {
    "zip": (b"PK\x03\x04", b"PK\x05\x06"),
    "gzip": (b"\x1f\x8b",),
    "bzip2": (b"BZh",),
    "xz": (b"\xfd7zXZ\x00",),
    "hdf5": (b"\x89HDF\r\n\x1a\n",),
}
_KIND_BY_SUFFIX = {
    ".zip": "zip",
    ".gz": "gzip",
    ".tgz": "gzip",
    ".bz2": "bzip2",
    ".xz": "xz",
    ".hdf5": "hdf5",
    ".h5": "hdf5",
    ".json": "json",
}
KINDS = (*_MAGIC, "json", "any")


def expected_kind(url: str) -> str:
    """The kind of file a URL names, by its suffix (``"any"`` when unknown): see :func:`check_content`."""
    return _KIND_BY_SUFFIX.get(PurePosixPath(urlparse(url).path).suffix.lower(), "any")


def check_content(path: Path, kind: str) -> str | None:
    """None if ``path`` starts like a ``kind`` file, else what it is instead (checked before a hash is trusted).

    Magic bytes for archives and HDF5 (whose superblock may also sit at 512, 1024 or 2048), a JSON parse
    for ``json`` (small files only), and for every kind: an HTML page is refused.
    """
    with open(path, "rb") as f:
        head = f.read(4096)
    lowered = head.lstrip().lower()
    if lowered.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "an HTML page (an error or login page, not the file)"
    if kind == "json":
        if path.stat().st_size > 16 << 20:
            return "a file too large to be an options.json"
        try:
            json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            return f"not JSON ({e})"
        return None
    if kind == "hdf5":
        with open(path, "rb") as f:
            for offset in (0, 512, 1024, 2048):
                f.seek(offset)
                if f.read(8) == _MAGIC["hdf5"][0]:
                    return None
        return f"not an HDF5 file (starts with {head[:8]!r})"
    magic = _MAGIC.get(kind)
    if magic is not None and not head.startswith(magic):
        return f"not a {kind} file (starts with {head[:8]!r}, expected {magic[0]!r})"
    return None


def _loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_offline(offline: bool | None = None) -> bool:
    """``offline`` if given, else whether ``$PROBING_OFFLINE`` is set to 1/true/yes/on."""
    if offline is not None:
        return offline
    return os.environ.get("PROBING_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def downloads_dir() -> Path:
    """Folder of downloaded files and of the hash ledger (under ``$PROBING_CACHE`` when set)."""
    return paths.cache_dir() / "downloads"


def cache_path(url: str) -> Path:
    """Where ``fetch(url)`` keeps the file: the URL's basename with a short hash of the whole URL."""
    name = unquote(PurePosixPath(urlparse(url).path).name)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "download"
    stem, dot, ext = name.rpartition(".")
    if not stem:
        stem, dot, ext = ext, "", ""
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:10]
    return downloads_dir() / f"{stem}-{digest}{dot}{ext}"


def ledger_path() -> Path:
    """The JSON file mapping each fetched URL to the sha256 and size of its first complete download."""
    return downloads_dir() / "ledger.json"


def recorded(url: str) -> dict | None:
    """The ledger entry for ``url`` (``{"sha256", "size", "recorded"}``), or None."""
    return _read_ledger().get(url)


def forget(url: str) -> bool:
    """Drop the recorded hash of ``url`` (after a legitimate upstream change); True if there was one."""
    with _locked(ledger_path().with_name("ledger.json.lock")):
        ledger = _read_ledger()
        if url not in ledger:
            return False
        del ledger[url]
        _write_ledger(ledger)
        return True


def fetch(
    url: str,
    *,
    sha256: str | None = None,
    size: int | None = None,
    dest: Path | None = None,
    progress: bool = True,
    offline: bool | None = None,
    retries: int = 3,
    hint: str | None = None,
    kind: str | None = None,
    allow_http: bool = False,
) -> Path:
    """Return a verified local copy of ``url``, downloading it only when it is not already present.

    ``sha256``/``size``: expected hex digest and byte count (checked when given; without ``sha256`` the
    hash recorded at the first download is used). ``dest``: final path, default ``cache_path(url)``.
    ``offline`` (default ``$PROBING_OFFLINE``): never touch the network. ``retries``: how many times an
    interrupted transfer is resumed before giving up. ``hint``: the command to show a user who must
    fetch the file (default: the Python call). ``kind``: what the file must start with (see
    :func:`check_content`; default from the URL's suffix). ``allow_http``: accept a plain-http URL whose
    sha256 is not pinned (otherwise only https, or http to this machine). A file already present is
    re-hashed on every call, so a corrupted cache is never used silently.
    """
    scheme = urlparse(url).scheme
    if scheme not in ("http", "https"):
        raise InputError(f"cannot fetch {url!r}: only http:// and https:// URLs are supported")
    if scheme == "http" and sha256 is None and not allow_http and not _loopback(url):
        raise DownloadError(
            f"refusing plain-http {url}: nothing would protect the file in transit and no sha256 is pinned for "
            "it; use an https:// URL, give sha256=, or pass allow_http=True if you accept the risk"
        )
    kind = kind or expected_kind(url)
    if kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if not _SHA256.fullmatch(sha256):
            raise InputError(f"sha256 for {url} must be 64 hex digits, got {sha256!r}")
    if size is not None and size < 0:
        raise InputError(f"size for {url} must be >= 0, got {size}")
    final = Path(dest) if dest is not None else cache_path(url)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(final.parent)
    hint = hint or f"python -c \"from probing.download import fetch; fetch('{url}')\""

    with _locked(final.with_name(final.name + ".lock"), waiting=url if progress else None):
        entry = None if sha256 else recorded(url)
        expected = sha256 or (entry["sha256"] if entry else None)
        when = entry.get("recorded", "date unknown") if entry else ""
        source = "given" if sha256 else f"recorded at its first download, {when}"
        if final.exists():
            found = _verify(final, url, expected, source, size, downloaded=False, kind=kind)
            if entry is None:
                _record(url, found, final.stat().st_size)
            return final
        if is_offline(offline):
            why = "offline=True" if offline else "PROBING_OFFLINE is set; unset it first"
            raise OfflineError(
                f"{url} is not in the cache ({final}) and network access is disabled ({why}). "
                f"Fetch it once with network access: {hint}"
            )
        part = final.with_name(final.name + ".part")
        digest, n = _download(url, part, size, progress, retries, final.name)
        _sidecar(part).unlink(missing_ok=True)
        _verify(part, url, expected, source, size, downloaded=True, digest=digest, n_bytes=n, kind=kind)
        if recorded(url) is None:
            _record(url, digest, n)
        os.replace(part, final)
        log.info("fetched %s -> %s (%d bytes, sha256 %s)", url, final, n, digest)
        return final


def _verify(
    path: Path,
    url: str,
    expected: str | None,
    source: str,
    size: int | None,
    *,
    downloaded: bool,
    digest: str | None = None,
    n_bytes: int | None = None,
    kind: str = "any",
) -> str:
    """Check size, sha256 and content kind of ``path``; remove it and raise on a mismatch; return its sha256."""
    n_bytes = path.stat().st_size if n_bytes is None else n_bytes
    where = f"the download of {url}" if downloaded else f"the cached copy of {url} ({path})"
    again = (
        "Run the same command again to download a fresh copy."
        if not downloaded
        else "Run the same command again to retry; if it fails the same way, the server's file has changed."
    )
    if size is not None and n_bytes != size:
        path.unlink()
        raise SizeMismatchError(
            f"size mismatch for {where}: expected {size} bytes, found {n_bytes}. The file has been removed. {again}"
        )
    if digest is None:
        digest = _hash_file(path)
    if expected is None:  # nothing pinned or recorded: the kind check decides whether this copy is trusted
        wrong = check_content(path, kind)
        if wrong is not None:
            path.unlink()
            raise UnexpectedContentError(
                f"{where} is {wrong}; expected a {kind} file. Nothing was kept or recorded. Check the URL "
                "in a browser: the server may be down or may want a login."
            )
    if expected is not None and digest != expected:
        path.unlink()
        if source.startswith("recorded"):
            again += (
                f" If the upstream file was legitimately updated, forget the recorded hash with "
                f"python -c \"from probing.download import forget; forget('{url}')\" and fetch it again."
            )
        raise ChecksumError(
            f"sha256 mismatch for {where}:\n  expected {expected} ({source})\n  found    {digest}\n"
            f"The file has been removed. {again}"
        )
    return digest


def _download(url: str, part: Path, size: int | None, progress: bool, retries: int, label: str) -> tuple[str, int]:
    """Bring ``part`` to the complete file, resuming after interruptions; return (sha256, bytes)."""
    attempt = 0
    while True:
        try:
            return _transfer(url, part, size, progress, label)
        except _Interrupted as exc:
            attempt += 1
            if attempt > retries:
                have = part.stat().st_size if part.exists() else 0
                raise DownloadError(
                    f"the transfer of {url} was interrupted {attempt} times (last: {exc}); "
                    f"the {have} bytes received so far are kept in {part} and the next attempt resumes "
                    f"from there: run the same command again."
                ) from None
            log.warning("transfer of %s interrupted (%s); resuming (retry %d of %d)", url, exc, attempt, retries)
            time.sleep(RETRY_WAIT_S * attempt)


def _sidecar(part: Path) -> Path:
    """Where an interrupted transfer records what its ``.part`` holds (bytes, sha256, server validator)."""
    return part.with_name(part.name + ".json")


def _resumable(url: str, part: Path, size: int | None) -> tuple[int, hashlib._Hash, str | None]:
    """(bytes to keep, their running sha256, the server's ETag/Last-Modified) of ``part``.

    A partial file is kept only if its record says it came from ``url`` and it still hashes to what was
    recorded when the transfer stopped; anything else (a planted, corrupted or foreign ``.part``, or one
    left by a killed process) is discarded and the download starts over.
    """
    hasher = hashlib.sha256()
    record = _sidecar(part)
    if not part.exists():
        record.unlink(missing_ok=True)
        return 0, hasher, None
    try:
        meta = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = None
    n = part.stat().st_size
    if isinstance(meta, dict) and meta.get("url") == url and meta.get("bytes") == n and (size is None or n <= size):
        _hash_into(hasher, part)
        if hasher.hexdigest() == meta.get("sha256"):
            return n, hasher, meta.get("validator")
    log.info("discarding %s: not a validated partial download of %s", part, url)
    part.unlink()
    record.unlink(missing_ok=True)
    return 0, hashlib.sha256(), None


def _transfer(url: str, part: Path, size: int | None, progress: bool, label: str) -> tuple[str, int]:
    """One HTTP request that continues ``part`` (Range) or restarts it; raise ``_Interrupted`` if cut short."""
    offset, hasher, validator = _resumable(url, part, size)
    if offset and offset == size:
        return hasher.hexdigest(), offset
    headers = {"User-Agent": f"probing/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator  # a changed file is then sent whole (200), not spliced on
    try:
        resp = _OPENER.open(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 416 and offset:
            if _content_range(exc.headers.get("Content-Range"))[1] == offset:
                return hasher.hexdigest(), offset
            part.unlink()
            return _transfer(url, part, size, progress, label)
        if exc.code in _RETRYABLE_STATUS:
            raise _Interrupted(f"HTTP {exc.code} {exc.reason}") from None
        raise DownloadError(f"HTTP error {exc.code} ({exc.reason}) while fetching {url}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise _Interrupted(f"no answer within {TIMEOUT_S:.0f} s") from None
        host = urlparse(url).netloc
        raise DownloadError(
            f"cannot reach {host} to fetch {url}: {exc.reason}. Check the network connection and proxy "
            f"settings; files already in the cache keep working without network."
        ) from None
    except _TRANSFER_ERRORS as exc:
        raise _Interrupted(f"{type(exc).__name__}: {exc}") from None

    with resp:
        if offset and resp.status == 206:
            start, total = _content_range(resp.headers.get("Content-Range"))
            if start != offset:
                resp.close()
                part.unlink()
                return _transfer(url, part, size, progress, label)
            flags = os.O_WRONLY | os.O_APPEND
        elif resp.status == 200:
            if offset:
                log.info("%s ignored the Range request; downloading from the start", urlparse(url).netloc)
            offset, hasher, flags = 0, hashlib.sha256(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
        else:
            raise DownloadError(f"unexpected HTTP status {resp.status} while fetching {url}")
        if size is not None and total is not None and total != size:
            part.unlink(missing_ok=True)
            raise SizeMismatchError(
                f"size mismatch for {url}: expected {size} bytes but the server announces {total}. "
                f"Nothing was kept; the expected size or the server's file is out of date."
            )
        validator = resp.headers.get("ETag") or resp.headers.get("Last-Modified")
        n = offset
        bar = tqdm(
            total=total, initial=offset, unit="B", unit_scale=True, unit_divisor=1024, desc=label, disable=not progress
        )
        read = getattr(resp, "read1", resp.read)  # read1: whatever has arrived, so a slow server cannot block us
        window_t, window_n = time.monotonic(), n
        with os.fdopen(open_nofollow(part, flags), "ab" if flags & os.O_APPEND else "wb") as f, bar:
            try:
                while True:
                    try:
                        chunk = read(CHUNK_BYTES)
                    except _TRANSFER_ERRORS as exc:
                        lost = f"connection lost after {n} of {total or '?'} bytes ({exc!r})"
                        raise _Interrupted(lost) from None
                    if not chunk:
                        break
                    f.write(chunk)
                    hasher.update(chunk)
                    n += len(chunk)
                    bar.update(len(chunk))
                    now = time.monotonic()
                    if now - window_t >= STALL_S:
                        if n - window_n < STALL_BYTES:
                            raise _Interrupted(
                                f"stalled: {n - window_n} bytes in {now - window_t:.0f} s (fewer than {STALL_BYTES}) "
                                f"after {n} of {total or '?'} bytes"
                            )
                        window_t, window_n = now, n
            finally:
                f.flush()
                os.fsync(f.fileno())
                meta = {"url": url, "bytes": n, "sha256": hasher.copy().hexdigest(), "validator": validator}
                with atomic_open(_sidecar(part), "w", encoding="utf-8") as rec:
                    json.dump(meta, rec)
    if total is not None and n < total:
        raise _Interrupted(f"connection closed after {n} of {total} bytes")
    if total is not None and n > total:
        part.unlink()
        raise DownloadError(f"the server sent {n} bytes for {url} but announced {total}; nothing was kept")
    return hasher.hexdigest(), n


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """(first byte, total length) from a ``Content-Range`` header; None where absent or ``*``."""
    m = re.fullmatch(r"\s*bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)\s*", value or "")
    if not m:
        return None, None
    start, total = m.groups()
    return (int(start) if start else None), (int(total) if total != "*" else None)


def _hash_into(hasher, path: Path) -> None:
    with open(path, "rb") as f:
        while block := f.read(CHUNK_BYTES):
            hasher.update(block)


def _hash_file(path: Path) -> str:
    hasher = hashlib.sha256()
    _hash_into(hasher, path)
    return hasher.hexdigest()


@contextlib.contextmanager
def _locked(lock: Path, waiting: str | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock``; say so on stderr when another process holds it."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(open_nofollow(lock, os.O_RDWR | os.O_CREAT), "r+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                print(f"waiting for another process that is fetching {waiting} ...", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_ledger() -> dict[str, dict]:
    path = ledger_path()
    if not path.exists():
        return {}
    try:
        ledger = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DownloadError(
            f"the download ledger {path} is not valid JSON ({exc}); delete it to start afresh"
        ) from None
    if not isinstance(ledger, dict):
        raise DownloadError(f"the download ledger {path} must hold a JSON object; delete it to start afresh")
    for url, entry in ledger.items():
        if not isinstance(entry, dict) or not _SHA256.fullmatch(str(entry.get("sha256"))):
            raise DownloadError(
                f"the download ledger {path} has a malformed entry for {url} (expected a 64-hex-digit sha256); "
                f"delete it to start afresh"
            )
    return ledger


def _write_ledger(ledger: dict[str, dict]) -> None:
    with atomic_open(ledger_path(), "w", encoding="utf-8") as f:
        json.dump(ledger, f, indent=1, sort_keys=True)
        f.write("\n")


def _record(url: str, sha256: str, size: int) -> None:
    """Remember the hash of the first complete download of ``url`` (kept if one is already there)."""
    with _locked(ledger_path().with_name("ledger.json.lock")):
        ledger = _read_ledger()
        if url in ledger:
            return
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        ledger[url] = {"sha256": sha256, "size": size, "recorded": stamp}
        _write_ledger(ledger)
