"""One dispatch for the controller command protocol: a handler per command type.

Both orchestrators fill in one ``CommandHandlers`` table, the Slurm controller agent
(agent/hyperpod_recovery_agent/executor.py) and the EKS orchestrator (adapters/eks_orchestrator/).
``run`` finds a command's handler by its type; a type an orchestrator has no handler for is one
error, InvalidCommand, naming what it does execute. ``command_reply`` is the answer both send.
"""

from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models import commands as protocol

# Whoever carries the commands out: a handler is called with it, the command and the incident's id.
OrchestratorT = TypeVar("OrchestratorT")
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


class Orchestrator(Protocol):
    """What an orchestrator carries the common commands out with: the Slurm agent's CommandExecutor
    and EksOrchestrator both are one (requeue_job, Slurm's alone, is added to the agent's table)."""

    def drain(self, command: protocol.DrainNodes) -> protocol.DrainResult: ...
    def cordon(self, command: protocol.CordonNodes) -> protocol.CordonResult: ...
    def resume(self, command: protocol.ResumeNodes) -> protocol.ResumeResult: ...
    def jobs_on_nodes(self, command: protocol.JobsOnNodes) -> protocol.JobsOnNodesResult: ...
    def resubmit(self, command: protocol.ResubmitJob, incident_id: str) -> protocol.ResubmitResult: ...
    def node_states(self, command: protocol.NodeStates) -> protocol.NodeStatesResult: ...
    def capture_job_spec(self, command: protocol.CaptureJobSpec) -> protocol.JobSpecResult: ...
    def boot_times(self, command: protocol.BootTimes) -> protocol.BootTimesResult: ...
    def check(self) -> protocol.AgentCheckResult: ...
    def capture_hang_evidence(self, command: protocol.CaptureHangEvidence) -> protocol.HangEvidenceResult: ...


AnOrchestrator = TypeVar("AnOrchestrator", bound=Orchestrator)


def orchestrator_handlers(
    kind: type[AnOrchestrator],
    where: str,
    *,
    requeue_job: Callable[[AnOrchestrator, protocol.RequeueJob, str], protocol.RequeueResult] | None = None,
) -> CommandHandlers[AnOrchestrator]:
    """The one table of handlers: each common command type by ``kind``'s method for it (``kind``: the
    orchestrator's class, which the type checker holds to Orchestrator)."""
    return CommandHandlers(
        where=where,
        drain_nodes=lambda orchestrator, command, _: orchestrator.drain(command),
        cordon_nodes=lambda orchestrator, command, _: orchestrator.cordon(command),
        resume_nodes=lambda orchestrator, command, _: orchestrator.resume(command),
        jobs_on_nodes=lambda orchestrator, command, _: orchestrator.jobs_on_nodes(command),
        resubmit_job=lambda orchestrator, command, incident_id: orchestrator.resubmit(command, incident_id),
        node_states=lambda orchestrator, command, _: orchestrator.node_states(command),
        capture_job_spec=lambda orchestrator, command, _: orchestrator.capture_job_spec(command),
        requeue_job=requeue_job,
        boot_times=lambda orchestrator, command, _: orchestrator.boot_times(command),
        check=lambda orchestrator, _command, _incident: orchestrator.check(),
        capture_hang_evidence=lambda orchestrator, command, _: orchestrator.capture_hang_evidence(command),
    )


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
