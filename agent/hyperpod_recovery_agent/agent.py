"""The agent's loop: long-poll the command queue, execute, answer the workflow's task token (and,
on a thread of its own while the loop runs, the job nodes snapshot: job_nodes.py).

What keeps it safe when things go wrong:
* A malformed command is answered with SendTaskFailure(InvalidCommand), the cause naming the
  field, and deleted: it is never retried forever. Without a readable token, or with one whose
  task no longer waits, it is only deleted (logged); only an answer that could not be sent
  (throttled, the network) brings it back.
* slurmctld unreachable: retried with backoff (RetryPolicy), heartbeating meanwhile, then
  answered ControllerUnavailable.
* Commands are received with a short visibility timeout, and every one the agent holds (the one it
  runs and those waiting their turn, all it could receive) has it renewed, with a task heartbeat, by
  a keep-alive thread while a command runs: the workflow's HeartbeatSeconds then tells a dead agent
  from a busy one within a minute. If the agent dies mid-command the message reappears within
  ``visibility_seconds`` and the restarted agent executes it again, which is safe: every command
  is idempotent against Slurm's own state, and a finished one is answered from the reply journal
  (so the answer is the same, and a retried controller Lambda's new task token gets it too).
* Nothing is executed for a task the workflow no longer waits for: before acting, the agent
  heartbeats the command's task token. A dead token (the state timed out, the execution ended or
  escalated, or the token was never issued, as in a forged message) means the command is dropped
  and deleted, never executed and never redelivered. This is also what makes a message on the queue
  trustworthy: only a running execution of this stack holds a live token the agent may answer.
* An answer the workflow no longer waits for (TaskTimedOut, an expired token) is dropped with a
  log line; any other failure to answer leaves the message to come back and be answered again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from hyperpod_recovery.errors import (
    ControllerAgentError,
    ControllerUnavailable,
    InvalidCommand,
    JobSpecUnavailable,
    NodeNotFound,
    OldJobNotStopped,
)
from hyperpod_recovery.models.commands import CommandEnvelope
from hyperpod_recovery.models.common import format_validation_error
from hyperpod_recovery_agent.config import RetryPolicy
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.job_nodes import JobNodesReporter, ReporterThread
from hyperpod_recovery_agent.slurm import SlurmCommandFailed, SlurmUnreachable

log = logging.getLogger("hyperpod_recovery_agent")

# The workflow stopped waiting for this token: answering again can never succeed.
_TOKEN_GONE = frozenset({"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"})
# Commands held at once (received, waiting their turn, each heartbeated): more than a storm sends
# (64 jobs' captures, four resubmissions per incident) and far below SQS's in-flight limit.
MAX_IN_HAND = 256
RECEIVE_BATCH = 10  # SQS ReceiveMessage's most
_CAUSE_LIMIT = 32_768  # SendTaskFailure cause
# Errors the agent answers with, by the exception that raised them (names = ASL error names).
_ANSWERED_ERRORS = (
    InvalidCommand,
    NodeNotFound,
    ControllerUnavailable,
    JobSpecUnavailable,
    OldJobNotStopped,
    SlurmCommandFailed,
    ControllerAgentError,  # (raised on purpose: what the agent cannot answer, said in its message)
)


@dataclass(frozen=True)
class Outcome:
    """What happened to one message, for logs and tests."""

    command_id: str | None
    command_type: str | None
    status: str  # succeeded | failed | replayed | invalid | expired | dropped | unanswered | unverified
    error: str | None = None
    cause: str | None = None


class ReplyJournal:
    """Replies to finished commands, one file per command id (written before the answer is sent)."""

    def __init__(self, directory: Path, keep_days: int = 7) -> None:
        self.directory = directory
        self.keep_seconds = keep_days * 86_400
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, command_id: str) -> Path:
        return self.directory / f"{hashlib.sha256(command_id.encode()).hexdigest()}.json"

    def get(self, command_id: str) -> str | None:
        try:
            return self._path(command_id).read_text()
        except FileNotFoundError:
            return None

    def put(self, command_id: str, reply_json: str) -> None:
        path = self._path(command_id)
        partial = path.with_suffix(".partial")
        with partial.open("w") as handle:
            handle.write(reply_json)
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(path)  # atomic: a crash leaves the old state or the whole reply

    def replies(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted(self.directory.glob("*.json"))]

    def prune(self, now: float | None = None) -> int:
        cutoff = (now if now is not None else time.time()) - self.keep_seconds
        old = [p for p in self.directory.glob("*.json") if p.stat().st_mtime < cutoff]
        for path in old:
            path.unlink(missing_ok=True)
        return len(old)


class Agent:
    def __init__(
        self,
        *,
        executor: CommandExecutor,
        sqs: Any,
        stepfunctions: Any,
        queue_url: str,
        journal: ReplyJournal,
        retry: RetryPolicy | None = None,
        heartbeat_seconds: float = 20,
        visibility_seconds: int = 60,
        sleep: Callable[[float], None] = time.sleep,
        keepalive_wait: Callable[[threading.Event, float], bool] | None = None,
        job_nodes: JobNodesReporter | None = None,
        job_nodes_wait: Callable[[threading.Event, float], bool] | None = None,
    ) -> None:
        self.executor = executor
        self.sqs = sqs
        self.stepfunctions = stepfunctions
        self.queue_url = queue_url
        self.journal = journal
        self.retry = retry or RetryPolicy()
        self.heartbeat_seconds = heartbeat_seconds
        self.visibility_seconds = visibility_seconds
        self.sleep = sleep
        # How the keep-alive thread waits between beats; tests pass one that does not sleep.
        self.keepalive_wait = keepalive_wait or (lambda stop, seconds: stop.wait(seconds))
        # Commands received and waiting their turn, oldest first (the keep-alive thread adds to it).
        self.waiting: deque[dict[str, Any]] = deque()
        # The periodic snapshot of running jobs' nodes (job_nodes.py), on its own thread while run() runs.
        self.job_nodes = job_nodes
        self.job_nodes_wait = job_nodes_wait
        self._waiting_lock = threading.Lock()

    # --- the loop ---------------------------------------------------------------------------
    def run(self, stop: threading.Event, wait_seconds: int = 20, between_polls: Callable[[], None] | None = None) -> None:
        """Poll until ``stop`` is set (SIGTERM); a command in progress is finished first."""
        with ReporterThread(self.job_nodes, self.job_nodes_wait) if self.job_nodes is not None else contextlib.nullcontext():
            self._poll_until(stop, wait_seconds, between_polls)

    def _poll_until(self, stop: threading.Event, wait_seconds: int, between_polls: Callable[[], None] | None) -> None:
        failures = 0
        while not stop.is_set():
            try:
                self.poll_once(wait_seconds)
                failures = 0
            except (ClientError, BotoCoreError) as exc:
                failures += 1
                delay = min(2.0**failures, 60.0)
                log.warning("command queue unreachable, retrying in %.0f s: %s", delay, exc)
                stop.wait(delay)
            if between_polls is not None:
                between_polls()

    def poll_once(self, wait_seconds: int = 20) -> list[Outcome]:
        """Take every command on the queue into hand (long-polling for the first), then execute
        them one at a time, oldest first; the ones waiting are heartbeated meanwhile."""
        self._hold(self.receive(wait_seconds))
        try:
            self.take_waiting()
        except (ClientError, BotoCoreError) as exc:  # what is held is run; the rest comes on the next poll
            log.warning("could not look for more commands: %s", exc)
        outcomes = []
        # One keep-alive for the commands waiting their turn, on its own timer: a run of short
        # commands (each with its own keep-alive, first beat after heartbeat_seconds) never beats them.
        with _WaitingKeepAlive(self):
            while (message := self._next_waiting()) is not None:
                outcomes.append(self.handle(message))
        return outcomes

    def receive(self, wait_seconds: int = 20) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=RECEIVE_BATCH,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=self.visibility_seconds,
        ).get("Messages", [])
        return messages

    def take_waiting(self) -> None:
        """Receive, without waiting, every command on the queue, up to MAX_IN_HAND held: a command
        left on the queue behind a long one would get no heartbeat and time out while we live."""
        while len(self.waiting) < MAX_IN_HAND:
            messages = self.receive(wait_seconds=0)
            if not messages:
                return
            self._hold(messages)

    def _hold(self, messages: list[dict[str, Any]]) -> None:
        with self._waiting_lock:
            self.waiting.extend(messages)

    def _next_waiting(self) -> dict[str, Any] | None:
        with self._waiting_lock:
            return self.waiting.popleft() if self.waiting else None

    def beat_waiting(self) -> None:
        """Heartbeat every command waiting its turn and keep it invisible; one whose task no longer
        waits (timed out, its execution ended) is dropped and deleted, never executed."""
        try:
            self.take_waiting()
        except (ClientError, BotoCoreError) as exc:
            log.warning("could not look for more commands: %s", exc)
        with self._waiting_lock:
            held = list(self.waiting)
        for message in held:
            token, command_id, command_type = _salvage(message.get("Body", ""))
            if token is None:
                continue  # rejected when its turn comes
            if not self.beat(token, message["ReceiptHandle"]):
                log.warning("command %s (%s) not executed: its task is no longer waiting", command_id, command_type)
                self._delete(message["ReceiptHandle"])
                with self._waiting_lock:
                    if message in self.waiting:
                        self.waiting.remove(message)

    # --- one message --------------------------------------------------------------------------
    def handle(self, message: dict[str, Any]) -> Outcome:
        body, receipt = message.get("Body", ""), message["ReceiptHandle"]
        try:
            envelope = CommandEnvelope.model_validate_json(body)
        except ValidationError as exc:
            outcome = self._reject(body, format_validation_error(exc))
            if outcome.status != "unanswered":
                self._delete(receipt)
            return outcome

        command_type = envelope.command.type
        replayed = self.journal.get(envelope.command_id)
        if replayed is not None:
            log.info("command %s already done; answering from the journal", envelope.command_id)
            return self._finish(envelope, receipt, Outcome(envelope.command_id, command_type, "replayed"), output=replayed)

        not_alive = self._task_not_alive(envelope, receipt)
        if not_alive is not None:
            return not_alive
        log.info("executing %s %s for %s", command_type, envelope.command_id, envelope.incident_id)
        with self._keepalive(envelope.task_token, receipt):
            try:
                reply = self._execute_with_retries(envelope)
            except _ANSWERED_ERRORS as exc:
                outcome = Outcome(envelope.command_id, command_type, "failed", type(exc).__name__, str(exc)[:_CAUSE_LIMIT])
                return self._finish(envelope, receipt, outcome)
            except Exception as exc:  # a bug or a Slurm output we do not understand: answer, never loop on it
                log.exception("command %s failed unexpectedly", envelope.command_id)
                outcome = Outcome(
                    envelope.command_id, command_type, "failed", ControllerAgentError.__name__, f"{type(exc).__name__}: {exc}"
                )
                return self._finish(envelope, receipt, outcome)
        output = reply.model_dump_json()
        self.journal.put(envelope.command_id, output)
        return self._finish(envelope, receipt, Outcome(envelope.command_id, command_type, "succeeded"), output=output)

    def _task_not_alive(self, envelope: CommandEnvelope, receipt: str) -> Outcome | None:
        """None when the workflow still waits for this command; otherwise what happened to it.

        An agent back after an outage finds commands whose states timed out long ago (the workflow
        escalated, a human may have restarted the job by hand): executing them now would be the
        automation acting behind the human's back."""
        command_id, command_type = envelope.command_id, envelope.command.type
        try:
            self.stepfunctions.send_task_heartbeat(taskToken=envelope.task_token)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in _TOKEN_GONE:
                log.warning("command %s (%s) not executed: its task is no longer waiting (%s)", command_id, command_type, code)
                self._delete(receipt)
                return Outcome(command_id, command_type, "expired", code, str(exc))
            log.warning("could not check that %s is still awaited (%s); it comes back on the queue", command_id, code)
            return Outcome(command_id, command_type, "unverified", code, str(exc))
        except BotoCoreError as exc:
            log.warning("could not check that %s is still awaited: %s; it comes back on the queue", command_id, exc)
            return Outcome(command_id, command_type, "unverified", type(exc).__name__, str(exc))
        return None

    def _execute_with_retries(self, envelope: CommandEnvelope) -> Any:
        delays = self.retry.delays()
        started = time.monotonic()
        for attempt in range(len(delays) + 1):
            try:
                return self.executor.execute(envelope)
            except SlurmUnreachable as exc:
                if attempt == len(delays):
                    waited = time.monotonic() - started
                    raise ControllerUnavailable(f"slurmctld unreachable after {attempt + 1} attempts over {waited:.0f} s: {exc}") from exc
                log.warning("slurmctld unreachable (attempt %d), retrying in %.0f s: %s", attempt + 1, delays[attempt], exc)
                self.sleep(delays[attempt])
        raise AssertionError("unreachable")  # pragma: no cover

    def _reject(self, body: str, problem: str) -> Outcome:
        """A message that is not a valid command: fail its task if it names one, never retry it.
        Only an answer that could not be sent (throttled, the network) leaves the message to come
        back and be rejected again; a task that no longer waits (or a token nobody issued) is
        dropped with the message, as the runbook promises: it would otherwise return until the
        command DLQ pages a human about a message nobody can answer."""
        token, command_id, command_type = _salvage(body)
        if token is None:
            log.error("dropped a command message without a usable task token: %s", problem)
            return Outcome(command_id, command_type, "invalid", "InvalidCommand", problem)
        try:
            self._answer_failure(token, "InvalidCommand", problem)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in _TOKEN_GONE:
                log.warning("could not reject command %s (%s); it comes back on the queue", command_id, code)
                return Outcome(command_id, command_type, "unanswered", code, str(exc))
            log.error("dropped command %s: %s; its task no longer waits (%s), nobody to answer", command_id, problem, code)
            return Outcome(command_id, command_type, "invalid", "InvalidCommand", problem)
        except BotoCoreError as exc:
            log.warning("could not reject command %s: %s; it comes back on the queue", command_id, exc)
            return Outcome(command_id, command_type, "unanswered", type(exc).__name__, str(exc))
        log.error("rejected command %s: %s", command_id, problem)
        return Outcome(command_id, command_type, "invalid", "InvalidCommand", problem)

    def _finish(self, envelope: CommandEnvelope, receipt: str, outcome: Outcome, output: str | None = None) -> Outcome:
        try:
            if output is not None:
                self.stepfunctions.send_task_success(taskToken=envelope.task_token, output=output)
            else:
                self._answer_failure(envelope.task_token, outcome.error or "InvalidCommand", outcome.cause or "")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in _TOKEN_GONE:
                log.warning("could not answer %s (%s); it comes back on the queue", envelope.command_id, code)
                return Outcome(outcome.command_id, outcome.command_type, "unanswered", code, str(exc))
            log.warning("workflow no longer waits for %s (%s); answer dropped", envelope.command_id, code)
            outcome = Outcome(outcome.command_id, outcome.command_type, "dropped", code, outcome.cause)
        except BotoCoreError as exc:
            log.warning("could not answer %s: %s; it comes back on the queue", envelope.command_id, exc)
            return Outcome(outcome.command_id, outcome.command_type, "unanswered", type(exc).__name__, str(exc))
        self._delete(receipt)
        log.info("command %s %s", envelope.command_id, outcome.status + (f": {outcome.error}: {outcome.cause}" if outcome.error else ""))
        return outcome

    def _answer_failure(self, token: str, error: str, cause: str) -> None:
        self.stepfunctions.send_task_failure(taskToken=token, error=error[:256], cause=cause[:_CAUSE_LIMIT])

    def _delete(self, receipt: str) -> None:
        try:
            self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)
        except (ClientError, BotoCoreError) as exc:
            # Harmless: the message comes back and is answered again from the journal.
            log.warning("could not delete a handled command message: %s", exc)

    # --- keep-alive ---------------------------------------------------------------------------
    def _keepalive(self, token: str, receipt: str) -> _KeepAlive:
        return _KeepAlive(self, token, receipt)

    def beat(self, token: str, receipt: str) -> bool:
        """One heartbeat: keep the message invisible, tell the workflow we are working (each on its
        own: an expired receipt must not cost the task its heartbeat). False: the task is gone."""
        try:
            self.sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=receipt, VisibilityTimeout=self.visibility_seconds)
        except (ClientError, BotoCoreError) as exc:
            log.warning("could not keep a command invisible: %s", exc)
        try:
            self.stepfunctions.send_task_heartbeat(taskToken=token)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            log.warning("heartbeat failed (%s): %s", code, exc)
            return code not in _TOKEN_GONE
        except BotoCoreError as exc:
            log.warning("heartbeat failed: %s", exc)
        return True


class _KeepAlive:
    def __init__(self, agent: Agent, token: str, receipt: str) -> None:
        self.agent, self.token, self.receipt = agent, token, receipt
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="keepalive", daemon=True)

    def _beat(self) -> None:
        while not self.agent.keepalive_wait(self.stop, self.agent.heartbeat_seconds):
            if not self.agent.beat(self.token, self.receipt):
                return

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


class _WaitingKeepAlive:
    """Heartbeats the commands held and waiting their turn (Agent.beat_waiting) every
    heartbeat_seconds, for as long as a batch of commands is worked through."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="keepalive-waiting", daemon=True)

    def _beat(self) -> None:
        while not self.agent.keepalive_wait(self.stop, self.agent.heartbeat_seconds):
            self.agent.beat_waiting()

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _salvage(body: str) -> tuple[str | None, str | None, str | None]:
    """Task token, command id and type from a message that failed validation, when readable."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # a deeply nested body must not crash the agent's loop
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    token = data.get("task_token")
    command_id = data.get("command_id")
    command = data.get("command")
    command_type = command.get("type") if isinstance(command, dict) else None
    return (
        token if isinstance(token, str) and 0 < len(token) <= 8192 else None,
        command_id if isinstance(command_id, str) else None,
        command_type if isinstance(command_type, str) else None,
    )
