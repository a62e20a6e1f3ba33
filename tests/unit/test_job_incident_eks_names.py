"""Every line a human reads names a Kubernetes job as kubectl shows it (``PyTorchJob kubeflow/llama``),
never by its uid first; a Slurm job stays ``job 1001``. The JobRecovery timeline and summary
(domain/record/job_incident.py), the NodeRecovery timeline and causes (domain/record/node_incident.py), a storm's
summary (domain/record/fates.py) and the record of an execution that ended unrecorded (domain/record/reconcile.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hyperpod_recovery.domain.jobs.job_failure import job_label
from hyperpod_recovery.domain.record.fates import jobs_sentence
from hyperpod_recovery.domain.record.job_incident import build_job_timeline, decide_completed, summarize_job
from hyperpod_recovery.domain.record.node_incident import build_timeline
from hyperpod_recovery.domain.record.node_incident import decide_completed as decide_node
from hyperpod_recovery.domain.record.reconcile import EndedExecution, unrecorded_end_record
from hyperpod_recovery.models.commands import CheckpointRef, CommandReply, CordonResult, JobRef, JobSpec, ResubmitResult
from hyperpod_recovery.models.job_events import JobFailedDetail
from hyperpod_recovery.models.job_recovery import FailureClassification, JobWorkflowState, RestartDecision
from hyperpod_recovery.models.kubernetes import KubeJobRef
from hyperpod_recovery.models.node_recovery import (
    Assessment,
    CheckpointPlan,
    NodeTarget,
    ResubmitFailure,
    ResumePlan,
    StepError,
    UnresumableJob,
    WorkflowState,
)
from hyperpod_recovery.models.records import Holdings, JobFate, Resubmission
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest, Trigger
from tests.fakes import T0

UID = "bea1bd05-1aff-56fd-aeef-72f72fd01614"
COPY_UID = "056d620f-e512-59b8-9de3-ee81aa389b40"
LLAMA = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
GPT = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="gpt")
CKPT = "s3://ckpt/llama/step-000003000/"
NODE = "hyperpod-i-0000000000000000a"


def _reply(result: ResubmitResult, *, dry_run: bool = False) -> CommandReply[ResubmitResult]:
    at = T0 + timedelta(seconds=60)
    return CommandReply[ResubmitResult](
        command_id="c", type="resubmit_job", requested_at=at, completed_at=at, dry_run=dry_run, result=result
    )


def _job_state(eks: bool, **parts: Any) -> JobWorkflowState:
    """A JobRecovery of ``llama`` as Classify Failure and Plan Job Restart word it (domain/jobs/job_failure.py)."""
    job_id = UID if eks else "1001"
    kube = LLAMA if eks else None
    failure = JobFailedDetail(
        cluster_name="llm-train",
        job_id=job_id,
        name="kubeflow/llama" if eks else "llama",
        nodes=[NODE],
        state="FAILED",
        reason="BackoffLimitExceeded",
        exit_code=1,
        ended_at=T0,
        event_key="k",
        kube=kube,
    )
    request = JobRecoveryRequest(
        cluster="llm-train", job_id=job_id, source="job_failed", reason="failed", detected_at=T0, received_at=T0, failure=failure
    )
    job = JobSpec(job_id=job_id, name="llama", num_nodes=1, state="FAILED", checkpoint_uri="s3://ckpt/llama", kube=kube)
    label = job_label(job_id, job, failure)
    classification = FailureClassification(
        at=T0, kind="application", reason=f"{label} ended FAILED with every node healthy: an application failure", job=job
    )
    plan = ResumePlan(job=JobRef(job_id=job_id, name="llama"), checkpoint=CheckpointRef(uri=CKPT, step=3000))
    restart = RestartDecision(at=T0, action="resubmit", reason=f"{label}: resubmit from step 3000 ({CKPT})", plan=plan)
    return JobWorkflowState(request=request, classification=classification, restart=restart, **parts)


def test_given_a_job_then_classify_and_plan_name_it_as_its_orchestrator_shows_it() -> None:
    # Given the same job on EKS and on Slurm, known by its description, its failure event, or both
    eks, slurm = _job_state(True), _job_state(False)
    for state, expected in ((eks, "PyTorchJob kubeflow/llama"), (slurm, "job 1001 (llama)")):
        assert state.classification is not None and state.request is not None
        job, failure = state.classification.job, state.request.failure
        # Then each names it alike: kind namespace/name on EKS, ``job <id> (<name>)`` on Slurm
        assert job_label(state.request.job_id, job, failure) == expected
        assert job_label(state.request.job_id, None, failure) == (expected if failure and failure.kube else "job 1001 (llama)")
        assert job_label(state.request.job_id, job, None) == expected
    assert job_label("1001", None, None) == "job 1001"


def _details(entries: list[Any]) -> dict[str, str]:
    return {e.event: e.detail for e in entries}


def test_given_an_eks_job_recovery_then_its_timeline_names_the_job_and_its_copy_as_kubectl_shows_them() -> None:
    # Given an EKS JobRecovery that re-created PyTorchJob kubeflow/llama as kubeflow/llama-r1
    copy = ResubmitResult(old_job_id=UID, new_job_id=COPY_UID, new_job_name="kubeflow/llama-r1", new_job_state="Created")
    state = _job_state(True, resubmission=_reply(copy))
    # When its timeline is written
    details = _details(build_job_timeline(state, T0))
    # Then each line names the job by kind namespace/name, its uid only after it
    assert details["job failed"].startswith(f"PyTorchJob kubeflow/llama (uid {UID}) ended FAILED on {NODE}")
    assert details["classified: application"].startswith("PyTorchJob kubeflow/llama ended FAILED")
    assert details["restart: resubmit"] == f"PyTorchJob kubeflow/llama: resubmit from step 3000 ({CKPT})"
    assert details["job resubmitted"] == f"PyTorchJob kubeflow/llama -> PyTorchJob kubeflow/llama-r1 (uid {COPY_UID}), Created"
    assert not any(d.startswith((UID, f"job {UID}")) for d in details.values())


def test_given_a_slurm_job_recovery_then_its_timeline_reads_as_it_always_did() -> None:
    # Given the same recovery on Slurm
    state = _job_state(False, resubmission=_reply(ResubmitResult(old_job_id="1001", new_job_id="1002", cancelled_old=True)))
    # When its timeline is written
    details = _details(build_job_timeline(state, T0))
    # Then a Slurm job is still ``job 1001``, and its copy ``1001 -> 1002``
    assert details["job failed"].startswith(f"job 1001 (llama) ended FAILED on {NODE}")
    assert details["restart: resubmit"] == f"job 1001 (llama): resubmit from step 3000 ({CKPT})"
    assert details["job resubmitted"] == "1001 -> 1002 (old job cancelled first)"


def test_given_an_eks_job_recovery_capped_then_its_cause_and_summary_name_the_job_by_kind_and_name() -> None:
    # Given an EKS JobRecovery its restart breaker capped
    state = _job_state(True)
    assert state.classification is not None and state.request is not None
    label = job_label(UID, state.classification.job, state.request.failure)
    state = state.model_copy(update={"restart": RestartDecision(at=T0, action="capped", reason=f"{label}: 3 restarts in the last 86400 s")})
    # When it is decided and summarized
    outcome, _, cause = decide_completed(state)
    summary = summarize_job(state, outcome, cause)
    # Then neither says the uid first
    assert cause == "PyTorchJob kubeflow/llama: 3 restarts in the last 86400 s"
    assert summary.startswith("Capped, PyTorchJob kubeflow/llama was not restarted: PyTorchJob kubeflow/llama: 3 restarts")


def _node_state(eks: bool, *, found: bool = True, **parts: Any) -> WorkflowState:
    job_id = UID if eks else "1001"
    request = RecoveryRequest(
        cluster="llm-train",
        node_ids=["i-0000000000000000a"],
        detected_at=T0,
        received_at=T0,
        incident_id="hpr-i-0a-20260314T0900",
        triggers=[Trigger(source="hyperpod_node_health", node_ids=["i-0000000000000000a"], reason="XID 79", detected_at=T0)],
    )
    target = NodeTarget(node_id="i-0000000000000000a", instance_group="workers", slurm_node=NODE, status="Running")
    assessment = Assessment(at=T0, orchestrator="eks" if eks else "slurm", node_recovery="None", targets=[target], proceed=True)
    jobs = [JobSpec(job_id=job_id, name="llama", num_nodes=1, state="RUNNING", kube=LLAMA if eks else None)] if found else []
    cordon = CommandReply[CordonResult](
        command_id="c", type="cordon_nodes", requested_at=T0, completed_at=T0, result=CordonResult(drained=[NODE], jobs=jobs)
    )
    return WorkflowState(request=request, assessment=assessment, cordon=cordon, **parts)


def test_given_an_eks_node_recovery_then_the_copy_is_named_with_its_kind() -> None:
    # Given an EKS node recovery that re-created the job on its node
    copy = ResubmitResult(old_job_id=UID, new_job_id=COPY_UID, new_job_name="kubeflow/llama-r1", new_job_state="Created")
    state = _node_state(True, resubmissions=[_reply(copy)])
    # When its timeline is written
    details = _details(build_timeline(state, T0))
    # Then the copy is ``PyTorchJob kubeflow/llama-r1 (uid …)``, as the job itself is named
    assert details["job resubmitted"] == f"PyTorchJob kubeflow/llama -> PyTorchJob kubeflow/llama-r1 (uid {COPY_UID}), Created"


def test_given_a_slurm_node_recovery_then_the_resubmission_reads_as_it_always_did() -> None:
    state = _node_state(False, resubmissions=[_reply(ResubmitResult(old_job_id="1001", new_job_id="1002", new_job_state="PENDING"))])
    assert _details(build_timeline(state, T0))["job resubmitted"] == "job 1001 -> 1002, PENDING"


def test_given_an_eks_job_the_incident_did_not_find_then_it_is_a_job_with_that_uid_not_a_job_id() -> None:
    # Given an EKS node recovery whose resubmission of a job it has no description of failed
    failure = ResubmitFailure(job_id=UID, failure=StepError(Error="KubeAccessDenied", Cause="403"))
    state = _node_state(True, found=False, resubmissions=[failure])
    # When its timeline and cause are written
    details = _details(build_timeline(state, T0))
    _, _, cause = decide_node(state)
    # Then the job is ``job with uid <uid>``, never ``job <uid>`` as if it were a Slurm job id
    assert details["resubmit failed"].startswith(f"job with uid {UID}: KubeAccessDenied")
    assert cause is not None and cause.startswith(f"job with uid {UID} was not resubmitted (KubeAccessDenied")


def test_given_an_eks_job_without_a_checkpoint_then_the_cause_names_it_by_kind_and_name() -> None:
    plan = CheckpointPlan(at=T0, unresumable=[UnresumableJob(job_id=UID, name="llama", reason="no checkpoint location")])
    _, _, cause = decide_node(_node_state(True, checkpoints=plan))
    assert cause == "PyTorchJob kubeflow/llama: no checkpoint location"
    slurm = CheckpointPlan(at=T0, unresumable=[UnresumableJob(job_id="1001", name="llama", reason="no checkpoint location")])
    assert decide_node(_node_state(False, checkpoints=slurm))[2] == "job 1001 (llama): no checkpoint location"


def _copies(eks: bool, count: int = 6) -> list[JobFate]:
    return [
        JobFate(
            job=f"{j:08x}-aaaa-4bbb-8ccc-{j:012x}" if eks else str(1000 + j),
            name=f"llama-{j}",
            kind="PyTorchJob" if eks else None,
            namespace="kubeflow" if eks else None,
            fate="resubmitted",
            copy_id=f"{j:08x}-dddd-4eee-8fff-{j:012x}" if eks else str(5000 + j),
            copy_name=f"llama-{j}-r1" if eks else None,
            copy_state="Created" if eks else "PENDING",
        )
        for j in range(count)
    ]


def test_given_a_storm_on_eks_then_its_summary_lists_each_copy_as_kubectl_shows_it() -> None:
    # Given a storm that re-created six EKS jobs (past what a summary says in full)
    # When its jobs are summarized
    sentence = jobs_sentence(_copies(True))
    # Then each is ``PyTorchJob ns/name -> PyTorchJob ns/name-r1``, never ``<uid> -> name-r1``
    assert "PyTorchJob kubeflow/llama-0 -> PyTorchJob kubeflow/llama-0-r1, PyTorchJob kubeflow/llama-1 -> " in sentence
    assert "aaaa" not in sentence


def test_given_a_storm_on_slurm_then_its_summary_stays_old_to_new_ids() -> None:
    assert jobs_sentence(_copies(False)) == (
        "resubmitted 6 job(s) (PENDING when submitted): 1000 -> 5000, 1001 -> 5001, 1002 -> 5002, 1003 -> 5003, 1004 -> 5004, 1005 -> 5005"
    )


def _ended(resubmissions: list[tuple[Resubmission, Any]]) -> EndedExecution:
    return EndedExecution(
        name="hpr-i-0a-20260314T0900",
        workflow="node",
        status="ABORTED",
        error=None,
        cause=None,
        started_at=T0,
        stopped_at=T0 + timedelta(minutes=5),
        request=None,
        states_entered=None,
        resubmissions=tuple(resubmissions),
    )


def test_given_an_eks_execution_stopped_after_a_resubmission_then_its_record_names_the_jobs_as_kubectl_shows_them() -> None:
    # Given an EKS node recovery stopped after it re-created one job, with another job's answer lost
    other = "cafe0000-aaaa-4bbb-8ccc-000000000001"
    done = Resubmission(
        job=UID, job_name="llama", new_job_id=COPY_UID, checkpoint_step=3000, checkpoint_uri=CKPT, new_job_name="kubeflow/llama-r1"
    )
    specs = [
        JobSpec(job_id=UID, name="llama", num_nodes=1, state="RUNNING", kube=LLAMA),
        JobSpec(job_id=other, name="gpt", num_nodes=1, state="RUNNING", kube=GPT),
    ]
    held = Holdings(incident="hpr-i-0a-20260314T0900", cluster="llm-train", claims={UID, other})
    # When its end is recorded
    record = unrecorded_end_record(
        _ended([(done, T0 + timedelta(seconds=30))]),
        "llm-train",
        held,
        hold_until=None,
        dry_run=False,
        now=T0 + timedelta(minutes=6),
        kept_claims=[other],
        orchestrator="eks",
        specs=specs,
    )
    # Then the resubmission and the kept claim name the jobs by kind namespace/name
    details = _details(record.timeline)
    assert details["job resubmitted"] == f"PyTorchJob kubeflow/llama -> PyTorchJob kubeflow/llama-r1 (uid {COPY_UID}) from step 3000"
    assert "kept the resubmission claim(s) of PyTorchJob kubeflow/gpt (no incident restarts them" in record.summary
    assert other not in record.summary


def test_given_a_slurm_execution_stopped_with_a_kept_claim_then_its_record_reads_as_it_always_did() -> None:
    done = Resubmission(job="1001", job_name="llama", new_job_id="1003", checkpoint_step=2000, checkpoint_uri=CKPT)
    held = Holdings(incident="hpr-i-0a-20260314T0900", cluster="llm-train", claims={"1001", "1002"})
    record = unrecorded_end_record(
        _ended([(done, T0)]), "llm-train", held, hold_until=None, dry_run=False, now=T0 + timedelta(minutes=6), kept_claims=["1002"]
    )
    assert _details(record.timeline)["job resubmitted"] == "1001 -> 1003 from step 2000"
    assert "kept the resubmission claim(s) of job(s) 1002 (no incident" in record.summary
