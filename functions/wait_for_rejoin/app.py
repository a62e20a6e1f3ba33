"""Wait For Rejoin: register the wait's task token for Notice Cluster Event (its timeout is the fallback check)."""

from hyperpod_recovery.models.node_recovery import WaitForRejoinInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.wait_for_rejoin import wait_for_rejoin


@workflow_step(WaitForRejoinInput)
def lambda_handler(step: WaitForRejoinInput, deps: Dependencies):
    return wait_for_rejoin(step, ledger=deps.ledger, workflows=deps.workflows, cluster=deps.settings.cluster_name, now=deps.now())
