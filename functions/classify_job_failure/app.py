"""Classify Failure: node-caused, application, or left alone (ListClusterNodes + Slurm's node states);
for a hang: still stuck (the job's progress read again), its suspects, or cleared by itself."""

from hyperpod_recovery.domain.policy.limits import node_recovery_time_bound_seconds
from hyperpod_recovery.models.job_recovery import ClassifyJobFailureInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.classify_job_failure import classify_job_failure


@workflow_step(ClassifyJobFailureInput)
def lambda_handler(step: ClassifyJobFailureInput, deps: Dependencies):
    settings = deps.settings
    return classify_job_failure(
        step,
        cluster=deps.cluster,
        now=deps.now(),
        node_timeout_seconds=node_recovery_time_bound_seconds(
            settings.reboot_deadline_seconds, settings.rejoin_deadline_seconds, settings.elastic_grow_back_grace_seconds
        ),
        orchestrator=settings.orchestrator,
        progress=deps.progress,
        ledger=deps.ledger,
        repeat_window_seconds=settings.repeat_offender_window_seconds,
        restart_window_seconds=settings.job_restart_window_seconds,
    )
