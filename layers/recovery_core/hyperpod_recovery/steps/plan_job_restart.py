"""Plan Job Restart (JobRecovery): the breaker, the claim, the lineage's restart budget, backoff and crash loops."""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.domain.job_failure import RestartPolicy, plan_restart
from hyperpod_recovery.models.job_recovery import PlanJobRestartInput, RestartDecision
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Ledger


def lineage_root_of(ledger: Ledger, cluster: str, job_id: str, resubmission_of: str | None) -> str:
    """The first job of the lineage: our ledger knows the jobs we resubmitted; a resubmission made
    some other way still names its predecessor in its comment (the event's resubmission_of)."""
    for candidate in (job_id, resubmission_of):
        if candidate:
            root = ledger.lineage_root(cluster, candidate)
            if root:
                return root
    return resubmission_of or job_id


def plan_job_restart(step: PlanJobRestartInput, *, ledger: Ledger, policy: RestartPolicy, now: datetime) -> RestartDecision:
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
    decision = plan_restart(
        request,
        step.classification,
        step.checkpoints,
        claim=ledger.resubmission_claim(request.cluster, job.job_id),
        lineage_root=root,
        history=ledger.restart_history(request.cluster, root),
        policy=policy,
        execution_name=step.execution_name,
        now=now,
    )
    logger.info("restart planned", extra={"job_id": job.job_id, "action": decision.action, "reason": decision.reason})
    return decision
