"""Every port: what the steps and the domain need from the world outside, one Protocol per system.

Real adapters live in adapters/ (one module per AWS service or outside system, each turning its SDK's
errors into ours, errors.py); in-memory fakes with the same interface live in tests/fakes.py, and
tests/contract/ holds both to the same expectations.

| port            | outside system                         | adapter                                     |
|-----------------|----------------------------------------|---------------------------------------------|
| Cluster         | SageMaker HyperPod                     | adapters/hyperpod.py HyperPodCluster        |
| Ledger (roles)  | DynamoDB                               | adapters/ledger/ DynamoLedger               |
| Orchestrator    | the cluster's scheduler                | adapters/slurm_agent.py SlurmAgentOrchestrator, |
|                 |                                        | adapters/eks_orchestrator/ EksOrchestrator   |
| KubeApi         | an EKS cluster's Kubernetes API        | adapters/kubernetes.py KubernetesApi        |
| Notifier        | SNS (chat: a second topic), EventBridge (pages) | adapters/notifier.py SnsNotifier |
| JobNodeSource   | the scheduler's running jobs           | adapters/job_nodes.py (Slurm: agent's snapshot; EKS: pods) |
| Workflows       | Step Functions                         | adapters/stepfunctions.py StepFunctions     |
| ExecutionHistory| Step Functions                         | adapters/stepfunctions.py StepFunctions     |
| DeadLetterSink  | SQS                                    | adapters/sqs.py DeadLetterQueue             |
| CheckpointReader, CheckpointWriter | S3                  | adapters/checkpoints.py S3CheckpointStore   |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

# Only annotations name the models: the checkpoint library imports this module for its S3 port and
# must not load the ledger's and the cluster's models (tests/contract/test_distributions.py).
if TYPE_CHECKING:
    from hyperpod_recovery.models.at_risk import AtRiskRecord, PlannedSwapRequest, SignalScore
    from hyperpod_recovery.models.cluster import BatchOutcome, ClusterInfo, ClusterNode
    from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply, HangEvidenceResult, JobSpec, ResubmitResult
    from hyperpod_recovery.models.events import ExecutionStatusDetail
    from hyperpod_recovery.models.hangs import RecordedVerdict
    from hyperpod_recovery.models.job_nodes import JobNodes
    from hyperpod_recovery.models.job_recovery import RestartEntry
    from hyperpod_recovery.models.kubernetes import KubeJobRef
    from hyperpod_recovery.models.node_recovery import ResumePlan
    from hyperpod_recovery.models.planned_swap import SwapRecord
    from hyperpod_recovery.models.progress import ProgressReport
    from hyperpod_recovery.models.progress_memory import JobMemory
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


class Cluster(Protocol):
    """The HyperPod cluster the stack guards (control plane: nodes, replace, reboot)."""

    def describe(self) -> ClusterInfo: ...
    def list_nodes(self, instance_group: str | None = None) -> list[ClusterNode]: ...
    # The instances created after ``since`` and the given ones (if they still exist): what a look
    # for repaired nodes needs, at a cost that does not grow with the fleet.
    def nodes_since(self, since: datetime, node_ids: Sequence[str]) -> list[ClusterNode]: ...
    # Each of the given nodes that still exists (one DescribeClusterNode each): a few nodes' facts
    # without listing the whole cluster.
    def describe_nodes(self, node_ids: Sequence[str]) -> list[ClusterNode]: ...
    def replace_nodes(self, node_ids: list[str]) -> BatchOutcome: ...
    def reboot_nodes(self, node_ids: list[str]) -> BatchOutcome: ...


# --- the ledger (adapters/ledger/ DynamoLedger), by role: each step asks only for the roles it uses ---
class NodeLocks(Protocol):
    """Which incident holds a node, and a human's holds on nodes."""

    def acquire_locks(self, incident_id: str, cluster: str, node_ids: list[str], now: datetime, ttl: timedelta) -> LockOutcome: ...
    def lock_holders(self, cluster: str, node_ids: list[str], now: datetime) -> dict[str, str]: ...
    def release_locks(self, incident_id: str, cluster: str, node_ids: list[str], hold_until: datetime | None) -> None: ...
    def node_holds(self, cluster: str, nodes: Sequence[str]) -> dict[str, NodeHold]: ...


class JobClaims(Protocol):
    """Which incident resubmits a job (once per job, by either workflow), and an EKS re-creation's token."""

    def claim_resubmission(self, cluster: str, job_id: str, incident_id: str, now: datetime, ttl: timedelta) -> ResubmissionClaim: ...
    def complete_resubmission(self, cluster: str, job_id: str, incident_id: str, new_job_id: str) -> None: ...
    def release_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None: ...
    def keep_resubmission(self, cluster: str, job_id: str, incident_id: str) -> None: ...
    def resubmission_claim(self, cluster: str, job_id: str) -> ResubmissionClaim | None: ...
    def recreation_token(self, cluster: str, job_id: str, now: datetime) -> str: ...


class Lineages(Protocol):
    """A resubmitted job's lineage and its restarts (restart budget, crash loops)."""

    def lineage_root(self, cluster: str, job_id: str) -> str | None: ...
    def restart_history(self, cluster: str, root: str) -> list[RestartEntry]: ...
    def record_restart(self, cluster: str, root: str, entry: RestartEntry) -> None: ...


class IncidentStore(Protocol):
    """An incident's record, its jobs and evidence, and what it holds until it ends."""

    def save_incident(self, record: IncidentRecord) -> None: ...
    def get_incident(self, incident_id: str) -> IncidentRecord | None: ...
    def save_jobs(self, incident_id: str, jobs: list[JobSpec], now: datetime) -> None: ...
    def jobs_of(self, incident_id: str) -> list[JobSpec] | None: ...
    def save_evidence(self, incident_id: str, evidence: HangEvidenceResult, now: datetime) -> None: ...
    def evidence_of(self, incident_id: str) -> HangEvidenceResult | None: ...
    def holdings(self, incident_id: str) -> Holdings | None: ...


class Replacements(Protocol):
    """Nodes whose replacement an incident already initiated (a retried step does not replace them again)."""

    def replacements_initiated(self, incident_id: str) -> set[str]: ...
    def mark_replacements_initiated(self, incident_id: str, node_ids: list[str], now: datetime) -> None: ...


class Effects(Protocol):
    """An outside effect made once per incident (its notification), however often its step runs; and
    the lease on the notification, where two deliveries of one end may run at once."""

    def begin_effect(self, incident_id: str, name: str, now: datetime) -> Effect: ...
    def finish_effect(self, incident_id: str, name: str, now: datetime, result: str | None = None) -> None: ...
    def effect_of(self, incident_id: str, name: str) -> Effect | None: ...
    def claim_notification(self, incident_id: str, now: datetime, lease: timedelta) -> bool: ...


class SafetyRecords(Protocol):
    """The safety policy's state: the cluster cap's places, the circuit breaker, job restarts in its window."""

    def nodes_in_recovery(self, cluster: str, now: datetime) -> set[str]: ...
    def reserve_capacity(
        self, cluster: str, incident_id: str, node_ids: list[str], limit: int, now: datetime, ttl: timedelta, hostnames: Sequence[str] = ()
    ) -> bool: ...
    def release_capacity(self, cluster: str, incident_id: str, node_ids: list[str], now: datetime) -> None: ...
    def hold_capacity_until(self, cluster: str, incident_id: str, node_ids: list[str], until: datetime, now: datetime) -> None: ...
    def breaker(self, cluster: str) -> BreakerState: ...
    def save_breaker(self, cluster: str, breaker: BreakerState) -> None: ...
    def job_restarts(self, cluster: str, now: datetime) -> list[str]: ...
    def reserve_job_restart(self, cluster: str, incident_id: str, limit: int, now: datetime, ttl: timedelta) -> bool: ...


class RecoveryLog(Protocol):
    """The recoveries that acted (the breaker's and repeat offenders' windows)."""

    def recovery_log(self, cluster: str, since: datetime | None = None) -> list[RecoveryLogEntry]: ...
    def log_recovery(self, cluster: str, entry: RecoveryLogEntry, keep_seconds: int) -> None: ...


class RejoinWaits(Protocol):
    """Recoveries waiting for their replaced nodes (Wait For Rejoin, Notice Cluster Event)."""

    def await_rejoin(self, cluster: str, wait: RejoinWait, now: datetime) -> None: ...
    def rejoin_waits(self, cluster: str) -> list[RejoinWait]: ...
    def end_rejoin_wait(self, cluster: str, execution: str, task_token: str) -> None: ...


class Marks(Protocol):
    """The pollers' marks: until when the sweep of ended executions recorded every end, and the
    job failures whose recovery a poll started."""

    def ends_swept_until(self, cluster: str) -> datetime | None: ...
    def save_ends_swept_until(self, cluster: str, moment: datetime) -> None: ...
    def failures_started(self, cluster: str, now: datetime) -> set[str]: ...
    def note_failure_started(self, cluster: str, event_key: str, until: datetime) -> None: ...


class Verdicts(Protocol):
    """Hang and slowdown verdicts, kept once per episode."""

    def record_verdict(self, recorded: RecordedVerdict) -> bool: ...
    def verdicts(self, cluster: str, since: datetime | None = None) -> list[RecordedVerdict]: ...


class AtRiskLedger(Protocol):
    """At-risk verdicts, kept once per episode, their outcomes and each signal's score (adapters/ledger/at_risk.py)."""

    def record_at_risk(self, record: AtRiskRecord) -> bool: ...
    def at_risk_records(self, cluster: str, since: datetime | None = None, until: datetime | None = None) -> list[AtRiskRecord]: ...
    def settle_at_risk(self, was: AtRiskRecord, now: AtRiskRecord) -> bool: ...
    def at_risk_score(self, cluster: str, signal: str) -> SignalScore: ...
    def at_risk_ticked_until(self, cluster: str) -> datetime | None: ...
    def save_at_risk_ticked_until(self, cluster: str, moment: datetime) -> None: ...
    # (read only: a verdict's planned swap's record, INCIDENT#<hps-...>/SWAP, says whether it took the node)
    def swap_record(self, swap_id: str) -> SwapRecord | None: ...
    def incidents(
        self, cluster: str, since: datetime | None = None, limit: int = 50, outcomes: Sequence[str] = ()
    ) -> list[IncidentRecord]: ...


# The roles a step asks for together.
class SwapRecords(Protocol):
    """What each planned swap decided and did (adapters/ledger/swaps.py)."""

    def save_swap(self, record: SwapRecord) -> None: ...
    def swap_record(self, swap_id: str) -> SwapRecord | None: ...


class SwapChecks(NodeLocks, SafetyRecords, RecoveryLog, Protocol): ...


class SwapEnd(SwapRecords, Effects, Protocol): ...


class ClaimedJobs(IncidentStore, JobClaims, Protocol): ...


class JobHistory(IncidentStore, JobClaims, RecoveryLog, Protocol): ...


class FailureHistory(JobHistory, Lineages, Protocol): ...


class RestartBudget(SafetyRecords, Lineages, JobClaims, IncidentStore, Protocol): ...


class SafetyChecks(NodeLocks, SafetyRecords, RecoveryLog, Protocol): ...


class SafeReplacements(SafetyRecords, Replacements, Protocol): ...


class HangRecord(Verdicts, JobClaims, Protocol): ...


class FailurePolls(Marks, Verdicts, Protocol): ...


class IncidentEffects(IncidentStore, Effects, Protocol): ...


class Settlement(NodeLocks, JobClaims, SafetyRecords, IncidentStore, Protocol):
    """What settling an incident's holdings at its end needs (steps/settle.py)."""


class IncidentEnd(Settlement, Effects, RecoveryLog, Lineages, Replacements, Protocol):
    """What recording an incident's end needs (Record Outcome, Reconcile Execution)."""


class Ledger(IncidentEnd, RejoinWaits, Marks, Verdicts, SwapRecords, Protocol):
    """What recoveries hold and remember, one table: every role (the adapter, the dry-run gate, the fakes)."""


class ProgressReader(Protocol):
    """The training scripts' progress (adapters/progress.py): read, never written, by the pipeline."""

    def running_jobs(self) -> dict[str, list[ProgressReport]]: ...
    def job(self, job: str) -> list[ProgressReport]: ...


class ProgressMemory(Protocol):
    """What Detect Hung Jobs remembers of each job between ticks (models/progress_memory.py)."""

    def recall(self, cluster: str, jobs: Sequence[str]) -> dict[str, JobMemory]: ...
    def remember(self, cluster: str, memories: Sequence[JobMemory]) -> int: ...  # the number left unwritten


class JobNodeSource(Protocol):
    """The orchestrator's own view of which nodes each running job runs on (models/job_nodes.py):
    Slurm through the controller agent's snapshot, EKS from the live pods' owners."""

    def running_job_nodes(self) -> JobNodes | None: ...  # None: not available (no snapshot, unreadable)


class Orchestrator(Protocol):
    """The cluster's scheduler: cordon, list jobs on nodes, resume, resubmit, read node states.

    A command is typed (models/commands.py) and carries the waiting Step Functions task's token;
    the state completes when someone answers that token. ``dispatch`` hands the command to whoever
    carries it out (on Slurm, the controller agent, which answers itself); ``answer`` completes a
    task here, with no command carried out (a dry run, a command already done, nothing to ask).
    Another orchestrator implements the same two calls (and may carry a command out and answer at
    once), so the state machines never change with it.
    """

    def dispatch(self, envelope: CommandEnvelope) -> None: ...
    def answer(self, task_token: str, reply: CommandReply[Any]) -> None: ...


class KubeApi(Protocol):
    """The Kubernetes calls a recovery makes on an EKS-orchestrated cluster (objects as the API
    returns them; errors as errors.py's Kube* names)."""

    def get_node(self, name: str) -> dict[str, Any]: ...
    def list_nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]: ...
    def patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]: ...
    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]: ...
    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]: ...
    def list_live_pods(self) -> list[dict[str, Any]]: ...  # every namespace's, not Succeeded or Failed
    # A hang's evidence (read-only; pods/log is granted to its own group, deploy/kubernetes-rbac.yaml).
    def get_pod_log(self, namespace: str, pod: str, container: str, tail_lines: int, limit_bytes: int) -> str: ...
    def list_events(self, namespace: str, involved_kind: str, involved_name: str) -> list[dict[str, Any]]: ...
    # At Risk's tick: the events about nodes (namespace default; a Role of deploy/kubernetes-rbac.yaml).
    def list_node_events(self) -> list[dict[str, Any]]: ...
    def get_job(self, ref: KubeJobRef) -> dict[str, Any]: ...
    def create_job(self, kind: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...
    def patch_job(self, ref: KubeJobRef, operations: list[dict[str, Any]]) -> dict[str, Any]: ...
    def list_jobs(self, kind: str) -> list[dict[str, Any]]: ...
    def list_jobs_in(self, kind: str, namespace: str, label_selector: str) -> list[dict[str, Any]]: ...
    # Kueue's Workloads (HyperPod task governance): how a job Kueue manages is stopped for good.
    def api_group(self, group: str) -> dict[str, Any]: ...
    def list_workloads(self, version: str, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]: ...
    def get_workload(self, version: str, namespace: str, name: str) -> dict[str, Any]: ...
    def patch_workload(self, version: str, namespace: str, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]: ...


class TrainingJobs(Protocol):
    """An EKS cluster's training jobs, as one poll reads them (adapters/eks_training_jobs.py)."""

    def installed(self, kind: str) -> list[dict[str, Any]]: ...  # none when the kind's CRD is not installed
    def pods(self, ref: KubeJobRef, job: dict[str, Any]) -> list[dict[str, Any]]: ...  # this very job's
    def pod_nodes(self, ref: KubeJobRef, job: dict[str, Any], pods: list[dict[str, Any]]) -> list[str]: ...


class Notifier(Protocol):
    def publish(self, subject: str, body: str, attributes: dict[str, str]) -> None: ...


Workflow = Literal["node", "job", "planned_swap"]
# What a start did: "started" an execution; found it "running" (the same name and input: Step
# Functions answers success again); or the name was taken ("already_exists": other input, or ended).
# Only "started" counts as a recovery started.
StartOutcome = Literal["started", "running", "already_exists"]


class Workflows(Protocol):
    """The stack's state machines: start one recovery, named so that a duplicate is turned away;
    ``wake`` completes a task that waits on the pipeline itself (Wait For Rejoin), False when the
    task no longer waits (timed out, its execution ended); ``running`` names a workflow's running
    executions (HistoryUnavailable when they cannot be listed)."""

    def start(self, name: str, payload: str, workflow: Workflow = "node") -> StartOutcome: ...
    def wake(self, task_token: str, output: str) -> bool: ...
    def running(self, workflow: Workflow) -> list[str]: ...


class PlannedSwaps(Protocol):
    """Where an enforced at-risk verdict starts its planned swap (the PlannedSwap state machine):
    execution ``hps-<verdict_id>``; ConfigurationError when its ARN is not set."""

    def start_planned_swap(self, request: PlannedSwapRequest) -> StartOutcome: ...


@dataclass(frozen=True)
class ResubmissionSeen:
    """A resubmission an execution's history shows: the agent's answer, and the plan it was given
    (None when its input could not be read)."""

    plan: ResumePlan | None
    reply: CommandReply[ResubmitResult]


@dataclass(frozen=True)
class ResubmissionsRead:
    """An execution's resubmissions, from its history: those answered, the jobs one was asked for
    (answered or not), and whether the whole history was read."""

    seen: list[ResubmissionSeen]
    asked: set[str]
    complete: bool
    # EKS jobs a stop only (Resubmit Jobs Now) answered stopped: suspended, their re-creation after the rejoin.
    stopped: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ClosedExecution:
    """An execution ListExecutions shows closed (FAILED, TIMED_OUT or ABORTED), without its input."""

    execution_arn: str
    state_machine_arn: str
    name: str
    status: str
    started_at: datetime
    stopped_at: datetime


class ExecutionHistory(Protocol):
    """What Step Functions tells of the stack's executions: an ended one's history, and which ended."""

    def states_entered(self, execution_arn: str) -> list[tuple[str, datetime]] | None: ...
    def resubmissions(self, execution_arn: str) -> ResubmissionsRead: ...
    def closed_since(self, since: datetime, started_after: datetime) -> list[ClosedExecution]: ...
    def describe_end(self, execution_arn: str) -> ExecutionStatusDetail | None: ...


class DeadLetterSink(Protocol):
    def send(self, body: str, reason: str, message_id: str) -> None: ...


# --- S3, for checkpoint discovery (domain/checkpoints/discovery.py) and commit (hyperpod_recovery.checkpointing) ---
LIST_PAGE_MAX = 1000  # ListObjectsV2's largest page


@dataclass(frozen=True)
class Listing:
    """One ListObjectsV2 page: full keys with sizes, and common prefixes (folders), each in key order."""

    objects: list[tuple[str, int]]
    folders: list[str]
    truncated: bool
    next_token: str | None = None


class CheckpointReader(Protocol):
    def get(self, bucket: str, key: str, max_bytes: int) -> bytes | None:
        """One GetObject of at most the first ``max_bytes``; None when the key does not exist."""
        ...

    def size(self, bucket: str, key: str) -> int | None:
        """One HeadObject: the object's size, or None when it does not exist."""
        ...

    def list(
        self,
        bucket: str,
        prefix: str,
        *,
        delimiter: str | None = None,
        start_after: str | None = None,
        token: str | None = None,
        max_keys: int = LIST_PAGE_MAX,
    ) -> Listing:
        """One ListObjectsV2 call."""
        ...


class CheckpointWriter(CheckpointReader, Protocol):
    def get_with_etag(self, bucket: str, key: str, max_bytes: int) -> tuple[bytes, str] | None: ...

    def put(self, bucket: str, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> None:
        """Raises CheckpointWriteConflict when the condition fails."""
        ...

    def sha256(self, bucket: str, key: str) -> str | None: ...
