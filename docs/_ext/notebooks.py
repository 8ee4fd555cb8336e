"""The notebooks of ``notebooks/`` as pages, with their outputs, without running them twice in CI.

The notebooks are stored without outputs. ``tests/test_notebooks.py`` executes each of them at its quick size
(``PROBING_NOTEBOOK_QUICK=1``) and, when ``$PROBING_NOTEBOOK_OUTPUTS`` names a folder, saves the executed copy
there (CI sets it to ``docs/_build/executed-notebooks``, this extension's default). Before Sphinx reads its
sources, this extension writes every notebook into ``docs/notebooks/`` (not versioned):

* the saved executed copy, when its code cells are the stored notebook's, cell for cell; myst-nb renders its
  outputs as they are (``execution_mode = "off"`` in the copy's metadata);
* else the stored notebook, which myst-nb executes here at the quick size (``nb_execution_mode = "cache"``: a
  second build reuses the outputs until a cell changes). A notebook that fails fails the build.

Progress-bar widgets (tqdm through ipywidgets) are dropped from the outputs: their JavaScript would be fetched
from a CDN, and the site is built and read offline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)
WIDGET = "application/vnd.jupyter.widget-view+json"


def executed_dir(root: Path) -> Path:
    return Path(os.environ.get("PROBING_NOTEBOOK_OUTPUTS") or root / "docs" / "_build" / "executed-notebooks")


def _code(nb: dict) -> list[str]:
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb["cells"]
        if c["cell_type"] == "code"
    ]


def _strip_widgets(nb: dict) -> dict:
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET in data:
                continue  # a progress bar: its text/plain fallback is only the widget's repr
            kept.append(out)
        cell["outputs"] = kept
    nb["metadata"].pop("widgets", None)
    return nb


def prepare(root: Path, dest: Path) -> dict[str, str]:
    """Write each notebook into ``dest``; return name -> "saved" (rendered from an executed copy) or "execute"."""
    dest.mkdir(parents=True, exist_ok=True)
    saved_dir = executed_dir(root)
    how: dict[str, str] = {}
    names = sorted(p.stem for p in (root / "notebooks").glob("*.ipynb"))
    for stale in dest.glob("*.ipynb"):
        if stale.stem not in names:
            stale.unlink()
    for name in names:
        stored = json.loads((root / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
        copy = saved_dir / f"{name}.ipynb"
        nb = stored
        how[name] = "execute"
        if copy.is_file():
            executed = json.loads(copy.read_text(encoding="utf-8"))
            done = all(c.get("execution_count") is not None for c in executed["cells"] if c["cell_type"] == "code")
            if _code(executed) == _code(stored) and done:
                nb = _strip_widgets(executed)
                nb["metadata"].setdefault("mystnb", {})["execution_mode"] = "off"
                how[name] = "saved"
            else:
                logger.info(f"notebooks: {copy} is not an executed copy of the stored notebook; executing it here")
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        target = dest / f"{name}.ipynb"
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    return how


def _on_builder_inited(app) -> None:
    how = prepare(Path(app.srcdir).parent, Path(app.srcdir) / "notebooks")
    saved = sorted(n for n, h in how.items() if h == "saved")
    run = sorted(n for n, h in how.items() if h == "execute")
    logger.info(f"notebooks: {len(saved)} rendered from executed copies, {len(run)} executed here (quick size): {run}")


def setup(app):
    app.connect("builder-inited", _on_builder_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
