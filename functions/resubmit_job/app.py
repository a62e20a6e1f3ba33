"""Resubmit Job: claim the job in the ledger (once per job), then ask the agent to resubmit it."""

from hyperpod_recovery.models.node_recovery import ResubmitJobInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.resubmit_job import resubmit_job


@workflow_step(ResubmitJobInput)
def lambda_handler(step: ResubmitJobInput, deps: Dependencies):
    return resubmit_job(step, orchestrator=deps.orchestrator, ledger=deps.ledger, claim_ttl=deps.lock_ttl, now=deps.now())
