"""Resubmit Job (both workflows): claim the job in the ledger, once per job, then ask the scheduler to resubmit it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.models.commands import JobRef, JobSpec, ResubmitJob, ResubmitResult
from hyperpod_recovery.models.common import matches
from hyperpod_recovery.models.kubernetes import KUBE_UID_PATTERN
from hyperpod_recovery.steps.commands import answer_here, dispatch_command

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import ResubmitJobInput, ResumePlan
    from hyperpod_recovery.ports import ClaimedJobs, Orchestrator


def resubmit_job(
    step: ResubmitJobInput, *, orchestrator: Orchestrator, ledger: ClaimedJobs, claim_ttl: timedelta, now: datetime
) -> dict[str, Any]:
    """Once per job: the ledger claim stops a second incident (or a retried Lambda) from
    restarting a job that was already resubmitted. A stop only (an EKS job stopped at once, re-created
    after the rejoin) takes the same claim: this incident's from the stop on."""
    request, plan = step.request, step.plan
    job_id = plan.job.job_id
    # (a stop only, and the re-creation after the rejoin that follows it, are two commands of one claim)
    command_id = f"{step.execution_name}:{'stop' if plan.stop_only else 'resubmit'}:{job_id}"
    claim = ledger.claim_resubmission(request.cluster, job_id, step.execution_name, now, claim_ttl)
    if not claim.claimed or claim.new_job_id:
        # Another incident restarted this job, or this incident already did (a retried step):
        # answer from the claim instead of submitting the job a second time.
        result = ResubmitResult(
            old_job_id=job_id,
            new_job_id=claim.new_job_id,
            already_submitted=not claim.claimed,
            submitted_by=None if claim.claimed else claim.incident_id,
            stop_only=plan.stop_only,
        )
        answer_here(orchestrator, step.task_token, command_id, "resubmit_job", result, now)
        return {"command_id": command_id, "sent": False, "already_resubmitted_by": claim.incident_id}
    # EKS: the re-creation's token, in the ledger before the object is made (the object carries it):
    # what proves which object is ours, and how a retry finds it whatever its name.
    token = ledger.recreation_token(request.cluster, job_id, now) if plan.job.kube is not None else None
    kube, copy_token = plan.job.kube, None
    # (a copy named by a Kubernetes uid is an EKS object: a Slurm grow-back reads nothing more)
    eks_grow_back = plan.require_free_nodes is not None and kube is None and matches(KUBE_UID_PATTERN, job_id)
    origin = shrunk_from(step, ledger) if eks_grow_back else None
    if origin is not None and origin.kube is not None:
        # An EKS grow-back: the shrunk copy is found (and proved ours) by the token recorded for the
        # re-creation that made it; its full-size successor gets a token of its own.
        kube, copy_token = origin.kube, ledger.recreation_token(request.cluster, origin.job_id, now)
        token = ledger.recreation_token(request.cluster, job_id, now)
    return dispatch_command(
        orchestrator,
        step,
        ResubmitJob(
            job_id=job_id,
            checkpoint=plan.checkpoint,
            kube=kube,
            recreation_token=token,
            copy_token=copy_token,
            stop_only=plan.stop_only,
            **sized(plan),
        ),
        command_id=command_id,
        now=now,
    )


def sized(plan: ResumePlan) -> dict[str, Any]:
    """A shrink or a grow-back's size (ResubmitJob.nodes and data_parallel) and a grow-back's
    condition (require_free_nodes); nothing for a job resubmitted at the size it ran at."""
    decision = plan.elastic
    if decision is None or (decision.action != "shrink" and plan.require_free_nodes is None):
        return {}
    fields: dict[str, Any] = {"nodes": decision.nodes, "data_parallel": decision.data_parallel}
    if plan.require_free_nodes is not None:
        fields["require_free_nodes"] = plan.require_free_nodes
    return {k: v for k, v in fields.items() if v is not None}


def shrunk_from(step: ResubmitJobInput, ledger: ClaimedJobs) -> JobSpec | None:
    """A grow-back's job as the incident captured it (an EKS job object, which the plan of a shrunk
    copy does not name): the elastic job object of this incident whose lineage name the copy carries
    and whose resubmission this incident claimed. None on Slurm (the agent holds the capture)."""
    plan = step.plan
    found = [
        j
        for j in ledger.jobs_of(step.execution_name) or []
        if j.kube is not None and j.elastic is not None and JobRef(job_id=j.job_id, name=j.name).name == plan.job.name
    ]
    if len(found) > 1:
        cluster = step.request.cluster
        claimed = [j for j in found if (c := ledger.resubmission_claim(cluster, j.job_id)) and c.incident_id == step.execution_name]
        found = claimed or found
    return found[0] if found else None
