"""The HTML drill report, rendered by a real browser (Debian's headless Chromium): every phase of
the timeline is drawn, in order, to scale, and the screenshot shows it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from sandbox.__main__ import main
from sandbox.browser import find_chromium, measure_timeline, screenshot
from sandbox.html_report import PHASE_COLORS, render_html
from tests.conftest import EVENTS

pytestmark = pytest.mark.sandbox

if find_chromium() is None:
    if os.environ.get("HYPERPOD_RECOVERY_REQUIRE_CHROMIUM") == "1":
        raise RuntimeError("HYPERPOD_RECOVERY_REQUIRE_CHROMIUM=1 but chromium is not installed (apt-get install chromium)")
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does)", allow_module_level=True)


@pytest.fixture(scope="module")
def default_drill(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("drill")
    assert main(["run", "--scenario", str(EVENTS / "drills" / "default.json"), "--out", str(out)]) == 0
    return json.loads((out / "drill-default.json").read_text()), out / "drill-default.html"


def _hex_rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def test_given_a_drill_then_the_html_report_sits_next_to_the_json_and_needs_nothing_online(
    default_drill: tuple[dict[str, Any], Path],
) -> None:
    report, html = default_drill
    page = html.read_text()
    assert html.with_suffix(".json").exists()
    # Self-contained: no script, stylesheet, font or image is fetched from anywhere
    # (links in the notifications' text are text, not fetched)
    assert "<script" not in page and "<link" not in page and "url(" not in page and "@import" not in page
    assert not re.search(r"\s(src|href)\s*=", page)
    # And the api_calls table lists every call with its count, and the total
    for name, count in report["api_calls"].items():
        assert f"<td>{name}</td><td>{count}</td>" in page
    assert f"<td>total</td><td>{report['api_calls_total']}</td>" in page


def test_given_the_report_in_chromium_then_every_phase_is_drawn_in_order_and_to_scale(default_drill: tuple[dict[str, Any], Path]) -> None:
    report, html = default_drill
    (incident,) = report["incidents"]
    # When the browser lays the page out
    bars = measure_timeline(html)
    # Then there is one visible bar per phase of the incident, in the phase's colour
    assert [b["phase"] for b in bars] == [p["name"] for p in incident["phases"]]
    # (the picture scales to the page: a bar is its 20 units high times the page's scale)
    scale = bars[0]["height"] / 20
    assert scale > 0.5 and all(b["height"] == pytest.approx(20 * scale, abs=0.5) and b["width"] >= 2 * scale - 0.5 for b in bars)
    assert all(b["fill"] == "rgb({}, {}, {})".format(*_hex_rgb(PHASE_COLORS[b["phase"]])) for b in bars)
    # And the bars run left to right as the phases happened
    lefts = [b["x"] for b in bars]
    assert lefts == sorted(lefts)
    # And to scale: the ten-minute wait for the replacement is the widest bar, by its share of the incident
    span = incident["phases"][-1]["end"] - incident["phases"][0]["start"]
    plot = max(b["x"] + b["width"] for b in bars) - min(lefts)
    wait = next(b for b in bars if b["phase"] == "wait_for_rejoin")
    assert wait["width"] == max(b["width"] for b in bars)
    assert wait["width"] == pytest.approx((wait["end"] - wait["start"]) / span * plot, abs=3)


def test_given_a_narrow_window_then_the_timeline_scales_to_fit_it(default_drill: tuple[dict[str, Any], Path]) -> None:
    _, html = default_drill
    # When the page is laid out in a narrow window (headless Chromium makes none narrower than 500 px) and a wide one
    narrow, wide = measure_timeline(html, width=520), measure_timeline(html, width=1100)
    # Then every bar lies inside the narrow window (no fixed-width picture to scroll sideways)
    assert narrow and all(b["x"] >= 0 and b["x"] + b["width"] <= 520 for b in narrow)
    # And the picture is the same, smaller: each bar keeps its share of the axis
    assert [b["phase"] for b in narrow] == [b["phase"] for b in wide]
    ratio = narrow[0]["height"] / wide[0]["height"]
    assert ratio < 0.6 and all(n["width"] == pytest.approx(w["width"] * ratio, abs=1.5) for n, w in zip(narrow, wide, strict=True))


def test_given_the_report_in_chromium_then_the_screenshot_shows_the_timeline(default_drill: tuple[dict[str, Any], Path]) -> None:
    _, html = default_drill
    png = screenshot(html, html.with_suffix(".png"))
    image = Image.open(png).convert("RGB")
    colours = {colour: count for count, colour in image.getcolors(maxcolors=1 << 20) or []}
    # The wait-for-rejoin bar is several hundred pixels wide and 20 high, in its own blue
    assert colours.get(_hex_rgb(PHASE_COLORS["wait_for_rejoin"]), 0) > 300 * 20
    # And the small phases are drawn too, each at least a 2-pixel sliver
    for phase in ("detect", "cordon", "replace", "resume", "resubmit"):
        assert colours.get(_hex_rgb(PHASE_COLORS[phase]), 0) >= 2 * 20 - 4, phase


def test_given_a_drill_with_several_incidents_then_each_gets_a_timeline_and_the_overview_colours_outcomes(tmp_path: Path) -> None:
    report = {
        "scenario": "two",
        "description": "",
        "dry_run": False,
        "cluster": {"name": "c", "orchestrator": "slurm", "node_recovery": "None", "instance_groups": {"w": 2}},
        "incidents": [
            {
                "id": f"inc-{n}",
                "workflow": "node",
                "job": None,
                "trigger": ["manual"],
                "nodes": ["i-1"],
                "outcome": outcome,
                "summary": "s <b>not markup</b>",
                "error": None,
                "cause": None,
                "phases": [
                    {"name": "detect", "start": 10.0 * n, "end": 10.0 * n + 5},
                    {"name": "record", "start": 10.0 * n + 5, "end": 10.0 * n + 6},
                ],
                "resubmissions": [],
                "timeline": [{"at": 10.0 * n, "event": "fault detected", "detail": "x"}],
                "workflow_seconds": 6.0,
                "provisioning_seconds": 0.0,
                "agent_seconds": 0.0,
                "pipeline_overhead_seconds": 6.0,
            }
            for n, outcome in ((1, "recovered"), (2, "escalated"))
        ],
        "api_calls": {"sns.Publish": 2},
        "api_calls_total": 2,
        "state_transitions": 10,
        "executions": 2,
        "virtual_seconds": 26.0,
        "pipeline_overhead_seconds": 12.0,
        "wall_seconds": 1.0,
        "notifications": [],
        "metrics": {},
    }
    html = tmp_path / "two.html"
    html.write_text(render_html(report))
    assert "&lt;b&gt;not markup&lt;/b&gt;" in html.read_text()
    bars = measure_timeline(html)
    assert sorted({b["incident"] for b in bars}) == ["inc-1", "inc-2"] and len(bars) == 4
