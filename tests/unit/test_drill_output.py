"""What every drill prints and draws, held over the class (every golden drill report, or any report
hypothesis makes): its verdicts, each copy of each job with its node count and times, a downtime
that says what it measures, a dry run that says what it would have done, and its own pass/fail
(sandbox/report/text.py, sandbox/html_report.py, sandbox/expectations.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.record.durations import format_duration
from sandbox.expectations import Check, verdict_line
from sandbox.golden import GOLDEN
from sandbox.html_report import render_html
from sandbox.report import JOBS_SHOWN, bounded, copy_lines, format_report, job_line

GOLDENS = sorted(GOLDEN.glob("*.json"))


def _golden(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    return report | {"wall_seconds": 0.0}  # (the one field a golden leaves out)


def _reports(having: Any) -> list[Any]:
    return [pytest.param(path, id=path.stem) for path in GOLDENS if having(json.loads(path.read_text()))]


def _hit(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [job for job in report.get("jobs", []) if job["fault_at"] is not None]


@pytest.mark.parametrize("path", _reports(lambda r: (r.get("hangs") or {}).get("verdicts")))
def test_given_any_drill_that_kept_a_verdict_then_its_printed_report_shows_each_verdicts_rule_mode_and_finding(path: Path) -> None:
    report = _golden(path)
    # When the drill's report is printed
    printed = format_report(report)
    # Then each verdict it kept is there: its time, rule and mode, what it found and what it did
    verdicts = report["hangs"]["verdicts"][:JOBS_SHOWN]
    assert f"verdicts: {len(report['hangs']['verdicts'])} (" in printed
    for verdict in verdicts:
        assert f"{verdict['rule']} ({verdict['mode']})  {bounded(verdict['summary'])}" in printed
        assert bounded(verdict["action"]) in printed


@pytest.mark.parametrize("path", _reports(lambda r: any(j["copies"] for j in r.get("jobs", []) if j["fault_at"] is not None)))
def test_given_any_drill_that_copied_a_job_then_each_copy_is_printed_under_it_with_its_node_count_and_when_it_ran(path: Path) -> None:
    report = _golden(path)
    printed = format_report(report).splitlines()
    for job in _hit(report)[:JOBS_SHOWN]:
        for copy in job["copies"]:
            # Then a line under the job's names the copy, its size against the job's, and its times
            name = copy["name"] if "name" in copy else copy["job"]
            line = next((ln for ln in printed if ln.startswith("    ") and f"{name} on " in ln), None)
            assert line is not None, f"no line for copy {copy['job']} of {job['label']}"
            size = f"{copy['nodes']} of {job['nodes']} nodes" if copy["nodes"] != job["nodes"] else f"{copy['nodes']} node"
            assert f" on {size}" in line or f" on all {size}" in line
            if copy.get("started_at") is not None:
                assert f"T+{format_duration(copy['started_at'])}" in line
            if copy.get("started_at") is not None and copy.get("ended_at") is not None:
                assert f"({format_duration(copy['ended_at'] - copy['started_at'])})" in line


def test_given_the_shrink_drill_then_its_thirteen_minutes_on_15_of_16_nodes_are_printed() -> None:
    report = _golden(GOLDEN / "no-spare-elastic.json")
    (job,) = _hit(report)
    assert copy_lines(job) == [
        "job 1002 on 15 of 16 nodes, from step 3000: ran T+2m 07.4s to T+15m 34.8s (13m 27.4s)",
        "job 1003 on all 16 nodes, from step 3200: running since T+15m 34.8s",
    ]


@pytest.mark.parametrize("path", _reports(lambda r: any(j["downtime_seconds"] is not None for j in r.get("jobs", []))))
def test_given_any_drill_whose_job_runs_again_then_its_downtime_says_from_which_stop_to_which_start(path: Path) -> None:
    for job in _hit(_golden(path))[:JOBS_SHOWN]:
        line = job_line(job)
        if job["downtime_seconds"] is None or not job["down"]:
            continue
        assert line is not None and "from its stop" in line and ("to its copy running" in line or "to a copy running" in line)


_GAP = st.tuples(st.integers(1, 10_000), st.integers(1, 5_000))


@given(gaps=st.lists(_GAP, min_size=1, max_size=4))
@settings(max_examples=60)
def test_given_any_interruptions_then_the_job_line_gives_each_ones_stop_and_restart(gaps: list[tuple[int, int]]) -> None:
    # Given a job down in gaps that do not touch (each: a stop, then a copy running some seconds later)
    down, at = [], 0.0
    for pause, length in gaps:
        start = at + pause
        down.append([start, start + length / 10])
        at = start + length / 10
    total = round(sum(end - start for start, end in down), 3)
    job = {
        "job": "1",
        "label": "job 1 (j)",
        "fault_at": down[0][0],
        "copy": "job 2",
        "checkpoint_step": None,
        "on": None,
        "down": down,
        "downtime_seconds": total,
    }
    # When its line is written
    line = job_line(job)
    # Then it says the total and, for each gap, when the job stopped and when a copy ran again
    assert line is not None and line.startswith(f"job 1 (j): down {format_duration(total)}")
    for start, end in down:
        assert f"T+{format_duration(start)}" in line and f"T+{format_duration(end)}" in line


@pytest.mark.parametrize("path", _reports(lambda r: r["dry_run"]))
def test_given_any_dry_run_drill_then_its_record_never_says_a_job_was_resubmitted(path: Path) -> None:
    report = _golden(path)
    details = [entry["detail"] for incident in report["incidents"] for entry in incident["timeline"]]
    said = [d for d in details if re.search(r"(?<!would be )resubmitted at once", d)]
    assert not said, said


@pytest.mark.parametrize("path", _reports(lambda r: True))
def test_given_any_drill_then_its_page_leads_with_its_pass_or_fail_and_gives_its_times_in_utc(path: Path) -> None:
    report = _golden(path)
    checks = [Check("outcomes", True, "recovered", "recovered")]
    # When its page is rendered with its checks
    page = render_html(report, checks)
    # Then the first thing after the title is its pass/fail, as the terminal's last line says it
    verdict = re.search(r'</h1><p class="verdict pass">([^<]*)</p>', page)
    assert verdict is not None and verdict.group(1) == verdict_line(report["scenario"], checks)
    # And its times are in UTC as well as the drill's clock, said as such
    assert "UTC</p>" in page and re.search(r"T\+0 = \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", page)
    if report["incidents"]:
        assert "<th>UTC</th>" in page
    # And every picture scales to the page: a viewBox, the page's width, no fixed size
    svgs = re.findall(r"<svg [^>]*>", page)
    assert all('width="100%"' in svg and "viewBox=" in svg and "height=" not in svg for svg in svgs)


@pytest.mark.parametrize("path", _reports(lambda r: any(j["fault_at"] is not None for j in r.get("jobs", []))))
def test_given_any_drill_with_a_hit_job_then_its_page_has_a_lane_with_a_bar_per_copy_on_its_node_count(path: Path) -> None:
    report = _golden(path)
    page = render_html(report)
    lane = re.search(r'<svg class="jobs".*?</svg>', page)
    assert lane is not None
    bars = re.findall(r'<rect class="run" data-job="([^"]*)" data-start="([^"]*)" data-end="([^"]*)" data-nodes="([^"]*)"', lane.group())
    for job in _hit(report)[:JOBS_SHOWN]:
        # Then the job itself and each copy that ran has a bar, with its node count
        assert (job["job"], "0.0", str(job["nodes"])) in {(b[0], b[1], b[3]) for b in bars}
        for copy in job["copies"]:
            if copy.get("started_at") is not None:
                assert (copy["job"], str(copy["started_at"]), str(copy["nodes"])) in {(b[0], b[1], b[3]) for b in bars}
        # And each gap when no copy trained is drawn across the job's rows
        drawn = re.findall(rf'<rect class="down" data-job="{re.escape(job["job"])}" data-start="([^"]*)" data-end="([^"]*)"', lane.group())
        assert drawn == [(str(start), str(end)) for start, end in job["down"]]


def test_given_a_failed_expectation_then_the_page_leads_with_fail_and_opens_the_checks_on_it() -> None:
    broken = Check("outcomes", False, "escalated", "recovered")
    page = render_html(_golden(GOLDEN / "default.json"), [Check("resubmissions", True, "1", "1"), broken])
    assert '</h1><p class="verdict fail">FAIL: drill default: 1 of 2 expectations failed' in page
    assert '<details class="checks" open>' in page and f'<li class="fail">{broken.line}</li>' in page


def test_given_checks_then_the_verdict_line_says_pass_or_how_many_failed() -> None:
    ok, broken = Check("a", True, "1", "1"), Check("b", False, "1", "2")
    assert verdict_line("d", [ok, ok]) == "PASS: drill d: all 2 expectations met"
    assert verdict_line("d", [ok, broken]) == "FAIL: drill d: 1 of 2 expectations failed (the FAIL lines above)"
