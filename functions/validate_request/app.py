"""Validate Request: the start input -> RecoveryRequest, or InvalidRecoveryRequest naming the field."""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import RECOVERIES_STARTED
from hyperpod_recovery.models.node_recovery import ValidateRequestInput
from hyperpod_recovery.observability import metrics
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.validate_request import validate_request


@workflow_step(ValidateRequestInput)
def lambda_handler(step: ValidateRequestInput, deps: Dependencies):
    request = validate_request(
        step, guarded=deps.guarded, stack_dry_run=deps.settings.dry_run, limits=deps.event_age_limits, now=deps.now()
    )
    metrics.add_metric(name=RECOVERIES_STARTED, unit=MetricUnit.Count, value=1)
    return request
