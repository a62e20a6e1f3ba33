"""Apply Safety Policy: circuit breaker, repeat offenders, cluster cap, before anything destructive."""

from hyperpod_recovery.metric_names import BREAKER_TRIPPED
from hyperpod_recovery.models.node_recovery import ApplySafetyPolicyInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.apply_safety_policy import apply_safety_policy


@workflow_step(ApplySafetyPolicyInput)
def lambda_handler(step: ApplySafetyPolicyInput, deps: Dependencies):
    assessment = apply_safety_policy(step, ledger=deps.ledger, policy=deps.safety_policy, reservation_ttl=deps.lock_ttl, now=deps.now())
    if assessment.safety is not None and assessment.safety.breaker_tripped_now:
        deps.count_done(BREAKER_TRIPPED, 1)
    return assessment
