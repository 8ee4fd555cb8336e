#!/usr/bin/env python3
"""Render an HTML report with headless Chromium and check the screenshot is not blank.

Usage:
    python scripts/check_report_render.py REPORT.html [--out SHOT.png] [--window-size 1280,2400]
                                          [--chromium PATH] [--min-ink 0.01] [--timeout 120]

Exit status 0 when the page rendered and at least ``--min-ink`` of the screenshot's pixels differ from
its background (the most common colour); 1 when the screenshot is blank or missing; 2 when Chromium
is not installed (Debian: ``apt-get install -y chromium``). Prints one summary line.
The page is loaded from a file:// URL with networking disabled, so it also shows that the report
needs nothing outside itself.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """Path of the first Chromium-like browser on PATH, or None."""
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def screenshot(
    html: Path, out: Path, *, window_size: str = "1280,2400", chromium: str | None = None, timeout: float = 120.0
) -> Path:
    """Render ``html`` headless into the PNG ``out``; raise RuntimeError with Chromium's output on failure."""
    exe = chromium or find_chromium()
    if exe is None:
        raise FileNotFoundError(f"no Chromium found on PATH (tried {', '.join(CHROMIUM_NAMES)})")
    html = Path(html).resolve()
    if not html.is_file():
        raise FileNotFoundError(f"report {html} does not exist")
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={out}",
            f"--window-size={window_size}",
            html.as_uri(),
        ]
        # stderr goes to a file, not a pipe: Chromium's helper processes outlive it and would hold a pipe open
        log = Path(profile) / "chromium.log"
        with open(log, "w") as err:
            proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err, timeout=timeout)
        if not out.is_file():
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"Chromium wrote no screenshot (exit {proc.returncode}):\n{tail}")
    return out


def ink_fraction(png: Path, tolerance: int = 8) -> tuple[float, int]:
    """Fraction of pixels whose colour differs from the most common one by more than ``tolerance``/255
    in some channel, and the number of distinct colours."""
    from matplotlib import image

    img = image.imread(str(png))
    if img.ndim == 2:
        img = img[..., None]
    rgb = img[..., :3] if img.shape[-1] >= 3 else img
    rgb = np.round(rgb * 255).astype(np.int32) if rgb.dtype.kind == "f" else rgb.astype(np.int32)
    flat = rgb.reshape(-1, rgb.shape[-1])
    packed = np.zeros(len(flat), dtype=np.int32)
    for channel in range(flat.shape[1]):
        packed = (packed << 8) | flat[:, channel]
    colours, first, counts = np.unique(packed, return_index=True, return_counts=True)
    background = flat[first[np.argmax(counts)]]
    ink = np.abs(flat - background).max(axis=1) > tolerance
    return float(ink.mean()), int(len(colours))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument(
        "--out", type=Path, default=None, help="screenshot path (default: report_screenshot.png beside REPORT)"
    )
    ap.add_argument("--window-size", default="1280,2400")
    ap.add_argument("--chromium", default=None)
    ap.add_argument("--min-ink", type=float, default=0.01)
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    out = args.out or args.report.with_name("report_screenshot.png")
    try:
        screenshot(args.report, out, window_size=args.window_size, chromium=args.chromium, timeout=args.timeout)
    except FileNotFoundError as exc:
        print(f"check_report_render: {exc}", file=sys.stderr)
        return 2 if "Chromium" in str(exc) else 1
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"check_report_render: {exc}", file=sys.stderr)
        return 1
    ink, n_colours = ink_fraction(out)
    ok = ink >= args.min_ink
    print(
        f"check_report_render: {'OK' if ok else 'BLANK'} {out} ink={ink:.1%} colours={n_colours} "
        f"(need ink >= {args.min_ink:.1%})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
