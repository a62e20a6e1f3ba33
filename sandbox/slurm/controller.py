"""The controller agent in the sandbox: the real Agent and CommandExecutor, answering the command queue
on the execution's virtual timeline, with the agent's latency, downtime and backlog."""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hyperpod_recovery.models.commands import (
    CommandEnvelope,
    CommandReply,
    ResumeNodes,
)
from hyperpod_recovery_agent.agent import Agent, ReplyJournal
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.job_nodes import JobNodesReporter
from sandbox.aws import ApiCalls, SandboxAWS
from sandbox.clock import VirtualClock
from sandbox.slurm.records import Submission
from sandbox.slurm.slurmctld import SimulatedSlurm

QUEUE_LAG_SECONDS = 0.2  # a long-polling agent picks a message up almost at once
# SQS visibility runs on real time while a command's handling waits on virtual time (it may park at
# the horizon for as long as other executions take): keep a received message invisible for the
# queue's maximum, so it never comes back to be received, counted and answered a second time.
VISIBILITY_SECONDS = 43_200


class _TimedExecutor(CommandExecutor):
    """The real executor, on the execution's virtual timeline: queue lag before, modelled agent
    latency after, Slurm's state locked only while the command runs (a wait may park at the
    horizon and must not hold up other executions' commands)."""

    def __init__(
        self, slurm: SimulatedSlurm, clock: VirtualClock, epoch: datetime, agent_seconds: float, health_check_seconds: float = 0.0
    ) -> None:
        super().__init__(slurm, now=lambda: epoch + timedelta(seconds=clock.now()), parallel_checks=False, sleep=self._wait)
        self.clock = clock
        self.agent_seconds = agent_seconds
        self.health_check_seconds = health_check_seconds
        self.lock = threading.RLock()
        # Working through a backlog on the runner's thread (an agent back after an outage): at the
        # runner's present, without the modelled latency (a jump there would park the runner itself).
        self.catching_up = False

    def _wait(self, seconds: float) -> None:
        """A wait inside a command (a cancelled job's end): a jump on the execution's timeline, with
        Slurm's state unlocked meanwhile, as slurmctld goes on serving others while the agent waits
        (another execution's command blocked on the lock would never park, and the runner would
        wait for it for ever). While catching up, on the runner's thread: its present moves on."""
        self.lock.release()
        try:
            self.clock.sleep(seconds, reason="wait for the cancelled job to end")
        finally:
            self.lock.acquire()

    def execute(self, envelope: CommandEnvelope) -> CommandReply[Any]:
        if self.catching_up:
            with self.lock:
                reply = super().execute(envelope)
            return reply.model_copy(update={"completed_at": self.now()})
        with self.clock.on(envelope.execution_name):
            self.clock.sleep(QUEUE_LAG_SECONDS)
            command = envelope.command
            if isinstance(command, ResumeNodes) and command.health_check is not None:
                # The checks run on all nodes at once and take their (modelled) time before any node
                # is released into service: Slurm's state changes at their end.
                self.clock.sleep(self.health_check_seconds)
            with self.lock:
                reply = super().execute(envelope)
            self.clock.sleep(self.agent_seconds)
            return reply.model_copy(update={"completed_at": self.now()})


class SimulatedController:
    """The controller node of a drill: simulated Slurm, real agent code, in-process."""

    def __init__(
        self,
        clock: VirtualClock,
        epoch: datetime,
        agent_seconds: float,
        agent_down: bool,
        agent_back_at: float | None = None,
        health_check_seconds: float = 0.0,
    ) -> None:
        self.clock = clock
        self.epoch = epoch
        self.agent_down = agent_down
        self.agent_back_at = agent_back_at
        self.slurm = SimulatedSlurm(now=lambda: epoch + timedelta(seconds=clock.now()))
        self.executor = _TimedExecutor(self.slurm, clock, epoch, agent_seconds, health_check_seconds)
        self.commands: list[dict[str, Any]] = []  # what the agent did, for the report
        self._journal_dir = tempfile.TemporaryDirectory(prefix="sandbox-agent-")
        self.journal = ReplyJournal(Path(self._journal_dir.name))
        self.agent: Agent | None = None
        self.job_nodes: JobNodesReporter | None = None  # the agent's periodic snapshot, on the virtual clock
        self.count_call: Callable[[str, str], None] = lambda service, action: None
        # Received commands by task token, until the thread of the task waiting for each takes it.
        self._inbox: dict[str | None, list[dict[str, Any]]] = {}
        self._receiving = threading.Lock()

    def connect(self, aws: SandboxAWS) -> None:
        self.agent = Agent(
            executor=self.executor,
            sqs=aws.client("sqs"),
            stepfunctions=aws.client("stepfunctions"),
            queue_url=aws.queue_urls["CommandQueue"],
            journal=self.journal,
            visibility_seconds=VISIBILITY_SECONDS,
            # No heartbeat on real time: a command's wait is a virtual jump, and a beat sent because
            # a loaded machine kept a parked command waiting 20 real seconds is not the pipeline's.
            keepalive_wait=lambda stop, seconds: stop.wait(),
        )
        self.count_call = aws.api_calls.record
        self.job_nodes = JobNodesReporter(
            slurm=self.slurm,
            dynamodb=aws.client("dynamodb"),
            table_name=aws.ledger_table,
            cluster=aws.parameters["ClusterName"],
            clock=lambda: (self.epoch + timedelta(seconds=self.clock.now())).timestamp(),
        )

    def report_job_nodes(self) -> None:
        """The agent's snapshot duty (every 30 s on a controller), brought up to the drill's moment
        before a detector tick reads it; an agent that is down writes none."""
        if self.job_nodes is None or self.agent_down or self._away():
            return
        with ApiCalls.counting(False):  # the agent's own duty on the controller, not the pipeline's calls
            self.job_nodes.tick()

    def close(self) -> None:
        self.agent = None  # answers nothing more
        self.job_nodes = None
        self._journal_dir.cleanup()

    # The report's view of Slurm.
    @property
    def submissions(self) -> list[Submission]:
        return self.slurm.submissions

    def drained_nodes(self) -> dict[str, str]:
        return self.slurm.drained_nodes()

    def pump(self, task_token: str | None = None) -> None:
        """Answer the command the Lambda just invoked sent (called after each Lambda invocation,
        with the task token it was given).

        The answer's modelled latency is a jump on the waiting execution's timeline, which may park
        the answering thread at the horizon; so a command is answered only on the thread of the
        task that waits for it. A thread that answered another execution's command would park
        under that execution's name while its own execution, waiting for the horizon to move,
        never counted as parked: the runner waited for it forever (a lost wake-up, when two
        executions' Lambdas finished at once and one pump took the other's message). Commands of
        other tasks go to their own inbox, under a lock held only while the queue is read (never
        across a wait), so the task that sent one finds it there or on the queue.

        A real agent long-polls all the time; only the polls that return work are the pipeline's
        cost, so the empty look at the queue is made uncounted and the useful receive counted.
        """
        # slurmctld schedules whether or not anyone asks: each Lambda invocation is a moment of the
        # drill at which a pending job may have become startable (a new host that registered).
        self.slurm.schedule()
        agent = self.agent
        if self.agent_down or agent is None or self._away():
            return
        with self._receiving:
            while True:
                with ApiCalls.counting(False):
                    messages = agent.receive(wait_seconds=0)
                if not messages:
                    break
                self.count_call("sqs", "ReceiveMessage")
                for message in messages:
                    self._inbox.setdefault(_token_of(message), []).append(message)
            # A message without a readable token is rejected without waiting: anyone may answer it.
            mine = self._inbox.pop(None, []) + (self._inbox.pop(task_token, []) if task_token else [])
        for message in mine:
            self._answer(agent, message)

    def _away(self) -> bool:
        return self.agent_back_at is not None and self.clock.now() < self.agent_back_at

    def catch_up(self) -> list[str]:
        """The agent is back (``agent_back_at``): it works through every command that queued up
        while it was away, as the real agent's first polls would, on the runner's thread. Returns
        the tasks it answered, so the runner can wake those still waiting for their answer."""
        agent = self.agent
        if agent is None:
            return []
        with self._receiving:
            while True:
                messages = agent.receive(wait_seconds=0)
                if not messages:
                    break
                self.count_call("sqs", "ReceiveMessage")  # only the polls that return work, as in pump
                for message in messages:
                    self._inbox.setdefault(_token_of(message), []).append(message)
            backlog = [m for queued in self._inbox.values() for m in queued]
            self._inbox.clear()
        answered: list[str] = []
        self.executor.catching_up = True
        try:
            with ApiCalls.counting():  # the agent's work, on the runner's thread: the pipeline's calls
                for message in backlog:
                    if self._answer(agent, message) not in _NOT_ANSWERED:
                        answered.append(str(json.loads(message["Body"]).get("execution_name", "")))
        finally:
            self.executor.catching_up = False
        return [name for name in answered if name]

    def _answer(self, agent: Agent, message: dict[str, Any]) -> str:
        outcome = agent.handle(message)
        entry: dict[str, Any] = {
            "type": outcome.command_type or "invalid",
            "incident": _incident_of(message),
            "status": outcome.status,
        }
        if outcome.error:
            entry["error"] = outcome.error
        reply = self.journal.get(outcome.command_id) if outcome.command_id else None
        parsed = CommandReply[Any].model_validate_json(reply) if reply is not None else None
        if parsed is not None and outcome.status == "succeeded":
            entry["at"] = (parsed.completed_at - self.epoch).total_seconds()
            entry["result"] = parsed.model_dump(mode="json")["result"]
        if parsed is not None and parsed.dry_run:
            entry["dry_run"] = True  # a dry run's cordon (answered, or replayed): the agent read, and drained nothing
        self.commands.append(entry)
        return outcome.status


# Agent outcomes after which the waiting task got no answer (agent.Outcome.status).
_NOT_ANSWERED = frozenset({"expired", "unverified", "unanswered", "dropped"})


def _token_of(message: dict[str, Any]) -> str | None:
    try:
        token = json.loads(message.get("Body", "")).get("task_token")
    except (ValueError, AttributeError):
        return None
    return token if isinstance(token, str) and token else None


def _incident_of(message: dict[str, Any]) -> str | None:
    try:
        incident = json.loads(message.get("Body", "")).get("incident_id")
    except (ValueError, AttributeError):
        return None
    return incident if isinstance(incident, str) else None
