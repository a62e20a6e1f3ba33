"""Find Newest Checkpoint: per affected job, the newest checkpoint whose manifest verifies."""

from hyperpod_recovery.models.workflow import FindNewestCheckpointInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.find_newest_checkpoint import find_newest_checkpoint


@workflow_step(FindNewestCheckpointInput)
def lambda_handler(step: FindNewestCheckpointInput, deps: Dependencies):
    return find_newest_checkpoint(step, reader=deps.checkpoints, ledger=deps.ledger, policy=deps.settings.resume_policy, now=deps.now())
