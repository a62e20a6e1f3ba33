"""Detect Hung Jobs (every minute): a stall or slowdown verdict per job from the progress its
training script reports; an enforced stall starts a JobRecovery (steps/detect_hung_jobs.py)."""

from hyperpod_recovery.adapters.progress_memory import ProgressMemoryTable
from hyperpod_recovery.errors import ConfigurationError
from hyperpod_recovery.metric_names import HANG_DETECTION
from hyperpod_recovery.runtime import Dependencies, counted_run
from hyperpod_recovery.steps.detect_hung_jobs import detect_hung_jobs


@counted_run(HANG_DETECTION, "progress read")
def lambda_handler(event: dict, context, deps: Dependencies):
    if deps.progress is None:
        raise ConfigurationError("Detect Hung Jobs needs PROGRESS_TABLE (template.yaml sets it on this function)")
    return detect_hung_jobs(
        progress=deps.progress,
        ledger=deps.ledger,
        workflows=deps.workflows,
        job_nodes=deps.job_nodes,  # (which nodes each job runs on: whose rows count)
        memory=ProgressMemoryTable(deps.settings.ledger_table),  # (what the last ticks saw and started)
        cluster=deps.settings.cluster_name,
        rules=deps.hang_rules,
        now=deps.now(),
        remaining_ms=context.get_remaining_time_in_millis,
        kube=deps.kube,  # (an EKS stack's: an EKS job's verdict names it by namespace/name)
    )
