"""A scenario's expect block against a drill's report: each expectation passes when what it says
happened and fails, saying what happened, when it did not (sandbox/expectations.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sandbox.drills import Check, Result, junit
from sandbox.expectations import IMPLICIT, NEEDS_A_HUMAN, ExpectSpec, evaluate, verdict
from sandbox.scenario import ScenarioError, load_scenario, with_changes
from tests.conftest import EVENTS


def _report(**changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "incidents": [
            {"outcome": "recovered", "error": None, "resubmissions": [{"checkpoint_step": 3000, "job": "1001", "new_job_id": "1002"}]}
        ],
        "slurm": {"submissions": [{"old_job_id": "1001"}]},
        "jobs": [{"job": "1001", "label": "job 1001 (llama)", "fault_at": 60.0, "downtime_seconds": 12.5}],
        "second_copies": [],
        "message_contradictions": [],
        "notifications": [{"subject": "[hyperpod-recovery] c: recovered", "message": "RECOVERED. Do not start another copy."}],
    }
    return report | changes


def _failed(expect: ExpectSpec, report: dict[str, Any], cap: int = 8, most_out: int = 1) -> list[str]:
    return [c.name for c in evaluate(expect, report, cap, most_out) if not c.ok]


@pytest.mark.parametrize(
    ("expect", "report", "fails"),
    [
        (ExpectSpec(outcomes=["recovered"]), _report(), []),
        (ExpectSpec(no_secret_kept=True), _report(secrets={"found_in": [], "evidence_items": 1, "evidence_redacted": 1}), []),
        (
            ExpectSpec(no_secret_kept=True),
            _report(secrets={"found_in": ["notification 0 (chat)"], "evidence_items": 1, "evidence_redacted": 1}),
            ["no secret kept"],
        ),
        # (a drill whose evidence said nothing was redacted never read the secrets: it proves nothing)
        (
            ExpectSpec(no_secret_kept=True),
            _report(secrets={"found_in": [], "evidence_items": 1, "evidence_redacted": 0}),
            ["no secret kept"],
        ),
        (ExpectSpec(no_secret_kept=True), _report(), ["no secret kept"]),
        (ExpectSpec(outcomes=["escalated"]), _report(), ["outcomes"]),
        (ExpectSpec(outcomes=["recovered", "recovered"]), _report(), ["outcomes"]),
        (ExpectSpec(resubmissions=1), _report(), []),
        (ExpectSpec(resubmissions=0), _report(), ["resubmissions"]),
        (ExpectSpec(checkpoint_step=3000), _report(), []),
        (ExpectSpec(node_repairs=0), _report(replacements=[], reboots=[]), []),
        (ExpectSpec(node_repairs=0), _report(replacements=[{"old_node_id": "i-1"}], reboots=[]), ["node repairs"]),
        (ExpectSpec(node_repairs=0), _report(replacements=[], reboots=[{"node_id": "i-1"}]), ["node repairs"]),
        (ExpectSpec(checkpoint_step=2000), _report(), ["checkpoint step"]),
        (
            ExpectSpec(checkpoint_step=3000),
            _report(incidents=[{"outcome": "escalated", "error": "X", "resubmissions": []}]),
            ["checkpoint step"],
        ),
        (ExpectSpec(max_job_downtime_seconds=20), _report(), []),
        (ExpectSpec(max_job_downtime_seconds=10), _report(), ["job downtime"]),
        (
            ExpectSpec(max_job_downtime_seconds=99),
            _report(jobs=[{"job": "1", "fault_at": 60.0, "downtime_seconds": None}]),
            ["job downtime"],
        ),
        (ExpectSpec(), _report(second_copies=[{"job": "1001"}]), ["one copy per job"]),
        (ExpectSpec(one_copy_per_job=False), _report(second_copies=[{"job": "1001"}]), []),
        (ExpectSpec(), _report(message_contradictions=["says recovered"]), ["messages match the record"]),
        (ExpectSpec(never_say=["DO NOT START"]), _report(), ["never says 'DO NOT START'"]),
        (ExpectSpec(always_say=["escalated"]), _report(), ["says 'escalated'"]),
        (ExpectSpec(always_say=["another copy"]), _report(), []),
    ],
)
def test_given_an_expectation_then_it_fails_exactly_when_the_report_breaks_it(
    expect: ExpectSpec, report: dict[str, Any], fails: list[str]
) -> None:
    assert _failed(expect, report) == fails


def test_given_more_nodes_out_than_the_cap_then_within_the_cap_fails_and_says_how_many() -> None:
    (check,) = [c for c in evaluate(ExpectSpec(), _report(), cap=3, most_out=4) if c.name == "within the cap"]
    assert not check.ok and "at most 3" in check.line and "got 4" in check.line


@pytest.mark.parametrize("outcome", NEEDS_A_HUMAN)
def test_given_no_expect_block_then_an_incident_that_needs_a_human_fails_the_drill_naming_its_error(outcome: str) -> None:
    checks = evaluate(IMPLICIT, _report(incidents=[{"outcome": outcome, "error": "RejoinDeadlineExceeded", "resubmissions": []}]), 8, 0)
    assert verdict(checks) == "fail"
    assert any(not c.ok and "RejoinDeadlineExceeded" in c.line for c in checks)


@given(st.lists(st.sampled_from(["recovered", "duplicate", "escalated", "dry_run"]), min_size=1, max_size=6), st.randoms())
def test_outcomes_are_a_multiset_order_never_matters(outcomes: list[str], random: Any) -> None:
    report = _report(incidents=[{"outcome": o, "error": None, "resubmissions": []} for o in outcomes])
    shuffled = list(outcomes)
    random.shuffle(shuffled)
    assert _failed(ExpectSpec(outcomes=shuffled), report) == []  # type: ignore[arg-type]
    assert _failed(ExpectSpec(outcomes=[*shuffled, "recovered"]), report) == ["outcomes"]  # type: ignore[arg-type]


def test_an_unknown_expectation_or_outcome_is_refused_when_the_scenario_loads() -> None:
    base = load_scenario(EVENTS / "drills" / "default.json")
    with pytest.raises((ScenarioError, ValidationError)):
        with_changes(base, {"expect": {"outcome": ["recovered"]}})  # a typo'd field asserts nothing: refused
    with pytest.raises((ScenarioError, ValidationError)):
        with_changes(base, {"expect": {"outcomes": ["recoverd"]}})


def test_every_project_drill_says_what_it_is_for() -> None:
    """Each drill in events/drills carries an expect block naming its outcomes (the real-Slurm one
    runs under its own test)."""
    for path in sorted((EVENTS / "drills").glob("*.json")):
        if path.stem == "real-slurm":
            continue
        expect = load_scenario(path).expect
        # (a drill of no incident says so: outcomes [], as the declared checkpoint save's does)
        assert expect is not None and expect.outcomes is not None, path.name


@settings(deadline=None)  # (the first example imports the sandbox)
@given(st.text(min_size=1, max_size=40))
def test_junit_is_well_formed_xml_whatever_a_scenario_name_or_error_holds(text: str) -> None:
    broken = Result(scenario=text, path=Path("x.json"), error=f"boom {text}")
    failed = Result(scenario="s", path=Path("s.json"), checks=[Check(text, False, text, text)])
    root = ET.fromstring(junit([broken, failed], suite=text))  # noqa: S314 (XML this test just made)
    assert root.get("errors") == "1" and root.get("failures") == "1"


@pytest.mark.parametrize(
    "loose",
    [
        {"within_cap": "no"},
        {"one_copy_per_job": 0},
        {"max_job_downtime_seconds": float("inf")},
        {"max_job_downtime_seconds": "60"},
        {"never_say": [""]},
        {"always_say": ["   "]},
        {"resubmissions": "1"},
    ],
)
def test_a_loose_value_is_refused_rather_than_read_as_something_else(loose: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ExpectSpec.model_validate(loose)


def test_strict_values_as_a_scenario_file_writes_them_are_taken() -> None:
    spec = ExpectSpec.model_validate({"outcomes": ["recovered"], "within_cap": False, "max_job_downtime_seconds": 60, "never_say": ["x"]})
    assert spec.within_cap is False and spec.max_job_downtime_seconds == 60


def test_a_job_no_fault_hit_has_no_downtime_to_bound() -> None:
    untouched = {"job": "2", "label": "job 2 (other)", "fault_at": None, "downtime_seconds": None}
    report = _report(jobs=[*_report()["jobs"], untouched])
    assert _failed(ExpectSpec(max_job_downtime_seconds=20), report) == []


def test_the_clis_expect_check_knows_the_same_fields_as_the_sandbox_and_refuses_loose_values() -> None:
    from hyperpod_recovery_cli.drill import DrillUsageError, check_expect
    from hyperpod_recovery_cli.scenario_schema import EXPECT_KINDS as _EXPECT_FIELDS

    assert set(_EXPECT_FIELDS) == set(ExpectSpec.model_fields)
    check_expect({"outcomes": ["recovered"], "within_cap": False, "max_job_downtime_seconds": 60, "never_say": ["x"], "resubmissions": 1})
    for loose in ([], {"no_human_needed": "false"}, {"resubmissions": "1"}, {"outcome": ["recovered"]}, {"outcomes": ["recoverd"]},
                  {"max_job_downtime_seconds": float("inf")}, {"always_say": [" "]}, {"resubmissions": True}):  # fmt: skip
        with pytest.raises(DrillUsageError):
            check_expect(loose)
