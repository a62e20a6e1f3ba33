"""Find Newest Checkpoint: per affected job, the newest checkpoint whose manifest verifies."""

from hyperpod_recovery.models.workflow import FindNewestCheckpointInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.checkpoints import find_newest_checkpoints


@workflow_step(FindNewestCheckpointInput)
def lambda_handler(step: FindNewestCheckpointInput, deps: Dependencies):
    return find_newest_checkpoints(step, reader=deps.checkpoints, ledger=deps.ledger, now=deps.now())
