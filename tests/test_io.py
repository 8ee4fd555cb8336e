"""Atomic writes: all or nothing, with an ordinary file's permissions."""

import os
import stat

import pytest

from probing._io import _UMASK, atomic_open


def test_atomic_open_replaces_only_on_success_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_open(path) as f:
            f.write("half")
            raise RuntimeError("interrupted")
    assert path.read_text() == "old"
    with atomic_open(path) as f:
        f.write("new")
    assert path.read_text() == "new"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_written_file_has_the_umask_mode_not_mkstemps_0600(tmp_path):
    # A report or figure must be readable by others where the user's umask allows it (0644 for 022).
    with atomic_open(tmp_path / "report.html") as f:
        f.write("<html></html>")
    assert stat.S_IMODE((tmp_path / "report.html").stat().st_mode) == 0o666 & ~_UMASK
