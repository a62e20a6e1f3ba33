"""Record Outcome / Escalate Incident / Record Duplicate / Record Rejection: ledger + SNS."""

from hyperpod_recovery.metric_names import NODE_OUTCOMES
from hyperpod_recovery.models.node_recovery import RecordOutcomeInput
from hyperpod_recovery.observability import publish_outcome
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.record_outcome import record_outcome


@workflow_step(RecordOutcomeInput)
def lambda_handler(step: RecordOutcomeInput, deps: Dependencies):
    return record_outcome(
        step,
        **deps.record_ports(),
        execution_url=deps.execution_url(step.execution_name),
        log_seconds=deps.safety_policy.log_seconds,
        # Counted once: a rerun that answers what an earlier run recorded counts nothing again.
        on_recorded=lambda result: publish_outcome(result, NODE_OUTCOMES, "incident recorded"),
    )
