"""A simulated Slurm controller and controller agent, answering the command queue.

It keeps Slurm's view of the cluster: node names with their state and drain reason, and jobs
with their nodes and state. It executes the typed commands the workflow sends (the same models the
real agent will use), answers with SendTaskSuccess/SendTaskFailure, and models the agent's latency
on the execution's virtual timeline. It is answered synchronously after each Lambda invocation
(``pump``), so drills need no polling thread. The real agent against a real Slurm comes with the
controller-agent milestone; the command protocol is the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from hyperpod_recovery.models.commands import (
    OWNER_TAG_PREFIX,
    CommandEnvelope,
    CommandReply,
    DrainNodes,
    DrainResult,
    JobsOnNodes,
    JobsOnNodesResult,
    JobSpec,
    ResubmitJob,
    ResubmitResult,
    ResumeNodes,
    ResumeResult,
)
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV
from sandbox.aws import ApiCalls
from sandbox.clock import VirtualClock

QUEUE_LAG_SECONDS = 0.2  # a long-polling agent picks a message up almost at once


@dataclass
class SlurmNode:
    name: str
    state: str = "idle"  # idle | allocated | drained
    reason: str | None = None


@dataclass
class SlurmJob:
    job_id: str
    name: str
    nodes: list[str]
    state: str
    checkpoint_uri: str | None
    auto_resume: bool = False
    environment: dict[str, str] = field(default_factory=dict)
    resubmission_of: str | None = None


@dataclass
class Submission:
    incident_id: str
    old_job_id: str
    new_job_id: str
    checkpoint_uri: str
    checkpoint_step: int


class CommandFailed(Exception):
    def __init__(self, error: str, cause: str) -> None:
        super().__init__(cause)
        self.error = error


class SimulatedSlurm:
    def __init__(self, clock: VirtualClock, epoch: datetime, agent_seconds: float, agent_down: bool) -> None:
        self.clock = clock
        self.epoch = epoch
        self.agent_seconds = agent_seconds
        self.agent_down = agent_down
        self.nodes: dict[str, SlurmNode] = {}
        self.jobs: dict[str, SlurmJob] = {}
        self.submissions: list[Submission] = []
        self.commands: list[dict[str, Any]] = []  # what the agent executed, for the report
        self._done: dict[str, str] = {}  # command_id -> reply JSON (idempotency)
        self._lock = threading.RLock()
        self.queue_url = ""
        self.sqs: Any = None
        self.stepfunctions: Any = None
        self.count_call: Callable[[str, str], None] = lambda service, action: None

    def connect(self, queue_url: str, sqs: Any, stepfunctions: Any, count_call: Callable[[str, str], None]) -> None:
        self.queue_url, self.sqs, self.stepfunctions, self.count_call = queue_url, sqs, stepfunctions, count_call

    def add_node(self, name: str) -> None:
        self.nodes[name] = SlurmNode(name)

    def add_job(self, job: SlurmJob) -> None:
        self.jobs[job.job_id] = job
        for name in job.nodes:
            self.nodes[name].state = "allocated"

    # --- the agent loop -----------------------------------------------------------------
    def pump(self) -> None:
        """Execute every command waiting on the queue (called after each Lambda invocation).

        A real agent long-polls all the time; only the polls that return work are the pipeline's
        cost, so the empty look at the queue is made uncounted and the useful receive counted.
        """
        if self.agent_down or self.sqs is None:
            return
        while True:
            with ApiCalls.counting(False):
                messages = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
            if not messages:
                return
            self.count_call("sqs", "ReceiveMessage")
            for message in messages:
                self._handle(message["Body"])
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def _handle(self, body: str) -> None:
        try:
            envelope = CommandEnvelope.model_validate_json(body)
        except ValidationError as exc:
            # Without a valid envelope there may be no token to answer: drop it (the real agent logs it).
            self.commands.append({"type": "invalid", "error": format_validation_error(exc)})
            return
        timeline = envelope.execution_name
        started = envelope.requested_at + timedelta(seconds=QUEUE_LAG_SECONDS)
        completed = started + timedelta(seconds=self.agent_seconds)
        failure: CommandFailed | None = None
        # The lock guards Slurm's state only: the virtual-time wait below may park at the horizon,
        # and must not hold up other executions' commands while it does.
        with self._lock:
            cached = self._done.get(envelope.command_id)
            try:
                result = None if cached else self._execute(envelope)
            except CommandFailed as failed:
                failure = failed
                self.commands.append({"type": envelope.command.type, "incident": envelope.incident_id, "error": failed.error})
            if cached is None and failure is None:
                reply: CommandReply[Any] = CommandReply(
                    command_id=envelope.command_id,
                    type=envelope.command.type,
                    requested_at=envelope.requested_at,
                    started_at=started,
                    completed_at=completed,
                    result=result,
                )
                cached = reply.model_dump_json()
                self._done[envelope.command_id] = cached
                self.commands.append(
                    {
                        "type": envelope.command.type,
                        "incident": envelope.incident_id,
                        "at": self._seconds(completed),
                        "result": result.model_dump(mode="json"),
                    }
                )
        self.clock.sleep_until(self._seconds(completed), timeline=timeline)
        if failure is not None:
            self.stepfunctions.send_task_failure(taskToken=envelope.task_token, error=failure.error, cause=str(failure))
        else:
            self.stepfunctions.send_task_success(taskToken=envelope.task_token, output=cached)

    def _seconds(self, moment: datetime) -> float:
        return (moment - self.epoch).total_seconds()

    # --- commands -----------------------------------------------------------------------
    def _execute(self, envelope: CommandEnvelope) -> Any:
        command = envelope.command
        if isinstance(command, DrainNodes):
            return self._drain(command)
        if isinstance(command, ResumeNodes):
            return self._resume(command)
        if isinstance(command, JobsOnNodes):
            return self._jobs_on(command)
        if isinstance(command, ResubmitJob):
            return self._resubmit(command, envelope.incident_id)
        raise CommandFailed("InvalidCommand", f"unknown command {command!r}")

    def _known(self, names: list[str]) -> None:
        unknown = [n for n in names if n not in self.nodes]
        if unknown:
            raise CommandFailed("NodeNotFound", f"Slurm does not know node(s) {unknown}")

    def _drain(self, command: DrainNodes) -> DrainResult:
        self._known(command.nodes)
        result = DrainResult()
        for name in command.nodes:
            node = self.nodes[name]
            if node.state == "drained" and node.reason == command.reason:
                result.already_drained.append(name)
                continue
            node.state, node.reason = "drained", command.reason
            result.drained.append(name)
        return result

    def _resume(self, command: ResumeNodes) -> ResumeResult:
        self._known(command.nodes)
        result = ResumeResult()
        for name in command.nodes:
            node = self.nodes[name]
            if node.state != "drained":
                result.not_drained.append(name)
            elif not (node.reason or "").startswith(command.owner_tag) or not command.owner_tag.startswith(OWNER_TAG_PREFIX):
                result.not_ours.append(name)  # someone else's drain: never undone by us
            else:
                node.state, node.reason = "idle", None
                result.resumed.append(name)
        return result

    def _jobs_on(self, command: JobsOnNodes) -> JobsOnNodesResult:
        self._known(command.nodes)
        wanted = set(command.nodes)
        jobs = [
            JobSpec(
                job_id=job.job_id,
                name=job.name,
                user="trainer",
                partition="gpu",
                num_nodes=len(job.nodes),
                nodes=job.nodes,
                state=job.state,
                time_limit="UNLIMITED",
                work_dir=f"/fsx/{job.name}",
                checkpoint_uri=job.checkpoint_uri,
                auto_resume=job.auto_resume,
            )
            for job in self.jobs.values()
            if job.state in ("RUNNING", "COMPLETING", "NODE_FAIL") and wanted & set(job.nodes)
        ]
        return JobsOnNodesResult(jobs=jobs)

    def _resubmit(self, command: ResubmitJob, incident_id: str) -> ResubmitResult:
        old = self.jobs.get(command.job.job_id)
        if old is None:
            raise CommandFailed("InvalidCommand", f"job {command.job.job_id} is unknown to Slurm")
        if old.state in ("RUNNING", "COMPLETING", "PENDING"):
            old.state = "CANCELLED"  # never two copies of a training run
        new_id = str(max(int(j) for j in self.jobs) + 1)
        usable = [n for n in old.nodes if self.nodes[n].state != "drained"]
        state = "RUNNING" if len(usable) == len(old.nodes) else "PENDING"
        self.jobs[new_id] = SlurmJob(
            job_id=new_id,
            name=old.name,
            nodes=old.nodes if state == "RUNNING" else [],
            state=state,
            checkpoint_uri=old.checkpoint_uri,
            auto_resume=old.auto_resume,
            resubmission_of=old.job_id,
            environment={
                RESUME_FROM_ENV: command.checkpoint.uri,
                RESUME_STEP_ENV: str(command.checkpoint.step),
            },
        )
        self.submissions.append(Submission(incident_id, old.job_id, new_id, command.checkpoint.uri, command.checkpoint.step))
        return ResubmitResult(old_job_id=old.job_id, new_job_id=new_id)
