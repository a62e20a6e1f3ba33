"""Validate Request: any start input -> the one RecoveryRequest, or InvalidRecoveryRequest."""

from __future__ import annotations

from datetime import datetime

from pydantic import TypeAdapter, ValidationError

from hyperpod_recovery.domain.normalize import GuardedCluster, translate_manual
from hyperpod_recovery.errors import InvalidRecoveryRequest
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.models.requests import ManualRecoveryRequest, RecoveryRequest, StartExecutionInput
from hyperpod_recovery.models.workflow import ValidateRequestInput

_UNION_TAGS = ("manual", "recovery")  # pydantic prefixes union errors with the tag; the user never wrote it
_START_INPUT: TypeAdapter[ManualRecoveryRequest | RecoveryRequest] = TypeAdapter(StartExecutionInput)


def validate_request(step: ValidateRequestInput, *, guarded: GuardedCluster, stack_dry_run: bool, now: datetime) -> RecoveryRequest:
    try:
        parsed = _START_INPUT.validate_python(step.request)
    except ValidationError as exc:
        raise InvalidRecoveryRequest(format_validation_error(exc, drop_prefix=_UNION_TAGS)) from exc
    request = translate_manual(parsed, now) if isinstance(parsed, ManualRecoveryRequest) else parsed
    if not guarded.owns(request.cluster):
        raise InvalidRecoveryRequest(f"cluster: {request.cluster!r} is not the cluster this stack guards ({guarded.name!r})")
    return request.model_copy(
        update={
            "cluster": guarded.name,
            "incident_id": step.execution_name,
            "received_at": now,
            # The stack's dry-run setting wins: a request can ask for a dry run, never for a live one
            # on a dry-run stack.
            "dry_run": stack_dry_run or bool(request.dry_run),
        }
    )
