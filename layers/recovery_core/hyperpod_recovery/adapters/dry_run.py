"""The one dry-run gate: in a dry run, every call that would change the cluster, the scheduler or
the pipeline's safety state stops here.

A drill (``dry_run: true``, or the stack's DryRun) runs every step for real: it reads the cluster,
the ledger, the jobs and the checkpoints, and decides exactly as a recovery would. Only the calls
that would change something are held back. Each is logged ("dry run: held back") and answered the
way the real system answers when the call succeeds, so each step goes on to what it would do next
and says it in its result ("would cordon", "would replace", "would resubmit"). The steps do not
check for a dry run themselves. The runtime wraps the ports in these gates when the step's request
is a dry run (runtime.py ``Dependencies.for_dry_run``, from ``requests_dry_run``), so a mutating
call added later is held back with the others. Steps whose input carries no request (Validate,
Find Newest Checkpoint, the preflight's checks) are never gated: they change nothing
(tests/unit/test_dry_run_gate.py lists them and fails on a new one).

Per port:
- Cluster: BatchReplace/BatchRebootClusterNodes are held back and answered as all initiated, in 0 calls.
- Ledger: locks, cap places, claims, the breaker, the repeat-offender log, replacement marks and
  restart lineage are held back. A lock is answered with what the locks hold now (read), so a
  drill shows a node another incident holds. The incident's own record and the jobs it found are
  written: they are what a drill is for.
- Orchestrator: a mutating command (drain, resume, resubmit, requeue) is answered here with the
  result it would have had; read-only commands (jobs on nodes, node states, boot times, job spec)
  still go to the scheduler, so a drill shows the real jobs. A cordon (drain, then list the jobs)
  goes with its drain turned off: the agent only reads, and answers what it would have drained.

tests/unit/test_dry_run_gate.py checks that the gate treats every port method one way or the
other, and that no held-back call reaches the adapter behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.models.cluster import BatchOutcome, ClusterInfo, ClusterNode
from hyperpod_recovery.models.commands import (
    MUTATING_COMMANDS,
    CommandEnvelope,
    CommandReply,
    ControllerCommand,
    CordonNodes,
    CordonResult,
    DrainNodes,
    DrainResult,
    HangEvidenceResult,
    JobSpec,
    RequeueJob,
    RequeueResult,
    ResubmitJob,
    ResubmitResult,
    ResumeNodes,
    ResumeResult,
)
from hyperpod_recovery.models.records import (
    BreakerState,
    Effect,
    Holdings,
    IncidentRecord,
    LockOutcome,
    NodeHold,
    RecoveryLogEntry,
    RejoinWait,
    ResubmissionClaim,
)
from hyperpod_recovery.observability import logger

if TYPE_CHECKING:
    from hyperpod_recovery.models.hangs import RecordedVerdict
    from hyperpod_recovery.models.job_recovery import RestartEntry
    from hyperpod_recovery.models.planned_swap import SwapRecord
    from hyperpod_recovery.ports import Cluster, Ledger, Orchestrator


def held_back(port: str, call: str, **detail: Any) -> None:
    """Record what a dry run would have done (the execution's log, correlated by its name)."""
    logger.info("dry run: held back", extra={"port": port, "call": call, **{k: v for k, v in detail.items() if v is not None}})


class DryRunCluster:
    """HyperPod with its Batch calls held back; DescribeCluster, ListClusterNodes and DescribeClusterNode are read."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def describe(self) -> ClusterInfo:
        return self._cluster.describe()

    def list_nodes(self, instance_group: str | None = None) -> list[ClusterNode]:
        return self._cluster.list_nodes(instance_group)

    def nodes_since(self, since: datetime, node_ids: Sequence[str]) -> list[ClusterNode]:
        return self._cluster.nodes_since(since, node_ids)

    def describe_nodes(self, node_ids: Sequence[str]) -> list[ClusterNode]:
        return self._cluster.describe_nodes(node_ids)

    def replace_nodes(self, node_ids: list[str]) -> BatchOutcome:
        held_back("cluster", "BatchReplaceClusterNodes", nodes=node_ids)
        return BatchOutcome(successful=list(node_ids), calls=0)

    def reboot_nodes(self, node_ids: list[str]) -> BatchOutcome:
        held_back("cluster", "BatchRebootClusterNodes", nodes=node_ids)
        return BatchOutcome(successful=list(node_ids), calls=0)


class DryRunLedger:
    """The ledger with what would hold or count against the safety rules held back."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    # --- held back ---------------------------------------------------------------------------
    def acquire_locks(self, incident_id: str, cluster: str, node_ids: list[str], now: datetime, ttl: timedelta) -> LockOutcome:
        """Answered from the locks as they are: a drill must not block a real recovery, and it shows
        which nodes another incident holds."""
        holders = self._ledger.lock_holders(cluster, node_ids, now)
        held = {node: incident for node, incident in holders.items() if incident != incident_id}
        acquired = [node for node in node_ids if node not in held]
        held_back("ledger", "acquire_locks", nodes=acquired)
        return LockOutcome(acquired=acquired, held_elsewhere=held)

    def release_locks(self, incident_id: str, cluster: str, node_ids: list[str], hold_until: datetime | None) -> None:
        held_back("ledger", "release_locks", nodes=node_ids)

    def replacements_initiated(self, incident_id: str) -> set[str]:
        return set()  # a dry run initiates none: nothing to read

    def mark_replacements_initiated(self, incident_id: str, node_ids: list[str], now: datetime) -> None:
        held_back("ledger", "mark_replacements_initiated", nodes=node_ids)

    def claim_resubmission(self, cluster: str, job_id: str, incident_id: str, now: datetime, ttl: timedelta) -> ResubmissionClaim:
        held_back("ledger", "claim_resubmission", job_id=job_id)
        return ResubmissionClaim(job_id=job_id, incident_id=incident_id, claimed=True)

    def complete_resubmission(self, cluster: str, job_id: str, incident_id: str, new_job_id: str) -> None:
        held_back("ledger", "complete_resubmission", job_id=job_id)

    def release_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None:
        held_back("ledger", "release_resubmission", job_id=job_id)

    def keep_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None:
        held_back("ledger", "keep_resubmission", job_id=job_id)

    def reserve_job_restart(self, cluster: str, incident_id: str, limit: int, now: datetime, ttl: timedelta) -> bool:
        """Answered from the places as they are: the verdict is the policy's, nothing is taken."""
        held_back("ledger", "reserve_job_restart", limit=limit)
        taken = self._ledger.job_restarts(cluster, now)
        return incident_id in taken or len(taken) < limit

    def note_failure_started(self, cluster: str, event_key: str, until: datetime) -> None:
        held_back("ledger", "note_failure_started", event=event_key)

    def recreation_token(self, cluster: str, job_id: str, now: datetime) -> str:
        held_back("ledger", "recreation_token", job_id=job_id)
        return "0" * 32  # (a dry run re-creates nothing: the orchestrator's answer is held back too)

    def record_restart(self, cluster: str, root: str, entry: RestartEntry) -> None:
        held_back("ledger", "record_restart", job_id=entry.failed_job_id)

    def reserve_capacity(
        self, cluster: str, incident_id: str, node_ids: list[str], limit: int, now: datetime, ttl: timedelta, hostnames: Sequence[str] = ()
    ) -> bool:
        held_back("ledger", "reserve_capacity", nodes=node_ids, limit=limit)
        return True

    def release_capacity(self, cluster: str, incident_id: str, node_ids: list[str], now: datetime) -> None:
        held_back("ledger", "release_capacity", nodes=node_ids)

    def hold_capacity_until(self, cluster: str, incident_id: str, node_ids: list[str], until: datetime, now: datetime) -> None:
        held_back("ledger", "hold_capacity_until", nodes=node_ids)

    def save_breaker(self, cluster: str, breaker: BreakerState) -> None:
        held_back("ledger", "save_breaker", state=breaker.state, reason=breaker.reason)

    def log_recovery(self, cluster: str, entry: RecoveryLogEntry, keep_seconds: int) -> None:
        held_back("ledger", "log_recovery", hostnames=entry.hostnames)

    def await_rejoin(self, cluster: str, wait: RejoinWait, now: datetime) -> None:
        held_back("ledger", "await_rejoin", execution=wait.execution)

    def end_rejoin_wait(self, cluster: str, execution: str, task_token: str) -> None:
        held_back("ledger", "end_rejoin_wait", execution=execution)

    # --- written: the drill's own record -------------------------------------------------------
    def save_jobs(self, incident_id: str, jobs: list[JobSpec], now: datetime) -> None:
        self._ledger.save_jobs(incident_id, jobs, now)

    def save_incident(self, record: IncidentRecord) -> None:
        self._ledger.save_incident(record)

    def begin_effect(self, incident_id: str, name: str, now: datetime) -> Effect:
        return self._ledger.begin_effect(incident_id, name, now)  # the drill's notification, sent once

    def finish_effect(self, incident_id: str, name: str, now: datetime, result: str | None = None) -> None:
        self._ledger.finish_effect(incident_id, name, now, result)

    def effect_of(self, incident_id: str, name: str) -> Effect | None:
        return self._ledger.effect_of(incident_id, name)

    # --- read ----------------------------------------------------------------------------------
    def lock_holders(self, cluster: str, node_ids: list[str], now: datetime) -> dict[str, str]:
        return self._ledger.lock_holders(cluster, node_ids, now)

    def node_holds(self, cluster: str, nodes: Sequence[str]) -> dict[str, NodeHold]:
        return self._ledger.node_holds(cluster, nodes)

    def resubmission_claim(self, cluster: str, job_id: str) -> ResubmissionClaim | None:
        return self._ledger.resubmission_claim(cluster, job_id)

    def lineage_root(self, cluster: str, job_id: str) -> str | None:
        return self._ledger.lineage_root(cluster, job_id)

    def restart_history(self, cluster: str, root: str) -> list[RestartEntry]:
        return self._ledger.restart_history(cluster, root)

    def nodes_in_recovery(self, cluster: str, now: datetime) -> set[str]:
        return self._ledger.nodes_in_recovery(cluster, now)

    def holdings(self, incident_id: str) -> Holdings | None:
        return self._ledger.holdings(incident_id)

    def jobs_of(self, incident_id: str) -> list[JobSpec] | None:
        return self._ledger.jobs_of(incident_id)

    def save_evidence(self, incident_id: str, evidence: HangEvidenceResult, now: datetime) -> None:
        self._ledger.save_evidence(incident_id, evidence, now)  # (read-only evidence: a drill keeps it too)

    def evidence_of(self, incident_id: str) -> HangEvidenceResult | None:
        return self._ledger.evidence_of(incident_id)

    def breaker(self, cluster: str) -> BreakerState:
        return self._ledger.breaker(cluster)

    def failures_started(self, cluster: str, now: datetime) -> set[str]:
        return self._ledger.failures_started(cluster, now)

    def job_restarts(self, cluster: str, now: datetime) -> list[str]:
        return self._ledger.job_restarts(cluster, now)

    def recovery_log(self, cluster: str, since: datetime | None = None) -> list[RecoveryLogEntry]:
        return self._ledger.recovery_log(cluster, since)

    def get_incident(self, incident_id: str) -> IncidentRecord | None:
        return self._ledger.get_incident(incident_id)

    def rejoin_waits(self, cluster: str) -> list[RejoinWait]:
        return self._ledger.rejoin_waits(cluster)

    # --- an end's notification and the sweep's mark: no workflow step writes them, in a drill or not
    def claim_notification(self, incident_id: str, now: datetime, lease: timedelta) -> bool:
        return self._ledger.claim_notification(incident_id, now, lease)

    def ends_swept_until(self, cluster: str) -> datetime | None:
        return self._ledger.ends_swept_until(cluster)

    def save_ends_swept_until(self, cluster: str, moment: datetime) -> None:
        self._ledger.save_ends_swept_until(cluster, moment)

    def record_verdict(self, recorded: RecordedVerdict) -> bool:
        held_back("ledger", "record_verdict", job=recorded.verdict.job)
        return True

    def verdicts(self, cluster: str, since: datetime | None = None) -> list[RecordedVerdict]:
        return self._ledger.verdicts(cluster, since)

    def save_swap(self, record: SwapRecord) -> None:
        self._ledger.save_swap(record)  # a dry run's swap is recorded: what it would have done

    def swap_record(self, swap_id: str) -> SwapRecord | None:
        return self._ledger.swap_record(swap_id)


def would_result(command: ControllerCommand) -> Any:
    """What a mutating command's reply says when it succeeds: the nodes drained or resumed, the job
    resubmitted (no new id: nothing ran) or requeued."""
    if isinstance(command, DrainNodes):
        return DrainResult(drained=command.nodes)
    if isinstance(command, CordonNodes):  # (not answered here: dispatch sends it without its drain)
        return CordonResult(drained=command.nodes)
    if isinstance(command, ResumeNodes):
        return ResumeResult(resumed=command.nodes)
    if isinstance(command, ResubmitJob):
        return ResubmitResult(old_job_id=command.job_id, stop_only=command.stop_only)
    if isinstance(command, RequeueJob):
        return RequeueResult(job_id=command.job_id, requeued=True)
    raise TypeError(f"{command.type} is not a mutating command")


class DryRunOrchestrator:
    """The scheduler with its mutating commands answered here; read-only ones are carried out."""

    def __init__(self, orchestrator: Orchestrator) -> None:
        self._orchestrator = orchestrator

    def dispatch(self, envelope: CommandEnvelope) -> None:
        command = envelope.command
        if command.type not in MUTATING_COMMANDS:
            self._orchestrator.dispatch(envelope)
            return
        held_back("orchestrator", command.type, command_id=envelope.command_id)
        if isinstance(command, CordonNodes):
            # Its drain is held back, its listing is not (a drill shows the real jobs): the agent
            # drains nothing and answers what it would have drained, marked dry_run.
            self._orchestrator.dispatch(envelope.model_copy(update={"command": command.model_copy(update={"drain": False})}))
            return
        at = envelope.requested_at
        reply: CommandReply[Any] = CommandReply(
            command_id=envelope.command_id,
            type=command.type,
            requested_at=at,
            started_at=at,
            completed_at=at,
            dry_run=True,
            result=would_result(command),
        )
        self._orchestrator.answer(envelope.task_token, reply)

    def answer(self, task_token: str, reply: CommandReply[Any]) -> None:
        self._orchestrator.answer(task_token, reply)
