"""Plan Job Restart (JobRecovery): the breaker, the claim, the lineage's restart budget, backoff and
crash loops, and the job side of the breaker: every restart planned takes a place among at most
BreakerMaxRecoveries in BreakerWindowSeconds, and the first one past them opens the breaker (a storm
of failed jobs, a shared file system gone, is a wider problem than single jobs: a human looks before
any more are restarted, on either orchestrator)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.jobs.job_failure import RestartPolicy, plan_restart
from hyperpod_recovery.models.job_recovery import PlanJobRestartInput, RestartDecision
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.domain.policy.safety import SafetyPolicy
    from hyperpod_recovery.models.records import BreakerState, ResubmissionClaim
    from hyperpod_recovery.ports import IncidentStore, Lineages, RestartBudget, SafetyRecords


def lineage_root_of(ledger: Lineages, cluster: str, job_id: str, resubmission_of: str | None) -> str:
    """The first job of the lineage: our ledger knows the jobs we resubmitted; a resubmission made
    some other way still names its predecessor in its comment (the event's resubmission_of)."""
    for candidate in (job_id, resubmission_of):
        if candidate:
            root = ledger.lineage_root(cluster, candidate)
            if root:
                return root
    return resubmission_of or job_id


def plan_job_restart(
    step: PlanJobRestartInput, *, ledger: RestartBudget, policy: RestartPolicy, safety: SafetyPolicy, now: datetime
) -> RestartDecision:
    request, job = step.request, step.classification.job
    assert job is not None, "Plan Job Restart runs only for classified jobs"
    failure = request.failure
    root = lineage_root_of(ledger, request.cluster, job.job_id, failure.resubmission_of if failure else None)
    breaker = ledger.breaker(request.cluster)
    if breaker.state == "open":
        # The breaker stops every automatic restart too: a human is already looking at the cluster.
        # (A dry run says so: it would be capped, as a NodeRecovery drill says.)
        return RestartDecision(
            at=now,
            action="capped",
            reason=f"the circuit breaker is open since {breaker.changed_at}: {breaker.reason}",
            lineage_root=root,
        )
    claim = ledger.resubmission_claim(request.cluster, job.job_id)
    decision = plan_restart(
        request,
        step.classification,
        step.checkpoints,
        claim=claim,
        lineage_root=root,
        history=ledger.restart_history(request.cluster, root),
        policy=policy,
        execution_name=step.execution_name,
        now=now,
        claimed_copy=_copy_name(ledger, claim, job.job_id) if job.kube else None,
    )
    if decision.action == "resubmit":
        decision = _within_the_breakers_window(decision, step, ledger=ledger, safety=safety, breaker=breaker, now=now)
    logger.info("restart planned", extra={"job_id": job.job_id, "action": decision.action, "reason": decision.reason})
    return decision


def _copy_name(ledger: IncidentStore, claim: ResubmissionClaim | None, job_id: str) -> str | None:
    """The name of the object another incident re-created the job as (EKS), from that incident's record:
    the claim knows its uid only, a human finds it by namespace/name."""
    if claim is None or not claim.new_job_id or claim.claimed:
        return None
    record = ledger.get_incident(claim.incident_id)
    fates = record.job_fates if record is not None else []
    return next((f.copy_name for f in fates if f.job == job_id and f.copy_id == claim.new_job_id and f.copy_name), None)


def _within_the_breakers_window(
    decision: RestartDecision,
    step: PlanJobRestartInput,
    *,
    ledger: SafetyRecords,
    safety: SafetyPolicy,
    breaker: BreakerState,
    now: datetime,
) -> RestartDecision:
    """The restart takes its place in the breaker's window (kept on a retry of this step); with none
    left, the breaker opens and nothing more restarts until a human resets it. In a dry run the ledger
    is behind the gate: the verdict is the policy's, the breaker is left as it was."""
    cluster, window = step.request.cluster, safety.breaker_window_seconds
    if ledger.reserve_job_restart(cluster, step.execution_name, safety.breaker_max_recoveries, now, timedelta(seconds=window)):
        return decision
    reason = (
        f"circuit breaker tripped: {safety.breaker_max_recoveries} job restarts in the last {window} s (limit "
        f"{safety.breaker_max_recoveries}): a wider problem than single jobs"
    )
    ledger.save_breaker(cluster, breaker.changed_to("open", reason=reason, by=step.execution_name, at=now))
    logger.warning("circuit breaker opened", extra={"reason": reason})
    return RestartDecision(at=now, action="capped", reason=reason, lineage_root=decision.lineage_root)
