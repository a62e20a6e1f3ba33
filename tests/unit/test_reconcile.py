"""Every end is an end: an execution stopped, timed out or crashed before Record Outcome is
recorded (aborted / failed), gives back what it held, and a human is told (Reconcile Execution)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hyperpod_recovery.errors import LedgerUnavailable
from hyperpod_recovery.models.events import ExecutionStatusChangeEvent, ExecutionStatusDetail
from hyperpod_recovery.models.records import IncidentRecord, Resubmission
from hyperpod_recovery.steps.reconcile_execution import reconcile_execution
from hyperpod_recovery.steps.settle import settle_holdings
from tests.conftest import load_event
from tests.fakes import CLUSTER, T0, FakeExecutionHistory, FakeLedger, FakeNotifier, node_id

TTL = timedelta(hours=6)
HOLD = timedelta(hours=24)
JOB_MACHINE = "arn:aws:states:us-west-2:111122223333:stateMachine:llm-train-job-recovery"
INCIDENT = "hpr-i-0391f86fa0fe0d465-20260314T0920"


def _detail(sample: str = "stepfunctions/execution_aborted.json", **changes: Any) -> ExecutionStatusDetail:
    event = ExecutionStatusChangeEvent.model_validate(load_event(sample))
    return event.detail.model_copy(update=changes)


def _holding_incident(ledger: FakeLedger, incident: str = INCIDENT) -> None:
    """An incident that locked its node, took a place under the cap and claimed a job, then died."""
    node = "i-0391f86fa0fe0d465"
    ledger.acquire_locks(incident, CLUSTER, [node], T0, TTL)
    ledger.reserve_capacity(CLUSTER, incident, [node], 1, T0, TTL, ["ip-10-1-0-7"])
    ledger.claim_resubmission(CLUSTER, "1001", incident, T0, TTL)


def _reconcile(detail: ExecutionStatusDetail, ledger: FakeLedger, notifier: FakeNotifier, now: Any = None, history: Any = None) -> Any:
    # By default its history reads whole and shows no resubmission (so no claim's outcome is unknown).
    history = history if history is not None else FakeExecutionHistory({detail.executionArn: []})
    return reconcile_execution(
        detail,
        ledger=ledger,
        notifier=notifier,
        cluster=CLUSTER,
        job_state_machine_arn=JOB_MACHINE,
        stack_dry_run=False,
        escalation_hold=HOLD,
        execution_url="https://console/x",
        now=now or T0 + timedelta(minutes=50),
        log_seconds=86_400,
        rejoin_deadline=timedelta(minutes=45),
        history=history,
    )


@pytest.mark.parametrize(
    ("sample", "status", "outcome", "error"),
    [
        ("stepfunctions/execution_aborted.json", "ABORTED", "aborted", "ExecutionAborted"),
        ("stepfunctions/execution_failed.json", "FAILED", "failed", "States.DataLimitExceeded"),
        ("stepfunctions/execution_failed.json", "TIMED_OUT", "failed", "States.DataLimitExceeded"),
    ],
)
def test_an_end_without_an_outcome_is_recorded_released_and_notified(sample: str, status: str, outcome: str, error: str) -> None:
    # Given an incident that held a node, a place under the cap and a job claim when it ended
    ledger, notifier = FakeLedger(), FakeNotifier()
    _holding_incident(ledger)
    # When its end reaches Reconcile Execution
    result = _reconcile(_detail(sample, status=status), ledger, notifier)
    # Then it is recorded with that outcome and the error that ended it
    record = ledger.incidents[INCIDENT]
    assert (result.action, record.outcome, record.error) == ("recorded", outcome, error)
    assert record.nodes == ["i-0391f86fa0fe0d465"] and record.hostnames == ["ip-10-1-0-7"]
    # And the cap place and the job claim are given back at once; the node stays locked for a human, for a bounded time
    now = T0 + timedelta(minutes=50)
    assert ledger.nodes_in_recovery(CLUSTER, now) == set() and ledger.resubmission_claim(CLUSTER, "1001") is None
    assert ledger.locks[(CLUSTER, "i-0391f86fa0fe0d465")] == (INCIDENT, now + HOLD)
    assert ledger.holdings(INCIDENT).empty
    # And a human is told what happened and what was released
    subject, body, attributes = notifier.published[0]
    assert outcome in subject and attributes["outcome"] == outcome and "ACTION NEEDED" in body and "place(s) under the cluster cap" in body
    # And the breaker's window counts it (it had passed the safety policy and was acting)
    assert [(e.incident, e.outcome) for e in ledger.recovery_log(CLUSTER)] == [(INCIDENT, outcome)]


def test_an_aborted_recovery_no_longer_shrinks_the_cap_for_the_next_fault() -> None:
    # Given a cap of one node, taken by a recovery a human then stopped mid-rejoin
    ledger = FakeLedger()
    _holding_incident(ledger)
    assert not ledger.reserve_capacity(CLUSTER, "next", [node_id(9)], 1, T0 + timedelta(minutes=50), TTL)
    # When its end is reconciled
    _reconcile(_detail(), ledger, FakeNotifier())
    # Then an unrelated fault 50 minutes later fits under the cap again
    assert ledger.reserve_capacity(CLUSTER, "next", [node_id(9)], 1, T0 + timedelta(minutes=50), TTL)


def test_an_aborted_recovery_keeps_the_place_of_a_replacement_in_flight_until_the_rejoin_deadline() -> None:
    # Given a cap of one node, taken by a recovery stopped while the replacement it initiated provisions
    ledger = FakeLedger()
    _holding_incident(ledger)
    ledger.mark_replacements_initiated(INCIDENT, ["i-0391f86fa0fe0d465"], T0)
    history = FakeExecutionHistory({_detail().executionArn: [("Replace Nodes", T0), ("Wait For Rejoin", T0 + timedelta(minutes=1))]})
    now = T0 + timedelta(minutes=5)
    # When its end is reconciled
    _reconcile(_detail(), ledger, FakeNotifier(), now=now, history=history)
    # Then that node still counts against the cap until the rejoin deadline from the end (it is still out), then expires
    deadline = _stopped_at() + timedelta(minutes=45)
    assert ledger.nodes_in_recovery(CLUSTER, deadline) == {"i-0391f86fa0fe0d465"}
    assert ledger.nodes_in_recovery(CLUSTER, deadline + timedelta(seconds=1)) == set()
    # And the incident holds nothing (nobody has to give it back), and the record says so
    record = ledger.incidents[INCIDENT]
    assert ledger.holdings(INCIDENT).empty and "still being replaced" in record.summary and "in Wait For Rejoin" in record.cause
    # And its phases are read from its history
    assert [p.name for p in record.phases] == ["replace", "wait_for_rejoin"]


def _stopped_at() -> datetime:
    stop = _detail().stopDate
    assert stop is not None
    return datetime.fromtimestamp(stop / 1000, UTC)


def test_a_reboot_in_flight_keeps_its_place_and_is_named_a_reboot() -> None:
    ledger = FakeLedger()
    _holding_incident(ledger)
    ledger.mark_replacements_initiated(INCIDENT, ["reboot:i-0391f86fa0fe0d465"], T0)
    _reconcile(_detail(), ledger, FakeNotifier())
    record = ledger.incidents[INCIDENT]
    assert "reboot of i-0391f86fa0fe0d465 had been initiated" in record.summary and "reboot:" not in record.summary
    assert ledger.nodes_in_recovery(CLUSTER, _stopped_at() + timedelta(minutes=45)) == {"i-0391f86fa0fe0d465"}


@pytest.mark.parametrize("fails", ["hold_capacity_until", "release_locks", "publish"])
def test_a_delivery_that_failed_half_way_is_finished_by_the_redelivery(fails: str) -> None:
    # Given an aborted incident with a replacement in flight, whose first reconcile fails half-way
    ledger, notifier = FakeLedger(), FakeNotifier()
    _holding_incident(ledger)
    ledger.mark_replacements_initiated(INCIDENT, ["i-0391f86fa0fe0d465"], T0)
    target = notifier if fails == "publish" else ledger
    original = getattr(target, fails)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise LedgerUnavailable("injected")

    setattr(target, fails, broken)
    with pytest.raises(LedgerUnavailable):
        _reconcile(_detail(), ledger, notifier)
    setattr(target, fails, original)
    # When SQS delivers the same end again, later
    result = _reconcile(_detail(), ledger, notifier, now=T0 + timedelta(hours=1))
    # Then it finishes the same way the first would have: the in-flight place kept (not released),
    # the node lock held for a human from the first attempt's time, and exactly one notification
    assert result.action == "settled" and ledger.incidents[INCIDENT].outcome == "aborted"
    assert ledger.nodes_in_recovery(CLUSTER, _stopped_at() + timedelta(minutes=45)) == {"i-0391f86fa0fe0d465"}
    assert ledger.locks[(CLUSTER, "i-0391f86fa0fe0d465")] == (INCIDENT, T0 + timedelta(minutes=50) + HOLD)
    assert ledger.holdings(INCIDENT).empty and len(notifier.published) == 1


def test_an_aborted_recovery_that_saw_its_nodes_back_gives_every_place_back() -> None:
    ledger = FakeLedger()
    _holding_incident(ledger)
    ledger.mark_replacements_initiated(INCIDENT, ["i-0391f86fa0fe0d465"], T0)
    history = FakeExecutionHistory({_detail().executionArn: [("Wait For Rejoin", T0), ("Resume Nodes", T0 + timedelta(minutes=12))]})
    _reconcile(_detail(), ledger, FakeNotifier(), history=history)
    assert ledger.nodes_in_recovery(CLUSTER, T0 + timedelta(minutes=50)) == set()


def test_an_unreadable_history_still_records_and_settles_but_keeps_the_claims() -> None:
    # Given the history cannot be read (FakeExecutionHistory without the execution answers None)
    ledger = FakeLedger()
    _holding_incident(ledger)
    result = _reconcile(_detail(), ledger, FakeNotifier(), history=FakeExecutionHistory())
    # Then the end is recorded all the same, with no phases beyond detection
    assert result.action == "recorded" and ledger.holdings(INCIDENT).empty
    assert [p.name for p in ledger.incidents[INCIDENT].phases] in ([], ["detect"])
    # And a job it claimed may have been resubmitted: its claim is kept (until it expires), not given back
    claim = ledger.resubmission_claim(CLUSTER, "1001")
    assert (
        claim is not None
        and claim.incident_id == INCIDENT
        and "kept the resubmission claim(s) of job(s) 1001" in ledger.incidents[INCIDENT].summary
    )


def test_a_resubmission_asked_for_and_never_answered_keeps_its_claim() -> None:
    # Given the history shows Resubmit Job scheduled for job 1001 and no answer (the execution stopped meanwhile)
    ledger = FakeLedger()
    _holding_incident(ledger)
    arn = _detail().executionArn
    _reconcile(_detail(), ledger, FakeNotifier(), history=FakeExecutionHistory({arn: []}, asked={arn: {"1001"}}))
    # Then its claim stays (the agent may have run sbatch), and the human is told to look before restarting
    assert ledger.resubmission_claim(CLUSTER, "1001") is not None and ledger.holdings(INCIDENT).empty
    assert "job 1001: a resubmission was asked for and its answer is lost" in ledger.incidents[INCIDENT].summary
    assert [(f.job, f.fate) for f in ledger.incidents[INCIDENT].job_fates] == [("1001", "copy_unknown")]


def test_a_job_stopped_at_once_whose_re_creation_never_came_is_told_stopped_and_its_claim_given_back() -> None:
    # Given an EKS job stopped at once for its re-creation after the rejoin (a stop only, answered), and the
    # execution stopped during the wait for the rejoin, before the re-creation was asked
    ledger = FakeLedger()
    _holding_incident(ledger)
    arn = _detail().executionArn
    _reconcile(_detail(), ledger, FakeNotifier(), history=FakeExecutionHistory({arn: []}, stopped={arn: {"1001"}}))
    # Then the record says it stays stopped and no copy was made (a human starts it), and its claim is given back
    (fate,) = ledger.incidents[INCIDENT].job_fates
    assert (fate.job, fate.fate) == ("1001", "not_resubmitted") and fate.reason.startswith("it was stopped (suspended) at once and stays")
    assert ledger.resubmission_claim(CLUSTER, "1001") is None


def test_a_history_that_is_throttled_makes_the_end_come_back_later() -> None:
    from hyperpod_recovery.errors import HistoryUnavailable

    class Throttled(FakeExecutionHistory):
        def resubmissions(self, execution_arn: str) -> Any:
            raise HistoryUnavailable("ThrottlingException")

    ledger = FakeLedger()
    _holding_incident(ledger)
    with pytest.raises(HistoryUnavailable):
        _reconcile(_detail(), ledger, FakeNotifier(), history=Throttled({_detail().executionArn: []}))
    # Nothing was settled blind: the claim and the holdings wait for the redelivery
    assert ledger.resubmission_claim(CLUSTER, "1001") is not None and not ledger.holdings(INCIDENT).empty


def test_a_redelivered_end_changes_nothing_and_notifies_once() -> None:
    ledger, notifier = FakeLedger(), FakeNotifier()
    _holding_incident(ledger)
    _reconcile(_detail(), ledger, notifier)
    again = _reconcile(_detail(), ledger, notifier)
    assert again.action == "settled" and len(notifier.published) == 1


def test_an_incident_that_recorded_its_end_is_only_settled() -> None:
    # Given an escalated incident whose Record Outcome saved the record and then died before releasing
    ledger, notifier = FakeLedger(), FakeNotifier()
    _holding_incident(ledger)
    record = IncidentRecord(
        incident_id=INCIDENT,
        cluster=CLUSTER,
        outcome="escalated",
        dry_run=False,
        trigger=["hyperpod_node_health"],
        nodes=["i-0391f86fa0fe0d465"],
        summary="Escalated",
        recorded_at=T0,
        resubmissions=[Resubmission(job="1001", job_name="llama", new_job_id="1002", checkpoint_step=3000, checkpoint_uri="s3://b/p/")],
    )
    ledger.save_incident(record)
    # When the execution's failed end arrives (escalations end in a Fail state by design)
    result = _reconcile(_detail("stepfunctions/execution_failed.json", error="RejoinDeadlineExceeded"), ledger, notifier)
    # Then the record stays as it was, nobody is paged twice, and what it held is settled:
    # the job it did resubmit keeps its completed claim, the cap place is given back
    assert result.action == "settled" and ledger.incidents[INCIDENT] == record and notifier.published == []
    assert ledger.resubmission_claim(CLUSTER, "1001").new_job_id == "1002"
    assert ledger.nodes_in_recovery(CLUSTER, T0) == set() and ledger.holdings(INCIDENT).empty


def test_an_end_that_held_nothing_is_recorded_as_holding_nothing() -> None:
    ledger, notifier = FakeLedger(), FakeNotifier()
    result = _reconcile(_detail(input="not json"), ledger, notifier)
    record = ledger.incidents[INCIDENT]
    assert result.action == "recorded" and "released nothing" in record.summary and record.nodes == []


def test_a_running_or_succeeded_execution_is_not_reconciled() -> None:
    ledger, notifier = FakeLedger(), FakeNotifier()
    assert _reconcile(_detail(status="SUCCEEDED"), ledger, notifier).action == "ignored"
    assert ledger.incidents == {} and notifier.published == []


def test_a_job_recovery_end_is_recorded_as_a_job_incident() -> None:
    ledger, notifier = FakeLedger(), FakeNotifier()
    job_request = {"cluster": CLUSTER, "job_id": "1001", "source": "manual", "reason": "drill", "detected_at": T0.isoformat()}
    _reconcile(_detail(stateMachineArn=JOB_MACHINE, input=json.dumps(job_request)), ledger, notifier)
    record = ledger.incidents[INCIDENT]
    assert (record.workflow, record.job_id, record.trigger) == ("job", "1001", ["manual"])


def test_settling_completes_what_was_resubmitted_and_gives_back_every_other_claim() -> None:
    # Given an incident that claimed two jobs and resubmitted one of them
    ledger = FakeLedger()
    ledger.claim_resubmission(CLUSTER, "1", "inc", T0, TTL)
    ledger.claim_resubmission(CLUSTER, "2", "inc", T0, TTL)
    # When it settles
    settle_holdings(ledger, "inc", resubmitted={"1": "11"}, hold_locks_until=None, now=T0)
    # Then job 1's claim names its resubmission, and job 2 is free for the next failure
    assert ledger.resubmission_claim(CLUSTER, "1").new_job_id == "11" and ledger.resubmission_claim(CLUSTER, "2") is None


def _seen(job: str, new_job_id: str | None, *, step: int = 2000, dry_run: bool = False, **result: Any) -> Any:
    from hyperpod_recovery.models.commands import CommandReply, ResubmitResult
    from hyperpod_recovery.models.node_recovery import ResumePlan
    from hyperpod_recovery.ports import ResubmissionSeen

    plan = ResumePlan.model_validate(
        {"job": {"job_id": job, "name": "llama"}, "checkpoint": {"uri": f"s3://ckpt/llama/step-{step:09d}/", "step": step}}
    )
    reply = CommandReply[ResubmitResult].model_validate(
        {
            "command_id": f"{INCIDENT}:resubmit:{job}",
            "type": "resubmit_job",
            "requested_at": T0 + timedelta(seconds=10),
            "completed_at": T0 + timedelta(seconds=12),
            "dry_run": dry_run,
            "result": {"old_job_id": job, "new_job_id": new_job_id, **result},
        }
    )
    return ResubmissionSeen(plan=plan, reply=reply)


@pytest.mark.parametrize(
    ("seen", "completed"),
    [
        ([_seen("1001", "1003")], {"1001": "1003"}),  # resubmitted at once, then stopped in the wait
        ([], {}),  # stopped before any resubmission
        ([_seen("1001", None)], {}),  # the agent answered without a job id
        ([_seen("1001", "1003", dry_run=True)], {}),
        ([_seen("1001", "1001", restarted_by_slurm=True)], {}),  # Slurm requeued it itself: nothing of ours
        ([_seen("1001", "0999", already_submitted=True, submitted_by="another")], {}),
    ],
)
def test_a_job_resubmitted_before_the_end_keeps_its_claim_and_is_named_in_the_record(seen: list[Any], completed: dict[str, str]) -> None:
    # Given an incident that claimed job 1001, maybe resubmitted it at once, and was stopped in the wait
    ledger, notifier = FakeLedger(), FakeNotifier()
    _holding_incident(ledger)
    arn = _detail().executionArn
    history = FakeExecutionHistory({arn: [("Resubmit Jobs Now", T0), ("Wait For Rejoin", T0 + timedelta(minutes=1))]}, {arn: seen})
    # When its end is reconciled
    _reconcile(_detail(), ledger, notifier, history=history)
    record = ledger.incidents[INCIDENT]
    claim = ledger.resubmission_claim(CLUSTER, "1001")
    if completed:
        # Then the claim is completed with the new job (a second incident will not restart the job again)
        assert claim is not None and claim.new_job_id == "1003" and ledger.holdings(INCIDENT).empty
        # And the record and the notification say the job runs again as its copy, not to resubmit it by hand
        assert [(r.job, r.new_job_id, r.checkpoint_step) for r in record.resubmissions] == [("1001", "1003", 2000)]
        assert "job 1001 (llama) resubmitted as job 1003 from step 2000" in record.summary
        assert "do not start another copy" in notifier.published[0][1]
        assert "resubmission claim" not in record.summary
        assert any(e.event == "job resubmitted" and e.at == T0 + timedelta(seconds=12) for e in record.timeline)
        assert "1001 -> 1003" in notifier.published[0][1]
    else:
        # Then the claim is given back, as for an end before any resubmission
        assert claim is None and record.resubmissions == [] and "the resubmission claim(s) of job(s) 1001" in record.summary
