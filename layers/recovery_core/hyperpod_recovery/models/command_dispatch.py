"""One dispatch for the controller command protocol: a handler per command type.

Both orchestrators fill in one ``CommandHandlers`` table, the Slurm controller agent
(agent/hyperpod_recovery_agent/executor.py) and the EKS orchestrator (adapters/eks_orchestrator/).
``run`` finds a command's handler by its type; a type an orchestrator has no handler for is one
error, InvalidCommand, naming what it does execute. ``command_reply`` is the answer both send.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Generic, TypeVar

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models import commands as protocol

# Whoever carries the commands out: a handler is called with it, the command and the incident's id.
OrchestratorT = TypeVar("OrchestratorT")
CommandT = TypeVar("CommandT")
ResultT = TypeVar("ResultT")
CommandResult = (
    protocol.DrainResult
    | protocol.CordonResult
    | protocol.ResumeResult
    | protocol.JobsOnNodesResult
    | protocol.ResubmitResult
    | protocol.NodeStatesResult
    | protocol.JobSpecResult
    | protocol.RequeueResult
    | protocol.BootTimesResult
    | protocol.AgentCheckResult
    | protocol.HangEvidenceResult
)


@dataclass(frozen=True)
class CommandHandlers(Generic[OrchestratorT]):
    """A handler per command type, each typed with its command and its answer; a field is named for
    the command's ``type``, and None means the orchestrator does not carry that command out."""

    # Said where a command is refused: "on EKS-orchestrated clusters", "by the Slurm controller agent".
    where: str
    drain_nodes: Callable[[OrchestratorT, protocol.DrainNodes, str], protocol.DrainResult] | None = None
    cordon_nodes: Callable[[OrchestratorT, protocol.CordonNodes, str], protocol.CordonResult] | None = None
    resume_nodes: Callable[[OrchestratorT, protocol.ResumeNodes, str], protocol.ResumeResult] | None = None
    jobs_on_nodes: Callable[[OrchestratorT, protocol.JobsOnNodes, str], protocol.JobsOnNodesResult] | None = None
    resubmit_job: Callable[[OrchestratorT, protocol.ResubmitJob, str], protocol.ResubmitResult] | None = None
    node_states: Callable[[OrchestratorT, protocol.NodeStates, str], protocol.NodeStatesResult] | None = None
    capture_job_spec: Callable[[OrchestratorT, protocol.CaptureJobSpec, str], protocol.JobSpecResult] | None = None
    requeue_job: Callable[[OrchestratorT, protocol.RequeueJob, str], protocol.RequeueResult] | None = None
    boot_times: Callable[[OrchestratorT, protocol.BootTimes, str], protocol.BootTimesResult] | None = None
    check: Callable[[OrchestratorT, protocol.CheckAgent, str], protocol.AgentCheckResult] | None = None
    capture_hang_evidence: Callable[[OrchestratorT, protocol.CaptureHangEvidence, str], protocol.HangEvidenceResult] | None = None

    def types(self) -> tuple[str, ...]:
        """The command types this orchestrator carries out, sorted: what its ``check`` answers."""
        return tuple(sorted(f.name for f in fields(self) if f.name in protocol.COMMAND_TYPES and getattr(self, f.name) is not None))

    def run(self, orchestrator: OrchestratorT, command: Any, incident_id: str = "") -> CommandResult:
        """The command carried out by its type's handler; InvalidCommand for a type without one."""
        kind = getattr(command, "type", None)
        handler = getattr(self, kind, None) if isinstance(kind, str) and kind in protocol.COMMAND_TYPES else None
        if handler is None:
            raise InvalidCommand(f"{kind} is not carried out {self.where} (it executes {', '.join(self.types())})")
        result: CommandResult = handler(orchestrator, command, incident_id)
        return result


def without_incident(
    handler: Callable[[OrchestratorT, CommandT], ResultT],
) -> Callable[[OrchestratorT, CommandT, str], ResultT]:
    """A handler from a method that needs only the command (every command but a resubmission)."""
    return lambda orchestrator, command, _incident_id: handler(orchestrator, command)


def command_reply(
    envelope: protocol.CommandEnvelope, result: CommandResult, *, started: datetime, completed: datetime
) -> protocol.CommandReply[Any]:
    """The answer to ``envelope``: its id and type echoed, the work timed. A dry run's cordon drained
    nothing: its answer says what would have been drained, and is marked so."""
    command = envelope.command
    return protocol.CommandReply(
        command_id=envelope.command_id,
        type=command.type,
        requested_at=envelope.requested_at,
        started_at=started,
        completed_at=completed,
        dry_run=isinstance(command, protocol.CordonNodes) and not command.drain,
        result=result,
    )
