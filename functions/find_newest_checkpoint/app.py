"""Find Newest Checkpoint: per affected job, the newest checkpoint whose manifest verifies, and
for an elastic job whether it shrinks now or waits for its replacement."""

from hyperpod_recovery.models.node_recovery import FindNewestCheckpointInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.find_newest_checkpoint import ElasticSettings, find_newest_checkpoint


@workflow_step(FindNewestCheckpointInput)
def lambda_handler(step: FindNewestCheckpointInput, deps: Dependencies):
    settings = deps.settings
    elastic = ElasticSettings(
        cluster=settings.cluster_name,
        expected_replacement_seconds=settings.expected_replacement_seconds,
        grow_back_seconds=settings.elastic_grow_back_seconds,
    )
    return find_newest_checkpoint(
        step, reader=deps.checkpoints, ledger=deps.ledger, policy=settings.resume_policy, elastic=elastic, now=deps.now()
    )
