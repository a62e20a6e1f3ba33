"""A dry run pages no one (issue 47 item 7): on a DryRun stack nothing reaches the pager (nor chat),
whatever the outcome, refused, stale and duplicate events included; the notification topic still
gets every message (docs/runbook.md, Notifications: the quiet row).

Every enumeration is taken from the code, so a new outcome or a new disposition is covered here
without anyone adding it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, get_args

import pytest

from hyperpod_recovery.domain.messages.severity import channels_of, severity_of
from hyperpod_recovery.domain.messages.verdict_notice import severity_of_notice
from hyperpod_recovery.models.job_recovery import RecordJobOutcomeInput
from hyperpod_recovery.models.node_recovery import RecordOutcomeInput, StepError
from hyperpod_recovery.models.records import IncidentRecord, JobFate
from hyperpod_recovery.steps.record_outcome import record_outcome
from hyperpod_recovery.vocabulary import OUTCOMES
from tests.contract.notifications_support import PAGERDUTY, resource_properties
from tests.contract.test_notification_bytes import TOPIC, Events, Sns, _notifier
from tests.fakes import CLUSTER, T0, FakeLedger, node_id

NODE_DISPOSITIONS = get_args(RecordOutcomeInput.model_fields["disposition"].annotation)
JOB_DISPOSITIONS = get_args(RecordJobOutcomeInput.model_fields["disposition"].annotation)
# (a job left with no copy pages whatever the outcome: domain/messages/advice.py needs_a_human)
ORPHAN = JobFate(job="1001", name="pretrain", fate="not_resubmitted", reason="no verified checkpoint")
# The refusals a workflow records: the Validate steps' errors (Record Rejection, Record Stale Event).
REFUSALS = {"rejected": "InvalidRecoveryRequest", "stale": "StaleEvent", "escalated": "ClusterCapReached"}


def _record(outcome: str, *, orphaned: bool) -> IncidentRecord:
    return IncidentRecord(
        incident_id="hpr-i-1",
        cluster=CLUSTER,
        outcome=outcome,  # type: ignore[arg-type]
        dry_run=False,  # as a refused or stale event's record is: its request never said "dry run"
        trigger=[],
        nodes=[node_id(1)],
        summary="s",
        recorded_at=T0,
        job_fates=[ORPHAN] if orphaned else [],
    )


@pytest.mark.parametrize("orphaned", [False, True], ids=["jobs-fine", "job-left-without-copy"])
@pytest.mark.parametrize("marked", [False, True], ids=["record-not-marked", "record-marked-dry-run"])
@pytest.mark.parametrize("outcome", OUTCOMES)
def test_given_any_outcome_on_a_dry_run_stack_then_only_the_topic_gets_it(outcome: str, marked: bool, orphaned: bool) -> None:
    # Given the record of any outcome, with or without the dry-run mark (a refused event's has none)
    record = _record(outcome, orphaned=orphaned).model_copy(update={"dry_run": marked})
    # When its channels are decided on a dry-run stack
    channels = channels_of(severity_of(record, stack_dry_run=True))
    # Then the topic alone gets it: no page, no chat
    assert channels == {"topic"}


def test_given_a_dry_run_stack_then_hyperpods_own_verdict_notices_never_page_either() -> None:
    assert channels_of(severity_of_notice(dry_run=True)) == {"topic"}


def _node_step(disposition: str, *, with_request: bool) -> RecordOutcomeInput:
    state: dict[str, Any] = {}
    if with_request:  # a request that parsed, not admitted (Validate Request refused it): dry_run unset
        state["request"] = {
            "cluster": CLUSTER,
            "node_ids": [node_id(1)],
            "triggers": [
                {"source": "hyperpod_node_health", "node_ids": [node_id(1)], "reason": "fault", "detected_at": "2026-03-11T09:00:00Z"}
            ],
            "detected_at": "2026-03-11T09:00:00Z",
        }
    error = StepError(Error=REFUSALS[disposition], Cause="refused") if disposition in REFUSALS else None
    return RecordOutcomeInput(execution_name="hpr-i-1", disposition=disposition, state=state, error=error)  # type: ignore[arg-type]


def _job_step(disposition: str, *, with_request: bool) -> RecordJobOutcomeInput:
    state: dict[str, Any] = {}
    if with_request:
        state["request"] = {
            "cluster": CLUSTER,
            "job_id": "1001",
            "source": "job_failed",
            "reason": "r",
            "detected_at": "2026-03-11T09:00:00Z",
        }
    error = StepError(Error=REFUSALS[disposition], Cause="refused") if disposition in REFUSALS else None
    return RecordJobOutcomeInput(execution_name="hpr-job-1001-1", disposition=disposition, state=state, error=error)  # type: ignore[arg-type]


CASES = [("node", d) for d in NODE_DISPOSITIONS] + [("job", d) for d in JOB_DISPOSITIONS]


@pytest.mark.parametrize("with_request", [False, True], ids=["unparsed", "parsed"])
@pytest.mark.parametrize(("workflow", "disposition"), CASES)
def test_given_a_dry_run_stack_when_any_disposition_is_recorded_then_nothing_reaches_the_pager_or_chat_and_the_topic_gets_it(
    workflow: str, disposition: str, with_request: bool
) -> None:
    # Given a DryRun stack with the topic, chat and PagerDuty all wired
    sns, events = Sns(), Events()
    step = _node_step(disposition, with_request=with_request) if workflow == "node" else _job_step(disposition, with_request=with_request)
    # When the workflow records the incident, whatever became of it (refused, stale, duplicate, escalated...)
    result = record_outcome(
        step,
        ledger=FakeLedger(),
        notifier=_notifier(sns, events),
        cluster=CLUSTER,
        execution_url="u",
        now=T0,
        escalation_hold=timedelta(hours=24),
        stack_dry_run=True,
    )
    # Then no page and no chat message went out, and the topic has the one message
    assert events.entries == [], result.outcome
    assert {topic: len(calls) for topic, calls in sns.published.items()} == {TOPIC: 1}, result.outcome


@pytest.mark.parametrize(("dry_run", "state"), [("true", "DISABLED"), ("false", "ENABLED")])
def test_given_a_dry_run_stack_then_its_alarms_page_no_one_and_an_armed_one_pages_them(dry_run: str, state: str) -> None:
    # (a refused event redriven from the intake DLQ lands there again: the DLQ's alarm must not page)
    assert resource_properties("AlarmPageRule", {**PAGERDUTY, "DryRun": dry_run})["State"] == state
