"""The fleet drill's HTML report, from a small real run as a user starts it: the page parses, draws
one point per hit, one line per job with a point per day and one step per execution start or end,
shows the JSON's numbers, fetches nothing and escapes what comes from the data."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from sandbox.fleet.goodput import format_goodput
from sandbox.fleet.report_html import render_fleet_html
from tests.conftest import ROOT

pytestmark = pytest.mark.sandbox
VOID_TAGS = frozenset({"meta", "br", "img", "input", "link", "hr"})


class Page(HTMLParser):
    """The elements (tag, attributes, the table they are in) and each table's rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], str | None]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.texts: list[tuple[str, str | None]] = []
        self.open: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._table = attributes.get("id", "")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        self.elements.append((tag, attributes, self._table))
        if tag not in VOID_TAGS and not tag.endswith("/"):
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}, self._table))

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1] if self.open else None}>"
        self.open.pop()
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.texts.append((data, self._table))
        if self._cell is not None:
            self._cell.append(data)

    def find(self, tag: str, css: str) -> list[dict[str, str]]:
        return [a for t, a, _ in self.elements if t == tag and css in a.get("class", "").split()]


def _parse(page: str) -> Page:
    parsed = Page()
    parsed.feed(page)
    parsed.close()
    assert parsed.open == [], f"unclosed: {parsed.open}"
    return parsed


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """``python bench/fleet.py`` on 64 nodes for 2 days at a dense rate, the page to a path of its own."""
    out = tmp_path_factory.mktemp("fleet-html")
    page = out / "pages" / "fleet.html"
    command = [sys.executable, "bench/fleet.py", "--nodes", "64", "--days", "2", "--jobs", "4x16", "--rate", "80", "--seed", "5"]
    done = subprocess.run(
        [*command, "--out", str(out), "--html", str(page)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"html: {page}" in done.stdout and "monthly cost (30 days)" in done.stdout
    (report,) = out.glob("fleet-64n-2d-seed5.json")
    return json.loads(report.read_text()), page.read_text()


def test_given_a_fleet_run_then_its_days_add_up_to_each_jobs_ettr_and_the_steps_peak_where_the_report_says(
    fleet_run: tuple[dict[str, Any], str],
) -> None:
    report, _ = fleet_run
    series = report["series"]
    assert len(series["downtime"]) == len(report["hits"]) >= 3
    days = series["ettr_per_day"]["days"]
    assert [d["seconds"] for d in days] == [86_400.0, 86_400.0]
    for job in report["jobs"]:
        shares = series["ettr_per_day"]["jobs"][job["job"]]
        weighted = sum(s * d["seconds"] for s, d in zip(shares, days, strict=True)) / (2 * 86_400)
        assert weighted == pytest.approx(job["ettr"], abs=2e-5)
    # and the executions running step up and down from none back to none, never below, peaking where it says
    concurrency = series["concurrent_executions"]
    times, running = [t for t, _ in concurrency["steps"]], [n for _, n in concurrency["steps"]]
    assert times == sorted(times) and min(running) >= 0 and running[-1] == 0
    assert concurrency["peak"] == max(running) == report["executions"]["peak_concurrent"]
    assert running[times.index(concurrency["peak_at"])] == concurrency["peak"]
    assert len(times) <= 2 * report["executions"]["total"]


def test_given_a_fleet_run_then_the_page_draws_a_point_per_hit_a_line_per_job_and_a_step_per_change(
    fleet_run: tuple[dict[str, Any], str],
) -> None:
    report, page = fleet_run
    parsed = _parse(page)
    svgs = {a["class"] for t, a, _ in parsed.elements if t == "svg"}
    assert svgs == {"fleet-downtime", "fleet-ettr", "fleet-concurrency"}
    # (a) a point per hit, at its time and downtime; the p50 and p99 the JSON's
    hits = parsed.find("circle", "hit")
    assert sorted((float(h["data-at"]), float(h["data-downtime"])) for h in hits) == sorted(
        (h["at"], h["downtime"]) for h in report["hits"]
    )
    percentiles = {line["data-name"]: float(line["data-seconds"]) for line in parsed.find("line", "pctl")}
    assert percentiles == {"p50": report["job_downtime_seconds"]["p50"], "p99": report["job_downtime_seconds"]["p99"]}
    # (b) a line per job with a point per day, and the mean's
    lines = parsed.find("polyline", "job")
    assert sorted(line["data-job"] for line in lines) == sorted(j["job"] for j in report["jobs"])
    assert all(len(line["points"].split()) == 2 for line in [*lines, *parsed.find("polyline", "mean")])
    # (c) one step per start or end, the peak marked
    (steps,) = parsed.find("path", "steps")
    assert int(steps["data-steps"]) == len(report["series"]["concurrent_executions"]["steps"]) == steps["d"].count("V")
    (peak,) = parsed.find("circle", "peak")
    assert int(peak["data-peak"]) == report["executions"]["peak_concurrent"]


def test_given_a_fleet_run_then_the_page_fetches_nothing_and_names_addresses_only_as_the_prices_sources(
    fleet_run: tuple[dict[str, Any], str],
) -> None:
    report, page = fleet_run
    parsed = _parse(page)
    assert not [t for t, _, _ in parsed.elements if t in ("script", "link", "img", "iframe", "object")]
    for tag, attributes, table in parsed.elements:
        for name, value in attributes.items():
            if "http" in value:
                assert (tag, name, table) == ("a", "href", "prices")
    assert all("http" not in text or table == "prices" for text, table in parsed.texts)
    sources = {a["href"] for t, a, table in parsed.elements if t == "a" and table == "prices"}
    assert {p["source"] for p in report["prices"]} <= sources


def test_given_a_fleet_run_then_every_number_in_the_tables_is_the_jsons(fleet_run: tuple[dict[str, Any], str]) -> None:
    report, page = fleet_run
    tables = _parse(page).tables
    # ETTR per job, and its points lost
    parts = ("lost_work", "detection", "pipeline", "provisioning_wait", "restart", "checkpoint_cost", "swaps", "false_alarms", "shrunk")
    expected = [
        [
            j["job"],
            str(j["nodes"]),
            str(j["hits"]),
            f"{100 * j['ettr']:.2f} %",
            *(f"{j['ettr_points_lost'][p]:.3f}" for p in parts),
            f"{j['recovery_downtime_percent']:.3f} %",
        ]
        for j in report["jobs"]
    ]
    # (the recovery's own downtime is its pipeline and provisioning-wait points)
    for j in report["jobs"]:
        points = j["ettr_points_lost"]
        assert j["recovery_downtime_percent"] == pytest.approx(points["pipeline"] + points["provisioning_wait"], abs=2e-3)
    assert [row[:-1] for row in tables["ettr"][1:]] == expected
    down = report["job_downtime_seconds"]
    failed_reboots = sum(j["failed_reboot_wait_seconds"] for j in report["jobs"])
    assert tables["downtime"][1] == [str(down["hits"])] + [f"{down[k] / 60:.1f} min" for k in ("p50", "p90", "p99", "max")] + [
        str(down["never_restarted"]),
        str(down["folded_into_a_running_incident"]),
        f"{failed_reboots / 60:.1f} min",
    ]
    assert {row[0]: int(row[1]) for row in tables["outcomes"][1:]} == report["incidents"]["by_outcome"]
    assert {row[0]: int(row[1]) for row in tables["pages"][1:]} == report["pages"]["why"]
    assert tables["safety"][1][0] == str(report["safety"]["capped_incidents"])
    per_day = {row[0]: float(row[1]) for row in tables["per-day"][1:]}
    assert per_day["state transitions"] == report["cost_per_day"]["state_transitions"]
    assert per_day["Lambda invocations"] == report["cost_per_day"]["lambda_invocations"]
    # the monthly cost: each line's count, and the total to the cent
    cost = report["monthly_cost"]
    rows = tables["cost"][1:]
    assert [float(row[2].replace(",", "")) for row in rows[: len(cost["lines"])]] == [line["per_30_days"] for line in cost["lines"]]
    assert rows[-2][0] == "total" and float(rows[-2][-1].lstrip("$")) == pytest.approx(cost["total_usd"], abs=0.005)
    limits = report["limits"]
    assert tables["limits"][1][1] == f"{limits['largest_dynamodb_item_bytes']:,}"
    assert tables["limits"][2][1] == f"{limits['largest_state_payload_bytes']:,}"


def test_given_a_fleet_run_then_the_page_ends_with_the_planners_view_as_the_terminal_prints_it(
    fleet_run: tuple[dict[str, Any], str],
) -> None:
    # Given the fleet run's report and page
    report, page = fleet_run
    # Then the page holds the planner's ETTR and what to change, the lines the terminal prints
    (shown,) = re.findall(r'<pre class="goodput">(.*?)</pre>', page, re.DOTALL)
    assert unescape(shown).splitlines() == format_goodput(report)
    assert "what to change" in unescape(shown) and "ETTR" in unescape(shown)


def test_given_markup_in_the_data_when_rendered_then_it_is_shown_as_text(fleet_run: tuple[dict[str, Any], str]) -> None:
    # Given a report whose job, fault, outcome and page reason carry markup
    report = copy.deepcopy(fleet_run[0])
    evil = '<script>alert("x")</script>'
    per_day = report["series"]["ettr_per_day"]["jobs"]
    per_day[evil] = per_day.pop(report["jobs"][0]["job"])
    report["jobs"][0]["job"] = evil
    report["series"]["downtime"][0]["fault"] = evil
    report["incidents"]["by_outcome"] = {evil: 1}
    report["pages"]["why"] = {evil: 1}
    # When it is rendered
    page = render_fleet_html(report)
    # Then no element comes from the data, and its text is there, escaped
    parsed = _parse(page)
    assert not [t for t, _, _ in parsed.elements if t == "script"]
    assert "&lt;script&gt;" in page and [row[0] for row in parsed.tables["outcomes"][1:]] == [evil]


def test_given_the_bench_when_run_without_html_then_the_page_is_beside_the_json(tmp_path: Path) -> None:
    command = [sys.executable, "bench/fleet.py", "--nodes", "16", "--days", "0.5", "--jobs", "2x8", "--out", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet-16n-0.5d-seed0.html", "fleet-16n-0.5d-seed0.json"]
    report = json.loads((tmp_path / "fleet-16n-0.5d-seed0.json").read_text())
    assert [d["seconds"] for d in report["series"]["ettr_per_day"]["days"]] == [43_200.0]
