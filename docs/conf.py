"""Sphinx configuration of the probing documentation (``sphinx-build -W --keep-going -b html docs docs/_build/html``).

The build is offline: no intersphinx, no remote images or scripts. The API reference is generated from the
package (``_ext/apiref.py``), the CLI reference from ``probing.cli.build_parser`` (sphinx-argparse), the
notebooks are rendered from executed copies (``_ext/notebooks.py``: what ``tests/test_notebooks.py`` saved
under ``$PROBING_NOTEBOOK_OUTPUTS``, else executed here at the quick size, cached).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # the checkout's probing, not an installed copy elsewhere
sys.path.insert(0, str(DOCS / "_ext"))

import probing  # noqa: E402

project = "probing"
author = "the probing authors"
copyright = "the probing authors, Apache-2.0"
release = version = probing.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "sphinxarg.ext",
    "apiref",
    "notebooks",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "jupyter_execute", "**.ipynb_checkpoints"]
root_doc = "index"

# --- warnings are errors (-W): broken references to the package's own objects are warnings too -----------
nitpicky = True
# no intersphinx (offline): references to numpy, pandas, torch, the standard library, ... stay plain text
nitpick_ignore_regex = [(r"py:.*", r"(?!probing\b).*"), (r"py:.*", r"probing\..*\._.*")]
suppress_warnings = ["myst.header"]

# --- autodoc / numpydoc -----------------------------------------------------------------------------------
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autosummary_generate = False  # the module pages are written by _ext/apiref.py; autosummary only draws tables
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = (
    set()
)  # the parameter check is _ext/apiref.py's (only where a Parameters section exists)

# --- MyST / myst-nb ---------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "attrs_inline"]
myst_heading_anchors = 3
# only notebooks without a saved executed copy run here (see _ext/notebooks.py); PROBING_DOCS_EXECUTE=off
# renders those without outputs instead (a quick look at the text, never in CI)
nb_execution_mode = os.environ.get("PROBING_DOCS_EXECUTE", "cache")
nb_execution_cache_path = str(DOCS / "_build" / ".jupyter_cache")
nb_execution_in_temp = True
nb_execution_timeout = 900
nb_execution_raise_on_error = True  # a notebook that fails fails the build
nb_execution_show_tb = True
nb_merge_streams = True
nb_output_stderr = "show"  # the runs' own warnings (a C at the end of its grid, ...) are part of the lesson
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
os.environ.setdefault("PROBING_NOTEBOOK_QUICK", "1")  # what a notebook executed here runs at (its kernel inherits it)
os.environ.setdefault("PROBING_OFFLINE", "1")

# --- HTML ---------------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "probing"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"changelog": [], "cli": []}
html_last_updated_fmt = None
