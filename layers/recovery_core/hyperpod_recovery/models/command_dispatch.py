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
from hyperpod_recovery.models.commands import (
    COMMAND_TYPES,
    AgentCheckResult,
    BootTimes,
    BootTimesResult,
    CaptureHangEvidence,
    CaptureJobSpec,
    CheckAgent,
    CommandEnvelope,
    CommandReply,
    CordonNodes,
    CordonResult,
    DrainNodes,
    DrainResult,
    HangEvidenceResult,
    JobsOnNodes,
    JobsOnNodesResult,
    JobSpecResult,
    NodeStates,
    NodeStatesResult,
    RequeueJob,
    RequeueResult,
    ResubmitJob,
    ResubmitResult,
    ResumeNodes,
    ResumeResult,
)

# Whoever carries the commands out: a handler is called with it, the command and the incident's id.
OrchestratorT = TypeVar("OrchestratorT")
CommandResult = (
    DrainResult
    | CordonResult
    | ResumeResult
    | JobsOnNodesResult
    | ResubmitResult
    | NodeStatesResult
    | JobSpecResult
    | RequeueResult
    | BootTimesResult
    | AgentCheckResult
    | HangEvidenceResult
)


@dataclass(frozen=True)
class CommandHandlers(Generic[OrchestratorT]):
    """A handler per command type, each typed with its command and its answer; a field is named for
    the command's ``type``, and None means the orchestrator does not carry that command out."""

    # Said where a command is refused: "on EKS-orchestrated clusters", "by the Slurm controller agent".
    where: str
    drain_nodes: Callable[[OrchestratorT, DrainNodes, str], DrainResult] | None = None
    cordon_nodes: Callable[[OrchestratorT, CordonNodes, str], CordonResult] | None = None
    resume_nodes: Callable[[OrchestratorT, ResumeNodes, str], ResumeResult] | None = None
    jobs_on_nodes: Callable[[OrchestratorT, JobsOnNodes, str], JobsOnNodesResult] | None = None
    resubmit_job: Callable[[OrchestratorT, ResubmitJob, str], ResubmitResult] | None = None
    node_states: Callable[[OrchestratorT, NodeStates, str], NodeStatesResult] | None = None
    capture_job_spec: Callable[[OrchestratorT, CaptureJobSpec, str], JobSpecResult] | None = None
    requeue_job: Callable[[OrchestratorT, RequeueJob, str], RequeueResult] | None = None
    boot_times: Callable[[OrchestratorT, BootTimes, str], BootTimesResult] | None = None
    check: Callable[[OrchestratorT, CheckAgent, str], AgentCheckResult] | None = None
    capture_hang_evidence: Callable[[OrchestratorT, CaptureHangEvidence, str], HangEvidenceResult] | None = None

    def types(self) -> tuple[str, ...]:
        """The command types this orchestrator carries out, sorted: what its ``check`` answers."""
        return tuple(sorted(f.name for f in fields(self) if f.name in COMMAND_TYPES and getattr(self, f.name) is not None))

    def run(self, orchestrator: OrchestratorT, command: Any, incident_id: str = "") -> CommandResult:
        """The command carried out by its type's handler; InvalidCommand for a type without one."""
        kind = getattr(command, "type", None)
        handler = getattr(self, kind, None) if isinstance(kind, str) and kind in COMMAND_TYPES else None
        if handler is None:
            raise InvalidCommand(f"{kind} is not carried out {self.where} (it executes {', '.join(self.types())})")
        result: CommandResult = handler(orchestrator, command, incident_id)
        return result


def command_reply(envelope: CommandEnvelope, result: CommandResult, *, started: datetime, completed: datetime) -> CommandReply[Any]:
    """The answer to ``envelope``: its id and type echoed, the work timed. A dry run's cordon drained
    nothing: its answer says what would have been drained, and is marked so."""
    command = envelope.command
    return CommandReply(
        command_id=envelope.command_id,
        type=command.type,
        requested_at=envelope.requested_at,
        started_at=started,
        completed_at=completed,
        dry_run=isinstance(command, CordonNodes) and not command.drain,
        result=result,
    )
