"""Validate Job Request: any JobRecovery start input -> the internal request, or InvalidRecoveryRequest naming the field."""

from __future__ import annotations

from datetime import datetime

from pydantic import TypeAdapter

from hyperpod_recovery.domain.freshness import EventAgeLimits
from hyperpod_recovery.domain.normalize import GuardedCluster, translate_manual_job
from hyperpod_recovery.models.job_recovery import ValidateJobRequestInput
from hyperpod_recovery.models.requests import JobRecoveryRequest, JobStartInput, ManualJobRecoveryRequest
from hyperpod_recovery.steps.admission import admit, parse_start_input

_START_INPUT: TypeAdapter[ManualJobRecoveryRequest | JobRecoveryRequest] = TypeAdapter(JobStartInput)


def validate_job_request(
    step: ValidateJobRequestInput, *, guarded: GuardedCluster, stack_dry_run: bool, limits: EventAgeLimits, now: datetime
) -> JobRecoveryRequest:
    parsed = parse_start_input(_START_INPUT, step.request)
    request = translate_manual_job(parsed, now) if isinstance(parsed, ManualJobRecoveryRequest) else parsed
    return admit(request, guarded=guarded, execution_name=step.execution_name, stack_dry_run=stack_dry_run, limits=limits, now=now)
