#!/usr/bin/env python3
"""Screenshot of the occurrence explorer for the README: headless Chromium, network off.

Usage:
    python scripts/screenshot_explorer.py EXPLORER.html --out docs/explorer.png
        [--search play] [--click 2] [--hover 2] [--chromium /usr/bin/chromium] [--width 1500]

Opens the page with every request refused, waits for the panels, optionally clicks the first point
of panel ``--click`` (its nearest-occurrence list appears), types ``--search`` and hovers the first
point of panel ``--hover`` (its tooltip shows), then saves a full-page PNG. Needs the ``dev`` extra
(playwright) and a system Chromium (Debian: ``apt-get install -y chromium``); no browser download.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# page coordinates of point i in a panel, from Bokeh's own view of the plot (frame scales + canvas position)
PIXEL_JS = """([panel, i]) => {
  const find = n => [...Bokeh.documents[0].all_models].find(m => { try { return m.name === n } catch (e) { return false } });
  const plot = find('panel_' + panel), src = find('occurrences');
  const view = [...Bokeh.index.find_by_id(plot.id)][0];
  const sx = view.frame.x_scale.compute(src.data['x_' + panel][i]);
  const sy = view.frame.y_scale.compute(src.data['y_' + panel][i]);
  const box = view.canvas_view.el.getBoundingClientRect();
  return [box.left + sx + window.scrollX, box.top + sy + window.scrollY];
}"""

FRAME_JS = """(panel) => {
  const plot = [...Bokeh.documents[0].all_models].find(m => { try { return m.name === 'panel_' + panel } catch (e) { return false } });
  const view = [...Bokeh.index.find_by_id(plot.id)][0];
  const f = view.frame.bbox, box = view.canvas_view.el.getBoundingClientRect();
  return [box.left + f.left + window.scrollX, box.top + f.top + window.scrollY,
          box.left + f.right + window.scrollX, box.top + f.bottom + window.scrollY];
}"""


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def open_page(browser, html: Path):
    """A page with html loaded, every request other than the file itself refused and recorded.

    Returns ``(page, requests)``: ``requests`` lists the URLs the page tried to fetch (should stay empty).
    """
    context = browser.new_context(viewport={"width": 1500, "height": 1000}, accept_downloads=True)
    context.set_offline(True)
    requests: list[str] = []
    target = html.resolve().as_uri()

    def refuse(route):
        if route.request.url != target:
            requests.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    context.route("**/*", refuse)
    page = context.new_page()
    page.on(
        "request", lambda r: r.url != target and not r.url.startswith(("data:", "blob:")) and requests.append(r.url)
    )
    page.goto(target)
    page.wait_for_function(
        "() => window.Bokeh && Bokeh.documents.length && [...Bokeh.index.roots].length", timeout=60000
    )
    page.wait_for_selector("canvas", timeout=60000)
    page.wait_for_timeout(500)
    return page, requests


def point_xy(page, panel: str, i: int) -> tuple[float, float]:
    x, y = page.evaluate(PIXEL_JS, [panel, i])
    return float(x), float(y)


def frame_box(page, panel: str) -> tuple[float, float, float, float]:
    """Page coordinates (left, top, right, bottom) of a panel's plotting area."""
    left, top, right, bottom = page.evaluate(FRAME_JS, panel)
    return float(left), float(top), float(right), float(bottom)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--search", help="text to type in the search box")
    ap.add_argument("--click", help="panel whose first point is clicked (nearest-occurrence list)")
    ap.add_argument("--hover", help="panel whose first point is hovered (tooltip)")
    ap.add_argument("--point", type=int, default=0, help="index of the point to click / hover (default 0)")
    ap.add_argument("--chromium", default=None)
    args = ap.parse_args(argv)
    exe = args.chromium or find_chromium()
    if exe is None:
        print("no Chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        page, requests = open_page(browser, args.html)
        if args.click is not None:
            page.mouse.click(*point_xy(page, args.click, args.point))
            page.mouse.move(0, 0)  # the click leaves no tooltip: only --hover shows one
        if args.search:
            page.locator("input[type=text]").first.fill(args.search)
            page.wait_for_timeout(300)
        if args.hover is not None:
            page.mouse.move(*point_xy(page, args.hover, args.point))
            page.wait_for_timeout(400)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(args.out), full_page=True)
        browser.close()
    if requests:
        print(f"the page tried to fetch {len(requests)} URL(s): {requests[:5]}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
