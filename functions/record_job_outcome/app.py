"""Record Job Outcome / Escalate Job Incident / Record Job Rejection: ledger (incident, lineage) + SNS."""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.models.job_recovery import RecordJobOutcomeInput
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.job_recovery import record_job_outcome

OUTCOME_METRICS = {
    "recovered": "JobsRecovered",
    "escalated": "JobsEscalated",
    "duplicate": "JobsLeftAlone",
    "rejected": "JobRequestsRejected",
    "capped": "JobsCapped",
    "dry_run": "JobDryRuns",
}


@workflow_step(RecordJobOutcomeInput)
def lambda_handler(step: RecordJobOutcomeInput, deps: Dependencies):
    result = record_job_outcome(
        step,
        ledger=deps.ledger,
        notifier=deps.notifier,
        cluster=deps.settings.cluster_name,
        execution_url=deps.execution_url(step.execution_name, workflow="job"),
        now=deps.now(),
    )
    metrics.add_metric(name=OUTCOME_METRICS[result.outcome], unit=MetricUnit.Count, value=1)
    logger.info("job incident recorded", extra={"outcome": result.outcome, "error": result.error, "summary": result.summary})
    return result
