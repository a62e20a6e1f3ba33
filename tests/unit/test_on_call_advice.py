"""An escalation's WHAT HAPPENS NEXT carries this incident's on-call commands with its real names,
and every ``hyperpod-recovery`` command any message shows is one the CLI accepts as written."""

from __future__ import annotations

import json
import re
import shlex
from datetime import timedelta

import pytest

from hyperpod_recovery.domain.messages.advice import RUNBOOK_ESCALATIONS, Deployment, next_steps
from hyperpod_recovery.models.records import IncidentRecord
from hyperpod_recovery_cli.app import _parser
from tests.conftest import ROOT
from tests.fakes import T0

COMMAND = re.compile(r"`(hyperpod-recovery [^`]+)`")
DEPLOYMENT = Deployment(stack="llm-train-recovery", ledger_table="llm-train-recovery-ledger")


def _escalated(**changes: object) -> IncidentRecord:
    record = IncidentRecord(
        incident_id="hpr-i-0abc-20261126T0200",
        cluster="llm-train",
        outcome="escalated",
        dry_run=False,
        trigger=["hyperpod_node_health"],
        nodes=["i-0abc", "i-0def"],
        hostnames=["ip-10-1-0-3", "ip-10-1-0-4"],
        error="RejoinDeadlineExceeded",
        cause="not back",
        summary="Escalated.",
        recorded_at=T0,
    )
    return record.model_copy(update=changes)


def _accepted(command: str) -> None:
    """The CLI's own parser takes the command as pasted (argparse exits 2 on anything it refuses)."""
    _parser().parse_args(shlex.split(command)[1:])


def test_given_an_escalation_that_keeps_its_locks_then_next_steps_name_show_release_hold_and_the_runbook_row() -> None:
    lines = next_steps(_escalated(), DEPLOYMENT, T0 + timedelta(hours=24))
    text = "\n".join(lines)
    assert "`hyperpod-recovery incidents show hpr-i-0abc-20261126T0200 --stack llm-train-recovery`" in text
    assert "`hyperpod-recovery locks release i-0abc i-0def --stack llm-train-recovery --reason 'what you did'`" in text
    assert "`hyperpod-recovery hold ip-10-1-0-3 --stack llm-train-recovery --reason 'why'`" in text
    assert f"Runbook: {RUNBOOK_ESCALATIONS} (row RejoinDeadlineExceeded)." in text
    for command in COMMAND.findall(text):
        _accepted(command)


def test_given_an_escalation_whose_locks_were_not_kept_then_no_release_is_offered() -> None:
    text = "\n".join(next_steps(_escalated(), DEPLOYMENT, None))
    assert "locks release" not in text and "incidents show" in text


def test_given_no_stack_name_then_no_on_call_command_is_shown_but_the_runbook_row_is() -> None:
    text = "\n".join(next_steps(_escalated(), Deployment(), T0))
    assert "hyperpod-recovery incidents" not in text and "locks release" not in text and "(row RejoinDeadlineExceeded)" in text


def test_the_runbook_anchor_is_a_heading_of_the_runbook() -> None:
    path, anchor = RUNBOOK_ESCALATIONS.split("#")
    headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text(), re.MULTILINE)
    slugs = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    assert anchor in slugs


GOLDEN = sorted((ROOT / "tests" / "golden" / "drills").glob("*.json"))


@pytest.mark.parametrize("report", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_every_hyperpod_recovery_command_a_drills_message_shows_is_one_the_cli_accepts(report: object) -> None:
    messages = json.loads(report.read_text()).get("notifications", [])  # type: ignore[attr-defined]
    for message in messages:
        for command in COMMAND.findall(message.get("message", "")):
            _accepted(command)


@pytest.mark.parametrize(
    ("outcome", "error", "row"), [("aborted", "OperatorStopped", "ExecutionAborted"), ("failed", "States.Runtime", "ExecutionFailed")]
)
def test_given_an_execution_that_ended_before_recording_then_the_runbook_row_is_the_executions_not_step_functions_error(
    outcome: str, error: str, row: str
) -> None:
    text = "\n".join(next_steps(_escalated(outcome=outcome, error=error), DEPLOYMENT, None))
    assert f"(row {row})" in text and f"(row {error})" not in text


def test_given_an_error_the_runbook_has_no_row_for_then_the_table_is_named_without_a_row() -> None:
    text = "\n".join(next_steps(_escalated(error="Lambda.Unknown"), DEPLOYMENT, None))
    assert f"Runbook: {RUNBOOK_ESCALATIONS}." in text and "(row Lambda.Unknown)" not in text


def test_every_row_an_escalation_can_name_is_a_row_of_the_runbooks_table() -> None:
    from hyperpod_recovery.domain.messages.advice import ERROR_MEANING, RUNBOOK_SHARED_ROWS

    table = (ROOT / "docs" / "runbook.md").read_text().split("## Escalations: the error says what happened", 1)[1].split("\n## ", 1)[0]
    named = {name for row in table.splitlines() if row.startswith("| `") for name in re.findall(r"`([A-Za-z.]+)`", row.split("|")[1])}
    assert set(ERROR_MEANING) | RUNBOOK_SHARED_ROWS | {"ExecutionAborted", "ExecutionFailed"} <= named


def test_given_a_node_another_incident_holds_then_the_release_names_only_this_incidents_nodes() -> None:
    from hyperpod_recovery.models.records import NodeFate

    fates = [
        NodeFate(node="ip-10-1-0-3", instance="i-0abc", fate="out_of_service", detail="left drained", held=True, acted=True),
        NodeFate(
            node="i-0def", instance="i-0def", fate="skipped", detail="locked_elsewhere: ip-10-1-0-4 is being recovered by incident other"
        ),
    ]
    text = "\n".join(next_steps(_escalated(node_fates=fates), DEPLOYMENT, T0))
    assert "locks release i-0abc --stack" in text and "i-0def --stack" not in text


# --- what an incident that ended half-way keeps; what a capped one left alone ----------------------
def test_given_a_stopped_incident_whose_record_lists_a_hostname_lock_key_then_no_command_names_a_lock_key() -> None:
    from hyperpod_recovery.models.records import NodeFate

    # (a record written before the fix listed the hostname's lock key among its nodes)
    fates = [NodeFate(node="ip-10-1-0-3", fate="unknown", detail="the recovery stopped in Wait For Rejoin")]
    record = _escalated(outcome="aborted", error="OperatorStopped", nodes=["host:ip-10-1-0-3", "i-0abc"], hostnames=["ip-10-1-0-3"])
    text = "\n".join(next_steps(record.model_copy(update={"node_fates": fates}), DEPLOYMENT, T0))
    assert "host:" not in text
    assert "`hyperpod-recovery locks release i-0abc ip-10-1-0-3 --stack llm-train-recovery --reason 'what you did'`" in text
    for command in COMMAND.findall(text):
        _accepted(command)


def test_given_a_stopped_incident_then_its_lock_line_says_why_the_nodes_stay_locked() -> None:
    from hyperpod_recovery.domain.messages.kept import KEPT_WHY

    text = "\n".join(next_steps(_escalated(outcome="aborted", error="OperatorStopped"), DEPLOYMENT, T0))
    assert f"stay locked until 2026-03-14 09:00 UTC: {KEPT_WHY}." in text


@pytest.mark.parametrize(("error", "when"), [("ClusterCapReached", "the cap has room"), ("CircuitBreakerOpen", "the breaker is reset")])
def test_given_a_capped_node_recovery_then_it_says_the_nodes_were_left_alone_and_how_to_recover_each(error: str, when: str) -> None:
    text = "\n".join(next_steps(_escalated(outcome="capped", error=error), DEPLOYMENT, None))
    assert "ip-10-1-0-3, ip-10-1-0-4 were left alone, not drained or cordoned, not replaced, not locked" in text
    assert f"once {when}" in text and "`hyperpod-recovery drill --stack llm-train-recovery --node i-0abc --live --yes`" in text
    assert "one node per command, so each stays under the cap: i-0abc, i-0def" in text
    for command in COMMAND.findall(text):
        _accepted(command)


def test_given_a_repeat_offender_then_no_left_alone_line_is_said_its_lock_is_kept() -> None:
    text = "\n".join(next_steps(_escalated(outcome="capped", error="RepeatOffender"), DEPLOYMENT, None))
    assert "left alone" not in text


def test_stop_says_what_it_keeps_until_when_why_and_the_release_that_works_as_printed() -> None:
    from hyperpod_recovery.domain.messages.kept import KEPT_WHY, stop_answer

    lines = stop_answer("oncall-1", "llm-train-recovery", {"i-0abc", "host:ip-10-1-0-3"}, T0)
    text = "\n".join(lines)
    assert f"It keeps the locks on i-0abc (ip-10-1-0-3) until 2026-03-14 09:00 UTC (EscalationHoldSeconds): {KEPT_WHY}." in text
    assert "`hyperpod-recovery locks release i-0abc ip-10-1-0-3 --stack llm-train-recovery --reason 'what you did'`" in text
    assert "releases what it holds" not in text
    for command in COMMAND.findall(text):
        _accepted(command)
    assert "no node lock" in "\n".join(stop_answer("oncall-1", "s", set(), None))


def test_the_refusal_under_a_running_incident_says_stopping_keeps_the_locks() -> None:
    from hyperpod_recovery.domain.messages.kept import still_running_refusal

    text = still_running_refusal("i-0abc", "oncall-1", "llm-train-recovery")
    assert "releases what it holds" not in text and "keeps its node locks" in text
    (command,) = COMMAND.findall(text)
    _accepted(command)
