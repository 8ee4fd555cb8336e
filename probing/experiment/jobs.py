"""Finished probe jobs, kept in the cache so that an interrupted run resumes and a repeated run only
reassembles its tables.

A job is one (task, encoder) pair; its key (:func:`probing.identity.digest`) hashes everything it read: the
stores' keys, the task's resolved specification, the probe settings, the WordNet inventory's fingerprint
(for kinds that use one), the toolkit version, the code identity of ``probing.probes`` and
``probing.tasks`` and that of the kind's own ``run`` and ``parse`` (for a kind registered from outside the
package, its module). Each file records the sha256 of its
payload, so a truncated, emptied or hand-edited file is recomputed (with a warning), never served.

While a job runs, each finished step (a layer's probes, the scalar mix: :attr:`probing.tasks.Job.step`) is
kept under the job's key, ``<key>.steps/<digest of the step name>.json`` (:class:`Checkpoints`), so an
interrupted job resumes at its first unfinished step; the folder goes when the job is recorded. The
``[similarity]`` table is a job of its own (:func:`similarity_key`).
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probing._io import atomic_open
from probing.errors import InputError
from probing.identity import code_identity, digest, function_identity
from probing.tasks import TaskKind, TaskOption, TaskOutput
from probing.tasks.common import StepResult

JOBS_DIR = "jobs"
_FORMAT = 2
JOB_VERSION = 1  # bump when a job's output changes for a reason its code does not show
SIMILARITY_VERSION = 1  # the same for the [similarity] table


def probe_code_digest() -> str:
    """The code identity of ``probing.probes`` and ``probing.tasks``: a cached job result is reused only by
    the code that computed it."""
    return code_identity(JOB_VERSION, ["probing.probes", "probing.tasks"])


def kind_identity(kind: TaskKind) -> str:
    """The code identity of a task kind's own code: its ``run``, ``parse`` and ``options`` class."""
    return digest([function_identity(f) for f in (kind.run, kind.parse, kind.options) if f is not None])


def option_identity(option: TaskOption) -> str | None:
    """The code identity a task option adds to a job's key: for an option defined outside ``probing.tasks``
    (whose code :func:`probe_code_digest` covers) its options class and every hook it has, and the code
    identity of the modules it names in ``code`` (with its ``version``); None when there is neither, so the
    built-in options add nothing."""
    parts = []
    if not option.options.__module__.startswith("probing.tasks."):
        hooks = (
            option.options,
            option.parse,
            option.rows,
            option.work,
            option.variants,
            option.views,
            option.variant_settings,
            option.finish,
        )
        parts += [function_identity(f) for f in hooks if f is not None]
    if option.code:
        parts.append(code_identity(option.version, option.code))
    return digest(parts) if parts else None


def similarity_key(spec: Mapping[str, Any], stores: Mapping[str, str]) -> str:
    """The job key of a ``[similarity]`` table (``spec``, its ``to_dict``) on ``stores`` (encoder -> store
    key): the toolkit version and the code identity of :mod:`probing.analysis.similarity` included."""
    import probing

    code = code_identity(SIMILARITY_VERSION, ["probing.analysis.similarity"])
    return digest({"version": probing.__version__, "code": code, "similarity": dict(spec), "stores": dict(stores)})


def _read(path: Path, what: str) -> Any:
    """The checksummed payload of ``path`` (None if there is none; a file that fails its checksum is
    ignored with a warning, and recomputed)."""
    if not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        output = record["output"]
        if record.get("format") != _FORMAT or record.get("sha256") != digest(output):
            raise InputError("its checksum does not match its content")
        return output
    except (OSError, ValueError, KeyError, TypeError) as e:
        warnings.warn(f"{path}: cached {what} ignored and recomputed ({e})", RuntimeWarning, stacklevel=3)
        return None


def _write(path: Path, payload: Any) -> Path:
    with atomic_open(path, "w", encoding="utf-8") as f:
        json.dump({"format": _FORMAT, "sha256": digest(payload), "output": payload}, f)
    return path


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
        output = _read(self.path(key), "job")
        try:
            return None if output is None else TaskOutput(**output)
        except TypeError as e:
            warnings.warn(f"{self.path(key)}: cached job ignored and recomputed ({e})", RuntimeWarning, stacklevel=2)
            return None

    def put(self, key: str, output: TaskOutput) -> Path:
        """Record a finished job atomically, and drop its steps (:meth:`checkpoints`)."""
        path = _write(self.path(key), output.__dict__)
        shutil.rmtree(self.root / f"{key}.steps", ignore_errors=True)
        return path

    def get_rows(self, key: str) -> list[dict] | None:
        """The rows of a finished table job (the ``[similarity]`` table), or None."""
        rows = _read(self.path(key), "table")
        return rows if isinstance(rows, list) else None

    def put_rows(self, key: str, rows: list[dict]) -> Path:
        """Record a finished table job atomically."""
        return _write(self.path(key), rows)

    def checkpoints(self, key: str, on_step: Callable[[str], None] | None = None) -> Checkpoints:
        """The step store of job ``key`` (:attr:`probing.tasks.Job.step`)."""
        return Checkpoints(self.root / f"{key}.steps", on_step)


@dataclass
class Checkpoints:
    """The finished steps of one job, one checksummed JSON file each under ``folder``: a
    :data:`~probing.tasks.common.Step` that returns a kept step's result instead of computing it again.
    ``on_step(name)`` is called after each step, kept or computed (the run's progress counts its units).
    Picklable without ``on_step``, so a Ray task keeps its steps in the shared cache."""

    folder: Path
    on_step: Callable[[str], None] | None = None

    def path(self, name: str) -> Path:
        """The file of step ``name``."""
        return self.folder / f"{digest(name)[:32]}.json"

    def has(self, name: str) -> bool:
        """Whether step ``name`` has a kept result (not yet checked against its checksum)."""
        return self.path(name).is_file()

    def __call__(self, name: str, compute: Callable[[], StepResult]) -> StepResult:
        path = self.path(name)
        kept = _read(path, f"step {name!r}")
        result = None
        if kept is not None and kept.get("name") == name:
            try:
                result = TaskOutput(**kept["rows"]), [_array(a) for a in kept["arrays"]]
            except (KeyError, TypeError, ValueError) as e:
                warnings.warn(f"{path}: cached step ignored and recomputed ({e})", RuntimeWarning, stacklevel=2)
        if result is None:
            result = compute()
            out, arrays = result
            payload = {"name": name, "rows": out.__dict__, "arrays": [_listed(a) for a in arrays]}
            _write(path, payload)
        if self.on_step is not None:
            self.on_step(name)
        return result


def _listed(a: np.ndarray) -> dict[str, Any]:
    """An array as JSON: its dtype (bool, integer or float; JSON keeps a float64 exactly) and its values."""
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"a step's arrays are bool, integer or float, not {a.dtype}")
    return {"dtype": a.dtype.str, "shape": list(a.shape), "values": a.ravel().tolist()}


def _array(d: Mapping[str, Any]) -> np.ndarray:
    return np.asarray(d["values"], dtype=np.dtype(d["dtype"])).reshape(d["shape"])
