"""Check Swap Checkpoint: one look for the job's next verified commit; at it, the expected costs decide."""

from hyperpod_recovery.domain.policy.limits import node_recovery_time_bound_seconds
from hyperpod_recovery.models.planned_swap import CheckSwapCheckpointInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.check_swap_checkpoint import SwapSettings, check_swap_checkpoint


@workflow_step(CheckSwapCheckpointInput)
def lambda_handler(step: CheckSwapCheckpointInput, deps: Dependencies):
    s = deps.settings
    settings = SwapSettings(
        cluster=s.cluster_name,
        controller_groups=tuple(s.controller_groups),
        login_groups=tuple(s.login_groups),
        expected_replacement_seconds=s.expected_replacement_seconds,
        grow_back_seconds=s.elastic_grow_back_seconds,
        node_timeout_seconds=node_recovery_time_bound_seconds(
            s.reboot_deadline_seconds, s.rejoin_deadline_seconds, s.elastic_grow_back_grace_seconds
        ),
        orchestrator=s.orchestrator,
    )
    return check_swap_checkpoint(
        step,
        reader=deps.checkpoints,
        cluster=deps.cluster,
        ledger=deps.ledger,
        job_nodes=deps.job_nodes,
        policy=deps.safety_policy,
        settings=settings,
        now=deps.now(),
    )
