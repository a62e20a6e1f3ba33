"""Import HyperPod Hangs (a CloudWatch Logs subscription on the cluster's log group): each
HANG_DETECTED event of HyperPod's Slurm hung job detection becomes a verdict of rule hyperpod_hang,
kept once per job and episode, observe-only, and told once (steps/import_hyperpod_hangs.py)."""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import VERDICT_NOTICES
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.steps.import_hyperpod_hangs import Teller, import_hyperpod_hangs


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    deps = deps or default_dependencies()
    metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
    counts = import_hyperpod_hangs(
        event=event,
        ledger=deps.ledger,
        teller=Teller(deps.notifier, deps.deployment, deps.settings.dry_run),
        cluster=deps.settings.cluster_name,
        mode=deps.settings.hyperpod_hang_mode,
        limits=deps.event_age_limits,
        now=deps.now(),
    )
    for key, metric in VERDICT_NOTICES.items():  # (every one each batch: an alarm sees a zero, not a gap)
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=counts.get(key, 0))
    logger.info("hyperpod hang events read", extra=counts)
    return counts
