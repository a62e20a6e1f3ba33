"""Exactly once, in every path: a claim is completed or given back whatever happened to the job,
one failed resubmission never hides the others, a replacement still coming up is never replaced
again, and what an incident says it did is what it did."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hyperpod_recovery.domain.record.incident import decide_outcome
from hyperpod_recovery.domain.record.node_incident import NODE_INCIDENT, summarize
from hyperpod_recovery.models.commands import CheckpointRef, CommandReply, JobRef, ResubmitResult
from hyperpod_recovery.models.node_recovery import (
    ApplySafetyPolicyInput,
    CheckpointPlan,
    RecordOutcomeInput,
    ResubmitFailure,
    ResumePlan,
    StepError,
    WorkflowState,
)
from hyperpod_recovery.steps.apply_safety_policy import apply_safety_policy
from hyperpod_recovery.steps.record_outcome import record_outcome
from tests.fakes import CLUSTER, T0, FakeLedger, FakeNotifier
from tests.unit.test_safety import POLICY, _assessment
from tests.unit.test_steps import _request, _state_after_lock

TTL = timedelta(hours=6)


def _reply(old: str, new: str | None, **flags: Any) -> CommandReply[ResubmitResult]:
    return CommandReply(
        command_id=f"inc-1:resubmit:{old}",
        type="resubmit_job",
        requested_at=T0,
        started_at=T0,
        completed_at=T0,
        result=ResubmitResult(old_job_id=old, new_job_id=new, **flags),
    )


def _plan(*jobs: str) -> CheckpointPlan:
    return CheckpointPlan(
        at=T0,
        resumable=[
            ResumePlan(
                job=JobRef(job_id=j, name=f"job-{j}"),
                checkpoint=CheckpointRef(uri=f"s3://b/{j}/step-000003000/", step=3000),
            )
            for j in jobs
        ],
    )


def _record(state: WorkflowState, ledger: FakeLedger, disposition: str = "completed") -> Any:
    notifier = FakeNotifier()
    result = record_outcome(
        RecordOutcomeInput(execution_name="inc-1", disposition=disposition, state=state),  # type: ignore[arg-type]
        ledger=ledger,
        notifier=notifier,
        cluster=CLUSTER,
        escalation_hold=timedelta(hours=24),
        execution_url="u",
        now=T0,
    )
    return result, notifier


def test_a_claim_slurm_made_moot_by_requeueing_the_job_is_given_back() -> None:
    # Given an incident that claimed job 1001, then found Slurm had requeued it itself
    ledger = FakeLedger()
    ledger.claim_resubmission(CLUSTER, "1001", "inc-1", T0, TTL)
    state = _state_after_lock().model_copy(
        update={"checkpoints": _plan("1001"), "resubmissions": [_reply("1001", "1001", already_submitted=True, restarted_by_slurm=True)]}
    )
    # When the incident is recorded
    _record(state, ledger)
    # Then the claim is gone: a later real failure of job 1001 (same id after a requeue) is handled
    assert ledger.resubmission_claim(CLUSTER, "1001") is None
    assert ledger.claim_resubmission(CLUSTER, "1001", "inc-later", T0 + timedelta(days=3), TTL).claimed


def test_one_failed_resubmission_does_not_hide_the_jobs_that_were_resubmitted() -> None:
    # Given two affected jobs: 1001 resubmitted as 1002, 2001 failed (the agent refused it)
    ledger = FakeLedger()
    for job in ("1001", "2001"):
        ledger.claim_resubmission(CLUSTER, job, "inc-1", T0, TTL)
    failure = ResubmitFailure(job_id="2001", failure=StepError(Error="InvalidCommand", Cause='{"errorMessage": "job 2001 is unresumable"}'))
    state = _state_after_lock().model_copy(
        update={"checkpoints": _plan("1001", "2001"), "resubmissions": [_reply("1001", "1002"), failure]}
    )
    # When the incident is recorded
    result, notifier = _record(state, ledger)
    # Then it escalates naming exactly what was and was not resubmitted, so nobody restarts 1001 twice
    assert (result.outcome, result.error) == ("escalated", "ResubmitFailed")
    assert (
        "job 1001 resubmitted as job 1002 from step 3000" in result.summary
        and "job 2001 NOT resubmitted: its resubmission failed" in result.summary
    )
    record = ledger.incidents["inc-1"]
    assert [(r.job, r.new_job_id) for r in record.resubmissions] == [("1001", "1002")]
    assert any(e.event == "resubmit failed" and "2001" in e.detail for e in record.timeline)
    # And 1001's claim names its resubmission while 2001's is given back for a human's restart
    assert ledger.resubmission_claim(CLUSTER, "1001").new_job_id == "1002" and ledger.resubmission_claim(CLUSTER, "2001") is None
    body = notifier.published[0][1]
    assert "job 1001 was resubmitted as job 1002 from step 3000 (its state not read): do not start another copy" in body
    assert "job 2001 was NOT resubmitted: its resubmission failed: InvalidCommand: job 2001 is unresumable" in body


def test_a_live_summary_never_says_dry_run() -> None:
    state = _state_after_lock().model_copy(
        update={
            "checkpoints": _plan("1001", "2001", "3001"),
            "resubmissions": [
                _reply("1001", None, already_submitted=True),  # another incident holds the claim, not completed yet
                _reply("2001", "2001", already_submitted=True, restarted_by_slurm=True),
                _reply("3001", "3002"),
            ],
        }
    )
    outcome, _, cause = decide_outcome(NODE_INCIDENT, RecordOutcomeInput(execution_name="inc-1", disposition="completed", state=state))
    text = summarize(state, outcome, cause)
    assert "dry run" not in text.lower()
    assert "job 1001 claimed for resubmission by another incident (no copy recorded yet)" in text
    assert "job 2001 requeued by Slurm" in text and "job 3001 resubmitted as job 3002" in text


def test_a_fault_on_a_replacement_still_provisioning_joins_the_recovery_of_its_node() -> None:
    # Given incident A replacing the node named ip-10-1-0-1 (it holds the logical node)
    ledger = FakeLedger()
    first = apply_safety_policy(
        ApplySafetyPolicyInput(execution_name="inc-a", request=_request(1), assessment=_assessment(1)),
        ledger=ledger,
        policy=POLICY,
        reservation_ttl=TTL,
        now=T0,
    )
    assert first.proceed
    # When HyperPod's health agent flags the replacement instance (a new id, the same hostname)
    replacement = _assessment(1).model_copy(
        update={"targets": [_assessment(1).targets[0].model_copy(update={"node_id": "i-0fffffffffffffff1", "status": "Pending"})]}
    )
    second = apply_safety_policy(
        ApplySafetyPolicyInput(execution_name="inc-b", request=_request(1, incident="inc-b"), assessment=replacement),
        ledger=ledger,
        policy=POLICY,
        reservation_ttl=TTL,
        now=T0 + timedelta(minutes=5),
    )
    # Then incident B does nothing to it and ends as a duplicate of A, saying so
    assert not second.proceed and [s.reason for s in second.skipped] == ["locked_elsewhere"]
    state = WorkflowState(request=_request(1, incident="inc-b"), assessment=second)
    outcome, _, _ = decide_outcome(NODE_INCIDENT, RecordOutcomeInput(execution_name="inc-b", disposition="completed", state=state))
    assert outcome == "duplicate" and "being recovered by incident inc-a" in summarize(state, outcome, None)
    assert ledger.nodes_in_recovery(CLUSTER, T0 + timedelta(minutes=5)) == {_assessment(1).targets[0].node_id}


def test_a_node_hyperpod_was_already_replacing_is_not_claimed_as_ours() -> None:
    from hyperpod_recovery.models.node_recovery import RejoinWatch, Replacement, WatchedNode

    watch = RejoinWatch(
        at=T0,
        started_at=T0,
        deadline=T0 + timedelta(hours=1),
        nodes=[WatchedNode(node_id=_assessment(1).targets[0].node_id, slurm_node="ip-10-1-0-1", initiation="already_in_progress")],
        next_wait_seconds=30,
    )
    replacement = Replacement(at=T0, calls=1, proceed=True, watch=watch)
    state = _state_after_lock().model_copy(update={"assessment": _assessment(1), "replacement": replacement})
    assert "already being replaced by HyperPod, not by this incident" in summarize(state, "recovered", None)
