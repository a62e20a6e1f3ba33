"""``make readme-sample``: the README's sample drill output and its report picture, and its sample
preflight output, from real runs.

Runs the default drill (events/drills/default.json, what ``make drill`` runs), writes what it printed
between the README's drill-sample markers, and renders its HTML report to
docs/images/drill-report-default.png in headless Chromium, stamped with the digest of the page it
was rendered from. Runs ``hyperpod-recovery preflight`` against the default drill's stack in the
sandbox and writes what it printed between the preflight-sample markers.
tests/integration/test_readme_sample.py runs both again and fails when the README's blocks or the
picture's page differ from today's, beyond what varies from run to run: the wall-clock seconds, the
output folder, the KMS key's id and the Python version.

Exit codes: 0 all written; 1 the drill or the preflight failed; 3 the README was written but Chromium is not
installed, so the picture was not (apt-get install chromium).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import struct
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PICTURE = ROOT / "docs" / "images" / "drill-report-default.png"
BEGIN = "<!-- drill-sample:begin: `make readme-sample` writes this block, a test compares it with the drill's output -->"
END = "<!-- drill-sample:end -->"
PREFLIGHT_BEGIN = "<!-- preflight-sample:begin: `make readme-sample` writes this block, a test compares it with the preflight's output -->"
PREFLIGHT_END = "<!-- preflight-sample:end -->"
OUT = "out"  # the report folder as `make drill` names it
# The only figure that varies between two runs of the same drill: seconds of real time. In the
# preflight: the notification key's id (moto makes a new one each time) and this machine's Python.
WALL_TIME = re.compile(r"(wall time:? )\d+(?:\.\d+)?s")
KEY_ID = re.compile(r"(its key )[0-9a-f-]{36}")
PYTHON = re.compile(r"(Python )3\.\d+\.\d+")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DIGEST_KEY = b"hyperpod-recovery-report-sha256"


@dataclass
class DrillRun:
    printed: str  # what `make drill` printed, its output folder written as out/
    html: str  # the HTML report


def run_default_drill(out: Path) -> DrillRun:
    from sandbox.__main__ import main as sandbox_main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = sandbox_main(["run", "--out", str(out)])
    if code != 0:
        raise RuntimeError(f"the default drill failed (exit code {code}): {printed.getvalue()}")
    return DrillRun(printed.getvalue().replace(str(out), OUT), (out / "drill-default.html").read_text())


def run_preflight_sample() -> str:
    """``hyperpod-recovery preflight --stack sandbox`` against the default drill's stack in the sandbox."""
    from tools.preflight_sandbox import SCENARIOS, preflight_in_sandbox

    run = preflight_in_sandbox(SCENARIOS["slurm"])
    if run.code != 0:
        raise RuntimeError(f"the preflight of the sandbox's stack failed (exit code {run.code}): {run.printed}{run.errors}")
    return run.printed


def normalise(text: str) -> str:
    text = KEY_ID.sub(r"\1<key id>", text)
    return PYTHON.sub(r"\1<version>", WALL_TIME.sub(r"\1<seconds>s", text))


def _block(readme: str, begin: str = BEGIN, end_marker: str = END) -> tuple[int, int]:
    start, end = readme.find(begin), readme.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no sample between {begin!r} and {end_marker!r}")
    return start + len(begin), end


def readme_sample(readme: str, begin: str = BEGIN, end_marker: str = END) -> str:
    """The printed output the README shows between the markers (without its code fence)."""
    start, end = _block(readme, begin, end_marker)
    block = readme[start:end].strip("\n")
    if not (block.startswith("```\n") and block.endswith("\n```")):
        raise ValueError(f"the README's sample after {begin!r} is not one ``` code block")
    return block[len("```\n") : -len("```")]


def with_sample(readme: str, printed: str, begin: str = BEGIN, end_marker: str = END) -> str:
    start, end = _block(readme, begin, end_marker)
    return f"{readme[:start]}\n```\n{printed.rstrip()}\n```\n{readme[end:]}"


def report_digest(html: str) -> str:
    return hashlib.sha256(normalise(html).encode()).hexdigest()


def _chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    chunks, at = [], len(PNG_SIGNATURE)
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        chunks.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + length]))
        at += 12 + length
    return chunks


def picture_digest(png: bytes) -> str | None:
    """The digest stamp() wrote into the picture, or None."""
    for kind, data in _chunks(png):
        key, _, value = data.partition(b"\0")
        if kind == b"tEXt" and key == DIGEST_KEY:
            return value.decode()
    return None


def stamp(png: bytes, digest: str) -> bytes:
    """The picture with a tEXt chunk naming the report it shows (after IHDR, which comes first)."""
    chunks = [(kind, data) for kind, data in _chunks(png) if not (kind == b"tEXt" and data.startswith(DIGEST_KEY + b"\0"))]
    chunks.insert(1, (b"tEXt", DIGEST_KEY + b"\0" + digest.encode()))
    body = b"".join(struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data)) for kind, data in chunks)
    return PNG_SIGNATURE + body


def main() -> int:
    from sandbox.browser import ChromiumNotFound, screenshot

    with tempfile.TemporaryDirectory(prefix="hpr-readme-sample-") as folder:
        out = Path(folder) / OUT
        try:
            run = run_default_drill(out)
        except RuntimeError as exc:
            print(f"readme-sample: {exc}", file=sys.stderr)
            return 1
        try:
            preflight = run_preflight_sample()
        except RuntimeError as exc:
            print(f"readme-sample: {exc}", file=sys.stderr)
            return 1
        readme = with_sample(README.read_text(), run.printed)
        README.write_text(with_sample(readme, preflight, PREFLIGHT_BEGIN, PREFLIGHT_END))
        print(f"{README.relative_to(ROOT)}: drill and preflight samples written")
        try:
            screenshot(out / "drill-default.html", PICTURE)
        except ChromiumNotFound as exc:
            print(f"readme-sample: {PICTURE.relative_to(ROOT)} not rendered: {exc}", file=sys.stderr)
            return 3
        PICTURE.write_bytes(stamp(PICTURE.read_bytes(), report_digest(run.html)))
        print(f"{PICTURE.relative_to(ROOT)}: rendered from the drill's report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
