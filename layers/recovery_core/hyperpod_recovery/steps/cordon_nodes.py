"""Cordon Nodes: drain the target nodes in the scheduler, tagged with the incident, and find the
jobs on them (one command: no job can start on them in between)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.models.commands import CordonNodes, owner_tag
from hyperpod_recovery.models.common import one_line
from hyperpod_recovery.steps.commands import dispatch_command

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import CordonNodesInput
    from hyperpod_recovery.ports import Orchestrator


def cordon_nodes(step: CordonNodesInput, *, orchestrator: Orchestrator, now: datetime) -> dict[str, Any]:
    nodes = [t.slurm_node for t in step.assessment.targets]
    # The trigger's text comes from an outside event: one printable line before it reaches Slurm.
    reason = one_line(f"{owner_tag(step.execution_name)} {step.request.triggers[0].reason}", 256)
    return dispatch_command(
        orchestrator,
        step,
        CordonNodes(nodes=nodes, reason=reason),
        command_id=f"{step.execution_name}:cordon",
        now=now,
    )
