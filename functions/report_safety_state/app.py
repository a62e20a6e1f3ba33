"""Report Safety State (scheduled every 5 minutes): BreakerOpen and NodesInRecovery gauges.

A metric emitted only when the breaker trips would let its alarm fall back to OK while automation
is still paused; this gauge keeps the alarm red until a human resets the breaker.
"""

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.metric_names import BREAKER_OPEN, NODES_IN_RECOVERY
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.steps.report_safety_state import report_safety_state


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    deps = deps or default_dependencies()
    metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
    state = report_safety_state(ledger=deps.ledger, cluster=deps.settings.cluster_name, now=deps.now())
    metrics.add_metric(name=BREAKER_OPEN, unit=MetricUnit.Count, value=1 if state.breaker_open else 0)
    metrics.add_metric(name=NODES_IN_RECOVERY, unit=MetricUnit.Count, value=state.nodes_in_recovery)
    if state.breaker_open:
        logger.warning("circuit breaker is open: automation paused", extra=state.model_dump(mode="json"))
    return state.model_dump(mode="json")
