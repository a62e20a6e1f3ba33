"""Validate Job Request: any JobRecovery start input -> the internal request, or InvalidRecoveryRequest naming the field."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import TypeAdapter

from hyperpod_recovery.domain.intake.normalize import GuardedCluster, translate_manual_job
from hyperpod_recovery.errors import InvalidRecoveryRequest
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN, matches
from hyperpod_recovery.models.kubernetes import KUBE_UID_PATTERN
from hyperpod_recovery.models.requests import JobRecoveryRequest, JobStartInput, ManualJobRecoveryRequest
from hyperpod_recovery.steps.admission import admit, parse_start_input

if TYPE_CHECKING:
    from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
    from hyperpod_recovery.models.job_recovery import ValidateJobRequestInput

_START_INPUT: TypeAdapter[ManualJobRecoveryRequest | JobRecoveryRequest] = TypeAdapter(JobStartInput)


def validate_job_request(
    step: ValidateJobRequestInput, *, guarded: GuardedCluster, stack_dry_run: bool, limits: EventAgeLimits, now: datetime
) -> JobRecoveryRequest:
    parsed = parse_start_input(_START_INPUT, step.request)
    request = translate_manual_job(parsed, now) if isinstance(parsed, ManualJobRecoveryRequest) else parsed
    # A job id has the form of the stack's orchestrator (a Slurm job id; on EKS a job object's uid):
    # the other form names nothing this cluster runs.
    pattern, form = (
        (SLURM_JOB_ID_PATTERN, "a Slurm job id") if guarded.orchestrator == "slurm" else (KUBE_UID_PATTERN, "a job object's uid")
    )
    if not matches(pattern, request.job_id):
        raise InvalidRecoveryRequest(f"job_id: {request.job_id!r} is not {form}, and this stack guards a {guarded.orchestrator} cluster")
    return admit(request, guarded=guarded, execution_name=step.execution_name, stack_dry_run=stack_dry_run, limits=limits, now=now)
