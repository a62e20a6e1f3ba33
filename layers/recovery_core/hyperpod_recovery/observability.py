"""The one Logger and Metrics instance every handler shares (service and namespace come from
POWERTOOLS_SERVICE_NAME / POWERTOOLS_METRICS_NAMESPACE set in template.yaml Globals)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

if TYPE_CHECKING:  # (every handler imports this module: not the node workflow's models)
    from hyperpod_recovery.models.node_recovery import OutcomeResult

logger = Logger()
metrics = Metrics()

# Several steps emit no metric on a given invocation; that is expected, not worth a warning each time.
warnings.filterwarnings("ignore", message="No application metrics to publish")


def publish_outcome(result: OutcomeResult, outcome_metrics: dict[str, str], message: str) -> None:
    """The end of an incident, for CloudWatch: one count for its outcome, its phase durations
    (seconds), and one log line with both."""
    metrics.add_metric(name=outcome_metrics[result.outcome], unit=MetricUnit.Count, value=1)
    for name, seconds in result.durations.items():
        metrics.add_metric(name=name, unit=MetricUnit.Seconds, value=seconds)
    logger.info(message, extra={"outcome": result.outcome, "error": result.error, "summary": result.summary, "durations": result.durations})
