"""Reference screenshots of the drill report, one per drill family, and the tolerant comparison that
checks a report still looks as it did (tests/integration/test_report_screenshots.py).

A family's page is rendered from a fresh run of its drill (wall time pinned: it measures the machine),
held to its expectations as ``make drill`` holds it,
in headless Chromium at a fixed window, and compared pixel by pixel with its reference: a pixel
differs when one of its channels moves by more than ``CHANNEL_TOLERANCE`` (anti-aliasing does not),
and the page matches while at most ``PIXEL_TOLERANCE`` of them differ. A word changed in a sentence
stays under that; a section moved, a chart redrawn or a colour changed does not.

``python tools/report_screenshots.py`` (in ``make golden``) rewrites the references.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageChops

from sandbox.browser import screenshot
from sandbox.drills import check_drill
from sandbox.golden import DRILLS, ROOT, comparable_report
from sandbox.html_report import render_html
from sandbox.scenario import load_scenario

REFERENCES = ROOT / "tests" / "golden" / "screenshots"
# The drill families a report must draw well: a Slurm node, an EKS node, a job's own failure, a
# 64-node storm, a dry run.
FAMILIES = {
    "slurm-node": "default",
    "eks-node": "eks-default",
    "job": "job-node-failure",
    "storm": "rack-storm-64-jobs",
    "dry-run": "dry-run",
}
WINDOW = (1100, 2000)
CHANNEL_TOLERANCE = 48
PIXEL_TOLERANCE = 0.005


def render_family(family: str, folder: Path) -> Path:
    """The family's report page, screenshotted into ``folder``/<family>.png."""
    report = {**comparable_report(FAMILIES[family]), "wall_seconds": 0.0}
    page = folder / f"{family}.html"
    page.write_text(render_html(report, check_drill(load_scenario(DRILLS / f"{FAMILIES[family]}.json"), report)))
    return screenshot(page, folder / f"{family}.png", *WINDOW)


def differing_share(actual: Path, reference: Path, diff: Path | None = None) -> float:
    """The share of pixels that differ beyond the channel tolerance (1.0 if the sizes differ);
    with ``diff``, those pixels are written there in red over a faded copy of the reference."""
    got, want = Image.open(actual).convert("RGB"), Image.open(reference).convert("RGB")
    if got.size != want.size:
        return 1.0
    delta = ImageChops.difference(got, want).convert("L").point(lambda v: 255 if v > CHANNEL_TOLERANCE else 0)
    changed = delta.histogram()[255]
    if diff is not None:
        faded = Image.blend(want, Image.new("RGB", want.size, "white"), 0.7)
        faded.paste(Image.new("RGB", want.size, (220, 0, 0)), mask=delta)
        faded.save(diff)
    return changed / (want.size[0] * want.size[1])
