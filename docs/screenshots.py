"""Screenshots of the documentation site in a real browser, to look at before a change to the docs.

    python docs/screenshots.py [--out DIR]

Builds the site as CI does (`mkdocs build --strict`, into site/), serves it on 127.0.0.1, and
takes headless Chromium screenshots of the front page, the recipes and an API page, at a desktop
width (1280 px) and a phone's (390 px). They go to site/screenshots/ (kept out of git with the
rest of site/) unless --out names another directory. Run by hand, not by CI: it needs the docs
extra (`pip install -e '.[docs]'`) and Chromium (`apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"front": "", "recipes": "guide/recipes/", "api": "reference/api/agentswf/"}
WIDTHS_PX = (1280, 390)
HEIGHT_PX = 3200  # tall enough for a page's first screens; the rest is read in the browser
BUILD_TIMEOUT_SECONDS = 300
SHOT_TIMEOUT_SECONDS = 60
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def build(site: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)]
    subprocess.run(command, cwd=ROOT, env=env, check=True, timeout=BUILD_TIMEOUT_SECONDS)


def browser() -> str:
    for name in BROWSERS:
        if found := shutil.which(name):
            return found
    sys.exit("screenshots: no Chromium found; install it (apt-get install chromium)")


def shoot(chromium: str, url: str, width: int, out: Path) -> None:
    command = [chromium, "--headless", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},{HEIGHT_PX}"]
    if os.geteuid() == 0:
        command.append("--no-sandbox")  # Chromium's own sandbox refuses to start as root
    command += [f"--screenshot={out}", url]
    subprocess.run(command, capture_output=True, check=True, timeout=SHOT_TIMEOUT_SECONDS)
    if not out.is_file():
        sys.exit(f"screenshots: Chromium wrote no {out}")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # a line a request is noise here
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where the screenshots go (default: site/screenshots)")
    options = parser.parse_args()
    site = ROOT / "site"
    build(site)
    out = (options.out or site / "screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    chromium = browser()
    handler = functools.partial(_Quiet, directory=str(site))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        for name, path in PAGES.items():
            for width in WIDTHS_PX:
                shot = out / f"{name}-{width}.png"
                shoot(chromium, base + path, width, shot)
                print(shot)
        server.shutdown()


if __name__ == "__main__":
    main()
