"""Check Rejoin: ListClusterNodes; have the nodes come back Running? A reboot that did not help is replaced."""

from hyperpod_recovery.models.node_recovery import CheckRejoinInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.check_rejoin import check_rejoin


@workflow_step(CheckRejoinInput)
def lambda_handler(step: CheckRejoinInput, deps: Dependencies):
    settings = deps.settings
    return check_rejoin(
        step,
        cluster=deps.cluster,
        ledger=deps.ledger,
        poll_seconds=settings.rejoin_waits[0],  # derived: within the history budget (domain/policy/limits.py)
        max_poll_seconds=settings.rejoin_waits[1],
        now=deps.now(),
    )
