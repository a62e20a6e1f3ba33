"""What both Validate steps share (Validate Request, Validate Job Request): any start input -> the
internal request, or InvalidRecoveryRequest naming the field; then admitted or not (our cluster,
fresh signals, the stack's DryRun folded in)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from hyperpod_recovery.domain.intake.freshness import EventAgeLimits, check_job_event_fresh, drop_stale_nodes
from hyperpod_recovery.errors import InvalidRecoveryRequest
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest

if TYPE_CHECKING:
    from hyperpod_recovery.domain.intake.normalize import GuardedCluster

_UNION_TAGS = ("manual", "recovery", "job")  # pydantic prefixes union errors with the tag; the user never wrote it
RequestT = TypeVar("RequestT", RecoveryRequest, JobRecoveryRequest)


def parse_start_input(adapter: TypeAdapter[Any], raw: Any) -> Any:
    if not isinstance(raw, dict):
        # aws stepfunctions start-execution --input '"i-0123..."' (or a list, a number): say so by name.
        raise InvalidRecoveryRequest(f"request: expected a JSON object, got {type(raw).__name__} ({str(raw)[:80]!r})")
    try:
        return adapter.validate_python(raw)
    except ValidationError as exc:
        raise InvalidRecoveryRequest(format_validation_error(exc, drop_prefix=_UNION_TAGS)) from exc
    except RecursionError as exc:
        raise InvalidRecoveryRequest("request: nested too deeply") from exc


def admit(
    request: RequestT, *, guarded: GuardedCluster, execution_name: str, stack_dry_run: bool, limits: EventAgeLimits, now: datetime
) -> RequestT:
    """The request as this execution runs it: our cluster only, fresh signals only, named by the
    execution, and the stack's dry-run setting wins (a request can ask for a dry run, never for a
    live one on a dry-run stack)."""
    if not guarded.owns(request.cluster):
        raise InvalidRecoveryRequest(f"cluster: {request.cluster!r} is not the cluster this stack guards ({guarded.name!r})")
    if isinstance(request, RecoveryRequest):
        request = drop_stale_nodes(request, limits, now)
    else:
        check_job_event_fresh(request, limits, now)
    return request.model_copy(
        update={
            "cluster": guarded.name,
            "incident_id": execution_name,
            "received_at": now,
            "dry_run": stack_dry_run or bool(request.dry_run),
        }
    )
