"""Apply Safety Policy: circuit breaker, repeat offenders, cluster cap, before anything destructive."""

from hyperpod_recovery.models.workflow import ApplySafetyPolicyInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.safety import apply_safety


@workflow_step(ApplySafetyPolicyInput)
def lambda_handler(step: ApplySafetyPolicyInput, deps: Dependencies):
    return apply_safety(step, ledger=deps.ledger, policy=deps.safety_policy, now=deps.now())
