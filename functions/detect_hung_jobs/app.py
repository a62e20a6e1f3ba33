"""Detect Hung Jobs (invoked every minute, reading every HANG_READ_EVERY_SECONDS within it): a stall or
slowdown verdict per job from the progress its training script reports; an enforced stall starts a
JobRecovery (steps/detect_hung_jobs.py)."""

from hyperpod_recovery.adapters.progress_memory import ProgressMemoryTable
from hyperpod_recovery.clock import current_sleep
from hyperpod_recovery.errors import ConfigurationError
from hyperpod_recovery.metric_names import HANG_DETECTION
from hyperpod_recovery.runtime import Dependencies, counted_run
from hyperpod_recovery.steps.detect_hung_jobs import detect_hung_jobs, read_repeatedly


@counted_run(HANG_DETECTION, "progress read")
def lambda_handler(event: dict, context, deps: Dependencies):
    if deps.progress is None:
        raise ConfigurationError("Detect Hung Jobs needs PROGRESS_TABLE (template.yaml sets it on this function)")
    progress = deps.progress
    memory = ProgressMemoryTable(deps.settings.ledger_table)  # (what the reads before saw and started)

    def read(now):
        return detect_hung_jobs(
            progress=progress,
            ledger=deps.ledger,
            workflows=deps.workflows,
            job_nodes=deps.job_nodes,  # (which nodes each job runs on: whose rows count)
            memory=memory,
            cluster=deps.settings.cluster_name,
            rules=deps.hang_rules,
            now=now,
            remaining_ms=context.get_remaining_time_in_millis,
            kube=deps.kube,  # (an EKS stack's: an EKS job's verdict names it by namespace/name)
        )

    return read_repeatedly(
        read,
        clock=deps.now,
        pause=current_sleep(),
        every_seconds=deps.settings.hang_read_every_seconds,
        remaining_ms=context.get_remaining_time_in_millis,
    )
