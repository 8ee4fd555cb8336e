"""The documentation site, opened in headless Chromium: search finds the API's names, notebook pages show figures.

The site is the one ``sphinx-build -W --keep-going -b html docs docs/_build/html`` writes (CI builds it after the
test suite, whose notebook tests save the executed copies it renders, then runs this file). It is read from
``$PROBING_DOCS_HTML`` or ``docs/_build/html``; without a built site the tests skip and say how to build it.
Every request that leaves the file system is blocked and recorded: the site must work offline.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import browser

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def site() -> Path:
    html = Path(os.environ.get("PROBING_DOCS_HTML") or ROOT / "docs" / "_build" / "html")
    if not (html / "index.html").is_file() or not (html / "search.html").is_file():
        pytest.skip(f"no built site at {html}: sphinx-build -W --keep-going -b html docs docs/_build/html")
    return html


@pytest.fixture(scope="module")
def chrome():
    """(page factory, requests that left the file system) in one headless Chromium."""
    html = site()
    exe = browser.require()
    from playwright.sync_api import sync_playwright

    leaked: list[str] = []

    def block(route):
        if not route.request.url.startswith(("file://", "data:", "about:", "blob:")):
            leaked.append(route.request.url)
            return route.abort()
        return route.continue_()

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        context.route("**/*", block)
        try:
            yield html, context, leaked
        finally:
            context.close()
            chromium.close()


def test_search_finds_linear_probe_cv(chrome):
    html, context, leaked = chrome
    page = context.new_page()
    page.goto((html / "search.html").as_uri() + "?q=LinearProbeCV")
    page.wait_for_selector("#search-results ul.search li", timeout=30_000)
    hits = page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(a => [a.textContent, a.href])")
    assert any("LinearProbeCV" in text and "probing.probes.linear" in href for text, href in hits), hits[:10]
    # the hit opens the class's entry, with its parameters and its example
    target = next(href for text, href in hits if "LinearProbeCV" in text and "probing.probes.linear" in href)
    page.goto(target)
    entry = page.locator('[id="probing.probes.linear.LinearProbeCV"]').locator("xpath=..")
    text = entry.inner_text()
    assert "Parameters" in text and "Cs" in text and ">>>" in text
    assert leaked == []


def _notebook_pages(html: Path) -> list[Path]:
    pages = sorted((html / "notebooks").glob("*.html"))
    assert len(pages) == len(list((ROOT / "notebooks").glob("*.ipynb"))), pages
    return pages


def test_notebook_pages_show_their_figures(chrome):
    """Every notebook page's images load (none broken); the notebooks that draw figures show them as outputs."""
    html, context, leaked = chrome
    shown = {}
    for path in _notebook_pages(html):
        page = context.new_page()
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        images = page.eval_on_selector_all(
            ".cell_output img", "els => els.map(i => [i.complete && i.naturalWidth > 0, i.naturalWidth])"
        )
        assert all(ok for ok, _ in images), (path.name, images)
        shown[path.stem] = len(images)
        page.close()
    # the figures the notebook tests count (tests/test_notebooks.py): e.g. 06 draws four, 09 one
    for name in ("02_layer_probes", "03_play_neighbours", "05_syntax_trees", "06_beyond_accuracy", "09_erasure"):
        assert shown[name] >= 1, (name, shown)
    assert shown["06_beyond_accuracy"] >= 4, shown
    assert leaked == []
