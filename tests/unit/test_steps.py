"""Step services with in-memory fakes: the decisions that touch state."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hyperpod_recovery.domain.intake.normalize import GuardedCluster
from hyperpod_recovery.errors import InvalidRecoveryRequest
from hyperpod_recovery.models.commands import CommandReply, CordonNodes, JobRef, JobSpec, ResubmitResult
from hyperpod_recovery.models.node_recovery import (
    Assessment,
    LockNodesInput,
    NodeTarget,
    RecordOutcomeInput,
    ReplaceNodesInput,
    ResubmitJobInput,
    ResumePlan,
    StepError,
    ValidateRequestInput,
    WorkflowState,
)
from hyperpod_recovery.models.requests import RecoveryRequest, Trigger
from hyperpod_recovery.steps.cordon_nodes import cordon_nodes
from hyperpod_recovery.steps.lock_nodes import lock_nodes
from hyperpod_recovery.steps.record_outcome import record_outcome
from hyperpod_recovery.steps.replace_nodes import replace_nodes
from hyperpod_recovery.steps.resubmit_job import resubmit_job
from hyperpod_recovery.steps.validate_request import validate_request
from tests.fakes import CLUSTER, CLUSTER_ARN, LIMITS, T0, FakeCluster, FakeLedger, FakeNotifier, FakeOrchestrator, compute_node, node_id

GUARDED = GuardedCluster(CLUSTER, CLUSTER_ARN)
TTL = timedelta(hours=6)


def _request(*numbers: int, dry_run: bool = False, incident: str = "inc-1") -> RecoveryRequest:
    nodes = [node_id(n) for n in numbers]
    return RecoveryRequest(
        cluster=CLUSTER,
        node_ids=nodes,
        dry_run=dry_run,
        detected_at=T0,
        incident_id=incident,
        received_at=T0,
        triggers=[Trigger(source="hyperpod_node_health", node_ids=list(nodes), reason="fault", detected_at=T0)],
    )


def _validate(payload: dict[str, Any], stack_dry_run: bool = False) -> RecoveryRequest:
    return validate_request(
        ValidateRequestInput(execution_name="exec-1", request=payload), guarded=GUARDED, stack_dry_run=stack_dry_run, limits=LIMITS, now=T0
    )


def test_manual_request_is_validated_into_the_internal_request() -> None:
    request = _validate({"cluster": CLUSTER_ARN, "node_ids": [node_id(1)], "reason": "drill"})
    assert request.incident_id == "exec-1" and request.received_at == T0
    assert request.cluster == CLUSTER  # the ARN is normalised to the name
    assert request.dry_run is False


def test_intake_request_is_accepted_as_it_is() -> None:
    request = _validate(_request(1, incident=None).model_dump(mode="json", exclude_none=True))  # type: ignore[arg-type]
    assert request.triggers[0].source == "hyperpod_node_health"


def test_request_for_another_cluster_is_invalid_and_names_the_cluster_field() -> None:
    with pytest.raises(InvalidRecoveryRequest, match=r"^cluster: 'other'"):
        _validate({"cluster": "other", "node_ids": [node_id(1)]})


def test_request_with_a_typo_is_invalid_and_names_the_field() -> None:
    with pytest.raises(InvalidRecoveryRequest, match=r"^dryrun: Extra inputs"):
        _validate({"cluster": CLUSTER, "node_ids": [node_id(1)], "dryrun": True})


@pytest.mark.parametrize(
    ("asked", "stack", "effective"), [(None, True, True), (False, True, True), (True, False, True), (None, False, False)]
)
def test_a_dry_run_stack_cannot_be_armed_by_a_request(asked: bool | None, stack: bool, effective: bool) -> None:
    payload: dict[str, Any] = {"cluster": CLUSTER, "node_ids": [node_id(1)]}
    if asked is not None:
        payload["dry_run"] = asked
    assert _validate(payload, stack_dry_run=stack).dry_run is effective


def test_second_incident_for_a_locked_node_does_not_proceed() -> None:
    ledger = FakeLedger()
    first = lock_nodes(LockNodesInput(execution_name="inc-1", request=_request(1)), ledger=ledger, lock_ttl=TTL, now=T0)
    second = lock_nodes(LockNodesInput(execution_name="inc-2", request=_request(1, incident="inc-2")), ledger=ledger, lock_ttl=TTL, now=T0)
    assert first.proceed and first.locked == [node_id(1)]
    assert not second.proceed and second.held_elsewhere == {node_id(1): "inc-1"}


def test_retried_lock_by_the_same_incident_succeeds() -> None:
    ledger = FakeLedger()
    step = LockNodesInput(execution_name="inc-1", request=_request(1))
    lock_nodes(step, ledger=ledger, lock_ttl=TTL, now=T0)
    assert lock_nodes(step, ledger=ledger, lock_ttl=TTL, now=T0).proceed


def test_expired_lock_is_taken_over() -> None:
    ledger = FakeLedger()
    lock_nodes(LockNodesInput(execution_name="inc-1", request=_request(1)), ledger=ledger, lock_ttl=TTL, now=T0)
    later = lock_nodes(
        LockNodesInput(execution_name="inc-2", request=_request(1, incident="inc-2")),
        ledger=ledger,
        lock_ttl=TTL,
        now=T0 + TTL + timedelta(seconds=1),
    )
    assert later.proceed


def _assessment(*numbers: int) -> Assessment:
    targets = [NodeTarget(node_id=node_id(n), instance_group="workers", slurm_node=f"ip-10-1-0-{n}", status="Running") for n in numbers]
    return Assessment(at=T0, orchestrator="slurm", node_recovery="None", targets=targets, proceed=True)


def test_retried_replace_does_not_call_batch_replace_again_for_started_nodes() -> None:
    # Given a replace step that already started node 1 (its response was lost, Lambda retried)
    cluster, ledger = FakeCluster([compute_node(1), compute_node(2)]), FakeLedger()
    step = ReplaceNodesInput(execution_name="inc-1", request=_request(1, 2), assessment=_assessment(1, 2))
    replace_nodes(step, cluster=cluster, ledger=ledger, first_check_after_seconds=30, deadline_seconds=2700, now=T0)
    # When the step runs again
    again = replace_nodes(step, cluster=cluster, ledger=ledger, first_check_after_seconds=30, deadline_seconds=2700, now=T0)
    # Then BatchReplace was called once, and both nodes are still being watched
    assert cluster.replace_calls == [[node_id(1), node_id(2)]]
    assert [r.initiation for r in again.replaced] == ["initiated", "initiated"]


def test_cordon_sends_one_typed_command_that_drains_tagged_with_the_incident_and_finds_the_jobs() -> None:
    from hyperpod_recovery.models.node_recovery import CordonNodesInput

    orchestrator = FakeOrchestrator()
    cordon_nodes(
        CordonNodesInput(execution_name="inc-1", task_token="tok", request=_request(7), assessment=_assessment(7)),
        orchestrator=orchestrator,
        now=T0,
    )
    command = orchestrator.dispatched[0].command
    assert isinstance(command, CordonNodes) and command.drain and command.nodes == ["ip-10-1-0-7"]
    # (its own id: an agent answers an id it has seen with its first answer, and an earlier version drained under ":drain")
    assert orchestrator.dispatched[0].command_id == "inc-1:cordon"
    assert command.reason.startswith("hyperpod-recovery:inc-1 ")
    assert orchestrator.dispatched[0].task_token == "tok" and orchestrator.answered == []


def _plan(job_id: str = "1001") -> ResumePlan:
    job = JobRef(job_id=job_id, name="llama")
    return ResumePlan(job=job, checkpoint={"uri": "s3://ckpt/llama/step-000003000/", "step": 3000})  # type: ignore[arg-type]


def test_a_job_is_resubmitted_once_even_when_two_incidents_touch_it() -> None:
    # Given the job already claimed for resubmission by incident inc-1
    ledger = FakeLedger()
    first, second = FakeOrchestrator(), FakeOrchestrator()
    resubmit_job(
        ResubmitJobInput(execution_name="inc-1", task_token="t1", request=_request(1), plan=_plan()),
        orchestrator=first,
        ledger=ledger,
        claim_ttl=TTL,
        now=T0,
    )
    # When a second incident (another node of the same job) wants to resubmit it
    resubmit_job(
        ResubmitJobInput(execution_name="inc-2", task_token="t2", request=_request(2, incident="inc-2"), plan=_plan()),
        orchestrator=second,
        ledger=ledger,
        claim_ttl=TTL,
        now=T0,
    )
    # Then only the first sends a resubmit command; the second answers its own token as already done
    assert len(first.dispatched) == 1 and second.dispatched == []
    assert second.answered[0][1].result.already_submitted


def test_retried_resubmission_after_the_job_was_submitted_reports_our_own_new_job() -> None:
    ledger = FakeLedger()
    ledger.claim_resubmission(CLUSTER, "1001", "inc-1", T0, TTL)
    ledger.complete_resubmission(CLUSTER, "1001", "inc-1", "1002")
    orchestrator = FakeOrchestrator()
    resubmit_job(
        ResubmitJobInput(execution_name="inc-1", task_token="t", request=_request(1), plan=_plan()),
        orchestrator=orchestrator,
        ledger=ledger,
        claim_ttl=TTL,
        now=T0,
    )
    ((_, reply),) = orchestrator.answered
    assert orchestrator.dispatched == [] and reply.result.new_job_id == "1002" and not reply.result.already_submitted


def _reply(new_job_id: str | None = "1002") -> CommandReply[ResubmitResult]:
    return CommandReply(
        command_id="c",
        type="resubmit_job",
        requested_at=T0,
        started_at=T0,
        completed_at=T0,
        result=ResubmitResult(old_job_id="1001", new_job_id=new_job_id),
    )


def _record(disposition: str, state: WorkflowState, error: StepError | None = None) -> tuple[FakeLedger, FakeNotifier, Any]:
    ledger, notifier = FakeLedger(), FakeNotifier()
    ledger.acquire_locks("inc-1", CLUSTER, [node_id(1)], T0, TTL)
    result = record_outcome(
        RecordOutcomeInput(execution_name="inc-1", disposition=disposition, state=state, error=error),  # type: ignore[arg-type]
        ledger=ledger,
        notifier=notifier,
        cluster=CLUSTER,
        escalation_hold=timedelta(hours=24),
        execution_url="https://console/x",
        now=T0,
    )
    return ledger, notifier, result


def _state_after_lock() -> WorkflowState:
    from hyperpod_recovery.models.node_recovery import LockResult

    return WorkflowState(request=_request(1), lock=LockResult(at=T0, locked=[node_id(1)], proceed=True))


def test_recovered_incident_releases_its_locks_and_notifies() -> None:
    state = _state_after_lock()
    state.resubmissions = [_reply()]
    ledger, notifier, result = _record("completed", state)
    assert result.outcome == "recovered"
    assert ledger.locks == {}
    assert ledger.incidents["inc-1"].outcome == "recovered"
    subject, body, attributes = notifier.published[0]
    assert subject.startswith("[hyperpod-recovery] llm-train: recovered") and attributes["outcome"] == "recovered"
    assert "https://console/x" in body


def test_escalated_incident_keeps_its_nodes_locked_for_a_human() -> None:
    error = StepError(Error="RejoinDeadlineExceeded", Cause='{"errorType": "RejoinDeadlineExceeded", "errorMessage": "1 node(s) not back"}')
    ledger, notifier, result = _record("escalated", _state_after_lock(), error)
    assert (result.outcome, result.error, result.cause) == ("escalated", "RejoinDeadlineExceeded", "1 node(s) not back")
    assert ledger.locks[(CLUSTER, node_id(1))] == ("inc-1", T0 + timedelta(hours=24))
    assert "Error: RejoinDeadlineExceeded" in notifier.published[0][1]


def test_completed_resubmission_is_recorded_on_the_job_claim() -> None:
    state = _state_after_lock()
    state.resubmissions = [_reply()]
    ledger = FakeLedger()
    ledger.claim_resubmission(CLUSTER, "1001", "inc-1", T0, TTL)
    record_outcome(
        RecordOutcomeInput(execution_name="inc-1", disposition="completed", state=state),
        ledger=ledger,
        notifier=FakeNotifier(),
        cluster=CLUSTER,
        escalation_hold=timedelta(0),
        execution_url="u",
        now=T0,
    )
    assert ledger.claim_resubmission(CLUSTER, "1001", "inc-2", T0, TTL).new_job_id == "1002"


def test_each_job_gets_a_checkpoint_or_a_reason_why_not() -> None:
    import json as _json

    from hyperpod_recovery.errors import CheckpointUnreadable
    from hyperpod_recovery.models.manifest import MANIFEST_SCHEMA
    from hyperpod_recovery.models.node_recovery import FindNewestCheckpointInput
    from hyperpod_recovery.steps.find_newest_checkpoint import find_newest_checkpoint
    from tests.fakes import FakeCheckpointStore

    class Unreadable(FakeCheckpointStore):
        def get(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
            if bucket == "locked-bucket":
                raise CheckpointUnreadable("AccessDenied")
            return super().get(bucket, key, max_bytes)

    reader = Unreadable()
    reader.put_object("ckpt", "llama/step-000000100/a", b"x")
    reader.put_object("ckpt", "llama/step-000000200/a", b"x")  # newer, never committed
    reader.put_object(
        "ckpt",
        "llama/step-000000100/manifest.json",
        _json.dumps(
            {
                "schema": MANIFEST_SCHEMA,
                "job": "llama",
                "step": 100,
                "created_at": "2026-03-14T09:00:00Z",
                "shards": [{"key": "a", "size": 1}],
            }
        ).encode(),
    )
    jobs = [
        JobSpec(job_id="1", name="llama", num_nodes=2, state="RUNNING", checkpoint_uri="s3://ckpt/llama"),
        JobSpec(job_id="2", name="auto", num_nodes=2, state="RUNNING", checkpoint_uri="s3://ckpt/auto", auto_resume=True),
        JobSpec(job_id="3", name="nowhere", num_nodes=2, state="RUNNING"),
        JobSpec(job_id="4", name="locked", num_nodes=2, state="RUNNING", checkpoint_uri="s3://locked-bucket/x"),
        JobSpec(job_id="5", name="empty", num_nodes=2, state="RUNNING", checkpoint_uri="s3://ckpt/empty"),
        JobSpec(job_id="6", name="climber", num_nodes=2, state="RUNNING", checkpoint_uri="s3://ckpt/a/../b"),
    ]
    plan = find_newest_checkpoint(FindNewestCheckpointInput(execution_name="inc-1", jobs=jobs), reader=reader, ledger=FakeLedger(), now=T0)

    assert [(p.job.job_id, p.checkpoint.step) for p in plan.resumable] == [("1", 100)]
    assert plan.resumable[0].rejected[0].startswith("step 200: no manifest.json")
    assert [j.job_id for j in plan.left_alone] == ["2"] and "auto-resume" in plan.left_alone[0].reason
    reasons = {j.job_id: j.reason for j in plan.unresumable}
    assert "no checkpoint location" in reasons["3"] and "AccessDenied" in reasons["4"] and "no verified checkpoint" in reasons["5"]
    assert reasons["6"].startswith("unusable checkpoint location: s3 URI 's3://ckpt/a/../b' has an empty, '.' or '..' path segment")
