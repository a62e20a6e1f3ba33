"""Apply Safety Policy: circuit breaker, repeat offenders, cluster cap, before anything destructive."""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import BREAKER_TRIPPED
from hyperpod_recovery.models.workflow import ApplySafetyPolicyInput
from hyperpod_recovery.observability import metrics
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.safety import apply_safety


@workflow_step(ApplySafetyPolicyInput)
def lambda_handler(step: ApplySafetyPolicyInput, deps: Dependencies):
    assessment = apply_safety(step, ledger=deps.ledger, policy=deps.safety_policy, reservation_ttl=deps.lock_ttl, now=deps.now())
    if assessment.safety is not None and assessment.safety.breaker_tripped_now:
        metrics.add_metric(name=BREAKER_TRIPPED, unit=MetricUnit.Count, value=1)
    return assessment
