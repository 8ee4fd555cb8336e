"""Finished probe jobs, kept in the cache so that an interrupted run resumes and a repeated run only
reassembles its tables.

A job is one (task, encoder) pair; its key (:func:`probing.identity.digest`) hashes everything it read: the
stores' keys, the task's resolved specification, the probe settings, the WordNet inventory's fingerprint
(for kinds that use one), the toolkit version, the code identity of ``probing.probes`` and
``probing.tasks`` and that of the kind's own ``run`` and ``parse`` (for a kind registered from outside the
package, its module). Each file records the sha256 of its
payload, so a truncated, emptied or hand-edited file is recomputed (with a warning), never served.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probing._io import atomic_open
from probing.errors import InputError
from probing.identity import code_identity, digest, function_identity
from probing.tasks import TaskKind, TaskOutput

JOBS_DIR = "jobs"
_FORMAT = 2
JOB_VERSION = 1  # bump when a job's output changes for a reason its code does not show


def probe_code_digest() -> str:
    """The code identity of ``probing.probes`` and ``probing.tasks``: a cached job result is reused only by
    the code that computed it."""
    return code_identity(JOB_VERSION, ["probing.probes", "probing.tasks"])


def kind_identity(kind: TaskKind) -> str:
    """The code identity of a task kind's own code: its ``run``, ``parse`` and ``options`` class."""
    return digest([function_identity(f) for f in (kind.run, kind.parse, kind.options) if f is not None])


class JobCache:
    """Finished jobs under ``root`` (``<cache>/jobs``), one JSON file per job key."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def key(self, inputs: Mapping[str, Any]) -> str:
        """The job key of ``inputs`` (JSON-able: stores, task, settings, inventory, ...), plus the code."""
        import probing

        return digest({"version": probing.__version__, "code": probe_code_digest(), **inputs})

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
            if record.get("format") != _FORMAT or record.get("sha256") != digest(output):
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
            json.dump({"format": _FORMAT, "sha256": digest(payload), "output": payload}, f)
        return path
