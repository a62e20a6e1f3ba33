"""Every simulated drill reports what its golden report says (tests/golden/drills/, sandbox/golden.py),
and no message it sent contradicts its incident's record.

A change meant to keep behaviour (a refactor, a speed-up) must leave every drill's outcome, timeline,
resubmissions, notifications, metrics and API calls as they were. A change meant to alter them
rewrites the golden reports (`make golden`) and shows the difference in review.
"""

from __future__ import annotations

import difflib

import pytest

from sandbox.drills import check_drill
from sandbox.golden import comparable, golden_report, golden_text, scenarios
from sandbox.scenario import load_scenario
from tests.conftest import EVENTS
from tests.statemachine.conftest import DrillReports

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("scenario", scenarios())
def test_the_drill_reports_what_its_golden_report_says(scenario: str, drill_reports: DrillReports) -> None:
    # Given the drill's golden report
    expected = golden_report(scenario)
    assert expected is not None, f"no golden report for {scenario}: make golden (python tools/golden_reports.py {scenario})"
    # When the drill runs now (once a session: the other drill tests read the same run)
    actual = comparable(drill_reports(scenario))
    # Then nothing a human read contradicts its incident's record (sandbox/message_check.py)
    assert actual.get("message_contradictions", []) == [], actual["message_contradictions"]
    # Then every field is as it was
    changed = sorted(field for field in expected.keys() | actual.keys() if expected.get(field) != actual.get(field))
    if changed:
        diff = difflib.unified_diff(golden_text(expected).splitlines(), golden_text(actual).splitlines(), "golden", "now", lineterm="", n=2)
        pytest.fail(f"{scenario}: fields changed: {', '.join(changed)}\n" + "\n".join(list(diff)[:80]))


@pytest.mark.parametrize("scenario", scenarios())
def test_the_drill_holds_its_own_expect_block(scenario: str, drill_reports: DrillReports) -> None:
    # Given the scenario's expect block (or the implicit one), which `make drills` holds it to
    loaded = load_scenario(EVENTS / "drills" / f"{scenario}.json")
    # When its drill runs now (the same run the golden comparison reads)
    checks = check_drill(loaded, drill_reports(scenario))
    # Then every expectation holds: a golden report rewritten to match a regression does not hide it
    assert [check.line for check in checks if not check.ok] == []


def test_every_golden_report_belongs_to_a_drill() -> None:
    from sandbox.golden import GOLDEN

    assert sorted(path.stem for path in GOLDEN.glob("*.json")) == scenarios()
