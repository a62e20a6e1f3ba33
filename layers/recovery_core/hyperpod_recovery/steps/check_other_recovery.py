"""Check Other Recovery (JobRecovery): has the incident holding the job's nodes recorded its outcome yet?"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.jobs.job_failure import watch_other_recovery

if TYPE_CHECKING:
    from hyperpod_recovery.models.job_recovery import CheckOtherRecoveryInput, OtherRecoveryWatch
    from hyperpod_recovery.ports import IncidentStore


def check_other_recovery(
    step: CheckOtherRecoveryInput, *, ledger: IncidentStore, poll_seconds: int, max_poll_seconds: int, deadline_seconds: int, now: datetime
) -> OtherRecoveryWatch:
    incidents = sorted(set(step.other_recovery.held_elsewhere.values()))
    records = {incident: ledger.get_incident(incident) for incident in incidents}
    return watch_other_recovery(
        step.other_recovery,
        records,
        poll_seconds=poll_seconds,
        max_poll_seconds=max_poll_seconds,
        deadline_seconds=deadline_seconds,
        now=now,
    )
