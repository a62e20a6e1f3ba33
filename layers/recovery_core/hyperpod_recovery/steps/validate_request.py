"""Validate Request: any NodeRecovery start input -> the internal request, or InvalidRecoveryRequest naming the field."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import TypeAdapter

from hyperpod_recovery.domain.intake.normalize import GuardedCluster, translate_manual
from hyperpod_recovery.models.requests import ManualRecoveryRequest, RecoveryRequest, StartExecutionInput
from hyperpod_recovery.steps.admission import admit, parse_start_input

if TYPE_CHECKING:
    from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
    from hyperpod_recovery.models.node_recovery import ValidateRequestInput

_START_INPUT: TypeAdapter[ManualRecoveryRequest | RecoveryRequest] = TypeAdapter(StartExecutionInput)


def validate_request(
    step: ValidateRequestInput, *, guarded: GuardedCluster, stack_dry_run: bool, limits: EventAgeLimits, now: datetime
) -> RecoveryRequest:
    parsed = parse_start_input(_START_INPUT, step.request)
    request = translate_manual(parsed, now) if isinstance(parsed, ManualRecoveryRequest) else parsed
    return admit(request, guarded=guarded, execution_name=step.execution_name, stack_dry_run=stack_dry_run, limits=limits, now=now)
