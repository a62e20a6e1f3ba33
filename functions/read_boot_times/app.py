"""Read Boot Times: ask the agent for slurmctld's boot time of rebooted nodes (the evidence they came back)."""

from hyperpod_recovery.models.node_recovery import ReadBootTimesInput
from hyperpod_recovery.runtime import Dependencies, workflow_step
from hyperpod_recovery.steps.read_boot_times import read_boot_times


@workflow_step(ReadBootTimesInput)
def lambda_handler(step: ReadBootTimesInput, deps: Dependencies):
    return read_boot_times(step, orchestrator=deps.orchestrator, now=deps.now())
