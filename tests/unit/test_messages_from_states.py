"""From a workflow's state to what a human reads, for generated NodeRecovery states (issue 30 §1):
Record Outcome's own path (domain/record/incident.py conclude, the summaries, the notification) over
every mix of drains (ours, ours from a retry, someone else's), repairs (started, refused, started
by HyperPod), rejoins, give-backs, health checks, job plans and resubmission answers, dry runs and
escalations, on either orchestrator. Checked two ways: against the state itself (each copy the
state shows is in the record; a drain we did not make is never ours), and by the message checker
(sandbox/message_check.py), which the real summaries must pass too."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.notification import notification
from hyperpod_recovery.domain.record.incident import conclude
from hyperpod_recovery.domain.record.node_incident import NODE_INCIDENT
from hyperpod_recovery.models.commands import (
    CheckpointRef,
    CommandReply,
    CordonResult,
    JobRef,
    JobSpec,
    ResubmitResult,
    ResumeResult,
    UnhealthyNode,
)
from hyperpod_recovery.models.kubernetes import KubeJobRef, node_name_for_instance
from hyperpod_recovery.models.node_recovery import (
    Assessment,
    CheckpointPlan,
    NodeTarget,
    RecordOutcomeInput,
    RejoinWatch,
    ReplaceFailure,
    Replacement,
    ResubmitFailure,
    ResumePlan,
    StepError,
    UnresumableJob,
    WatchedNode,
    WorkflowState,
)
from hyperpod_recovery.models.requests import RecoveryRequest, Trigger
from sandbox.message_check import contradictions
from tests.fakes import T0, node_id

DEPLOYMENT = Deployment(stack="llm-train-recovery", ledger_table="llm-train-recovery-ledger")
INCIDENT = "hpr-i-0a-20260314T0900"


def _reply(result: Any, at: int, *, dry_run: bool = False, kind: str = "") -> CommandReply[Any]:
    return CommandReply[type(result)](  # type: ignore[misc]
        command_id=f"{INCIDENT}:{kind}", type=kind, requested_at=T0 + timedelta(seconds=at), completed_at=T0 + timedelta(seconds=at + 2),
        dry_run=dry_run, result=result,
    )  # fmt: skip


@st.composite
def states(draw: Any) -> tuple[WorkflowState, str, StepError | None]:
    eks = draw(st.booleans())
    dry_run = draw(st.integers(0, 5)) == 0
    count = draw(st.integers(1, 3))
    instances = [node_id(n) for n in range(1, count + 1)]
    names = [node_name_for_instance(i) if eks else f"ip-10-3-0-{n}" for n, i in enumerate(instances, 1)]
    request = RecoveryRequest(
        cluster="llm-train",
        node_ids=instances,
        detected_at=T0,
        received_at=T0 + timedelta(seconds=5),
        incident_id=INCIDENT,
        triggers=[Trigger(source="hyperpod_node_health", node_ids=instances, reason="XID 79", detected_at=T0)],
        dry_run=dry_run,
    )
    targets = [
        NodeTarget(node_id=i, instance_group="workers", slurm_node=n, status="Running") for i, n in zip(instances, names, strict=True)
    ]
    assessment = Assessment(
        at=T0 + timedelta(seconds=6), orchestrator="eks" if eks else "slurm", node_recovery="None", targets=targets, proceed=True
    )
    state: dict[str, Any] = {"request": request, "assessment": assessment}
    # Jobs and how each is planned and answered
    jobs = []
    for j in range(draw(st.sampled_from([0, 1, 2, 3, 7]))):
        uid = f"{j:08x}-aaaa-4bbb-8ccc-{j:012x}"
        kube = KubeJobRef(kind="PyTorchJob", namespace="team-a", name=f"llama-{j}") if eks else None
        jobs.append(JobSpec(job_id=uid if eks else str(1001 + j), name=f"llama-{j}", num_nodes=4, state="RUNNING", kube=kube))
    stage = draw(st.sampled_from(["cordon", "replace", "rejoin", "resume", "end"]))
    drain = draw(st.lists(st.sampled_from(["ours", "ours_retry", "theirs", "absent"]), min_size=count, max_size=count))
    cordon = CordonResult(
        drained=[n for n, d in zip(names, drain, strict=True) if d == "ours"],
        already_drained=[n for n, d in zip(names, drain, strict=True) if d in ("ours_retry", "theirs")],
        ours_already=[n for n, d in zip(names, drain, strict=True) if d == "ours_retry"],
        absent=[n for n, d in zip(names, drain, strict=True) if d == "absent"] if eks else [],
        jobs=jobs,
    )
    state["cordon"] = _reply(cordon, 10, dry_run=dry_run, kind="cordon_nodes")
    if stage != "cordon":
        refused = draw(st.lists(st.booleans(), min_size=count, max_size=count))
        watched = []
        for i, (instance, name) in enumerate(zip(instances, names, strict=True)):
            if refused[i]:
                continue
            rejoined = stage in ("resume", "end") or (stage == "rejoin" and draw(st.booleans()))
            watched.append(
                WatchedNode(
                    node_id=instance,
                    slurm_node=name,
                    initiation=draw(st.sampled_from(["initiated", "initiated", "already_in_progress"])),
                    replacement_node_id=node_id(100 + i),
                    status="Running" if rejoined else "Pending",
                    rejoined=rejoined,
                    replacement_slurm_node=node_name_for_instance(node_id(100 + i)) if eks and rejoined else None,
                    renamed_in_service=eks and rejoined,
                    # (the rejoin stamps a node it handed to Resume Nodes, whatever that step then found)
                    resumed_at=T0 + timedelta(seconds=720) if stage in ("resume", "end") and rejoined and draw(st.booleans()) else None,
                )
            )
        watch = RejoinWatch(
            at=T0 + timedelta(seconds=700), started_at=T0, deadline=T0 + timedelta(hours=1), nodes=watched, next_wait_seconds=30,
            done=stage in ("resume", "end"), dry_run=dry_run, orchestrator="eks" if eks else "slurm",
        )  # fmt: skip
        failed = [
            ReplaceFailure(node_id=i, error_code="InsufficientCapacity", message="none")
            for i, r in zip(instances, refused, strict=True)
            if r
        ]
        state["replacement"] = Replacement(
            at=T0 + timedelta(seconds=12), failed=failed, calls=1, dry_run=dry_run, proceed=True, watch=watch
        )
    if stage in ("resume", "end"):
        services = [node_name_for_instance(node_id(100 + i)) if eks else n for i, n in enumerate(names)]
        verdicts = draw(st.lists(st.sampled_from(["resumed", "not_ours", "unhealthy", "not_drained"]), min_size=count, max_size=count))
        resume = ResumeResult(
            resumed=[s for s, v in zip(services, verdicts, strict=True) if v == "resumed"],
            not_ours=[s for s, v in zip(services, verdicts, strict=True) if v == "not_ours"],
            not_drained=[s for s, v in zip(services, verdicts, strict=True) if v == "not_drained"],
            unhealthy=[
                UnhealthyNode(node=s, verdict="failed", detail="exit 1")
                for s, v in zip(services, verdicts, strict=True)
                if v == "unhealthy"
            ],
        )
        state["resume"] = _reply(resume, 720, dry_run=dry_run, kind="resume_nodes")
    # Plans and answers
    plan: dict[str, list[Any]] = {"resume_now": [], "resumable": [], "unresumable": [], "left_alone": []}
    answers: list[Any] = []
    later: list[Any] = []  # (the re-creations after the rejoin of jobs stopped at once)
    for j, job in enumerate(jobs):
        kind = draw(st.sampled_from(["resume_now", "resumable", "unresumable", "left_alone"]))
        ref = JobRef(job_id=job.job_id, name=job.name, kube=job.kube)
        checkpoint = CheckpointRef(uri=f"s3://ckpt/{job.name}/step-000003000/", step=3000)
        if kind == "resumable" and eks and draw(st.booleans()):
            # Its pods may take 600 s to stop: stopped at once (a stop only), re-created after the rejoin
            twin = ResumePlan(job=ref, checkpoint=checkpoint, stop_grace_seconds=600)
            plan["resumable"].append(twin)
            plan["resume_now"].insert(0, twin.model_copy(update={"stop_only": True}))
            stop = draw(st.sampled_from(["stopped", "declined", "failed", "none"]))
            if stop == "stopped":
                answers.append(
                    _reply(ResubmitResult(old_job_id=job.job_id, stop_only=True, cancelled_old=True), 16, dry_run=dry_run, kind="r")
                )
            elif stop == "declined":
                said = ResubmitResult(old_job_id=job.job_id, stop_only=True, declined="not stopped at once: 503")
                answers.append(_reply(said, 16, dry_run=dry_run, kind="r"))
            elif stop == "failed":
                answers.append(ResubmitFailure(job_id=job.job_id, failure=StepError(Error="LedgerUnavailable", Cause="throttled")))
            made = draw(st.sampled_from(["submitted", "failed", "none"])) if stage in ("resume", "end") else "none"
            if made == "submitted":
                result = ResubmitResult(
                    old_job_id=job.job_id, new_job_id=f"{j:08x}-dddd-4eee-8fff-{j:012x}", new_job_name=f"team-a/llama-{j}-r1"
                )
                later.append(_reply(result, 730, dry_run=dry_run, kind="resubmit_job"))
            elif made == "failed":
                why = StepError(Error="OldCopyStillStopping", Cause="PyTorchJob team-a/llama is stopped (suspended) and stays stopped")
                later.append(ResubmitFailure(job_id=job.job_id, failure=why))
            continue
        if kind in ("resume_now", "resumable"):
            plan[kind].append(ResumePlan(job=ref, checkpoint=checkpoint))
            answer = draw(st.sampled_from(["submitted", "already", "requeued", "failed", "timed_out", "none"]))
            if answer == "submitted":
                new = f"{j:08x}-dddd-4eee-8fff-{j:012x}" if eks else str(2001 + j)
                result = ResubmitResult(
                    old_job_id=job.job_id, new_job_id=new, new_job_state=draw(st.sampled_from([None, "PENDING", "RUNNING"])),
                    new_job_name=f"team-a/llama-{j}-r1" if eks else None,
                )  # fmt: skip
                answers.append(_reply(result, 20, dry_run=dry_run, kind="resubmit_job"))
            elif answer == "already":
                result = ResubmitResult(old_job_id=job.job_id, new_job_id=None, already_submitted=True, submitted_by="hpr-other")
                answers.append(_reply(result, 20, dry_run=dry_run, kind="resubmit_job"))
            elif answer == "requeued" and not eks:
                result = ResubmitResult(old_job_id=job.job_id, new_job_id=job.job_id, already_submitted=True, restarted_by_slurm=True)
                answers.append(_reply(result, 20, dry_run=dry_run, kind="resubmit_job"))
            elif answer in ("failed", "timed_out"):
                error = "States.Timeout" if answer == "timed_out" else "SlurmCommandFailed"
                answers.append(ResubmitFailure(job_id=job.job_id, failure=StepError(Error=error, Cause="sbatch: error: Invalid account")))
        else:
            plan[kind].append(
                UnresumableJob(
                    job_id=job.job_id, name=job.name, reason="no checkpoint verifies" if kind == "unresumable" else "restarts itself"
                )
            )
    if stage != "cordon" or jobs:
        state["checkpoints"] = CheckpointPlan(at=T0 + timedelta(seconds=14), **plan)
        state["resubmissions_now"] = answers
        state["resubmissions"] = later
    escalated = draw(st.booleans())
    error = (
        StepError(Error=draw(st.sampled_from(["RejoinDeadlineExceeded", "States.HeartbeatTimeout", "KubeAccessDenied"])), Cause="not back")
        if escalated
        else None
    )
    return WorkflowState.model_validate(state), "escalated" if escalated else "completed", error


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(states())
def test_every_state_is_recorded_true_to_itself_and_told_without_contradiction(drawn: tuple[WorkflowState, str, StepError | None]) -> None:
    state, disposition, error = drawn
    # Given a NodeRecovery's state at its end, When Record Outcome records it and renders its page
    step = RecordOutcomeInput(execution_name=INCIDENT, disposition=disposition, state=state, error=error)  # type: ignore[arg-type]
    _, record, _ = conclude(
        NODE_INCIDENT, step, cluster="llm-train", now=T0 + timedelta(minutes=20), orchestrator=state.assessment.orchestrator
    )  # type: ignore[union-attr]
    subject, body = notification(record, "https://console/exec", deployment=DEPLOYMENT)
    fates = {f.job: f for f in record.job_fates}
    # Then every copy the state shows is the job's copy in the record
    for reply in state.replies:
        result = reply.result
        if reply.dry_run:
            assert fates[result.old_job_id].fate == "would_resubmit"
        elif result.new_job_id and not result.already_submitted:
            assert (fates[result.old_job_id].fate, fates[result.old_job_id].copy_id) == ("resubmitted", result.new_job_id)
    # And a failure that was answered leaves no copy, one that was not leaves one possible
    for failure in state.resubmit_failures:
        expected = {"States.Timeout": "copy_unknown", "SlurmCommandFailed": "not_resubmitted"}.get(failure.failure.Error, "not_resubmitted")
        assert fates[failure.job_id].fate == ("would_not_resubmit" if state.dry_run else expected)
    # And a job stopped at once is never told as re-created by its stop; when the incident ended before its
    # re-creation was asked (no resume), it is told stopped, no copy made
    for stop in state.early_stop_replies:
        fate = fates[stop.result.old_job_id]
        later_made = any(r.result.old_job_id == stop.result.old_job_id and r.result.new_job_id for r in state.replies)
        assert fate.fate in (
            ("resubmitted", "would_resubmit") if later_made else ("not_resubmitted", "would_resubmit", "would_not_resubmit")
        )
        if stop.result.cancelled_old and not state.dry_run and state.resume is None:
            assert fate.reason.startswith("it was stopped (suspended) at once and stays stopped, no copy of it made")
    # And no node someone else drained is ever ours to give back
    theirs = set(state.cordon.result.already_drained) - set(state.cordon.result.ours_already)  # type: ignore[union-attr]
    assert not [n.node for n in record.node_fates if n.held and n.node in theirs]
    assert not state.dry_run or not [n for n in record.node_fates if n.held or n.acted]
    # And a node the resume left cordoned or drained by someone else is never recorded back in service,
    # and the page says whose it is to give back
    left = set(state.last_resume.result.not_ours) if state.last_resume is not None else set()
    for fate in record.node_fates:
        if not state.dry_run and {fate.node, fate.replacement_node} & left and fate.fate != "skipped":
            # (its node line on a page that lists nodes; on a NO ACTION page, its timeline's resume line)
            resume_lines = [line.split("by someone else: ", 1)[1] for line in body.splitlines() if "by someone else: " in line]
            names = {fate.node, fate.replacement_node} & left
            said = "by someone else: left so" in body or any(name in line.split(", ") for line in resume_lines for name in names)
            assert fate.fate == "not_ours" and said, (fate, body)
    # And nothing in the page or the summary contradicts the record
    assert contradictions(record, subject, body) == []
    assert contradictions(record, "", record.summary) == []
