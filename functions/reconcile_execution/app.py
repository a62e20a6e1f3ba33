"""Reconcile Execution: SQS (Step Functions status-change events) -> record and settle every end.

An execution that was stopped, timed out or crashed before Record Outcome gets its incident record
(aborted / failed), gives back its cap places and job claims, and a human is notified. A record
whose ledger or SNS call failed transiently is retried; a body that is not a status-change event is
logged and dropped (sqs_events.py). The same ends are swept every 5 minutes (Sweep Ended
Executions): the event is delivered best effort.
"""

from hyperpod_recovery.execution_ends import count_recorded, end_context
from hyperpod_recovery.models.events import ExecutionStatusChangeEvent
from hyperpod_recovery.runtime import Dependencies
from hyperpod_recovery.sqs_events import sqs_event_handler
from hyperpod_recovery.steps.reconcile_execution import reconcile_end


@sqs_event_handler(ExecutionStatusChangeEvent, what="a Step Functions status-change event")
def lambda_handler(event: ExecutionStatusChangeEvent, deps: Dependencies) -> None:
    count_recorded(reconcile_end(event.detail, end_context(deps), deps.now()))
