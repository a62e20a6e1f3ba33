"""The JobRecovery workflow's payloads: what starts it (the agent's "job failed" event, or a human
naming a job), and what each of its states adds to the execution state.

JobRecovery reuses NodeRecovery for the nodes (a nested execution) and the Find Newest
Checkpoint / Resubmit Job steps for the job, so those keep their own models (models/workflow.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hyperpod_recovery.models.commands import CommandReply, JobSpec, JobSpecResult, NodeStatesResult, ResubmitResult
from hyperpod_recovery.models.common import NodeId, SlurmJobId, SlurmNodeName, Timestamp
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest
from hyperpod_recovery.models.workflow import CheckpointPlan, ResumePlan, StepError, StepInput

FailureKind = Literal["node_caused", "application", "left_alone"]
RestartKind = Literal["node_caused", "application"]


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")
    at: Timestamp


class FaultyNode(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slurm_node: SlurmNodeName
    node_id: NodeId | None = None  # None: HyperPod does not list it (cannot be replaced by us)
    why: str
    # False for a node someone else drained: a fault, but theirs to handle; we never replace it.
    ours_to_repair: bool = True


class FailureClassification(_Result):
    """Why the job failed, and what JobRecovery does about it."""

    kind: FailureKind
    reason: str
    job: JobSpec | None = None
    # The job as a list (0 or 1), the shape Find Newest Checkpoint takes.
    jobs: list[JobSpec] = Field(default_factory=list)
    faulty_nodes: list[FaultyNode] = Field(default_factory=list)
    recover_nodes: bool = False
    node_request: RecoveryRequest | None = None
    node_execution_name: str | None = Field(default=None, max_length=80)


class NodeRecoveryRun(BaseModel):
    """What the nested NodeRecovery execution ended with (its $.outcome and $.lock)."""

    model_config = ConfigDict(extra="ignore")
    execution_arn: str
    outcome: dict[str, Any]
    lock: dict[str, Any] = Field(default_factory=dict)

    @property
    def outcome_name(self) -> str:
        return str(self.outcome.get("outcome", "unknown"))

    @property
    def held_elsewhere(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.lock.get("held_elsewhere") or {}).items()}


class OtherRecoveryWatch(BaseModel):
    """Waiting for another incident that holds the job's nodes (a health event got there first)."""

    model_config = ConfigDict(extra="forbid")
    held_elsewhere: dict[str, str]  # node id -> incident
    checks: int = 0
    started_at: Timestamp | None = None
    deadline: Timestamp | None = None
    at: Timestamp | None = None
    done: bool = False
    outcomes: dict[str, str] = Field(default_factory=dict)  # incident -> outcome, once recorded
    next_wait_seconds: int = Field(default=0, ge=0)


class RestartEntry(BaseModel):
    """One restart of a job lineage (the original job and every resubmission of it), in the ledger."""

    model_config = ConfigDict(extra="forbid")
    failed_job_id: SlurmJobId
    new_job_id: SlurmJobId
    kind: RestartKind
    checkpoint_step: int = Field(ge=0)
    restarted_at: Timestamp
    incident: str


RestartAction = Literal["resubmit", "left_alone", "resubmitted_by_node_recovery", "capped"]


class RestartDecision(_Result):
    action: RestartAction
    reason: str
    lineage_root: SlurmJobId | None = None
    plan: ResumePlan | None = None
    backoff_seconds: int = Field(default=0, ge=0)
    restarts_in_window: int = 0
    failures_at_step: int = 0
    resubmitted_as: SlurmJobId | None = None
    resubmitted_by: str | None = None


class JobWorkflowState(BaseModel):
    """The job execution's state as Record Job Outcome sees it."""

    model_config = ConfigDict(extra="ignore")

    request: JobRecoveryRequest | None = None
    inspection: CommandReply[JobSpecResult] | None = None
    node_states: CommandReply[NodeStatesResult] | None = None
    classification: FailureClassification | None = None
    node_recovery: NodeRecoveryRun | None = None
    other_recovery: OtherRecoveryWatch | None = None
    checkpoints: CheckpointPlan | None = None
    restart: RestartDecision | None = None
    resubmission: CommandReply[ResubmitResult] | None = None


# --- step inputs ---------------------------------------------------------------------------
class ValidateJobRequestInput(StepInput):
    request: dict[str, Any]


class JobControllerStepInput(StepInput):
    task_token: str = Field(min_length=1)
    request: JobRecoveryRequest


class CaptureJobSpecInput(JobControllerStepInput):
    pass


class CheckJobNodesInput(JobControllerStepInput):
    inspection: CommandReply[JobSpecResult]


class ClassifyJobFailureInput(StepInput):
    request: JobRecoveryRequest
    inspection: CommandReply[JobSpecResult]
    node_states: CommandReply[NodeStatesResult]


class CheckOtherRecoveryInput(StepInput):
    request: JobRecoveryRequest
    other_recovery: OtherRecoveryWatch


class PlanJobRestartInput(StepInput):
    request: JobRecoveryRequest
    classification: FailureClassification
    checkpoints: CheckpointPlan


class RecordJobOutcomeInput(StepInput):
    disposition: Literal["completed", "rejected", "escalated"]
    state: JobWorkflowState = Field(default_factory=JobWorkflowState)
    error: StepError | None = None
