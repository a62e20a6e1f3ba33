"""Detect Hung Jobs (every minute): a stall or slowdown verdict per job from the progress its
training script reports; an enforced stall starts a JobRecovery (steps/detect_hung_jobs.py)."""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.adapters.progress_memory import ProgressMemoryTable
from hyperpod_recovery.errors import ConfigurationError
from hyperpod_recovery.metric_names import HANG_DETECTION
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.steps.detect_hung_jobs import detect_hung_jobs


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    deps = deps or default_dependencies()
    metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
    if deps.progress is None:
        raise ConfigurationError("Detect Hung Jobs needs PROGRESS_TABLE (template.yaml sets it on this function)")
    counts = detect_hung_jobs(
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
    for key, metric in HANG_DETECTION.items():  # (every one each tick: an alarm sees a zero, not a gap)
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=counts.get(key, 0))
    logger.info("progress read", extra=counts)
    return counts
