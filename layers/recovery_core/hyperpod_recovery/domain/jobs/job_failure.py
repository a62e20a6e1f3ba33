"""JobRecovery's decisions, pure: why did the job fail, and may it be restarted (and when).

* ``classify_failure``: first, a job whose launcher said "do not requeue" (exit code 93, NVIDIA's
  resiliency extension) is never restarted: DoNotRequeue, a human decides. Otherwise node-caused
  (NODE_FAIL, or a node of the job unhealthy in HyperPod or DOWN/FAIL in Slurm) versus application
  failure (all nodes healthy); or left alone because something else already restarts it (HyperPod
  auto-resume, a Slurm requeue).
* ``plan_restart``: once per job (the resubmission claim), from the newest verified checkpoint,
  within the lineage's restart budget, with backoff; a failure at the same checkpoint step as the
  previous one is a crash loop and goes to a human instead.
* ``watch_other_recovery``: wait for the incident that already holds the job's nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.intake.execution_names import node_execution_name
from hyperpod_recovery.domain.jobs.failure_chance import duration_words, exposure_seconds, is_chance
from hyperpod_recovery.domain.jobs.node_request import node_recovery_request
from hyperpod_recovery.domain.jobs.states import running_again
from hyperpod_recovery.errors import (
    CrashLoopDetected,
    DoNotRequeue,
    JobNodesNotCarried,
    JobSpecUnavailable,
    NodeRecoveryEscalated,
    NodeRecoveryNotFinished,
    NoVerifiedCheckpoint,
    RestartBudgetExhausted,
)
from hyperpod_recovery.models.commands import (
    DRAINED_SLURM_STATES,
    REPAIR_REASON_PREFIXES,
    UNHEALTHY_SLURM_FLAGS,
    UNHEALTHY_SLURM_STATES,
    CheckpointRef,
    JobSpec,
    NodeStatus,
    left_alone_reason,
)
from hyperpod_recovery.models.common import MAX_JOB_NODES_CARRIED
from hyperpod_recovery.models.job_events import DO_NOT_REQUEUE_EXIT_CODE, JobFailedDetail
from hyperpod_recovery.models.job_recovery import (
    FailureClassification,
    FaultyNode,
    OtherRecoveryWatch,
    RestartDecision,
    RestartEntry,
)

if TYPE_CHECKING:
    from hyperpod_recovery.models.cluster import ClusterNode
    from hyperpod_recovery.models.node_recovery import CheckpointPlan
    from hyperpod_recovery.models.records import IncidentRecord, ResubmissionClaim
    from hyperpod_recovery.models.requests import JobRecoveryRequest

# Slurm restarted the job itself (requeue after a node failure): the same job id is queued again.
REQUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"})
# ClusterInstanceStatus values of a node that is not (or no longer) a healthy member.
UNHEALTHY_HYPERPOD_STATUSES = frozenset({"Failure", "ShuttingDown", "Pending", "NotFound"})


@dataclass(frozen=True)
class RestartPolicy:
    """The per-lineage restart budget for application failures (template parameters JobRestart*)."""

    budget: int
    window_seconds: int
    backoff_seconds: int
    max_backoff_seconds: int
    crash_loop_repeats: int
    # Job-only failures a node brings per 1,000 node-days (JobFailuresPer1000NodeDays): what chance
    # explains on a large job (domain/jobs/failure_chance.py). 0: every count over a limit pages.
    job_failures_per_1000_node_days: float = 0.0


def job_label(job_id: str, job: JobSpec | None, failure: JobFailedDetail | None) -> str:
    """The job as its orchestrator shows it: ``job 1001 (llama)`` on Slurm, ``PyTorchJob kubeflow/llama``
    on EKS (its uid is on the timeline's first line), whichever of the job's description and the
    failure event names it."""
    kube = (job.kube if job is not None else None) or (failure.kube if failure is not None else None)
    if kube is not None:
        return f"{kube.kind} {kube.namespace}/{kube.name}"
    name = job.name if job is not None else failure.name if failure is not None else None
    return f"job {job_id}" + (f" ({name})" if name else "")


def nodes_text(nodes: list[str], limit: int = 4) -> str:
    """A node list short enough for a timeline line: ``a, b, c, d +12``."""
    shown = ", ".join(nodes[:limit]) or "no node known"
    return shown + (f" +{len(nodes) - limit}" if len(nodes) > limit else "")


def job_nodes(request: JobRecoveryRequest, job: JobSpec | None) -> list[str]:
    """The nodes the job ran on: the epilog's SLURM_JOB_NODELIST first (squeue forgets an ended
    job's nodes), else what slurmctld says now."""
    failure = request.failure
    nodes = (failure.nodes if failure else []) or (job.nodes if job else [])
    return list(dict.fromkeys(nodes))


def faulty_nodes(
    nodes: Iterable[str], slurm: list[NodeStatus], cluster: list[ClusterNode], orchestrator: Literal["slurm", "eks"] = "slurm"
) -> list[FaultyNode]:
    """The job's nodes that are unhealthy in HyperPod, or DOWN/FAIL/DRAIN in Slurm.

    A node drained by someone else (a reason without our tag or HyperPod's ``Action:``) counts as a
    fault of the job but is not ours to repair: replacing a node an operator drained for
    maintenance would be the automation making things worse.
    """
    by_name = {s.name: s for s in slurm}
    by_host = {name: n for n in cluster if (name := n.name_in(orchestrator))}
    found = []
    for name in dict.fromkeys(nodes):
        why = []
        ours = True
        state = by_name.get(name)
        if state is not None:
            base = state.state.lower().split("+", 1)[0]
            if base in UNHEALTHY_SLURM_STATES or UNHEALTHY_SLURM_FLAGS & set(state.flags):
                why.append(f"Slurm state {state.state}{'+' + '+'.join(state.flags) if state.flags else ''}")
            elif state.reason.startswith(REPAIR_REASON_PREFIXES):
                why.append(f"drained for repair ({state.reason[:80]})")
            elif "DRAIN" in state.flags or base in DRAINED_SLURM_STATES:
                why.append(f"drained by someone else ({state.reason[:80] or 'no reason'}): left to them")
                ours = False
        node = by_host.get(name)
        if node is not None and node.status in UNHEALTHY_HYPERPOD_STATUSES:
            why.append(f"HyperPod status {node.status}")
            ours = True  # HyperPod itself says the instance is bad
        if why:
            found.append(FaultyNode(slurm_node=name, node_id=node.node_id if node else None, why="; ".join(why), ours_to_repair=ours))
    return found


def do_not_requeue_reason(label: str, failure: JobFailedDetail, orchestrator: Literal["slurm", "eks"] = "slurm") -> str:
    """Why a job its launcher gave up on is not restarted. Its launcher's verdict wins over every
    other rule: a node fault at the same end is repaired through that node's own health events
    (NodeRecovery), never by this job's incident, so nothing restarts the job behind the verdict."""
    nodes = "; Slurm also reported a node failure: its nodes are not replaced for this job" if failure.state == "NODE_FAIL" else ""
    return (
        f"{label} ended {failure.state} with exit code {failure.exit_code}: its launcher (NVIDIA resiliency extension) "
        f"decided it must not be requeued; not {'re-created' if orchestrator == 'eks' else 'resubmitted'}{nodes}"
    )


def classify_failure(
    request: JobRecoveryRequest,
    job: JobSpec | None,
    slurm: list[NodeStatus],
    cluster: list[ClusterNode],
    execution_name: str,
    now: datetime,
    orchestrator: Literal["slurm", "eks"] = "slurm",
) -> FailureClassification:
    failure = request.failure
    label = job_label(request.job_id, job, failure)
    if failure is not None and failure.exit_code == DO_NOT_REQUEUE_EXIT_CODE:
        raise DoNotRequeue(do_not_requeue_reason(label, failure, orchestrator))
    if (job is not None and job.auto_resume) or (failure is not None and failure.auto_resume):
        return FailureClassification(
            at=now,
            kind="left_alone",
            job=job,
            reason=f"{label}: {left_alone_reason(job)}"
            if job is not None and job.restarted_by
            else f"{label} uses srun --auto-resume=1: HyperPod restarts it itself",
        )
    if job is None:
        raise JobSpecUnavailable(
            f"{label}: slurmctld no longer knows the job (MinJobAge passed?), so there is no batch script to resubmit it with"
        )
    if job.state in REQUEUED_STATES or (request.source == "job_failed" and running_again(job.state, orchestrator)):
        by = "its operator (its pods restarted" if orchestrator == "eks" else "Slurm (requeued"
        return FailureClassification(at=now, kind="left_alone", job=job, reason=f"{label} was already restarted by {by}; now {job.state})")
    nodes = job_nodes(request, job)
    if not nodes and job.num_nodes > MAX_JOB_NODES_CARRIED:
        # a manual request: no failure event named them, and its spec came without them
        raise JobNodesNotCarried(
            f"{label} runs on {job.num_nodes} nodes, more than a workflow carries the names of ({MAX_JOB_NODES_CARRIED}), "
            "and nothing in this incident named them: whether one of them failed cannot be told, so nothing was done to it"
        )
    faulty = faulty_nodes(nodes, slurm, cluster, orchestrator)
    ended = f"ended {failure.state} ({failure.reason or 'no reason'}, exit {failure.exit_code})" if failure else f"is {job.state}"
    if not faulty and not (failure is not None and failure.state == "NODE_FAIL"):
        return FailureClassification(
            at=now,
            kind="application",
            job=job,
            jobs=[job],
            reason=f"{label} {ended} with every node healthy ({nodes_text(nodes)}): an application failure",
        )
    replaceable = [f for f in faulty if f.node_id and f.ours_to_repair]
    reason = f"{label} {ended}: " + (
        "; ".join(f"{f.slurm_node}: {f.why}" for f in faulty)
        if faulty
        else "Slurm reported a node failure but every node looks healthy now"
    )
    node_request = node_recovery_request(request, replaceable, "job_failed", lambda f: f"{label} {ended} on {f.slurm_node}: {f.why}")
    return FailureClassification(
        at=now,
        kind="node_caused",
        job=job,
        jobs=[job],
        reason=reason[:2048],
        faulty_nodes=faulty,
        recover_nodes=node_request is not None,
        node_request=node_request,
        node_execution_name=node_execution_name(execution_name) if node_request else None,
    )


def refuse_second_slowdown(label: str, history: list[RestartEntry], now: datetime, window_seconds: int) -> None:
    """A slow job progresses and checkpoints: the same-step crash-loop rule never sees it loop. One
    restart for a slowdown per lineage and window: slow again after it, the slowness follows the job
    (its data, its code, its schedule), not a node, and a human decides."""
    before = [e for e in history if e.kind == "slow" and e.restarted_at >= now - timedelta(seconds=window_seconds)]
    if before:
        raise CrashLoopDetected(
            f"{label} is slow again after its restart for a slowdown at {before[-1].restarted_at:%Y-%m-%d %H:%M} UTC "
            f"(incident {before[-1].incident}): restarting it again would loop"
        )


def plan_restart(
    request: JobRecoveryRequest,
    classification: FailureClassification,
    checkpoints: CheckpointPlan,
    *,
    claim: ResubmissionClaim | None,
    lineage_root: str,
    history: list[RestartEntry],
    policy: RestartPolicy,
    execution_name: str,
    now: datetime,
    claimed_copy: str | None = None,
) -> RestartDecision:
    """Resubmit, or leave alone because someone already did; raises when a human must decide.
    ``claimed_copy``: on EKS, the name of the object the claim's incident made (its record's)."""
    job = classification.job
    assert job is not None, "only classifications with a job reach Plan Job Restart"
    label = job_label(job.job_id, job, request.failure)
    # an open claim that expired is nobody's: its incident died unsettled, or kept it for a resubmission
    # whose answer was lost; Resubmit Job takes it over, and the agent finds a copy that incident made
    if claim is not None and claim.incident_id != execution_name and claim.in_force(now):
        by_child = claim.incident_id == classification.node_execution_name
        return RestartDecision(
            at=now,
            action="resubmitted_by_node_recovery" if by_child else "left_alone",
            reason=_claimed_reason(label, job, claim, claimed_copy),
            lineage_root=lineage_root,
            resubmitted_as=claim.new_job_id,
            resubmitted_by=claim.incident_id,
            resubmitted_name=claimed_copy if job.kube and claim.new_job_id else None,
        )
    if checkpoints.unresumable:
        raise NoVerifiedCheckpoint("; ".join(f"job {j.job_id} ({j.name}): {j.reason}" for j in checkpoints.unresumable))
    if not checkpoints.resumable:
        return RestartDecision(at=now, action="left_alone", reason=f"{label}: nothing to resume", lineage_root=lineage_root)
    plan = checkpoints.resumable[0]
    step = plan.checkpoint.step
    in_window = [e for e in history if e.kind == "application" and e.restarted_at >= now - timedelta(seconds=policy.window_seconds)]
    # Every earlier restart from this same step has failed again (we are handling the latest
    # failure of the lineage): with the failure that led to the first of them, that many failures here.
    at_step = [e for e in history if e.checkpoint_step == step]
    failures_at_step = 1 + len(at_step)
    backoff = 0
    chance_note = ""
    if classification.kind == "slow":
        refuse_second_slowdown(label, history, now, policy.window_seconds)
    if classification.kind in ("hung", "slow") and failures_at_step >= policy.crash_loop_repeats:
        # A job that hangs (or slows down) again and again from the same checkpoint is the code's or
        # the data's, not a node's: another restart would loop.
        raise CrashLoopDetected(
            f"{label} {'is slow' if classification.kind == 'slow' else 'hung'}, failure {failures_at_step} "
            f"with its newest verified checkpoint still at step {step} "
            f"({plan.checkpoint.uri}): restarting it again would loop"
        )
    if classification.kind == "application":
        chance_note = _within_bounds(label, job.num_nodes, plan.checkpoint, (at_step, in_window), policy, now)
        backoff = min(policy.max_backoff_seconds, policy.backoff_seconds * 2 ** min(len(in_window), 30))
    budget_text = (
        f", restart {len(in_window) + 1} of {policy.budget} in {policy.window_seconds} s"
        if classification.kind == "application" and len(in_window) < policy.budget
        else f", restart {len(in_window) + 1} in {policy.window_seconds} s"
        if classification.kind == "application"
        else ""
    )
    return RestartDecision(
        at=now,
        action="resubmit",
        reason=f"{label}: resubmit from step {step} ({plan.checkpoint.uri})"
        + (f" after a {backoff} s backoff" if backoff else "")
        + budget_text
        + chance_note,
        lineage_root=lineage_root,
        plan=plan,
        backoff_seconds=0 if request.dry_run else backoff,
        restarts_in_window=len(in_window),
        failures_at_step=failures_at_step,
    )


def _claimed_reason(label: str, job: JobSpec, claim: ResubmissionClaim, copy_name: str | None = None) -> str:
    """What another incident's claim on the job says: its copy (on EKS a re-created object, by the name
    kubectl shows when its maker's record gives it, else by its uid), or an open claim that says only
    that its incident holds it."""
    if claim.new_job_id:
        made = "re-created" if job.kube else "resubmitted"
        if job.kube and copy_name:
            copy = f"{job.kube.kind} {job.kube.namespace}/{copy_name}"
        else:
            copy = f"the job of uid {claim.new_job_id}" if job.kube else f"job {claim.new_job_id}"
        return f"{label} was already {made} by incident {claim.incident_id} as {copy}"
    return f"{label} {open_claim_text(claim, job.kube is not None)}"


def _within_bounds(
    label: str,
    nodes: int,
    checkpoint: CheckpointRef,
    restarts: tuple[list[RestartEntry], list[RestartEntry]],
    policy: RestartPolicy,
    now: datetime,
) -> str:
    """An application failure's restart within the crash-loop rule and the restart budget, or a human
    decides (raises). ``restarts``: the earlier restarts from this step, and those in the window. Returns
    what chance excused, said for the reason."""
    at_step, in_window = restarts
    step = checkpoint.step
    rate = policy.job_failures_per_1000_node_days
    failures_at_step = 1 + len(at_step)
    chance_note = ""
    if failures_at_step >= policy.crash_loop_repeats:
        # The failures of the copies restarted from this step: a loop, unless a job this size meets
        # that many independent faults in the time those copies ran by chance.
        span = exposure_seconds([e.restarted_at for e in at_step], now)
        chance, p = is_chance(len(at_step), nodes, rate, span)
        if not chance:
            raise CrashLoopDetected(
                f"{label} failed {failures_at_step} times with its newest verified checkpoint still at step {step} "
                f"({checkpoint.uri}): restarting it again would loop"
            )
        chance_note = (
            f"; {len(at_step)} failure(s) of the copies restarted from step {step}, in the {duration_words(span)} they ran, are "
            f"what independent faults bring a {nodes}-node job by chance ({100 * p:.1f} %, at {rate:g} per 1,000 node-days): "
            "not taken for a crash loop"
        )
    if len(in_window) >= policy.budget:
        # The failures after the window's first restart, in the time since it (a budget of 0 means
        # never: chance is not asked): over the budget, unless a job this size meets them by chance.
        span = max(0.0, (now - in_window[0].restarted_at).total_seconds()) if in_window else 0.0
        chance, p = is_chance(len(in_window), nodes, rate, span) if policy.budget > 0 else (False, 0.0)
        if not chance:
            raise RestartBudgetExhausted(
                f"{label}: {len(in_window)} restarts after application failures in the last {policy.window_seconds} s "
                f"(budget {policy.budget}); last from step {step}"
            )
        chance_note += (
            f"; over the budget of {policy.budget}, but {len(in_window)} failure(s) in the {duration_words(span)} since the "
            f"window's first restart are what independent faults bring a {nodes}-node job by chance "
            f"({100 * p:.1f} %, at {rate:g} per 1,000 node-days)"
        )
    return chance_note


def watch_other_recovery(
    watch: OtherRecoveryWatch,
    records: dict[str, IncidentRecord | None],
    *,
    poll_seconds: int,
    max_poll_seconds: int,
    deadline_seconds: int,
    now: datetime,
) -> OtherRecoveryWatch:
    """Done when every incident holding the job's nodes has recorded its outcome."""
    started = watch.started_at or now
    deadline = watch.deadline or started + timedelta(seconds=deadline_seconds)
    outcomes = {incident: record.outcome for incident, record in records.items() if record is not None}
    escalated = {i: records[i] for i, o in outcomes.items() if o == "escalated"}
    if escalated:
        incident, record = next(iter(escalated.items()))
        detail = f"{record.error}: {record.cause}" if record and record.error else "see that incident"
        raise NodeRecoveryEscalated(f"incident {incident}, which holds the job's nodes, escalated ({detail}); the job is not resubmitted")
    done = len(outcomes) == len(records)
    if not done and now >= deadline:
        waiting = sorted(set(records) - set(outcomes))
        raise NodeRecoveryNotFinished(f"incidents {waiting} hold the job's nodes and had not finished by {deadline.isoformat()}")
    wait = 0 if done else min(max_poll_seconds, poll_seconds * 2 ** min(watch.checks, 10))
    return watch.model_copy(
        update={
            "checks": watch.checks + 1,
            "started_at": started,
            "deadline": deadline,
            "at": now,
            "done": done,
            "outcomes": outcomes,
            "next_wait_seconds": wait,
        }
    )


def open_claim_text(claim: ResubmissionClaim, on_eks: bool) -> str:
    """An open claim, in words that claim no more than it holds: its incident may be restarting the job,
    or may have left it to Slurm's requeue or kept it after a lost answer."""
    what = "re-creation" if on_eks else "resubmission"
    until = f" (open until {claim.open_until:%Y-%m-%d %H:%M:%S} UTC)" if claim.open_until else ""
    return f"is claimed for {what} by incident {claim.incident_id}{until}"
