"""Render a drill report in headless Chromium (Debian's ``chromium`` package): a PNG screenshot,
and the page's DOM after layout with each timeline bar's drawn box measured.

``python -m sandbox.browser out/drill-default.html [out.png]`` writes the screenshot. Exit codes:
0 written; 1 Chromium ran but wrote no screenshot (crashed, timed out); 2 bad usage (no such HTML
file); 3 Chromium is not installed (``apt-get install chromium``). A failure is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Without the background-networking flags Chromium tries to reach Google's hosts on a machine
# with no internet, and as root it needs --no-sandbox.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
# Appended to a copy of the page: after layout, write every bar's drawn box into the DOM.
MEASURE = """<script>
window.addEventListener('load', () => {
  const boxes = [...document.querySelectorAll('svg.timeline rect.phase')].map(r => {
    const b = r.getBoundingClientRect();
    return {incident: r.closest('svg').dataset.incident, phase: r.dataset.phase,
            start: +r.dataset.start, end: +r.dataset.end, x: b.x, width: b.width, height: b.height,
            fill: getComputedStyle(r).fill};
  });
  const out = document.createElement('pre'); out.id = 'measured'; out.textContent = JSON.stringify(boxes);
  document.body.appendChild(out);
});
</script>"""


BROWSERS = ("chromium", "chromium-browser", "google-chrome")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CHROMIUM = 0, 1, 2, 3


class ChromiumNotFound(FileNotFoundError):
    """No Chromium on PATH."""


def find_chromium() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    chromium = find_chromium()
    if chromium is None:
        raise ChromiumNotFound(f"chromium not found on PATH (looked for {', '.join(BROWSERS)}): apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="hpr-chromium-") as profile:
        return subprocess.run(  # noqa: S603 - an argument list of our own, never a shell
            [chromium, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=timeout, check=True
        )


def screenshot(html: Path, png: Path, width: int = 1100, height: int = 1600) -> Path:
    _run([f"--screenshot={png.resolve()}", f"--window-size={width},{height}", html.resolve().as_uri()])
    if not png.exists():
        raise RuntimeError(f"chromium wrote no screenshot to {png}")
    return png


def measure_timeline(html: Path, width: int = 1100) -> list[dict[str, Any]]:
    """The drawn box (CSS pixels) of every phase bar, as the browser laid it out in a window ``width`` wide."""
    with tempfile.TemporaryDirectory(prefix="hpr-measure-") as folder:
        page = Path(folder) / "page.html"
        page.write_text(html.read_text().replace("</body>", MEASURE + "</body>"))
        dom = _run(["--virtual-time-budget=5000", f"--window-size={width},1600", "--dump-dom", page.as_uri()]).stdout
    start = dom.index('<pre id="measured">') + len('<pre id="measured">')
    raw = dom[start : dom.index("</pre>", start)]
    return list(json.loads(raw.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.browser", description="Screenshot a drill report in headless Chromium.")
    parser.add_argument("html", type=Path, help="the report page, e.g. out/drill-default.html")
    parser.add_argument("png", type=Path, nargs="?", help="where to write the screenshot (default: beside the page, .png)")
    args = parser.parse_args(argv)
    if not args.html.is_file():
        print(f"sandbox.browser: no such report page: {args.html} (make drill writes out/drill-<name>.html)", file=sys.stderr)
        return EXIT_USAGE
    try:
        print(screenshot(args.html, args.png or args.html.with_suffix(".png")))
    except ChromiumNotFound as exc:
        print(f"sandbox.browser: {exc}", file=sys.stderr)
        return EXIT_NO_CHROMIUM
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, RuntimeError) as exc:
        detail = exc.stderr.strip().splitlines()[-1:] if isinstance(exc, subprocess.CalledProcessError) and exc.stderr else []
        print(f"sandbox.browser: chromium failed: {exc}" + (f": {detail[0]}" if detail else ""), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
