"""Execute one typed command against Slurm and build the reply the workflow expects.

Idempotent by construction, so a redelivered message or an agent restarted mid-command never does
anything twice: draining a drained node and resuming a resumed one are no-ops, and a resubmission
is found again by the comment it carries (Slurm itself keeps the idempotency key).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models.commands import (
    OWNER_TAG_PREFIX,
    CaptureJobSpec,
    CommandEnvelope,
    CommandReply,
    DrainNodes,
    DrainResult,
    JobsOnNodes,
    JobsOnNodesResult,
    JobSpec,
    JobSpecResult,
    NodeStates,
    NodeStatesResult,
    NodeStatus,
    RequeueJob,
    RequeueResult,
    ResubmitJob,
    ResubmitResult,
    ResumeNodes,
    ResumeResult,
)
from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV
from hyperpod_recovery_agent.slurm import RESUBMISSION_MARK, NodeState, Submission

# The old job's state at resubmission time: restarting on its own, or still holding an allocation.
RESTARTED_BY_SLURM = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"})
STILL_ALIVE = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING"})


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Slurm(Protocol):
    """What the executor needs from Slurm: SlurmCli on a controller, the sandbox's simulation in drills."""

    def node_states(self, nodes: Iterable[str]) -> dict[str, NodeState]: ...
    def drain(self, nodes: Sequence[str], reason: str) -> None: ...
    def resume(self, nodes: Sequence[str]) -> None: ...
    def jobs_on(self, nodes: Iterable[str]) -> list[JobSpec]: ...
    def job(self, job_id: str) -> JobSpec | None: ...
    def resubmission_of(self, job_id: str, incident_id: str) -> str | None: ...
    def submit(self, submission: Submission) -> str: ...
    def cancel(self, job_id: str) -> None: ...
    def requeue(self, job_id: str) -> bool: ...


class CommandExecutor:
    def __init__(self, slurm: Slurm, *, now: Callable[[], datetime] = _utcnow) -> None:
        self.slurm = slurm
        self.now = now

    def execute(self, envelope: CommandEnvelope) -> CommandReply[Any]:
        started = self.now()
        command = envelope.command
        result: Any
        if isinstance(command, DrainNodes):
            result = self.drain(command)
        elif isinstance(command, ResumeNodes):
            result = self.resume(command)
        elif isinstance(command, JobsOnNodes):
            result = JobsOnNodesResult(jobs=self.slurm.jobs_on(command.nodes))
        elif isinstance(command, ResubmitJob):
            result = self.resubmit(command, envelope.incident_id)
        elif isinstance(command, NodeStates):
            states = self.slurm.node_states(command.nodes)
            result = NodeStatesResult(
                nodes=[NodeStatus(name=s.name, state=s.state, flags=list(s.flags), reason=s.reason) for s in states.values()]
            )
        elif isinstance(command, CaptureJobSpec):
            result = JobSpecResult(job=self.slurm.job(command.job_id))
        elif isinstance(command, RequeueJob):
            result = RequeueResult(job_id=command.job_id, requeued=self.slurm.requeue(command.job_id))
        else:  # pragma: no cover - the envelope's discriminated union admits nothing else
            raise InvalidCommand(f"command: unknown type {type(command).__name__}")
        return CommandReply(
            command_id=envelope.command_id,
            type=command.type,
            requested_at=envelope.requested_at,
            started_at=started,
            completed_at=self.now(),
            result=result,
        )

    def drain(self, command: DrainNodes) -> DrainResult:
        if not command.reason.startswith(OWNER_TAG_PREFIX + ":"):
            raise InvalidCommand(f"reason: must start with {OWNER_TAG_PREFIX}: so that only our drains are ever resumed")
        states = self.slurm.node_states(command.nodes)
        already = [n for n, s in states.items() if s.drained_or_draining]  # ours from a retry, or someone else's: kept as is
        to_drain = [n for n in command.nodes if n not in already]
        if to_drain:
            self.slurm.drain(to_drain, command.reason)
        return DrainResult(drained=to_drain, already_drained=already)

    def resume(self, command: ResumeNodes) -> ResumeResult:
        if not command.owner_tag.startswith(OWNER_TAG_PREFIX + ":"):
            raise InvalidCommand(f"owner_tag: must start with {OWNER_TAG_PREFIX}:")
        result = ResumeResult()
        for name, state in self.slurm.node_states(command.nodes).items():
            if not state.drained_or_draining:
                result.not_drained.append(name)
            elif not state.reason.startswith(command.owner_tag):
                result.not_ours.append(name)  # someone else's drain (or another incident's): never undone by us
            else:
                result.resumed.append(name)
        if result.resumed:
            self.slurm.resume(result.resumed)
        return result

    def resubmit(self, command: ResubmitJob, incident_id: str) -> ResubmitResult:
        old = command.job
        existing = self.slurm.resubmission_of(old.job_id, incident_id)
        if existing is not None:
            return ResubmitResult(old_job_id=old.job_id, new_job_id=existing, already_submitted=True)
        if not old.batch_script:
            raise InvalidCommand(f"job.batch_script: job {old.job_id} has no captured batch script to resubmit")
        current = self.slurm.job(old.job_id)
        if current is not None and current.state in RESTARTED_BY_SLURM:
            # Slurm requeued it after the node failure: it is restarting already. A second copy
            # would train twice on the same data and race it for checkpoints.
            return ResubmitResult(old_job_id=old.job_id, new_job_id=old.job_id, already_submitted=True, restarted_by_slurm=True)
        cancelled = False
        if current is not None and current.state in STILL_ALIVE:
            # Still holding nodes we replaced (or hung on them): never two copies of a training run.
            self.slurm.cancel(old.job_id)
            cancelled = True
        minutes = int(old.time_limit) if old.time_limit and old.time_limit.isdigit() else None
        new_id = self.slurm.submit(
            Submission(
                script=old.batch_script,
                name=old.name,
                num_nodes=old.num_nodes,
                comment=f"{RESUBMISSION_MARK}{old.job_id} incident={incident_id}",
                environment={RESUME_FROM_ENV: command.checkpoint.uri, RESUME_STEP_ENV: str(command.checkpoint.step)},
                partition=old.partition,
                time_limit_minutes=minutes,
                work_dir=old.work_dir,
                exclude_nodes=tuple(command.exclude_nodes),
            )
        )
        return ResubmitResult(old_job_id=old.job_id, new_job_id=new_id, cancelled_old=cancelled)
