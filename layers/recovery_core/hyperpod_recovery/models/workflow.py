"""Payloads passed between the NodeRecovery states. Each step's result lands at its own key of
the execution state ($.lock, $.assessment, ...), so later steps and Record Outcome see what
every earlier step did, with the time it did it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hyperpod_recovery.models.commands import (
    CheckpointRef,
    CommandReply,
    DrainResult,
    JobsOnNodesResult,
    JobSpec,
    ResubmitResult,
    ResumeResult,
)
from hyperpod_recovery.models.common import NodeId, SlurmNodeName, Timestamp
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest

Outcome = Literal["recovered", "escalated", "duplicate", "rejected", "capped", "dry_run"]


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")
    at: Timestamp


class LockResult(_Result):
    locked: list[NodeId]
    held_elsewhere: dict[str, str] = Field(default_factory=dict)  # node id -> incident holding it
    dry_run: bool = False
    proceed: bool


class NodeTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeId
    instance_group: str
    slurm_node: SlurmNodeName
    status: str
    launch_time: datetime | None = None


class SkippedNode(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeId
    reason: Literal["controller", "login", "not_found", "locked_elsewhere", "repeat_offender"]
    detail: str = ""


class SafetyDecision(BaseModel):
    """Apply Safety Policy's verdict: the circuit breaker, the cluster cap, repeat offenders."""

    model_config = ConfigDict(extra="forbid")
    at: Timestamp
    capped: bool = False
    error: Literal["CircuitBreakerOpen", "ClusterCapReached"] | None = None
    reason: str = ""
    in_recovery_before: int = 0  # nodes other incidents had in recovery
    limit: int = 0  # at most this many nodes in recovery at once (min of the percent and the count)
    reserved: list[NodeId] = Field(default_factory=list)  # nodes counted against the cap until Record Outcome
    breaker_tripped_now: bool = False


class Assessment(_Result):
    orchestrator: Literal["slurm", "eks"]
    node_recovery: str
    targets: list[NodeTarget]
    skipped: list[SkippedNode] = Field(default_factory=list)
    proceed: bool
    compute_nodes: int = 0  # the cluster's compute nodes (the cap's percent is of these)
    safety: SafetyDecision | None = None


Initiation = Literal["initiated", "already_in_progress", "vanished", "dry_run"]


class NodeReplacement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeId
    slurm_node: SlurmNodeName
    instance_group: str
    initiation: Initiation
    action: Literal["reboot", "replace"] = "replace"  # the first rung of the escalation ladder


class ReplaceFailure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeId
    error_code: str
    message: str = ""


class WatchedNode(BaseModel):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeId  # the instance that failed
    slurm_node: SlurmNodeName
    initiation: Initiation
    seen_not_running: bool = False
    status: str | None = None
    replacement_node_id: NodeId | None = None
    rejoined: bool = False
    action: Literal["reboot", "replace"] = "replace"
    # Set when a reboot did not bring the node back in time and it was replaced instead.
    escalated_to_replace_at: Timestamp | None = None


class RejoinWatch(_Result):
    started_at: Timestamp
    deadline: Timestamp
    reboot_deadline: Timestamp | None = None  # rebooted nodes not back by then are replaced
    checks: int = 0
    nodes: list[WatchedNode]
    done: bool = False
    next_wait_seconds: int = Field(ge=0)
    dry_run: bool = False


class Replacement(_Result):
    replaced: list[NodeReplacement]
    failed: list[ReplaceFailure] = Field(default_factory=list)
    calls: int = Field(ge=0)
    dry_run: bool = False
    proceed: bool
    watch: RejoinWatch


class UnresumableJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: str
    name: str
    reason: str


class ResumePlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job: JobSpec
    checkpoint: CheckpointRef
    # Newer checkpoints that did not verify, with why ("step 3000: shard rank3.distcp is missing").
    rejected: list[str] = Field(default_factory=list, max_length=10)


class CheckpointPlan(_Result):
    resumable: list[ResumePlan] = Field(default_factory=list)
    unresumable: list[UnresumableJob] = Field(default_factory=list)
    left_alone: list[UnresumableJob] = Field(default_factory=list)


class StepError(BaseModel):
    """What a Catch puts at $.errors: Step Functions' own {Error, Cause}."""

    Error: str
    Cause: str | None = None


class WorkflowState(BaseModel):
    """The execution state as Record Outcome sees it: whatever steps ran before the end."""

    model_config = ConfigDict(extra="ignore")

    request: RecoveryRequest | None = None
    lock: LockResult | None = None
    assessment: Assessment | None = None
    cordon: CommandReply[DrainResult] | None = None
    jobs: CommandReply[JobsOnNodesResult] | None = None
    replacement: Replacement | None = None
    rejoin: RejoinWatch | None = None
    resume: CommandReply[ResumeResult] | None = None
    checkpoints: CheckpointPlan | None = None
    resubmissions: list[CommandReply[ResubmitResult]] = Field(default_factory=list)


class SafetyState(BaseModel):
    """What Report Safety State publishes: the breaker and how many nodes are in recovery now."""

    cluster: str
    breaker_open: bool
    breaker_reason: str | None = None
    breaker_changed_at: Timestamp | None = None
    nodes_in_recovery: int


class OutcomeResult(_Result):
    incident_id: str
    outcome: Outcome
    error: str | None = None
    cause: str | None = None
    summary: str
    durations: dict[str, float] = Field(default_factory=dict)  # phase durations (metric name -> seconds)


# --- step inputs: what each Lambda receives (the ASL builds these from the state) -------------
class StepInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    execution_name: str = Field(min_length=1, max_length=80)


class ValidateRequestInput(StepInput):
    request: dict[str, Any]


class LockNodesInput(StepInput):
    request: RecoveryRequest


class AssessNodesInput(StepInput):
    request: RecoveryRequest
    lock: LockResult


class ControllerStepInput(StepInput):
    task_token: str = Field(min_length=1)
    request: RecoveryRequest


class CordonNodesInput(ControllerStepInput):
    assessment: Assessment


class FindAffectedJobsInput(ControllerStepInput):
    assessment: Assessment


class ApplySafetyPolicyInput(StepInput):
    request: RecoveryRequest
    assessment: Assessment


class ReplaceNodesInput(StepInput):
    request: RecoveryRequest
    assessment: Assessment


class CheckRejoinInput(StepInput):
    request: RecoveryRequest
    rejoin: RejoinWatch


class ResumeNodesInput(ControllerStepInput):
    rejoin: RejoinWatch


class FindNewestCheckpointInput(StepInput):
    jobs: list[JobSpec]


class ResubmitJobInput(StepInput):
    """Shared by NodeRecovery (a job on a replaced node) and JobRecovery (the failed job)."""

    task_token: str = Field(min_length=1)
    request: RecoveryRequest | JobRecoveryRequest
    plan: ResumePlan


class RecordOutcomeInput(StepInput):
    disposition: Literal["completed", "duplicate", "rejected", "escalated"]
    state: WorkflowState = Field(default_factory=WorkflowState)
    error: StepError | None = None
