# SPDX-License-Identifier: MIT
"""Headless Chromium for the tests of what a person sees: the flame graph's
SVG and speedscope's viewer.

Pages are served from a directory by an HTTP server on the loopback
address (Chromium started on a file:// URL does not finish loading here),
and Chromium prints the page's DOM once its scripts have run (--dump-dom,
with a virtual time budget so that timers and fetches complete first) or
takes a screenshot. speedscope is its npm release, fetched once with
`npm pack` into build/ and reused.
"""
import functools
import html
import http.server
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

from .paths import BUILD

CHROMIUM = "/usr/bin/chromium"
SPEEDSCOPE_VERSION = "1.25.0"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--disable-background-networking", "--disable-quic",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(directory):
    """An HTTP server for directory on 127.0.0.1; yields its base URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def chromium(url, *, screenshot=None, size=(1280, 800), budget_ms=5000, timeout=90):
    """The DOM of url after its scripts ran, or (screenshot=PATH) a PNG of it."""
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run scripts/install-deps.sh"
    with tempfile.TemporaryDirectory(prefix="nupp-chromium-") as profile:
        what = [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
        p = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                            f"--window-size={size[0]},{size[1]}",
                            f"--virtual-time-budget={budget_ms}", *what, url],
                           capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"chromium failed on {url}:\n{p.stderr[-3000:]}"
    if screenshot:
        assert Path(screenshot).stat().st_size > 0, f"no screenshot of {url}"
    return p.stdout


def result_of(dom, element_id="result"):
    """The JSON a harness page wrote into <pre id=element_id>."""
    m = re.search(rf'<pre id="{element_id}">(.*?)</pre>', dom, re.S)
    assert m and m[1], f"the page wrote no result:\n{dom[-3000:]}"
    return json.loads(html.unescape(m[1]))


def speedscope_release():
    """dist/release of speedscope's npm package (its viewer, and the JSON
    schema of its file format), fetched once into build/."""
    root = BUILD / f"speedscope-{SPEEDSCOPE_VERSION}"
    release = root / "package" / "dist" / "release"
    if (release / "index.html").exists():
        return release
    assert shutil.which("npm"), "npm is missing (the machine's Node.js brings it)"
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        p = subprocess.run(["npm", "pack", f"speedscope@{SPEEDSCOPE_VERSION}", "--silent"],
                           cwd=tmp, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"npm pack speedscope failed:\n{p.stderr}"
        tgz = Path(tmp) / p.stdout.strip().splitlines()[-1]
        staged = Path(tmp) / "unpacked"
        with tarfile.open(tgz) as t:
            # Only what the archive holds, under staged (Python >= 3.11.4).
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            t.extractall(staged, **safe)
        if not (release / "index.html").exists():
            shutil.rmtree(root, ignore_errors=True)
            staged.rename(root)
    return release
