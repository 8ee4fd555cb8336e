"""Fetch files over HTTP(S) into the cache: resumable, verified, safe under concurrency, offline-aware.

A file is downloaded to ``<final>.part``, resumed with an HTTP Range request after an interruption,
checked (size, sha256) and only then renamed onto its final name, so a file under its final name is
always complete. When no sha256 is known in advance, the hash of the first complete download is
recorded in a small JSON ledger and every later copy is checked against it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
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
from urllib.parse import unquote, urlparse

from tqdm import tqdm

from probing import __version__, paths
from probing._io import atomic_open
from probing.errors import InputError, ProbingError

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
TIMEOUT_S = 60.0
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


class _Interrupted(Exception):
    """A transfer stopped early; what arrived is kept in the ``.part`` file and can be resumed."""


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
) -> Path:
    """Return a verified local copy of ``url``, downloading it only when it is not already present.

    ``sha256``/``size``: expected hex digest and byte count (checked when given; without ``sha256`` the
    hash recorded at the first download is used). ``dest``: final path, default ``cache_path(url)``.
    ``offline`` (default ``$PROBING_OFFLINE``): never touch the network. ``retries``: how many times an
    interrupted transfer is resumed before giving up. ``hint``: the command to show a user who must
    fetch the file (default: the Python call). A file already present is re-hashed on every call, so
    a corrupted cache is never used silently.
    """
    if urlparse(url).scheme not in ("http", "https"):
        raise InputError(f"cannot fetch {url!r}: only http:// and https:// URLs are supported")
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if not _SHA256.fullmatch(sha256):
            raise InputError(f"sha256 for {url} must be 64 hex digits, got {sha256!r}")
    if size is not None and size < 0:
        raise InputError(f"size for {url} must be >= 0, got {size}")
    final = Path(dest) if dest is not None else cache_path(url)
    final.parent.mkdir(parents=True, exist_ok=True)
    hint = hint or f"python -c \"from probing.download import fetch; fetch('{url}')\""

    with _locked(final.with_name(final.name + ".lock"), waiting=url if progress else None):
        entry = None if sha256 else recorded(url)
        expected = sha256 or (entry["sha256"] if entry else None)
        when = entry.get("recorded", "date unknown") if entry else ""
        source = "given" if sha256 else f"recorded at its first download, {when}"
        if final.exists():
            found = _verify(final, url, expected, source, size, downloaded=False)
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
        _verify(part, url, expected, source, size, downloaded=True, digest=digest, n_bytes=n)
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
) -> str:
    """Check size and sha256 of ``path``; remove it and raise on a mismatch; return its sha256."""
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


def _transfer(url: str, part: Path, size: int | None, progress: bool, label: str) -> tuple[str, int]:
    """One HTTP request that continues ``part`` (Range) or restarts it; raise ``_Interrupted`` if cut short."""
    offset = part.stat().st_size if part.exists() else 0
    if size is not None and offset > size:
        part.unlink()
        offset = 0
    hasher = hashlib.sha256()
    if offset:
        _hash_into(hasher, part)
        if offset == size:
            return hasher.hexdigest(), offset
    headers = {"User-Agent": f"probing/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)
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
            mode = "ab"
        elif resp.status == 200:
            if offset:
                log.info("%s ignored the Range request; downloading from the start", urlparse(url).netloc)
            offset, hasher, mode = 0, hashlib.sha256(), "wb"
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
        n = offset
        bar = tqdm(
            total=total, initial=offset, unit="B", unit_scale=True, unit_divisor=1024, desc=label, disable=not progress
        )
        with open(part, mode) as f, bar:
            try:
                while True:
                    try:
                        chunk = resp.read(CHUNK_BYTES)
                    except _TRANSFER_ERRORS as exc:
                        lost = f"connection lost after {n} of {total or '?'} bytes ({exc!r})"
                        raise _Interrupted(lost) from None
                    if not chunk:
                        break
                    f.write(chunk)
                    hasher.update(chunk)
                    n += len(chunk)
                    bar.update(len(chunk))
            finally:
                f.flush()
                os.fsync(f.fileno())
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
    with open(lock, "a+b") as fh:
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
