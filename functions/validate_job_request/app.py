"""Validate Job Request: the start input (agent event or manual request) -> JobRecoveryRequest."""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import JOB_RECOVERIES_STARTED
from hyperpod_recovery.models.job_recovery import ValidateJobRequestInput
from hyperpod_recovery.observability import metrics
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.validate_job_request import validate_job_request


@workflow_step(ValidateJobRequestInput)
def lambda_handler(step: ValidateJobRequestInput, deps: Dependencies):
    request = validate_job_request(
        step, guarded=deps.guarded, stack_dry_run=deps.settings.dry_run, limits=deps.event_age_limits, now=deps.now()
    )
    metrics.add_metric(name=JOB_RECOVERIES_STARTED, unit=MetricUnit.Count, value=1)
    return request
