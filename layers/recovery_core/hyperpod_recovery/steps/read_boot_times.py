"""Read Boot Times: slurmctld's boot time and state of the nodes Check Rejoin asked about."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.models.commands import BootTimes
from hyperpod_recovery.steps.commands import dispatch_command

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import ReadBootTimesInput
    from hyperpod_recovery.ports import Orchestrator


def read_boot_times(step: ReadBootTimesInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    """slurmctld's boot time and state of the nodes Check Rejoin asked about (read-only): the
    evidence that a rebooted node came back, whatever HyperPod's status showed meanwhile."""
    return dispatch_command(
        orchestrator,
        step,
        BootTimes(nodes=step.rejoin.boot_check),
        # One reading per check (the agent answers a command id it has seen from its journal).
        command_id=f"{step.execution_name}:boot-times:{step.rejoin.checks}:{step.rejoin.boot_readings}",
        now=now,
    )
