"""Check Other Recovery: has the incident holding the job's nodes recorded its outcome? (bounded wait)"""

from hyperpod_recovery.models.job_recovery import CheckOtherRecoveryInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.job_recovery import check_other_recovery

# The other incident may itself wait for a replacement: allow its whole rejoin deadline, plus margin.
MARGIN_SECONDS = 1800


@workflow_step(CheckOtherRecoveryInput)
def lambda_handler(step: CheckOtherRecoveryInput, deps: Dependencies):
    settings = deps.settings
    return check_other_recovery(
        step,
        ledger=deps.ledger,
        poll_seconds=settings.rejoin_poll_seconds,
        max_poll_seconds=settings.rejoin_max_poll_seconds,
        deadline_seconds=settings.rejoin_deadline_seconds + MARGIN_SECONDS,
        now=deps.now(),
    )
