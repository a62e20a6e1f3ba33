"""The drill report, checked in a real browser: each drill family's page, rendered by headless
Chromium, looks like its reference screenshot (tests/golden/screenshots/, rewritten by
`python tools/report_screenshots.py`, which `make golden` runs). The comparison tolerates
anti-aliasing and a few changed words, not a moved section or a redrawn chart (sandbox/screenshots.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from sandbox.browser import find_chromium
from sandbox.screenshots import FAMILIES, PIXEL_TOLERANCE, REFERENCES, differing_share, render_family

pytestmark = pytest.mark.sandbox

if find_chromium() is None:
    if os.environ.get("HYPERPOD_RECOVERY_REQUIRE_CHROMIUM") == "1":
        raise RuntimeError("HYPERPOD_RECOVERY_REQUIRE_CHROMIUM=1 but chromium is not installed (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does)", allow_module_level=True)

REWRITE = "python tools/report_screenshots.py"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_given_a_drill_family_then_its_report_in_chromium_looks_like_its_reference(family: str, tmp_path: Path) -> None:
    reference = REFERENCES / f"{family}.png"
    assert reference.exists(), f"no reference screenshot {reference}: run {REWRITE} {family}"
    # When the family's drill runs and its report page is rendered
    actual = render_family(family, tmp_path)
    # Then at most a sliver of its pixels differ from the reference (the diff is kept to look at)
    diff = tmp_path / f"{family}-diff.png"
    share = differing_share(actual, reference, diff)
    assert share <= PIXEL_TOLERANCE, f"{family}: {share:.2%} of pixels differ (see {diff}); if meant, run {REWRITE} {family}"


def _page(tmp_path: Path, name: str, boxes: list[tuple[int, int, int, int]]) -> Path:
    image = Image.new("RGB", (400, 300), "white")
    draw = ImageDraw.Draw(image)
    for box in boxes:
        draw.rectangle(box, fill=(31, 119, 180))
    path = tmp_path / f"{name}.png"
    image.save(path)
    return path


def test_given_a_section_moved_down_then_the_comparison_fails_it(tmp_path: Path) -> None:
    # A 200x20 bar (a phase of the timeline) drawn 30 px lower: a layout change
    reference = _page(tmp_path, "reference", [(50, 50, 250, 70)])
    moved = _page(tmp_path, "moved", [(50, 80, 250, 100)])
    assert differing_share(moved, reference) > PIXEL_TOLERANCE


def test_given_a_few_pixels_changed_then_the_comparison_tolerates_them(tmp_path: Path) -> None:
    # A word's worth of pixels (a 20x10 patch), and anti-aliasing-sized shifts in colour everywhere else
    reference = _page(tmp_path, "reference", [(50, 50, 250, 70)])
    touched = _page(tmp_path, "touched", [(50, 50, 250, 70), (300, 200, 320, 210)])
    assert 0 < differing_share(touched, reference) <= PIXEL_TOLERANCE
    faint = Image.open(reference).point(lambda v: max(0, v - 30))
    faint.save(tmp_path / "faint.png")
    assert differing_share(tmp_path / "faint.png", reference) == 0


def test_given_a_page_of_another_size_then_everything_differs(tmp_path: Path) -> None:
    reference = _page(tmp_path, "reference", [])
    Image.new("RGB", (400, 301), "white").save(tmp_path / "taller.png")
    assert differing_share(tmp_path / "taller.png", reference) == 1.0
