"""Start Planned Swap: an enforced at-risk verdict -> its node and the job on it (the orchestrator's reading)."""

from hyperpod_recovery.models.planned_swap import StartPlannedSwapInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.start_planned_swap import start_planned_swap


@workflow_step(StartPlannedSwapInput)
def lambda_handler(step: StartPlannedSwapInput, deps: Dependencies):
    return start_planned_swap(
        step,
        guarded=deps.guarded,
        stack_dry_run=deps.settings.dry_run,
        cluster=deps.cluster,
        job_nodes=deps.job_nodes,
        kube=deps.kube,
        now=deps.now(),
    )
