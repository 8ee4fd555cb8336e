"""Finished probe jobs, kept in the cache so that an interrupted run resumes and a repeated run only
reassembles its tables.

A job is one (task, encoder) pair; its key hashes everything it read: the stores' keys, the task's
resolved specification, the probe settings, the WordNet inventory's fingerprint (for kinds that use one),
the toolkit version and the source of the probe and task code. Each file records the sha256 of its
payload, so a truncated, emptied or hand-edited file is recomputed (with a warning), never served.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probing._io import atomic_open, source_digest
from probing.errors import InputError
from probing.tasks import TaskOutput

JOBS_DIR = "jobs"
_FORMAT = 2


@functools.cache
def probe_code_digest() -> str:
    """sha256 over the source of ``probing.probes`` and ``probing.tasks``: a cached job result is reused only
    by the code that computed it."""
    root = Path(__file__).parent.parent
    files = sorted([*(root / "probes").glob("*.py"), *(root / "tasks").glob("*.py")])
    return source_digest(root, [f"{f.parent.name}/{f.name}" for f in files])


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class JobCache:
    """Finished jobs under ``root`` (``<cache>/jobs``), one JSON file per job key."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def key(self, inputs: Mapping[str, Any]) -> str:
        """The job key of ``inputs`` (JSON-able: stores, task, settings, inventory, ...), plus the code."""
        import probing

        payload = {"version": probing.__version__, "code": probe_code_digest(), **inputs}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> TaskOutput | None:
        """The finished job ``key``, or None if there is none or its file fails its checksum."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
            output = record["output"]
            if record.get("format") != _FORMAT or record.get("sha256") != _digest(output):
                raise InputError("its checksum does not match its content")
            return TaskOutput(**output)
        except (OSError, ValueError, KeyError, TypeError) as e:
            warnings.warn(f"{path}: cached job ignored and recomputed ({e})", RuntimeWarning, stacklevel=2)
            return None

    def put(self, key: str, output: TaskOutput) -> Path:
        """Record a finished job atomically."""
        payload = output.__dict__
        path = self.path(key)
        with atomic_open(path, "w", encoding="utf-8") as f:
            json.dump({"format": _FORMAT, "sha256": _digest(payload), "output": payload}, f)
        return path
