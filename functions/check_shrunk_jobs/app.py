"""Check Shrunk Jobs: each shrunk job grows back now, waits for its next checkpoint, or stays shrunk."""

from hyperpod_recovery.models.node_recovery import CheckShrunkJobsInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.check_shrunk_jobs import check_shrunk_jobs


@workflow_step(CheckShrunkJobsInput)
def lambda_handler(step: CheckShrunkJobsInput, deps: Dependencies):
    return check_shrunk_jobs(
        step, reader=deps.checkpoints, ledger=deps.ledger, grace_seconds=deps.settings.elastic_grow_back_grace_seconds, now=deps.now()
    )
