"""An incident's resume plan (Find Newest Checkpoint): for every affected job, the checkpoint it
resumes from and when (now, before the replacement is back, or after the rejoin), at what size (an
elastic job may shrink), or why it cannot be resumed. The step reads the checkpoints and the ledger;
what follows from them is decided here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.elastic.decide import Estimate, decide_elastic
from hyperpod_recovery.domain.jobs.eks_grace import outlives_the_wait
from hyperpod_recovery.models.commands import CheckpointRef, JobRef, JobSpec, ResumePolicy, left_alone_reason
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.models.node_recovery import (
    MAX_ELASTIC_DECISIONS,
    MAX_SHRUNK_JOBS_PER_INCIDENT,
    CheckpointPlan,
    ElasticDecision,
    FindNewestCheckpointInput,
    ResumePlan,
    UnresumableJob,
)

if TYPE_CHECKING:
    from hyperpod_recovery.domain.checkpoints.discovery import Discovery


def resume_now(job: JobSpec, policy: ResumePolicy, *, allowed: bool) -> bool:
    """Whether ``job`` is resubmitted before the wait for its failed nodes' replacement: its own
    choice, else the stack's policy, where the workflow can (``allowed``)."""
    return allowed and (job.resume or policy) == "immediate"


class SpareNodes:
    """The spare nodes each partition had at the cordon, handed out job by job: two jobs of one
    incident are never both counted on the same spare."""

    def __init__(self) -> None:
        self.left: dict[str | None, int] = {}

    def of(self, job: JobSpec) -> int | None:
        if job.spare_nodes is None:
            return None
        return self.left.setdefault(job.partition, job.spare_nodes)

    def take(self, job: JobSpec, decision: ElasticDecision) -> None:
        spare = self.of(job)
        if spare is None or decision.action == "wait":
            return
        kept = decision.full_nodes - decision.lost_nodes  # the job's own nodes still in service
        used = decision.lost_nodes if decision.action == "full_size" else max(0, decision.nodes - kept)
        self.left[job.partition] = max(0, spare - used)


def stop_only(plan: ResumePlan) -> ResumePlan:
    """The stop at once of a job re-created after the rejoin: what the stop needs of its plan (the job,
    the step it is for), no more: it takes one of the incident's entries, and no more room in its state."""
    checkpoint = CheckpointRef(uri=plan.checkpoint.uri, step=plan.checkpoint.step)
    return ResumePlan(job=plan.job, checkpoint=checkpoint, stop_grace_seconds=plan.stop_grace_seconds, stop_only=True)


def not_to_read(job: JobSpec) -> tuple[str, UnresumableJob] | None:
    """A job planned without reading its checkpoints: ("unresumable", why) when the agent could not
    capture it faithfully or it names no checkpoint location; ("left_alone", why) when its own
    restarter resumes it. None: its checkpoints are read."""
    if job.unresumable and not job.auto_resume:
        return "unresumable", UnresumableJob(job_id=job.job_id, name=job.name, reason=f"cannot be resubmitted as it was: {job.unresumable}")
    if job.auto_resume:
        return "left_alone", UnresumableJob(job_id=job.job_id, name=job.name, reason=left_alone_reason(job))
    if not job.checkpoint_uri:
        return "unresumable", UnresumableJob(
            job_id=job.job_id, name=job.name, reason="no checkpoint location in the job's comment or environment"
        )
    return None


def unverified(job: JobSpec, discovery: Discovery) -> UnresumableJob:
    """A job none of whose checkpoints verified: why, with the first rejections."""
    rejected = f" (rejected: {'; '.join(discovery.rejected[:5])})" if discovery.rejected else ""
    return UnresumableJob(job_id=job.job_id, name=job.name, reason=f"no verified checkpoint under {job.checkpoint_uri}{rejected}"[:1024])


@dataclass(frozen=True)
class Timing:
    """When a job with a verified checkpoint resumes, before any elastic decision."""

    now: bool  # resubmitted before the rejoin
    slow: bool  # EKS: its pods may outlive a re-creation's wait: stopped at once, re-created after the rejoin
    rigid: bool  # never shrunk: a hang's job, or one held for the rejoin


def timing(job: JobSpec, step: FindNewestCheckpointInput, policy: ResumePolicy) -> Timing:
    """A hang's node recovery resubmits the hung job (only that one) at once, whatever the policy: the
    drain keeps it off the suspects, which the health gate then checks. Any other job goes by its own
    policy. EKS: a job's pod on a node this incident reboots stays Terminating until the node is
    back (no kubelet confirms it before), and no copy is made while it may run: such a job resumes
    after the rejoin. So does one whose pods may take longer to stop than a re-creation waits."""
    hung = step.hung_job == job.job_id
    # A planned swap's job leaves its node right after its commit: at once, onto a spare or shrunk.
    swapped = step.swapped_job == job.job_id
    slow = job.kube is not None and step.resume_now_allowed and outlives_the_wait(job.stop_grace_seconds)
    held = (job.kube is not None and step.rebooting) or slow
    now = resume_now(job, "immediate" if hung or swapped else policy, allowed=step.resume_now_allowed and not held)
    return Timing(now=now, slow=slow, rigid=hung or held)  # (held, no shrink either: a shrunk copy would wait for the same pods)


@dataclass(frozen=True)
class ElasticInputs:
    """What one job's shrink-or-wait decision weighs besides the job and its checkpoint."""

    lost: int  # its nodes out of service in this incident
    wait: Estimate  # the expected wait for the replacement
    grow_back: Estimate  # what growing back to full size costs it
    lineage_nodes: int | None  # the largest size its lineage ran at, when proven


def starts_now(when: Timing, decision: ElasticDecision | None) -> bool:
    """Resubmitted before the rejoin: by its timing, or because it shrinks (or runs full size on spares)."""
    return when.now or (decision is not None and decision.action != "wait")


class Planner:
    """The incident's plan, job by job. Every job ends in exactly one list (an EKS job stopped at once
    is also a stop only in ``resume_now``); at most MAX_ELASTIC_DECISIONS elastic decisions and
    MAX_SHRUNK_JOBS_PER_INCIDENT shrunk jobs an incident."""

    def __init__(self, step: FindNewestCheckpointInput, policy: ResumePolicy, plan: CheckpointPlan) -> None:
        self.step, self.policy, self.plan = step, policy, plan
        self.spares = SpareNodes()
        self.decided = self.shrunk = self.stops = 0
        self.room = MAX_JOBS_PER_INCIDENT - len(step.jobs)  # a stop is one more entry of the plan: the Maps' items are bounded together

    def unresumable(self, job: JobSpec, reason: str) -> None:
        self.plan.unresumable.append(UnresumableJob(job_id=job.job_id, name=job.name, reason=reason[:1024]))

    def elastic_spent(self, job: JobSpec) -> bool:
        """An elastic job past the incident's decisions: treated as rigid."""
        return self.decided >= MAX_ELASTIC_DECISIONS and bool(job.elastic or job.elastic_problem)

    def decide_elastic(self, job: JobSpec, checkpoint: CheckpointRef, inputs: ElasticInputs) -> ElasticDecision | None:
        """Shrink-and-continue, only where the workflow resubmits before the replacement is back; one
        incident grows back at most MAX_SHRUNK_JOBS_PER_INCIDENT (its history is bounded): the others wait."""
        decision = decide_elastic(
            job,
            checkpoint,
            lost=inputs.lost,
            spare=self.spares.of(job),
            wait=inputs.wait,
            grow_back=inputs.grow_back,
            lineage_nodes=inputs.lineage_nodes,
        )
        if decision is not None and decision.action == "shrink" and self.shrunk >= MAX_SHRUNK_JOBS_PER_INCIDENT:
            decision = decision.model_copy(
                update={"action": "wait", "nodes": decision.full_nodes, "data_parallel": None, "why": "too_many_shrunk"}
            )
        if decision is not None:
            self.decided += 1
            self.shrunk += decision.action == "shrink"
            self.spares.take(job, decision)
        return decision

    def place(self, job: JobSpec, discovery: Discovery, when: Timing, decision: ElasticDecision | None) -> ResumePlan:
        """The job's resume plan, in ``resume_now`` or ``resumable``; a slow EKS job's stop first."""
        assert discovery.checkpoint is not None
        now = starts_now(when, decision)
        # Every rejected step is in the step's log line; the plan keeps them newest first, in one line.
        chosen = ResumePlan(
            job=JobRef(job_id=job.job_id, name=job.name, kube=job.kube),
            checkpoint=discovery.checkpoint,
            rejected=["; ".join(discovery.rejected)] if discovery.rejected else [],
            elastic=decision,
            stop_grace_seconds=job.stop_grace_seconds if when.slow else None,
        )
        (self.plan.resume_now if now else self.plan.resumable).append(chosen)
        if when.slow and self.stops < self.room:
            self.stops += 1
            self.plan.resume_now.insert(self.stops - 1, stop_only(chosen))  # first: the sooner stopped
        self.plan.shrinks = self.shrunk
        return chosen
