"""Slurm for drills: a simulated slurmctld answered by the real agent code.

``SimulatedSlurm`` keeps Slurm's view of the cluster (nodes with state and drain reason, jobs with
their nodes and state) and implements the agent's ``Slurm`` port, so the command queue is
answered by the real ``Agent`` and ``CommandExecutor`` (agent/hyperpod_recovery_agent/): the
drain/resume/resubmit rules drilled here are the ones that run on a controller. What is modelled
is only Slurm itself, and the agent's latency on the execution's virtual timeline. Commands are
answered synchronously after each Lambda invocation (``pump``), so drills need no polling thread.

``make drill SLURM=real`` replaces all of this with the agent as a separate process against a real
slurmctld (sandbox/real_slurm.py).
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hyperpod_recovery.errors import InvalidCommand, NodeNotFound
from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply, JobSpec
from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV
from hyperpod_recovery_agent.agent import Agent, ReplyJournal
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.slurm import RESUBMISSION_MARK, NodeState
from hyperpod_recovery_agent.slurm import Submission as SbatchRequest
from sandbox.aws import ApiCalls, SandboxAWS
from sandbox.clock import VirtualClock

QUEUE_LAG_SECONDS = 0.2  # a long-polling agent picks a message up almost at once
TRAINING_SCRIPT = "#!/bin/bash\n#SBATCH --exclusive\nsrun python train.py --resume-from-env\n"


@dataclass
class SlurmNode:
    name: str
    state: str = "idle"  # idle | allocated
    drained: bool = False
    reason: str = ""


@dataclass
class SlurmJob:
    job_id: str
    name: str
    nodes: list[str]
    state: str
    checkpoint_uri: str | None
    auto_resume: bool = False
    environment: dict[str, str] = field(default_factory=dict)
    comment: str = ""
    resubmission_of: str | None = None


@dataclass
class Submission:
    incident_id: str
    old_job_id: str
    new_job_id: str
    checkpoint_uri: str
    checkpoint_step: int


class SimulatedSlurm:
    """slurmctld's state, behind the same port SlurmCli gives the executor."""

    def __init__(self) -> None:
        self.nodes: dict[str, SlurmNode] = {}
        self.jobs: dict[str, SlurmJob] = {}
        self.submissions: list[Submission] = []

    def add_node(self, name: str) -> None:
        self.nodes[name] = SlurmNode(name)

    def add_job(self, job: SlurmJob) -> None:
        self.jobs[job.job_id] = job
        for name in job.nodes:
            self.nodes[name].state = "allocated"

    def drained_nodes(self) -> dict[str, str]:
        return {n.name: n.reason for n in self.nodes.values() if n.drained}

    # --- the agent's Slurm port -----------------------------------------------------------
    def node_states(self, nodes: Iterable[str]) -> dict[str, NodeState]:
        names = list(nodes)
        unknown = [n for n in names if n not in self.nodes]
        if unknown:
            raise NodeNotFound(f"unknown to slurmctld: {', '.join(unknown)}")
        return {n: NodeState(n, self.nodes[n].state, ("DRAIN",) if self.nodes[n].drained else (), self.nodes[n].reason) for n in names}

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        for name in nodes:
            self.nodes[name].drained, self.nodes[name].reason = True, " ".join(reason.split())

    def resume(self, nodes: Sequence[str]) -> None:
        for name in nodes:
            node = self.nodes[name]
            node.drained, node.reason = False, ""
            if node.state == "down":  # a replaced node's new instance registered: resume makes it usable
                node.state = "idle"

    def jobs_on(self, nodes: Iterable[str]) -> list[JobSpec]:
        wanted = set(self.node_states(nodes))
        return [
            self._spec(job) for job in self.jobs.values() if job.state in ("RUNNING", "COMPLETING", "NODE_FAIL") and wanted & set(job.nodes)
        ]

    def job(self, job_id: str) -> JobSpec | None:
        job = self.jobs.get(job_id)
        return self._spec(job) if job else None

    def resubmission_of(self, job_id: str, incident_id: str) -> str | None:
        mark = f"{RESUBMISSION_MARK}{job_id} incident={incident_id}"
        return next((j.job_id for j in self.jobs.values() if j.comment == mark), None)

    def submit(self, submission: SbatchRequest) -> str:
        old_id = submission.comment.removeprefix(RESUBMISSION_MARK).split(" ", 1)[0]
        old = self.jobs[old_id]
        new_id = str(max(int(j) for j in self.jobs) + 1)
        usable = [n for n in old.nodes if not self.nodes[n].drained and self.nodes[n].state != "down" and n not in submission.exclude_nodes]
        state = "RUNNING" if len(usable) == len(old.nodes) else "PENDING"
        self.jobs[new_id] = SlurmJob(
            job_id=new_id,
            name=submission.name,
            nodes=old.nodes if state == "RUNNING" else [],
            state=state,
            checkpoint_uri=old.checkpoint_uri,
            auto_resume=old.auto_resume,
            environment=dict(submission.environment),
            comment=submission.comment,
            resubmission_of=old.job_id,
        )
        for name in self.jobs[new_id].nodes:
            self.nodes[name].state = "allocated"
        incident = submission.comment.rsplit("incident=", 1)[-1]
        self.submissions.append(
            Submission(incident, old.job_id, new_id, submission.environment[RESUME_FROM_ENV], int(submission.environment[RESUME_STEP_ENV]))
        )
        return new_id

    # --- what a drill does to Slurm ------------------------------------------------------------
    def current_incarnation(self, job_id: str) -> SlurmJob:
        """The newest resubmission of ``job_id`` (or the job itself): what a job_failed fault hits."""
        current = self.jobs[job_id]
        while True:
            newer = [j for j in self.jobs.values() if j.resubmission_of == current.job_id]
            if not newer:
                return current
            current = max(newer, key=lambda j: int(j.job_id))

    def fail_job(self, job_id: str, state: str, down_nodes: Sequence[str], requeued: bool) -> SlurmJob:
        """The job ends ``state``; ``down_nodes`` stop responding. A requeued job is pending again."""
        job = self.jobs[job_id]
        for name in job.nodes:
            node = self.nodes[name]
            if name in down_nodes:
                node.state = "down"
                if not node.drained:
                    node.reason = "Not responding"
            elif node.state == "allocated":
                node.state = "idle"
        job.state = "PENDING" if requeued else state
        return job

    def cancel(self, job_id: str) -> None:
        job = self.jobs[job_id]
        if job.state in ("RUNNING", "COMPLETING", "PENDING"):
            job.state = "CANCELLED"

    def requeue(self, job_id: str) -> bool:
        job = self.jobs.get(job_id)
        if job is None:
            raise InvalidCommand(f"job_id: {job_id} is unknown to slurmctld")
        if job.state == "PENDING":
            return False
        job.state = "PENDING"
        return True

    def _spec(self, job: SlurmJob) -> JobSpec:
        return JobSpec(
            job_id=job.job_id,
            name=job.name,
            user="trainer",
            partition="gpu",
            num_nodes=max(1, len(job.nodes)),
            nodes=job.nodes,
            state=job.state,
            time_limit=None,
            work_dir=f"/fsx/{job.name}",
            checkpoint_uri=job.checkpoint_uri,
            auto_resume=job.auto_resume,
            batch_script=TRAINING_SCRIPT.replace("--resume-from-env", "--auto-resume=1") if job.auto_resume else TRAINING_SCRIPT,
        )


class _TimedExecutor(CommandExecutor):
    """The real executor, on the execution's virtual timeline: queue lag before, modelled agent
    latency after, Slurm's state locked only while the command runs (a wait may park at the
    horizon and must not hold up other executions' commands)."""

    def __init__(self, slurm: SimulatedSlurm, clock: VirtualClock, epoch: datetime, agent_seconds: float) -> None:
        super().__init__(slurm, now=lambda: epoch + timedelta(seconds=clock.now()))
        self.clock = clock
        self.agent_seconds = agent_seconds
        self.lock = threading.RLock()

    def execute(self, envelope: CommandEnvelope) -> CommandReply[Any]:
        with self.clock.on(envelope.execution_name):
            self.clock.sleep(QUEUE_LAG_SECONDS)
            with self.lock:
                reply = super().execute(envelope)
            self.clock.sleep(self.agent_seconds)
            return reply.model_copy(update={"completed_at": self.now()})


class SimulatedController:
    """The controller node of a drill: simulated Slurm, real agent code, in-process."""

    def __init__(self, clock: VirtualClock, epoch: datetime, agent_seconds: float, agent_down: bool) -> None:
        self.clock = clock
        self.epoch = epoch
        self.agent_down = agent_down
        self.slurm = SimulatedSlurm()
        self.executor = _TimedExecutor(self.slurm, clock, epoch, agent_seconds)
        self.commands: list[dict[str, Any]] = []  # what the agent did, for the report
        self._journal_dir = tempfile.TemporaryDirectory(prefix="sandbox-agent-")
        self.journal = ReplyJournal(Path(self._journal_dir.name))
        self.agent: Agent | None = None
        self.count_call: Callable[[str, str], None] = lambda service, action: None

    def connect(self, aws: SandboxAWS) -> None:
        self.agent = Agent(
            executor=self.executor,
            sqs=aws.client("sqs"),
            stepfunctions=aws.client("stepfunctions"),
            queue_url=aws.queue_urls["CommandQueue"],
            journal=self.journal,
        )
        self.count_call = aws.api_calls.record

    def close(self) -> None:
        self.agent = None  # answers nothing more
        self._journal_dir.cleanup()

    # The report's view of Slurm.
    @property
    def submissions(self) -> list[Submission]:
        return self.slurm.submissions

    def drained_nodes(self) -> dict[str, str]:
        return self.slurm.drained_nodes()

    def pump(self) -> None:
        """Answer every command waiting on the queue (called after each Lambda invocation).

        A real agent long-polls all the time; only the polls that return work are the pipeline's
        cost, so the empty look at the queue is made uncounted and the useful receive counted.
        """
        if self.agent_down or self.agent is None:
            return
        while True:
            with ApiCalls.counting(False):
                messages = self.agent.receive(wait_seconds=0)
            if not messages:
                return
            self.count_call("sqs", "ReceiveMessage")
            for message in messages:
                outcome = self.agent.handle(message)
                entry: dict[str, Any] = {
                    "type": outcome.command_type or "invalid",
                    "incident": _incident_of(message),
                    "status": outcome.status,
                }
                if outcome.error:
                    entry["error"] = outcome.error
                reply = self.journal.get(outcome.command_id) if outcome.command_id else None
                if reply is not None and outcome.status == "succeeded":
                    parsed = CommandReply[Any].model_validate_json(reply)
                    entry["at"] = (parsed.completed_at - self.epoch).total_seconds()
                    entry["result"] = parsed.model_dump(mode="json")["result"]
                self.commands.append(entry)


def _incident_of(message: dict[str, Any]) -> str | None:
    try:
        incident = json.loads(message.get("Body", "")).get("incident_id")
    except (ValueError, AttributeError):
        return None
    return incident if isinstance(incident, str) else None
