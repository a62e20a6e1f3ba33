"""JobRecovery's decisions and steps: classify the failure, plan the restart (claim, budget,
backoff, crash loop), wait for another incident, record the outcome. Fakes only (tests/fakes.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from hyperpod_recovery.domain.intake.execution_names import job_execution_name, node_execution_name
from hyperpod_recovery.domain.intake.normalize import GuardedCluster
from hyperpod_recovery.domain.jobs.job_failure import (
    RestartPolicy,
    classify_failure,
    plan_restart,
    watch_other_recovery,
)
from hyperpod_recovery.domain.policy.safety import SafetyPolicy
from hyperpod_recovery.domain.record.incident import decide_outcome, submitted_here
from hyperpod_recovery.domain.record.job_incident import JOB_INCIDENT
from hyperpod_recovery.errors import (
    CrashLoopDetected,
    InvalidRecoveryRequest,
    JobSpecUnavailable,
    NodeRecoveryEscalated,
    NodeRecoveryNotFinished,
    NoVerifiedCheckpoint,
    RestartBudgetExhausted,
)
from hyperpod_recovery.models.cluster import ClusterNode
from hyperpod_recovery.models.commands import CheckpointRef, CommandReply, JobRef, JobSpec, JobSpecResult, NodeStatus, ResubmitResult
from hyperpod_recovery.models.job_events import JobFailedDetail
from hyperpod_recovery.models.job_recovery import (
    CheckJobNodesInput,
    FailureClassification,
    JobWorkflowState,
    OtherRecoveryWatch,
    RecordJobOutcomeInput,
    RestartDecision,
    RestartEntry,
    ValidateJobRequestInput,
)
from hyperpod_recovery.models.node_recovery import CheckpointPlan, ResumePlan, StepError, UnresumableJob
from hyperpod_recovery.models.records import IncidentRecord, ResubmissionClaim
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.check_job_nodes import check_job_nodes
from hyperpod_recovery.steps.plan_job_restart import lineage_root_of
from hyperpod_recovery.steps.record_outcome import record_outcome
from hyperpod_recovery.steps.validate_job_request import validate_job_request
from tests.fakes import CLUSTER, CLUSTER_ARN, LIMITS, T0, FakeLedger, FakeNotifier, FakeOrchestrator, node_id

POLICY = RestartPolicy(budget=3, window_seconds=86_400, backoff_seconds=60, max_backoff_seconds=900, crash_loop_repeats=2)
SAFETY = SafetyPolicy(
    max_percent=20,
    max_nodes=64,
    breaker_max_recoveries=20,
    breaker_max_failures=3,
    breaker_window_seconds=3600,
    offender_max_recoveries=3,
    offender_window_seconds=86_400,
)
NODES = ["ip-10-1-0-1", "ip-10-1-0-2"]
URI = "s3://ckpt/llama/"


def _failure(state: str = "FAILED", **changes: Any) -> JobFailedDetail:
    values: dict[str, Any] = {
        "cluster_name": CLUSTER,
        "job_id": "8",
        "name": "llama",
        "nodes": NODES,
        "state": state,
        "reason": "NonZeroExitCode" if state == "FAILED" else "NodeDown",
        "exit_code": 1 if state == "FAILED" else 0,
        "ended_at": T0,
        "checkpoint_uri": URI,
        "event_key": f"{CLUSTER}:8:{int(T0.timestamp())}",
    }
    return JobFailedDetail(**{**values, **changes})


def _request(failure: JobFailedDetail | None = None, *, dry_run: bool = False, source: str = "job_failed") -> JobRecoveryRequest:
    return JobRecoveryRequest(
        cluster=CLUSTER,
        job_id="8",
        source=source,  # type: ignore[arg-type]
        reason="job 8 failed",
        detected_at=T0,
        failure=failure,
        dry_run=dry_run,
        incident_id="hpj-8",
        received_at=T0,
    )


def _job(state: str = "FAILED", **changes: Any) -> JobSpec:
    return JobSpec(
        **{
            "job_id": "8",
            "name": "llama",
            "num_nodes": 2,
            "nodes": NODES,
            "state": state,
            "checkpoint_uri": URI,
            **changes,
        }
    )


def _hyperpod(status: str = "Running") -> list[ClusterNode]:
    return [
        ClusterNode(
            node_id=node_id(i),
            instance_group="workers",
            status=status if i == 2 else "Running",
            private_dns_hostname=f"{name}.ec2.internal",
        )
        for i, name in enumerate(NODES, start=1)
    ]


def _slurm(state: str = "idle", flags: tuple[str, ...] = (), reason: str = "") -> list[NodeStatus]:
    return [NodeStatus(name=NODES[0], state="idle"), NodeStatus(name=NODES[1], state=state, flags=list(flags), reason=reason)]


def _classify(
    request: JobRecoveryRequest, job: JobSpec | None, slurm: list[NodeStatus] | None = None, hyperpod: list[ClusterNode] | None = None
):  # type: ignore[no-untyped-def]
    return classify_failure(
        request, job, slurm if slurm is not None else _slurm(), hyperpod if hyperpod is not None else _hyperpod(), "hpj-8", T0
    )


# --- classify ------------------------------------------------------------------------------------
def test_failure_on_healthy_nodes_is_an_application_failure() -> None:
    result = _classify(_request(_failure()), _job())
    assert result.kind == "application" and not result.recover_nodes and result.jobs == [_job()]


@pytest.mark.parametrize(
    ("slurm", "hyperpod", "why"),
    [
        (_slurm("down"), _hyperpod(), "Slurm state down"),
        (_slurm("idle", ("NOT_RESPONDING",)), _hyperpod(), "NOT_RESPONDING"),
        (_slurm("idle", ("DRAIN",), "Action:Replace"), _hyperpod(), "drained for repair"),
        (_slurm(), _hyperpod("Failure"), "HyperPod status Failure"),
    ],
    ids=["slurm-down", "not-responding", "hyperpod-drain-for-repair", "hyperpod-failure"],
)
def test_an_unhealthy_node_makes_it_node_caused_and_only_that_node_is_recovered(
    slurm: list[NodeStatus], hyperpod: list[ClusterNode], why: str
) -> None:
    result = _classify(_request(_failure()), _job(), slurm, hyperpod)
    assert result.kind == "node_caused" and why in result.reason
    assert result.recover_nodes and result.node_request is not None
    assert result.node_request.node_ids == [node_id(2)] and result.node_request.triggers[0].source == "job_failed"
    assert result.node_execution_name == "hpj-8-nodes"


def test_a_node_drained_by_a_human_makes_it_node_caused_but_is_never_replaced_by_us() -> None:
    # Replacing a node an operator drained for maintenance would make things worse; the job is
    # still restarted once (outside the application budget), and Slurm keeps it off that node.
    result = _classify(_request(_failure()), _job(), _slurm("idle", ("DRAIN",), "maintenance: swap NIC"))
    assert result.kind == "node_caused" and "drained by someone else (maintenance: swap NIC)" in result.reason
    assert not result.recover_nodes and result.faulty_nodes[0].ours_to_repair is False


def test_node_fail_with_every_node_healthy_again_is_node_caused_without_a_node_recovery() -> None:
    result = _classify(_request(_failure("NODE_FAIL")), _job("NODE_FAIL"))
    assert result.kind == "node_caused" and not result.recover_nodes and result.node_request is None
    assert "every node looks healthy now" in result.reason


def test_a_faulty_node_hyperpod_does_not_list_is_reported_but_not_recovered() -> None:
    result = _classify(_request(_failure("NODE_FAIL")), _job("NODE_FAIL"), _slurm("down"), _hyperpod()[:1])
    assert [(f.slurm_node, f.node_id) for f in result.faulty_nodes] == [(NODES[1], None)] and not result.recover_nodes


@pytest.mark.parametrize(
    ("request_", "job", "why"),
    [
        (_request(_failure(auto_resume=True)), _job(), "auto-resume"),
        (_request(_failure()), _job(auto_resume=True), "auto-resume"),
        (_request(_failure("NODE_FAIL")), _job("PENDING"), "requeued"),
        (_request(_failure("NODE_FAIL")), _job("RUNNING"), "requeued"),
    ],
    ids=["event-auto-resume", "script-auto-resume", "requeued-pending", "requeued-running-again"],
)
def test_a_job_something_else_restarts_is_left_alone(request_: JobRecoveryRequest, job: JobSpec, why: str) -> None:
    result = _classify(request_, job)
    assert result.kind == "left_alone" and why in result.reason


@pytest.mark.parametrize("state", ["Running", "Restarting"])
def test_an_eks_job_its_operator_runs_again_after_its_failure_event_is_left_alone_in_its_words(state: str) -> None:
    # Given a PyTorchJob whose failure event arrived, and whose pods its operator already runs again
    kube = {"kind": "PyTorchJob", "namespace": "kubeflow", "name": "llama"}
    job = _job(state, kube=kube)
    # When it is classified on EKS
    result = classify_failure(_request(_failure(kube=kube)), job, [], _hyperpod(), "hpj-8", T0, "eks")
    # Then nothing re-creates a second copy, and the reason names its operator, not Slurm
    assert result.kind == "left_alone" and "restarted by its operator" in result.reason and "Slurm" not in result.reason
    # and the same words on Slurm (squeue's are upper case) mean nothing there
    assert _classify(_request(_failure()), _job(state)).kind == "application"


def test_a_running_job_named_by_a_human_is_restarted_not_left_alone() -> None:
    # A manual request for a running (hung) job: the agent cancels it before resubmitting
    assert _classify(_request(None, source="manual"), _job("RUNNING")).kind == "application"


def test_a_job_slurmctld_forgot_cannot_be_resubmitted() -> None:
    with pytest.raises(JobSpecUnavailable, match="no batch script"):
        _classify(_request(_failure()), None)


def test_the_event_node_list_wins_over_the_ended_jobs_empty_one() -> None:
    # squeue shows no nodes for an ended job; the epilog's SLURM_JOB_NODELIST does
    result = _classify(_request(_failure("NODE_FAIL")), _job("NODE_FAIL", nodes=[]), _slurm("down"))
    assert [f.slurm_node for f in result.faulty_nodes] == [NODES[1]]


def test_execution_names_are_deterministic_and_fit_step_functions() -> None:
    assert job_execution_name("8_3", T0) == f"hpj-8_3-{int(T0.timestamp())}"
    assert len(node_execution_name("x" * 80)) == 80 and node_execution_name("hpj-1").endswith("-nodes")


# --- plan the restart ------------------------------------------------------------------------------
def _classification(kind: str = "application") -> FailureClassification:
    return FailureClassification(at=T0, kind=kind, reason="r", job=_job(), jobs=[_job()], node_execution_name="hpj-8-nodes")  # type: ignore[arg-type]


def _checkpoints(step: int = 2000) -> CheckpointPlan:
    return CheckpointPlan(
        at=T0,
        resumable=[ResumePlan(job=JobRef(job_id="8", name="llama"), checkpoint=CheckpointRef(uri=f"{URI}step-{step:09d}/", step=step))],
    )


def _entry(step: int, hours_ago: float, kind: str = "application", new: str = "9") -> RestartEntry:
    return RestartEntry(
        failed_job_id="8",
        new_job_id=new,
        kind=kind,
        checkpoint_step=step,
        restarted_at=T0 - timedelta(hours=hours_ago),
        incident="i",  # type: ignore[arg-type]
    )


def _plan(
    kind: str = "application",
    history: list[RestartEntry] | None = None,
    claim: ResubmissionClaim | None = None,
    step: int = 2000,
    dry_run: bool = False,
    checkpoints: CheckpointPlan | None = None,
) -> RestartDecision:
    return plan_restart(
        _request(_failure(), dry_run=dry_run),
        _classification(kind),
        checkpoints or _checkpoints(step),
        claim=claim,
        lineage_root="8",
        history=history or [],
        policy=POLICY,
        execution_name="hpj-8",
        now=T0,
    )


def test_first_application_failure_is_resubmitted_after_the_base_backoff() -> None:
    decision = _plan()
    assert decision.action == "resubmit" and decision.backoff_seconds == 60 and decision.plan is not None


def test_backoff_doubles_per_restart_in_the_window_and_is_capped() -> None:
    assert _plan(history=[_entry(1000, 5)]).backoff_seconds == 120
    assert _plan(history=[_entry(100, 5), _entry(200, 4)], step=3000).backoff_seconds == 240
    capped = RestartPolicy(budget=100, window_seconds=86_400, backoff_seconds=60, max_backoff_seconds=900, crash_loop_repeats=2)
    many = [_entry(s, 1) for s in range(1, 10)]
    decision = plan_restart(
        _request(_failure()),
        _classification(),
        _checkpoints(5000),
        claim=None,
        lineage_root="8",
        history=many,
        policy=capped,
        execution_name="hpj-8",
        now=T0,
    )
    assert decision.backoff_seconds == 900


def test_restarts_older_than_the_window_do_not_count() -> None:
    decision = _plan(history=[_entry(100, 30), _entry(200, 29), _entry(300, 28)], step=400)
    assert decision.action == "resubmit" and decision.restarts_in_window == 0


def test_the_budget_exhausted_escalates() -> None:
    with pytest.raises(RestartBudgetExhausted, match="3 restarts"):
        _plan(history=[_entry(100, 3), _entry(200, 2), _entry(300, 1)], step=400)


def test_failing_again_at_the_step_it_resumed_from_is_a_crash_loop() -> None:
    with pytest.raises(CrashLoopDetected, match="step 2000"):
        _plan(history=[_entry(2000, 1)])


def test_a_node_caused_failure_is_restarted_at_once_outside_the_budget() -> None:
    decision = _plan("node_caused", history=[_entry(100, 3), _entry(200, 2), _entry(2000, 1)])
    assert decision.action == "resubmit" and decision.backoff_seconds == 0


def test_a_job_claimed_by_another_incident_is_left_alone_and_by_our_nested_recovery_counts_as_ours() -> None:
    other = _plan(claim=ResubmissionClaim(job_id="8", incident_id="hpr-x", claimed=False, new_job_id="9"))
    assert other.action == "left_alone" and "hpr-x as job 9" in other.reason
    nested = _plan(claim=ResubmissionClaim(job_id="8", incident_id="hpj-8-nodes", claimed=False, new_job_id="9"))
    assert nested.action == "resubmitted_by_node_recovery" and nested.resubmitted_as == "9"
    # Our own claim (a retried step) goes on to Resubmit Job, which answers from the claim
    assert _plan(claim=ResubmissionClaim(job_id="8", incident_id="hpj-8", claimed=False)).action == "resubmit"


def test_a_claim_another_incident_holds_open_is_left_alone_until_it_expires_then_taken_over() -> None:
    # Given incident hpr-x's open claim on job 8, taken an hour ago and holding until T0 + 1 s
    open_claim = ResubmissionClaim(
        job_id="8", incident_id="hpr-x", claimed=False, claimed_at=T0 - timedelta(hours=1), open_until=T0 + timedelta(seconds=1)
    )
    # When it still holds, then the job is left to it, in words that do not say it was resubmitted
    held = _plan(claim=open_claim)
    assert held.action == "left_alone" and held.resubmitted_as is None
    assert held.reason.endswith("is claimed for resubmission by incident hpr-x (open until 2026-03-14 09:00:01 UTC)")
    # When it expired (hpr-x died without settling it), then it is nobody's: Resubmit Job takes it over
    expired = open_claim.model_copy(update={"open_until": T0 - timedelta(seconds=1)})
    assert _plan(claim=expired).action == "resubmit"
    # And a completed claim holds whatever its age (the job was resubmitted: never a second copy)
    done = expired.model_copy(update={"new_job_id": "9", "open_until": None, "claimed_at": T0 - timedelta(days=29)})
    assert _plan(claim=done).action == "left_alone"


def test_no_verified_checkpoint_escalates() -> None:
    plan = CheckpointPlan(at=T0, unresumable=[UnresumableJob(job_id="8", name="llama", reason="no verified checkpoint under s3://ckpt/")])
    with pytest.raises(NoVerifiedCheckpoint, match="job 8"):
        _plan(checkpoints=plan)


def test_a_dry_run_does_not_wait_out_the_backoff() -> None:
    assert _plan(dry_run=True).backoff_seconds == 0


def test_the_lineage_root_is_found_through_the_ledger_or_the_events_predecessor() -> None:
    ledger = FakeLedger()
    assert lineage_root_of(ledger, CLUSTER, "8", None) == "8"
    assert lineage_root_of(ledger, CLUSTER, "12", "11") == "11"  # resubmitted some other way: its predecessor
    ledger.record_restart(CLUSTER, "8", _entry(2000, 1, new="11"))
    assert lineage_root_of(ledger, CLUSTER, "11", "8") == "8" and lineage_root_of(ledger, CLUSTER, "12", "11") == "8"


# --- waiting for another incident ------------------------------------------------------------------
def _record(outcome: str, error: str | None = None) -> IncidentRecord:
    return IncidentRecord(
        incident_id="hpr-x", cluster=CLUSTER, outcome=outcome, dry_run=False, trigger=[], nodes=[], summary="s", recorded_at=T0, error=error
    )  # type: ignore[arg-type]


def _watch(records: dict[str, IncidentRecord | None], checks: int = 0, at_minutes: int = 0) -> OtherRecoveryWatch:
    watch = OtherRecoveryWatch(held_elsewhere={node_id(2): "hpr-x"}, checks=checks, started_at=T0, deadline=T0 + timedelta(hours=1))
    return watch_other_recovery(
        watch, records, poll_seconds=30, max_poll_seconds=60, deadline_seconds=3600, now=T0 + timedelta(minutes=at_minutes)
    )


def test_the_job_waits_while_the_other_incident_runs_and_goes_on_when_it_recorded() -> None:
    waiting = _watch({"hpr-x": None})
    assert not waiting.done and waiting.next_wait_seconds == 30 and waiting.checks == 1
    assert _watch({"hpr-x": None}, checks=3).next_wait_seconds == 60
    done = _watch({"hpr-x": _record("recovered")})
    assert done.done and done.outcomes == {"hpr-x": "recovered"}


def test_the_job_escalates_when_the_other_incident_escalated_or_never_finishes() -> None:
    with pytest.raises(NodeRecoveryEscalated, match="RejoinDeadlineExceeded"):
        _watch({"hpr-x": _record("escalated", "RejoinDeadlineExceeded")})
    with pytest.raises(NodeRecoveryNotFinished):
        _watch({"hpr-x": None}, at_minutes=61)


# --- steps ---------------------------------------------------------------------------------------------
def _validate(payload: dict[str, Any], stack_dry_run: bool = False, orchestrator: str = "slurm") -> JobRecoveryRequest:
    guarded = GuardedCluster(name=CLUSTER, arn=CLUSTER_ARN, orchestrator=orchestrator)  # type: ignore[arg-type]
    return validate_job_request(
        ValidateJobRequestInput(execution_name="drill-1", request=payload),
        guarded=guarded,
        stack_dry_run=stack_dry_run,
        limits=LIMITS,
        now=T0,
    )


def test_a_manual_job_request_is_validated_into_the_internal_request() -> None:
    request = _validate({"cluster": CLUSTER, "job_id": "1234", "reason": "NCCL timeout", "dry_run": True})
    assert (request.source, request.job_id, request.dry_run, request.incident_id, request.failure) == (
        "manual",
        "1234",
        True,
        "drill-1",
        None,
    )


def test_a_bad_manual_job_request_names_the_field() -> None:
    with pytest.raises(InvalidRecoveryRequest, match="job_id"):
        _validate({"cluster": CLUSTER, "job_id": "12; rm -rf /"})
    with pytest.raises(InvalidRecoveryRequest, match="cluster: 'other'"):
        _validate({"cluster": "other", "job_id": "12"})


def test_a_dry_run_stack_cannot_be_armed_by_a_job_request() -> None:
    assert _validate({"cluster": CLUSTER, "job_id": "12", "dry_run": False}, stack_dry_run=True).dry_run is True


def test_checking_the_nodes_of_a_job_without_nodes_answers_at_once() -> None:
    orchestrator = FakeOrchestrator()
    reply = CommandReply(
        command_id="c", type="capture_job_spec", requested_at=T0, started_at=T0, completed_at=T0, result=JobSpecResult(job=None)
    )
    step = CheckJobNodesInput(execution_name="hpj-8", task_token="t", request=_request(None, source="manual"), inspection=reply)
    assert check_job_nodes(step, orchestrator=orchestrator, now=T0)["sent"] is False
    assert orchestrator.dispatched == [] and orchestrator.answered[0][1].result.nodes == []


def _completed_state(new_job: str = "9") -> JobWorkflowState:
    plan = _checkpoints(2000).resumable[0]
    reply = CommandReply(
        command_id="c",
        type="resubmit_job",
        requested_at=T0,
        started_at=T0,
        completed_at=T0,
        result=ResubmitResult(old_job_id="8", new_job_id=new_job),
    )
    return JobWorkflowState(
        request=_request(_failure()),
        classification=_classification(),
        checkpoints=_checkpoints(2000),
        restart=RestartDecision(at=T0, action="resubmit", reason="r", lineage_root="8", plan=plan, backoff_seconds=60),
        resubmission=reply,
    )


def test_recording_a_resubmission_extends_the_lineage_and_notifies_with_the_job() -> None:
    ledger, notifier = FakeLedger(), FakeNotifier()
    ledger.claim_resubmission(CLUSTER, "8", "hpj-8", T0, timedelta(hours=6))
    step = RecordJobOutcomeInput(execution_name="hpj-8", disposition="completed", state=_completed_state())
    result = record_outcome(step, ledger=ledger, notifier=notifier, cluster=CLUSTER, execution_url="https://x", now=T0)
    assert result.outcome == "recovered" and "resubmitted as job 9 from step 2000" in result.summary
    assert [(e.failed_job_id, e.new_job_id, e.checkpoint_step) for e in ledger.restart_history(CLUSTER, "8")] == [("8", "9", 2000)]
    assert ledger.lineage_root(CLUSTER, "9") == "8" and ledger.claims[(CLUSTER, "8")]["new_job_id"] == "9"
    record = ledger.get_incident("hpj-8")
    assert record is not None and record.workflow == "job" and [r.checkpoint_step for r in record.resubmissions] == [2000]
    subject = notifier.published[0][0]  # type: ignore[attr-defined]
    assert subject.startswith(f"[hyperpod-recovery] {CLUSTER}: recovered job 8")


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize("already_submitted", [False, True])
@pytest.mark.parametrize("restarted_by_slurm", [False, True])
@pytest.mark.parametrize("new_job", ["9", "8", None])
def test_the_record_lists_a_resubmission_only_when_this_incident_submitted_the_job(
    dry_run: bool, already_submitted: bool, restarted_by_slurm: bool, new_job: str | None
) -> None:
    # Given a JobRecovery whose Resubmit Job answered with any combination of what the agent can say
    # (Slurm requeued the job itself: the "new" id is the old one, 8, and nothing was submitted)
    state = _completed_state()
    assert state.resubmission is not None
    result = state.resubmission.result.model_copy(
        update={"new_job_id": new_job, "already_submitted": already_submitted, "restarted_by_slurm": restarted_by_slurm}
    )
    state = state.model_copy(update={"resubmission": state.resubmission.model_copy(update={"dry_run": dry_run, "result": result})})
    ledger, notifier = FakeLedger(), FakeNotifier()
    step = RecordJobOutcomeInput(execution_name="hpj-8", disposition="completed", state=state)
    # When the outcome is recorded
    record_outcome(step, ledger=ledger, notifier=notifier, cluster=CLUSTER, execution_url="https://x", now=T0)
    record = ledger.get_incident("hpj-8")
    assert record is not None
    # Then the record, the lineage and the shared rule (domain/record/incident.py) agree: a resubmission only
    # when it was submitted here, not in a drill, not by another incident, not Slurm's own requeue
    submitted = not dry_run and not already_submitted and not restarted_by_slurm and new_job is not None
    assert submitted_here(state.resubmission) is submitted
    assert [r.new_job_id for r in record.resubmissions] == ([new_job] if submitted else [])
    assert [e.new_job_id for e in ledger.restart_history(CLUSTER, "8")] == ([new_job] if submitted else [])


def test_a_failed_nested_node_recovery_is_escalated_under_its_own_error() -> None:
    cause = json.dumps(
        {"ExecutionArn": "arn:aws:states:us-west-2:1:execution:m:hpj-8-nodes", "Error": "RejoinDeadlineExceeded", "Cause": "not back"}
    )
    step = RecordJobOutcomeInput(execution_name="hpj-8", disposition="escalated", error=StepError(Error="States.TaskFailed", Cause=cause))
    outcome, error, text = decide_outcome(JOB_INCIDENT, step)
    assert (outcome, error) == ("escalated", "NodeRecoveryEscalated") and "hpj-8-nodes ended RejoinDeadlineExceeded: not back" in (
        text or ""
    )


def test_an_open_breaker_stops_job_restarts_too() -> None:
    from hyperpod_recovery.models.job_recovery import PlanJobRestartInput
    from hyperpod_recovery.models.records import BreakerState
    from hyperpod_recovery.steps.plan_job_restart import plan_job_restart

    ledger = FakeLedger()
    ledger.save_breaker(CLUSTER, BreakerState(state="open", reason="3 failed recoveries", changed_at=T0, changed_by="hpr-x"))
    step = PlanJobRestartInput(
        execution_name="hpj-8", request=_request(_failure()), classification=_classification(), checkpoints=_checkpoints()
    )
    decision = plan_job_restart(step, ledger=ledger, policy=POLICY, safety=SAFETY, now=T0)
    assert decision.action == "capped" and "3 failed recoveries" in decision.reason
    outcome, error, _ = decide_outcome(
        JOB_INCIDENT,
        RecordJobOutcomeInput(
            execution_name="hpj-8", disposition="completed", state=JobWorkflowState(request=_request(_failure()), restart=decision)
        ),
    )
    assert (outcome, error) == ("capped", "CircuitBreakerOpen")


def test_a_dry_run_with_the_breaker_open_says_the_restart_would_be_capped() -> None:
    from hyperpod_recovery.domain.record.job_incident import summarize_job
    from hyperpod_recovery.models.job_recovery import PlanJobRestartInput
    from hyperpod_recovery.models.records import BreakerState
    from hyperpod_recovery.steps.plan_job_restart import plan_job_restart

    # Given the breaker open, and a drill of a job's failure
    ledger = FakeLedger()
    ledger.save_breaker(CLUSTER, BreakerState(state="open", reason="3 failed recoveries", changed_at=T0, changed_by="hpr-x"))
    request = _request(_failure(), dry_run=True)
    step = PlanJobRestartInput(execution_name="hpj-8", request=request, classification=_classification(), checkpoints=_checkpoints())
    # When it plans the restart
    decision = plan_job_restart(step, ledger=ledger, policy=POLICY, safety=SAFETY, now=T0)
    # Then it ends as a dry run that says the breaker would have stopped the restart
    state = JobWorkflowState(request=request, restart=decision)
    outcome, _, cause = decide_outcome(JOB_INCIDENT, RecordJobOutcomeInput(execution_name="hpj-8", disposition="completed", state=state))
    assert decision.action == "capped" and outcome == "dry_run"
    assert "the circuit breaker is open" in summarize_job(state, outcome, cause)


def test_a_job_request_from_before_the_rename_reads_under_todays_source_name() -> None:
    # Given the input of an execution the older version started ("slurm_job_failed"), in flight through an upgrade
    old = _request(_failure()).model_dump(mode="json") | {"source": "slurm_job_failed"}
    # Then it validates, as the one name the signal has now; a source nobody ever wrote is still refused
    assert JobRecoveryRequest.model_validate(old).source == "job_failed"
    with pytest.raises(ValidationError):
        JobRecoveryRequest.model_validate(old | {"source": "slurm_job_exploded"})


def test_a_job_id_has_the_form_of_the_stacks_orchestrator() -> None:
    uid = "aa28155a-644d-5c16-9403-54b8756caf50"
    # A Slurm stack takes Slurm job ids only, an EKS stack a job object's uid only
    with pytest.raises(InvalidRecoveryRequest, match="not a Slurm job id"):
        _validate({"cluster": CLUSTER, "job_id": uid})
    with pytest.raises(InvalidRecoveryRequest, match="not a job object's uid"):
        _validate({"cluster": CLUSTER, "job_id": "1234"}, orchestrator="eks")
    assert _validate({"cluster": CLUSTER, "job_id": uid}, orchestrator="eks").job_id == uid
