"""Intake: SQS batch of EventBridge events -> grouped RecoveryRequests and JobRecoveryRequests -> executions.

Per record: parse and translate. A record that can never parse goes to the DLQ with the reason
and is *not* retried; a foreign-cluster or no-action event is dropped and counted. Then the
accepted node triggers are grouped (a rack failure becomes one execution) and each group starts a
NodeRecovery execution named by its incident id; each failed job starts a JobRecovery execution
named by the job's end. A reused name means a duplicate of an incident in progress. Node
recoveries start first: when a health event and a job failure arrive together, the node recovery
takes the node locks and the job recovery waits for it instead of racing it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.intake.execution_names import incident_id_for, job_execution_name
from hyperpod_recovery.domain.intake.normalize import GuardedCluster, Ignored, group_triggers, parse_intake_event
from hyperpod_recovery.errors import ForeignClusterEvent, InvalidRecoveryRequest, StartExecutionFailed
from hyperpod_recovery.models.common import MAX_NODES_PER_REQUEST
from hyperpod_recovery.models.requests import JobRecoveryRequest, Trigger
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.ports import DeadLetterSink, Workflows


@dataclass
class Intake:
    guarded: GuardedCluster
    dead_letters: DeadLetterSink
    accepted: dict[str, Trigger] = field(default_factory=dict)  # SQS message id -> trigger
    accepted_jobs: dict[str, JobRecoveryRequest] = field(default_factory=dict)  # SQS message id -> job request
    counts: Counter[str] = field(default_factory=Counter)

    def accept(self, message_id: str, body: str) -> None:
        """One record of the batch (sqs_events.process_batch). Raises only for transient problems (record retried)."""
        self.counts["received"] += 1
        try:
            result = parse_intake_event(body, self.guarded)
        except InvalidRecoveryRequest as exc:
            logger.warning("event rejected: sent to the DLQ", extra={"message_id": message_id, "reason": str(exc)})
            self.dead_letters.send(body, str(exc), message_id)
            self.counts["dead_lettered"] += 1
            return
        except ForeignClusterEvent as exc:
            logger.warning("event for another cluster dropped", extra={"message_id": message_id, "reason": str(exc)})
            self.counts["foreign"] += 1
            return
        if isinstance(result, Ignored):
            logger.info("event needs no action", extra={"message_id": message_id, "reason": result.reason})
            self.counts["ignored"] += 1
            return
        if isinstance(result, JobRecoveryRequest):
            self.accepted_jobs[message_id] = result
            return
        self.accepted[message_id] = result

    def start_recoveries(self, workflows: Workflows, episode_window_seconds: int) -> list[str]:
        """Start one execution per group; returns the message ids whose start failed (SQS redelivers them,
        and the queue's maxReceiveCount bounds a refusal retrying will not fix)."""
        failed: list[str] = []
        requests = group_triggers(list(self.accepted.values()), self.guarded.name, MAX_NODES_PER_REQUEST)
        for request in requests:
            name = incident_id_for(request, episode_window_seconds)
            messages = [m for m, t in self.accepted.items() if set(t.node_ids) & set(request.node_ids)]
            try:
                started = workflows.start(name, request.model_dump_json(exclude_none=True))
            except StartExecutionFailed:
                # Transient, or a permanent refusal SQS's redrive (maxReceiveCount) will bound.
                logger.exception("could not start recovery; records will be retried", extra={"incident": name})
                failed += messages
                continue
            self.counts["started" if started == "started" else "duplicates"] += 1
            logger.info(
                "recovery started" if started == "started" else "duplicate of an incident already started",
                extra={"incident": name, "nodes": request.node_ids, "events": len(messages)},
            )
        return failed + self._start_job_recoveries(workflows)

    def _start_job_recoveries(self, workflows: Workflows) -> list[str]:
        failed: list[str] = []
        for message_id, job in self.accepted_jobs.items():
            assert job.failure is not None  # intake only makes job requests from the agent's events
            name = job_execution_name(job.job_id, job.failure.ended_at)
            try:
                started = workflows.start(name, job.model_dump_json(exclude_none=True), "job")
            except StartExecutionFailed:
                logger.exception("could not start job recovery; record will be retried", extra={"incident": name})
                failed.append(message_id)
                continue
            self.counts["jobs_started" if started == "started" else "duplicates"] += 1
            logger.info(
                "job recovery started" if started == "started" else "duplicate of a job recovery already started",
                extra={"incident": name, "job_id": job.job_id, "state": job.failure.state},
            )
        return failed
