"""Sweep Ended Executions (every 5 minutes): the ends of both workflows that Step Functions lists as
FAILED, TIMED_OUT or ABORTED since the last sweep are recorded, settled and notified like Reconcile
Execution does, whether or not their status-change event (delivered best effort) ever came. A sweep
that could not finish every end fails (the alarm counts completed sweeps) and the next goes on."""

from datetime import timedelta

from aws_lambda_powertools.metrics import MetricUnit

from hyperpod_recovery.errors import EndsNotSwept
from hyperpod_recovery.execution_ends import count_recorded, end_context, longest_run
from hyperpod_recovery.metric_names import ENDS_SWEPT
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies
from hyperpod_recovery.steps.sweep_ended_executions import sweep_ended_executions


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict, context, deps: Dependencies | None = None):
    deps = deps or default_dependencies()
    metrics.add_dimension(name="cluster", value=deps.settings.cluster_name)
    swept = sweep_ended_executions(
        context=end_context(deps),
        marks=deps.ledger,
        clock=deps.now,
        longest_run=longest_run(deps),
        time_left=lambda: timedelta(milliseconds=context.get_remaining_time_in_millis()),
    )
    for result in swept.recorded:
        count_recorded(result)
    metrics.add_metric(name=ENDS_SWEPT["recorded"], unit=MetricUnit.Count, value=len(swept.recorded))
    metrics.add_metric(name=ENDS_SWEPT["completed"], unit=MetricUnit.Count, value=1 if swept.complete else 0)
    summary = {"found": swept.found, "recorded": [r.incident for r in swept.recorded], "settled": swept.settled, "skipped": swept.skipped}
    logger.info("ended executions swept", extra={**summary, "unfinished": swept.unfinished, "until": str(swept.until)})
    if not swept.complete:
        raise EndsNotSwept(f"{len(swept.unfinished)} ended execution(s) not settled yet, from {swept.until}: {swept.unfinished[:5]}")
    return {**summary, "until": swept.until.isoformat() if swept.until else None}
