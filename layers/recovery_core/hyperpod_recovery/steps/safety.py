"""Apply Safety Policy: breaker, repeat offenders, cluster cap; then count the nodes against the cap."""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.domain.safety import SafetyPolicy, apply_safety_policy
from hyperpod_recovery.models.workflow import ApplySafetyPolicyInput, Assessment, SafetyState
from hyperpod_recovery.observability import logger
from hyperpod_recovery.steps.ports import Ledger


def apply_safety(step: ApplySafetyPolicyInput, *, ledger: Ledger, policy: SafetyPolicy, now: datetime) -> Assessment:
    request = step.request
    breaker = ledger.breaker(request.cluster)
    assessment = apply_safety_policy(
        step.assessment,
        policy,
        breaker=breaker,
        log=ledger.recovery_log(request.cluster),
        in_recovery=ledger.nodes_in_recovery(request.cluster),
        now=now,
    )
    safety = assessment.safety
    assert safety is not None
    if request.dry_run:
        # A drill says what the policy would decide and changes none of its state.
        return assessment.model_copy(update={"safety": safety.model_copy(update={"reserved": [], "breaker_tripped_now": False})})
    if safety.breaker_tripped_now:
        ledger.save_breaker(request.cluster, breaker.changed_to("open", reason=safety.reason, by=step.execution_name, at=now))
        logger.warning("circuit breaker opened", extra={"reason": safety.reason})
    if safety.reserved and not ledger.reserve_capacity(request.cluster, safety.reserved, safety.limit):
        # Another incident took the last room between our read and our write.
        capped = safety.model_copy(
            update={"capped": True, "error": "ClusterCapReached", "reason": f"the cap of {safety.limit} nodes filled up", "reserved": []}
        )
        return assessment.model_copy(update={"safety": capped, "proceed": False})
    if safety.capped:
        logger.warning("recovery capped", extra={"error": safety.error, "reason": safety.reason})
    return assessment


def report_safety_state(*, ledger: Ledger, cluster: str) -> SafetyState:
    """Report Safety State (every 5 minutes): the breaker and the cap's use, as gauges for the
    dashboard and the BreakerOpen alarm, which then stays red until a human resets the breaker."""
    breaker = ledger.breaker(cluster)
    return SafetyState(
        cluster=cluster,
        breaker_open=breaker.state == "open",
        breaker_reason=breaker.reason if breaker.state == "open" else None,
        breaker_changed_at=breaker.changed_at,
        nodes_in_recovery=len(ledger.nodes_in_recovery(cluster)),
    )
