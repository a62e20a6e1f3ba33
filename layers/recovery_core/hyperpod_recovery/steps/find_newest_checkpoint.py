"""Find Newest Checkpoint: for every affected job, the newest verified checkpoint, or why not."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified
from hyperpod_recovery.domain.elastic.decide import Estimate, decide_elastic
from hyperpod_recovery.domain.elastic.estimates import MEASURED_WINDOW_DAYS, expected_wait, grow_back_cost
from hyperpod_recovery.domain.intake.execution_names import hung_job_of, is_hang_incident
from hyperpod_recovery.domain.jobs.eks_grace import outlives_the_wait
from hyperpod_recovery.errors import CheckpointUnreadable
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
from hyperpod_recovery.models.records import RecoveryLogEntry
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import CheckpointReader, ClaimedJobs, JobHistory, RecoveryLog


def resume_now(job: JobSpec, policy: ResumePolicy, *, allowed: bool) -> bool:
    """Whether ``job`` is resubmitted before the wait for its failed nodes' replacement: its own
    choice, else the stack's policy, where the workflow can (``allowed``)."""
    return allowed and (job.resume or policy) == "immediate"


@dataclass(frozen=True)
class ElasticSettings:
    """The stack's figures for shrink-or-wait until the ledger has measured ones."""

    cluster: str
    expected_replacement_seconds: int
    grow_back_seconds: int


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


def find_newest_checkpoint(
    step: FindNewestCheckpointInput,
    *,
    reader: CheckpointReader,
    ledger: JobHistory,
    policy: ResumePolicy = "after_rejoin",
    elastic: ElasticSettings | None = None,
    now: datetime,
) -> CheckpointPlan:
    """Every job ends in exactly one list (an EKS job stopped at once is also a stop only in
    ``resume_now``: CheckpointPlan); a job the agent could not capture faithfully is
    unresumable here, before any resubmission is sent. The jobs' descriptions go to the ledger,
    where Record Outcome finds them; the workflow then forgets them (Forget Job Details).

    A resumable job is planned for now or for after the rejoin by ``resume_now``."""
    ledger.save_jobs(step.execution_name, step.jobs, now)
    estimates = _estimates(step, ledger, elastic, now)
    spares = SpareNodes()
    decided = shrunk = stops = 0
    room = MAX_JOBS_PER_INCIDENT - len(step.jobs)  # (a stop is one more entry of the plan: the Maps' items are bounded together)
    plan = CheckpointPlan(at=now, jobs_found=len(step.jobs) + step.omitted, jobs_omitted=step.omitted)
    for job in step.jobs:
        if job.unresumable and not job.auto_resume:
            plan.unresumable.append(
                UnresumableJob(job_id=job.job_id, name=job.name, reason=f"cannot be resubmitted as it was: {job.unresumable}")
            )
            continue
        if job.auto_resume:
            plan.left_alone.append(UnresumableJob(job_id=job.job_id, name=job.name, reason=left_alone_reason(job)))
            continue
        if not job.checkpoint_uri:
            plan.unresumable.append(
                UnresumableJob(job_id=job.job_id, name=job.name, reason="no checkpoint location in the job's comment or environment")
            )
            continue
        try:
            discovery = find_newest_verified(reader, job.checkpoint_uri, job=job.name or None)
        except CheckpointUnreadable as exc:
            plan.unresumable.append(
                UnresumableJob(job_id=job.job_id, name=job.name, reason=f"cannot read {job.checkpoint_uri}: {exc}"[:1024])
            )
            continue
        except ValueError as exc:  # a location with '..' or empty segments: never guessed at
            plan.unresumable.append(UnresumableJob(job_id=job.job_id, name=job.name, reason=f"unusable checkpoint location: {exc}"[:1024]))
            continue
        if discovery.checkpoint is None:
            rejected = f" (rejected: {'; '.join(discovery.rejected[:5])})" if discovery.rejected else ""
            plan.unresumable.append(
                UnresumableJob(
                    job_id=job.job_id, name=job.name, reason=f"no verified checkpoint under {job.checkpoint_uri}{rejected}"[:1024]
                )
            )
            continue
        # A hang's node recovery resubmits the hung job (only that one) at once, whatever the policy: the
        # drain keeps it off the suspects, which the health gate then checks. Any other job on them goes
        # by its own policy, as for any node incident.
        hung = is_hang_incident(step.execution_name) and hung_job_of(step.execution_name) == job.job_id
        # EKS: a job's pod on a node this incident reboots stays Terminating until the node is back (no
        # kubelet confirms it before), and no copy is made while it may run: such a job resumes after the
        # rejoin. So does one whose pods may take longer to stop than a re-creation waits; it is stopped
        # at once (Resubmit Jobs Now, a stop only), so its pods have until the rejoin to go.
        slow = job.kube is not None and step.resume_now_allowed and outlives_the_wait(job.stop_grace_seconds)
        held = (job.kube is not None and step.rebooting) or slow
        now_or_later = resume_now(job, "immediate" if hung else policy, allowed=step.resume_now_allowed and not held)
        decision = None
        rigid = hung or held  # (held, no shrink either: a shrunk copy would wait for the same pods)
        if estimates is not None and not rigid and decided >= MAX_ELASTIC_DECISIONS and (job.elastic or job.elastic_problem):
            logger.warning("elastic job treated as rigid", extra={"job_id": job.job_id, "decided": decided, "limit": MAX_ELASTIC_DECISIONS})
        elif estimates is not None and not rigid:
            # Shrink-and-continue: only where the workflow resubmits before the replacement is back.
            wait, log = estimates
            assert elastic is not None
            grow_back = grow_back_cost(log, job.checkpoint_uri, parameter_seconds=elastic.grow_back_seconds)
            lost = job.lost_nodes if job.lost_nodes is not None else step.lost_nodes
            lineage = lineage_nodes(ledger, elastic.cluster, job) if elastic is not None else None
            decision = decide_elastic(
                job, discovery.checkpoint, lost=lost, spare=spares.of(job), wait=wait, grow_back=grow_back, lineage_nodes=lineage
            )
            if decision is not None and decision.action == "shrink" and shrunk >= MAX_SHRUNK_JOBS_PER_INCIDENT:
                # One incident grows back at most this many (its history is bounded): the others wait.
                decision = decision.model_copy(
                    update={"action": "wait", "nodes": decision.full_nodes, "data_parallel": None, "why": "too_many_shrunk"}
                )
            if decision is not None:
                decided += 1
                shrunk += decision.action == "shrink"
                spares.take(job, decision)
                now_or_later = now_or_later or decision.action != "wait"
        logger.info(
            "checkpoint chosen",
            extra={
                "job_id": job.job_id,
                "checkpoint": discovery.checkpoint.uri,
                "found_by": discovery.found_by,
                "rejected": discovery.rejected,
                "resume": "immediate" if now_or_later else "after_rejoin",
                "resume_chosen_by": "job" if job.resume else "stack",
                "stop_grace_seconds": job.stop_grace_seconds if slow else None,
                "elastic": decision.model_dump(mode="json") if decision is not None else None,
            },
        )
        # Every rejected step is in the log line above; the plan keeps them newest first, in one line of 300 characters.
        newest_rejected = ["; ".join(discovery.rejected)] if discovery.rejected else []
        chosen = ResumePlan(
            job=JobRef(job_id=job.job_id, name=job.name, kube=job.kube),
            checkpoint=discovery.checkpoint,
            rejected=newest_rejected,
            elastic=decision,
            stop_grace_seconds=job.stop_grace_seconds if slow else None,
        )
        (plan.resume_now if now_or_later else plan.resumable).append(chosen)
        if slow and stops < room:
            stops += 1
            plan.resume_now.insert(stops - 1, stop_only(chosen))  # (first: the sooner stopped)
    plan.shrinks = shrunk
    return plan


def stop_only(plan: ResumePlan) -> ResumePlan:
    """The stop at once of a job re-created after the rejoin: what the stop needs of its plan (the job,
    the step it is for), no more: it takes one of the incident's entries, and no more room in its state."""
    checkpoint = CheckpointRef(uri=plan.checkpoint.uri, step=plan.checkpoint.step)
    return ResumePlan(job=plan.job, checkpoint=checkpoint, stop_grace_seconds=plan.stop_grace_seconds, stop_only=True)


# A copy of a copy of ...: how far back its lineage's size is looked for (two ledger reads a step).
MAX_LINEAGE_STEPS = 4


def lineage_nodes(ledger: ClaimedJobs, cluster: str, job: JobSpec) -> int | None:
    """The largest size the job's lineage ran at, when the job is a copy we made (its comment's mark,
    each step proven by the ledger: that incident's claim on that job, and that incident's record of
    it); None when it is no copy of ours, or nothing proves it. A mark the ledger does not confirm is
    only the owner's word, never a reason to grow a job bigger than it ran."""
    mark, child, size, proven = job.copy_of, job.job_id, job.num_nodes, False
    for _ in range(MAX_LINEAGE_STEPS):
        if mark is None:
            break
        claim = ledger.resubmission_claim(cluster, mark.job_id)
        # The claim must be that incident's, and name this very job as its copy once it is completed
        # (while the incident runs it names none yet: then the incident's claim alone is the proof).
        if claim is None or claim.incident_id != mark.incident or claim.new_job_id not in (None, child):
            break
        parent = next((j for j in ledger.jobs_of(mark.incident) or [] if j.job_id == mark.job_id), None)
        if parent is None:
            break
        size, mark, child, proven = max(size, parent.num_nodes), parent.copy_of, parent.job_id, True
    return size if proven else None


def _estimates(
    step: FindNewestCheckpointInput, ledger: RecoveryLog, elastic: ElasticSettings | None, now: datetime
) -> tuple[Estimate, list[RecoveryLogEntry]] | None:
    """The expected wait, and the recovery log each job's grow-back cost is read from (its measured
    restarts), read only when an elastic job needs them (one Query of the recovery log); None where
    no job can shrink (no opt-in, or a workflow that cannot resubmit early)."""
    if elastic is None or not step.resume_now_allowed or not any(j.elastic or j.elastic_problem for j in step.jobs):
        return None
    log = ledger.recovery_log(elastic.cluster, since=now - timedelta(days=MEASURED_WINDOW_DAYS))
    wait = expected_wait(log, step.instance_groups, parameter_seconds=elastic.expected_replacement_seconds)
    return wait, log
