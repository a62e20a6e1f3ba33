"""Record Swap Outcome / Escalate Swap: the swap's record (ledger) and its notification (SNS), once."""

from hyperpod_recovery.models.planned_swap import RecordSwapOutcomeInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.record_swap_outcome import record_swap_outcome


@workflow_step(RecordSwapOutcomeInput)
def lambda_handler(step: RecordSwapOutcomeInput, deps: Dependencies):
    return record_swap_outcome(step, ledger=deps.ledger, notifier=deps.notifier, cluster=deps.settings.cluster_name, now=deps.now())
