"""Check Other Recovery: has the incident holding the job's nodes recorded its outcome? (bounded wait)"""

from hyperpod_recovery.domain.policy.limits import rejoin_wait_bounds, rejoin_window_seconds
from hyperpod_recovery.models.job_recovery import CheckOtherRecoveryInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.check_other_recovery import check_other_recovery

# The other incident may itself reboot, then replace, replace again and wait, then wait for a shrunk
# job's grow-back (twice its grace at most): allow all its windows, plus margin.
MARGIN_SECONDS = 1800


@workflow_step(CheckOtherRecoveryInput)
def lambda_handler(step: CheckOtherRecoveryInput, deps: Dependencies):
    settings = deps.settings
    window = rejoin_window_seconds(settings.reboot_deadline_seconds, settings.rejoin_deadline_seconds)
    deadline_seconds = window + 2 * settings.elastic_grow_back_grace_seconds + MARGIN_SECONDS
    first_wait, longest_wait = rejoin_wait_bounds(settings.rejoin_poll_seconds, settings.rejoin_max_poll_seconds, deadline_seconds)
    return check_other_recovery(
        step,
        ledger=deps.ledger,
        poll_seconds=first_wait,
        max_poll_seconds=longest_wait,
        deadline_seconds=deadline_seconds,
        now=deps.now(),
    )
