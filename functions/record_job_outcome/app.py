"""Record Job Outcome / Escalate Job Incident / Record Job Rejection: ledger (incident, lineage) + SNS."""

from hyperpod_recovery.metric_names import JOB_OUTCOMES
from hyperpod_recovery.models.job_recovery import RecordJobOutcomeInput
from hyperpod_recovery.observability import publish_outcome
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.record_outcome import record_outcome


@workflow_step(RecordJobOutcomeInput)
def lambda_handler(step: RecordJobOutcomeInput, deps: Dependencies):
    return record_outcome(
        step,
        **deps.record_ports(),
        execution_url=deps.execution_url(step.execution_name, workflow="job"),
        # Counted once: a rerun that answers what an earlier run recorded counts nothing again.
        on_recorded=lambda result: publish_outcome(result, JOB_OUTCOMES, "job incident recorded"),
    )
