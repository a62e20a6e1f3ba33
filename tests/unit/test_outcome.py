"""How a NodeRecovery incident ended: outcome, timeline, phases, notification (domain/record/incident.py
with domain/record/node_incident.py's table)."""

from __future__ import annotations

from datetime import timedelta

from hyperpod_recovery.domain.messages.notification import notification
from hyperpod_recovery.domain.record.incident import conclude, decide_outcome
from hyperpod_recovery.domain.record.node_incident import NODE_INCIDENT
from hyperpod_recovery.models.commands import CheckpointRef, CommandReply, CordonResult, JobsOnNodesResult, JobSpec
from hyperpod_recovery.models.node_recovery import (
    Assessment,
    CheckpointPlan,
    NodeTarget,
    RecordOutcomeInput,
    ReplaceFailure,
    SkippedNode,
    StepError,
    UnresumableJob,
    WorkflowState,
)
from hyperpod_recovery.models.requests import RecoveryRequest, Trigger
from tests.fakes import T0, node_id


def _state(**parts) -> WorkflowState:  # type: ignore[no-untyped-def]
    request = RecoveryRequest(
        cluster="llm-train",
        node_ids=[node_id(1)],
        detected_at=T0,
        received_at=T0 + timedelta(seconds=5),
        incident_id="inc-1",
        triggers=[Trigger(source="hyperpod_node_health", node_ids=[node_id(1)], reason="XID 79", detected_at=T0)],
        dry_run=parts.pop("dry_run", False),
    )
    return WorkflowState(request=request, **parts)


def _decide(disposition: str = "completed", error: StepError | None = None, **parts):  # type: ignore[no-untyped-def]
    step = RecordOutcomeInput(execution_name="inc-1", disposition=disposition, state=_state(**parts), error=error)  # type: ignore[arg-type]
    return decide_outcome(NODE_INCIDENT, step)


def _assessment(skipped: list[SkippedNode] | None = None, targets: int = 1) -> Assessment:
    nodes = [
        NodeTarget(node_id=node_id(n), instance_group="workers", slurm_node=f"ip-10-1-0-{n}", status="Running")
        for n in range(1, targets + 1)
    ]
    return Assessment(
        at=T0 + timedelta(seconds=6), orchestrator="slurm", node_recovery="None", targets=nodes, skipped=skipped or [], proceed=bool(nodes)
    )


def test_clean_run_is_recovered() -> None:
    assert _decide(assessment=_assessment()) == ("recovered", None, None)


def test_dry_run_is_reported_as_dry_run() -> None:
    assert _decide(assessment=_assessment(), dry_run=True)[0] == "dry_run"


def test_caught_error_escalates_with_the_lambda_error_message() -> None:
    error = StepError(Error="HyperPodApiError", Cause='{"errorType": "HyperPodApiError", "errorMessage": "AccessDenied", "trace": []}')
    assert _decide("escalated", error) == ("escalated", "HyperPodApiError", "AccessDenied")


def test_agent_timeout_says_the_agent_did_not_answer() -> None:
    _, error, cause = _decide("escalated", StepError(Error="States.Timeout", Cause=None))
    assert error == "States.Timeout" and "controller agent" in (cause or "")


def test_unhealthy_controller_escalates_even_if_the_workers_were_recovered() -> None:
    skipped = [SkippedNode(node_id=node_id(9), reason="controller", detail="controller node in group 'controller'")]
    assert _decide(assessment=_assessment(skipped))[:2] == ("escalated", "ProtectedNodeUnhealthy")


def test_nothing_actionable_and_nothing_protected_is_rejected_not_paged() -> None:
    skipped = [SkippedNode(node_id=node_id(1), reason="not_found", detail="not in cluster")]
    outcome, error, cause = _decide(assessment=_assessment(skipped, targets=0))
    assert (outcome, error) == ("rejected", "NoActionableNodes") and "not in cluster" in (cause or "")


def test_every_problem_is_listed_and_the_most_severe_names_the_error() -> None:
    from hyperpod_recovery.models.node_recovery import Replacement

    replacement = Replacement.model_validate(
        {
            "at": T0,
            "failed": [ReplaceFailure(node_id=node_id(2), error_code="InternalServerError").model_dump()],
            "calls": 1,
            "proceed": False,
            "watch": {"at": T0, "started_at": T0, "deadline": T0, "nodes": [], "next_wait_seconds": 0},
        }
    )
    checkpoints = CheckpointPlan(at=T0, unresumable=[UnresumableJob(job_id="1001", name="llama", reason="no checkpoint")])
    outcome, error, cause = _decide(assessment=_assessment(), replacement=replacement, checkpoints=checkpoints)
    assert (outcome, error) == ("escalated", "ReplaceNotInitiated")
    assert "InternalServerError" in (cause or "") and "job 1001" in (cause or "")


def _full_state() -> WorkflowState:
    job = JobSpec(job_id="1001", name="llama", num_nodes=16, state="RUNNING", checkpoint_uri="s3://ckpt/llama")
    at = T0 + timedelta(seconds=10)
    return _state(
        assessment=_assessment(),
        cordon=CommandReply(
            command_id="c",
            type="drain_nodes",
            requested_at=at,
            started_at=at,
            completed_at=at + timedelta(seconds=2),
            result=CordonResult(drained=["ip-10-1-0-1"]),  # an earlier version's drain, its jobs found apart
        ),
        jobs=CommandReply(
            command_id="j",
            type="jobs_on_nodes",
            requested_at=at + timedelta(seconds=2),
            started_at=at,
            completed_at=at + timedelta(seconds=4),
            result=JobsOnNodesResult(jobs=[job]),
        ),
        checkpoints=CheckpointPlan(
            at=at + timedelta(seconds=5),
            resumable=[
                {
                    "job": {"job_id": job.job_id, "name": job.name},
                    "checkpoint": CheckpointRef(uri="s3://ckpt/llama/step-000003000/", step=3000),
                }
            ],
        ),  # type: ignore[list-item]
    )


def test_incident_record_has_an_ordered_timeline_and_phases() -> None:
    state = _full_state()
    step = RecordOutcomeInput(execution_name="inc-1", disposition="completed", state=state)
    result, record, _ = conclude(NODE_INCIDENT, step, cluster="llm-train", now=T0 + timedelta(seconds=20))
    assert result.outcome == record.outcome == "recovered" and result.summary == record.summary
    events = [e.event for e in record.timeline]
    assert events == [
        "fault detected",
        "event received",
        "nodes assessed",
        "nodes cordoned",
        "affected jobs found",
        "checkpoint chosen",
        "outcome: recovered",
    ]
    assert [e.at for e in record.timeline] == sorted(e.at for e in record.timeline)
    assert {p.name for p in record.phases} >= {"detect", "assess", "cordon", "find_jobs", "record"}
    assert record.agent_seconds == 4.0
    assert record.jobs[0]["job_id"] == "1001"


def test_given_the_jobs_found_by_the_cordon_then_the_record_tells_both_from_one_answer() -> None:
    # Given this version's Cordon Nodes answer (drain and jobs), as Forget Job Details left it raw
    at = T0 + timedelta(seconds=10)
    job = JobSpec(job_id="1001", name="llama", num_nodes=16, state="RUNNING", checkpoint_uri="s3://ckpt/llama")
    raw = {
        "cordon": {
            "command_id": "inc-1:cordon", "type": "cordon_nodes", "requested_at": at.isoformat(),
            "completed_at": (at + timedelta(seconds=2)).isoformat(),
            "result": {"drained": ["ip-10-1-0-1"], "already_drained": [], "jobs": [job.model_dump(mode="json")], "omitted": 0},
        },
    }  # fmt: skip
    state = WorkflowState.lenient(raw).model_copy(update={"request": _state().request, "assessment": _assessment()})
    # Then the jobs are where every reader looks, from the same answer, and no separate phase is invented
    assert state.jobs is not None and state.jobs_found_by_cordon and [j.job_id for j in state.jobs.result.jobs] == ["1001"]
    step = RecordOutcomeInput(execution_name="inc-1", disposition="completed", state=state)
    _, record, _ = conclude(NODE_INCIDENT, step, cluster="llm-train", now=T0 + timedelta(seconds=20))
    events = [e.event for e in record.timeline]
    assert events.index("nodes cordoned") < events.index("affected jobs found")
    assert "find_jobs" not in {p.name for p in record.phases} and "cordon" in {p.name for p in record.phases}
    assert record.agent_seconds == 2.0 and record.jobs[0]["job_id"] == "1001"


def test_notification_subject_fits_sns_and_names_cluster_outcome_and_nodes() -> None:
    state = _full_state()
    error = StepError(Error="RejoinDeadlineExceeded", Cause="node not back")
    step = RecordOutcomeInput(execution_name="inc-1", disposition="escalated", state=state, error=error)
    _, record, _ = conclude(NODE_INCIDENT, step, cluster="llm-train", now=T0)
    record.hostnames = [f"ip-10-3-0-{n}" for n in range(1, 40)]
    subject, body = notification(record, "https://console/exec")
    assert len(subject) <= 100 and subject.startswith("[hyperpod-recovery] llm-train: ESCALATED RejoinDeadlineExceeded ip-10-3-0-1, ")
    assert "ACTION NEEDED" in body and "Error: RejoinDeadlineExceeded" in body and body.endswith("https://console/exec")
