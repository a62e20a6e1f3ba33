"""Drills that assert: `python -m sandbox run` exits 1 when the scenario's expect block (or, without
one, the implicit one) is broken; `python -m sandbox drills DIR` (make drills, hyperpod-recovery
drills) runs a folder into a table and JUnit XML; `hyperpod-recovery drill --stack` checks what a
deployed stack can show of the same block."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery_cli.main import main as cli
from sandbox.__main__ import main as sandbox
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from tests.conftest import EVENTS
from tests.integration.test_drill_aws import _drill

pytestmark = pytest.mark.sandbox
DEFAULT = EVENTS / "drills" / "default.json"


def _scenario(folder: Path, name: str, base: Path = DEFAULT, **changes: Any) -> Path:
    document = json.loads(base.read_text()) | {"name": name} | changes
    path = folder / f"{name}.json"
    path.write_text(json.dumps(document))
    return path


def test_given_the_default_drill_then_its_expectations_hold_and_it_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sandbox(["run", "--scenario", str(DEFAULT), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "expectations (the scenario's expect)" in printed and "FAIL" not in printed
    assert "ok   outcomes: expected recovered; got recovered" in printed and "ok   resubmissions: expected 1; got 1" in printed
    # And its last line is its own verdict against them
    assert re.fullmatch(r"PASS: drill default: all \d+ expectations met", printed.rstrip().splitlines()[-1])


def test_given_an_expectation_the_drill_breaks_then_it_exits_1_saying_what_was_expected_and_what_happened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _scenario(tmp_path, "expects-escalation", expect={"outcomes": ["escalated"], "checkpoint_step": 2000})
    assert sandbox(["run", "--scenario", str(path), "--out", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "FAIL outcomes: expected escalated; got recovered" in captured.out
    assert "FAIL checkpoint step: expected every resubmission from step 2000; got [3000]" in captured.out
    assert "drill expects-escalation: 2 expectation(s) failed" in captured.err
    assert re.fullmatch(r"FAIL: drill expects-escalation: 2 of \d+ expectations failed .*", captured.out.rstrip().splitlines()[-1])


def test_given_no_expect_block_then_an_escalation_fails_the_drill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = json.loads((EVENTS / "drills" / "rejoin-deadline.json").read_text())
    document.pop("expect")
    path = tmp_path / "rejoin-deadline.json"
    path.write_text(json.dumps(document))
    assert sandbox(["run", "--scenario", str(path), "--out", str(tmp_path)]) == 1
    assert (
        "FAIL no human needed: expected no incident that needs a human; got escalated (RejoinDeadlineExceeded)" in capsys.readouterr().out
    )


def test_given_a_folder_then_drills_prints_a_table_writes_junit_and_exits_1_for_a_failure_and_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    _scenario(folder, "passes")
    _scenario(folder, "fails", expect={"outcomes": ["escalated"]})
    (folder / "broken.json").write_text('{"name": "broken"')
    junit = tmp_path / "junit" / "drills.xml"
    assert sandbox(["drills", str(folder), "--junit", str(junit), "--out", str(tmp_path / "out")]) == 1
    printed = capsys.readouterr().out
    rows = {line.split()[0]: line for line in printed.splitlines() if line.split() and line.split()[0] in ("passes", "fails", "broken")}
    assert "recovered" in rows["passes"] and rows["passes"].rstrip().endswith("pass") and re.search(r"\d+\.\d s", rows["passes"])
    assert rows["fails"].rstrip().endswith("FAIL") and rows["broken"].rstrip().endswith("ERROR")
    assert "1 passed, 2 failed, 0 skipped" in printed
    # And the JUnit XML is what CI reporters read: a suite, a case per scenario, a failure and an error
    suite = ET.parse(junit).getroot()  # noqa: S314 (the file this test just had written)
    assert (suite.tag, suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("testsuite", "3", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["fails"].find("failure").get("message").startswith("FAIL outcomes: expected escalated")  # type: ignore[union-attr]
    assert cases["broken"].find("error") is not None and cases["passes"].find("failure") is None


def _without_times(text: str) -> str:
    """A run's output or JUnit XML without the seconds it measured (the machine's, not the drills')."""
    return re.sub(r'time="[0-9.]+"', 'time=""', re.sub(r"\(\d+\.\d s\)", "(s)", text))


def test_given_drills_run_in_parallel_then_lines_table_and_junit_are_those_of_a_serial_run_and_each_drill_has_its_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a folder of quick scenarios (a rejected request each: under a second), one that fails and one broken
    folder = tmp_path / "mine"
    folder.mkdir()
    rejected = EVENTS / "drills" / "foreign-cluster.json"
    for name in ("c-third", "a-first", "b-second"):
        _scenario(folder, name, base=rejected)
    _scenario(folder, "d-fails", base=rejected, expect={"outcomes": ["recovered"]})
    (folder / "e-broken.json").write_text("{")
    runs = {}
    for jobs in ("1", "3"):
        out, junit = tmp_path / f"out-{jobs}", tmp_path / f"junit-{jobs}.xml"
        # When the suite runs one drill at a time, then three at once
        assert sandbox(["drills", str(folder), "--junit", str(junit), "--out", str(out), "--jobs", jobs]) == 1
        printed = capsys.readouterr().out.replace(str(out), "OUT").replace(str(junit), "JUNIT")
        runs[jobs] = (_without_times(printed), _without_times(junit.read_text()), out)
    # Then the printed lines (in the scenarios' order), the table and the JUnit XML are the same
    assert runs["3"][:2] == runs["1"][:2]
    printed = runs["3"][0].splitlines()
    assert [line.split()[1] for line in printed[:5]] == ["a-first", "b-second", "c-third", "d-fails", "e-broken"]
    # And each drill that ran has its HTML page, its pass/fail first, and an index links them all
    out = runs["3"][2]
    for name in ("a-first", "b-second", "c-third"):
        assert '<p class="verdict pass">PASS: drill ' in (out / f"drill-{name}.html").read_text()
    assert '<p class="verdict fail">FAIL: drill d-fails' in (out / "drill-d-fails.html").read_text()
    index = (out / "index.html").read_text()
    ran = ("a-first", "b-second", "c-third", "d-fails")
    assert re.findall(r'<a href="(drill-[a-z-]+\.html)">', index) == [f"drill-{n}.html" for n in ran]
    assert "3 passed, 2 failed, 0 skipped" in index


def test_given_jobs_below_one_then_drills_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sandbox(["drills", str(EVENTS / "drills"), "--out", str(tmp_path), "--jobs", "0"]) == 2
    assert "--jobs 0: at least 1" in capsys.readouterr().err


def test_given_an_empty_folder_or_a_file_then_drills_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sandbox(["drills", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert sandbox(["drills", str(DEFAULT)]) == 2
    err = capsys.readouterr().err
    assert "no scenario (*.json) in it" in err and "not a folder of scenarios" in err


def test_given_the_cli_in_a_clone_then_drills_runs_the_same_suite(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    _scenario(folder, "passes")
    out = io.StringIO()
    assert cli(["drills", str(folder), "--out", str(tmp_path / "out"), "--jobs", "1"], stdout=out, stderr=io.StringIO()) == 0
    assert "1 passed, 0 failed" in out.getvalue() and (tmp_path / "out" / "drill-passes.html").exists()


def test_given_a_deployed_stack_then_drill_checks_what_it_can_of_the_expect_block_and_names_the_rest(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed():
        code, printed, _ = _drill(runner, "--scenario", str(DEFAULT), "--live", "--yes")
    assert code == 0, printed
    assert "ok   outcome: expected recovered; got recovered" in printed and "ok   resubmissions: expected 1; got 1" in printed
    assert "not checked here:" in printed and "one_copy_per_job" in printed and "max_job_downtime_seconds" in printed
    # And a dry run says why the outcome is not checked instead of passing it
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda2.log")
    wrong = _scenario(tmp_path, "wrong", expect={"outcomes": ["escalated"], "resubmissions": 1})
    with runner.deployed():
        code, printed, _ = _drill(runner, "--scenario", str(wrong))
    assert code == 0 and "outcomes (a dry run's outcome is dry_run: give --live --yes)" in printed
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda3.log")
    with runner.deployed():
        code, printed, _ = _drill(runner, "--scenario", str(wrong), "--live", "--yes")
    assert code == 1 and "FAIL outcome: expected escalated; got recovered" in printed
