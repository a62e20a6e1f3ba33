"""Check Controller Agent: send the agent a read-only ``check`` command (the agent-check workflow, run by hyperpod-recovery preflight)."""

from hyperpod_recovery.models.preflight import CheckControllerAgentInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.check_controller_agent import check_controller_agent


@workflow_step(CheckControllerAgentInput)
def lambda_handler(step: CheckControllerAgentInput, deps: Dependencies):
    return check_controller_agent(step, orchestrator=deps.orchestrator, now=deps.now())
