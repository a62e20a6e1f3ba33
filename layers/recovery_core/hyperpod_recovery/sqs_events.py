"""The Lambda handler of an SQS queue of events (Reconcile Execution, Notice Cluster Event): one
batch, each record parsed into its event model and handled with the stack's dependencies.

Powertools' batch processing retries only the records whose handling raised (a transient ledger,
Step Functions or SNS error); a body that is not the expected event is logged and dropped, since
retrying it cannot help. Kept apart from runtime.py so that only these functions import the batch
utilities. Their handlers import the batch module before anything imports pydantic: Powertools
loads its parser's event models (a third of a bare handler's cold start) when pydantic is already
loaded, and the batch here uses none of them (tests/unit/test_cold_imports.py holds it)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import BaseModel, ValidationError

from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.observability import logger, metrics
from hyperpod_recovery.runtime import Dependencies, default_dependencies

EventT = TypeVar("EventT", bound=BaseModel)


def sqs_event_handler(model: type[EventT], *, what: str) -> Callable[[Callable[[EventT, Dependencies], None]], Callable[..., Any]]:
    """Turn ``fn(event, deps)`` into the handler of a queue of ``model`` events (``what`` names
    them in the log line of a dropped body: "a HyperPod cluster event")."""

    def decorate(fn: Callable[[EventT, Dependencies], None]) -> Callable[..., Any]:
        processor = BatchProcessor(event_type=EventType.SQS)

        @logger.inject_lambda_context(clear_state=True)
        @metrics.log_metrics
        @functools.wraps(fn)
        def handler(event: dict[str, Any], context: Any, deps: Dependencies | None = None) -> Any:
            ready = deps or default_dependencies()
            metrics.add_dimension(name="cluster", value=ready.settings.cluster_name)

            def record_handler(record: SQSRecord) -> None:
                try:
                    parsed = model.model_validate_json(record.body)
                except ValidationError as exc:
                    logger.error(f"not {what}: dropped", extra={"reason": format_validation_error(exc)})
                    return
                fn(parsed, ready)

            return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)

        return handler

    return decorate
