"""Plan Job Restart: once per job, within the lineage's restart budget, not in a crash loop, within the breaker's window."""

from hyperpod_recovery.models.job_recovery import PlanJobRestartInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.plan_job_restart import plan_job_restart


@workflow_step(PlanJobRestartInput)
def lambda_handler(step: PlanJobRestartInput, deps: Dependencies):
    return plan_job_restart(step, ledger=deps.ledger, policy=deps.restart_policy, safety=deps.safety_policy, now=deps.now())
