"""The Lambda handlers of SQS queues (Intake, Reconcile Execution, Notice Cluster Event): one batch,
each record handled on its own, and the records whose handling raised reported back so that SQS
redelivers only those (ReportBatchItemFailures on the event source mapping in template.yaml).

This is the partial-batch contract of Lambda's SQS event source, written out here rather than taken
from Powertools' batch utility: that module loads asyncio and every event data class, about 45 ms
of each of these functions' cold start, for a loop of a dozen lines."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hyperpod_recovery.errors import EveryRecordFailed
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies

EventT = TypeVar("EventT", bound=BaseModel)
BatchResponse = dict[str, list[dict[str, str]]]


def sqs_records(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The records of an SQS event; anything else is a wiring mistake, refused loudly."""
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list) or not all(isinstance(r, Mapping) and isinstance(r.get("messageId"), str) for r in records):
        raise ValueError("not an SQS event: expected Records, each with a messageId and a body")
    return records


def process_batch(records: Iterable[Mapping[str, Any]], handle: Callable[[str, str], None]) -> BatchResponse:
    """Call ``handle(message_id, body)`` for each record; the response names the records whose
    handling raised. When every record of a non-empty batch raised, the invocation fails instead
    (EveryRecordFailed), as Powertools' batch processor does, so the function's Errors metric sees it."""
    failed: list[str] = []
    handled = 0
    for record in records:
        handled += 1
        message_id = record["messageId"]
        try:
            handle(message_id, str(record.get("body", "")))
        except Exception:
            logger.exception("record failed: SQS redelivers it", extra={"message_id": message_id})
            failed.append(message_id)
    if handled and len(failed) == handled:
        raise EveryRecordFailed(f"all {handled} records of the batch failed; each is logged above")
    return {"batchItemFailures": [{"itemIdentifier": m} for m in failed]}


def sqs_event_handler(model: type[EventT], *, what: str) -> Callable[[Callable[[EventT, Dependencies], None]], Callable[..., Any]]:
    """Turn ``fn(event, deps)`` into the handler of a queue of ``model`` events (``what`` names
    them in the log line of a dropped body: "a HyperPod cluster event"). A body that is not such an
    event is logged and dropped: redelivering it cannot help."""

    def decorate(fn: Callable[[EventT, Dependencies], None]) -> Callable[..., Any]:
        @logger.inject_lambda_context(clear_state=True)
        @metrics.log_metrics
        @functools.wraps(fn)
        def handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> BatchResponse:
            records = sqs_records(event)
            ready = deps or default_dependencies()
            metrics.add_dimension(name="cluster", value=ready.settings.cluster_name)

            def handle(_message_id: str, body: str) -> None:
                try:
                    parsed = model.model_validate_json(body)
                except ValidationError as exc:
                    logger.error(f"not {what}: dropped", extra={"reason": format_validation_error(exc)})
                    return
                fn(parsed, ready)

            return process_batch(records, handle)

        return handler

    return decorate
