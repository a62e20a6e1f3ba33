"""The JobRecovery workflow's payloads: what starts it (the agent's "job failed" event, or a human
naming a job), and what each of its states adds to the execution state.

JobRecovery reuses NodeRecovery for the nodes (a nested execution) and the Find Newest
Checkpoint / Resubmit Job steps for the job, so those keep their own models (models/node_recovery.py).
"""

from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, field_validator

from hyperpod_recovery.models.commands import (
    CommandReply,
    HangEvidenceResult,
    JobSpec,
    JobSpecResult,
    NodeStatesResult,
    ResubmitResult,
)
from hyperpod_recovery.models.common import (
    MAX_JOB_NODES_CARRIED,
    MAX_NODES_PER_REQUEST,
    JobId,
    LongText,
    Model,
    NodeId,
    ShortText,
    SlurmNodeName,
    StepResult,
    Timestamp,
)
from hyperpod_recovery.models.node_recovery import CheckpointPlan, ResumePlan, StepError, StepInput, lenient_state
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest

# hung: a running job that stopped making progress (a hang verdict, models/hangs.py); it is
# cancelled and resubmitted, its suspects checked by a nested NodeRecovery. recovered_by_itself: the
# hang cleared before anything was done (progress again while the evidence was taken).
FailureKind = Literal["node_caused", "application", "left_alone", "hung", "slow", "recovered_by_itself"]
RestartKind = Literal["node_caused", "application", "hung", "slow"]


class FaultyNode(Model):
    model_config = ConfigDict(extra="forbid")
    slurm_node: SlurmNodeName
    node_id: NodeId | None = None  # None: HyperPod does not list it (cannot be replaced by us)
    why: ShortText
    # False for a node someone else drained: a fault, but theirs to handle; we never replace it.
    ours_to_repair: bool = True


class FailureClassification(StepResult):
    """Why the job failed, and what JobRecovery does about it."""

    kind: FailureKind
    reason: LongText
    job: JobSpec | None = None
    # The job as a list (0 or 1), the shape Find Newest Checkpoint takes.
    jobs: list[JobSpec] = Field(default_factory=list, max_length=1)
    faulty_nodes: list[FaultyNode] = Field(default_factory=list, max_length=MAX_JOB_NODES_CARRIED)
    recover_nodes: bool = False
    node_request: RecoveryRequest | None = None
    node_execution_name: str | None = Field(default=None, max_length=80)
    # Recover Nodes' TimeoutSecondsPath: the longest the nested NodeRecovery can run under this
    # stack's deadlines (domain/policy/limits.py), so the parent never gives up on a child mid-recovery.
    node_timeout_seconds: int | None = Field(default=None, ge=1, le=31_536_000)


class NodeRecoveryRun(Model):
    """What the nested NodeRecovery execution ended with (its $.outcome and $.lock)."""

    model_config = ConfigDict(extra="ignore")
    execution_arn: str = Field(max_length=2048)
    # The child's $.outcome (an OutcomeResult) and $.lock (a LockResult), each bounded by its own model.
    outcome: dict[Annotated[str, Field(max_length=64)], Any] = Field(max_length=20)
    lock: dict[Annotated[str, Field(max_length=64)], Any] = Field(default_factory=dict, max_length=20)

    @property
    def outcome_name(self) -> str:
        return str(self.outcome.get("outcome", "unknown"))

    @property
    def held_elsewhere(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.lock.get("held_elsewhere") or {}).items()}


class OtherRecoveryWatch(Model):
    """Waiting for another incident that holds the job's nodes (a health event got there first)."""

    model_config = ConfigDict(extra="forbid")
    # node id -> incident
    held_elsewhere: dict[Annotated[str, Field(max_length=32)], Annotated[str, Field(max_length=80)]] = Field(
        max_length=MAX_NODES_PER_REQUEST
    )
    checks: int = 0
    started_at: Timestamp | None = None
    deadline: Timestamp | None = None
    at: Timestamp | None = None
    done: bool = False
    # incident -> outcome, once recorded
    outcomes: dict[Annotated[str, Field(max_length=80)], Annotated[str, Field(max_length=16)]] = Field(
        default_factory=dict, max_length=MAX_NODES_PER_REQUEST
    )
    next_wait_seconds: int = Field(default=0, ge=0)


class RestartEntry(Model):
    """One restart of a job lineage (the original job and every resubmission of it), in the ledger."""

    model_config = ConfigDict(extra="forbid")
    failed_job_id: JobId
    new_job_id: JobId
    kind: RestartKind
    checkpoint_step: int = Field(ge=0)
    restarted_at: Timestamp
    incident: str


RestartAction = Literal["resubmit", "left_alone", "resubmitted_by_node_recovery", "capped"]


class RestartDecision(StepResult):
    action: RestartAction
    reason: LongText
    lineage_root: JobId | None = None
    plan: ResumePlan | None = None
    backoff_seconds: int = Field(default=0, ge=0)
    restarts_in_window: int = 0
    failures_at_step: int = 0
    resubmitted_as: JobId | None = None
    resubmitted_by: str | None = Field(default=None, max_length=80)
    # EKS: that copy's object name (in the job's namespace), as its maker's record names it
    resubmitted_name: str | None = Field(default=None, max_length=253, exclude_if=lambda v: v is None)


class JobWorkflowState(Model):
    """The job execution's state as Record Job Outcome sees it."""

    model_config = ConfigDict(extra="ignore")

    request: JobRecoveryRequest | None = None
    inspection: CommandReply[JobSpecResult] | None = None
    node_states: CommandReply[NodeStatesResult] | None = None
    evidence: CommandReply[HangEvidenceResult] | None = None
    classification: FailureClassification | None = None
    node_recovery: NodeRecoveryRun | None = None
    other_recovery: OtherRecoveryWatch | None = None
    checkpoints: CheckpointPlan | None = None
    restart: RestartDecision | None = None
    resubmission: CommandReply[ResubmitResult] | None = None
    # Parts of the state that did not parse (a crash or a hand-made input): named in the record.
    unreadable: list[Annotated[str, Field(max_length=500)]] = Field(default_factory=list, max_length=20)

    @property
    def dry_run(self) -> bool:
        """A dry run, by its request; when the request did not parse, by its resubmission's label."""
        if self.request is not None:
            return bool(self.request.dry_run)
        return bool(self.resubmission is not None and self.resubmission.dry_run)

    @classmethod
    def lenient(cls, raw: Any) -> Self:
        return lenient_state(cls, raw)


# --- step inputs ---------------------------------------------------------------------------
class ValidateJobRequestInput(StepInput):
    request: Any  # whatever start-execution was given; Validate Job Request says what is wrong with it


class JobControllerStepInput(StepInput):
    task_token: str = Field(min_length=1)
    request: JobRecoveryRequest


class CaptureJobSpecInput(JobControllerStepInput):
    pass


class CheckJobNodesInput(JobControllerStepInput):
    inspection: CommandReply[JobSpecResult]


class CaptureHangEvidenceInput(JobControllerStepInput):
    inspection: CommandReply[JobSpecResult]


class ClassifyJobFailureInput(StepInput):
    request: JobRecoveryRequest
    inspection: CommandReply[JobSpecResult]
    node_states: CommandReply[NodeStatesResult]
    # A hang's (Capture Hang Evidence): absent for a job that ended.
    evidence: CommandReply[HangEvidenceResult] | None = None


class CheckOtherRecoveryInput(StepInput):
    request: JobRecoveryRequest
    other_recovery: OtherRecoveryWatch


class PlanJobRestartInput(StepInput):
    request: JobRecoveryRequest
    classification: FailureClassification
    checkpoints: CheckpointPlan


class RecordJobOutcomeInput(StepInput):
    disposition: Literal["completed", "rejected", "escalated", "stale"]
    state: JobWorkflowState = Field(default_factory=JobWorkflowState)
    error: StepError | None = None

    @field_validator("state", mode="before")
    @classmethod
    def _state_never_blocks_the_record(cls, value: Any) -> Any:
        return value if isinstance(value, JobWorkflowState) else JobWorkflowState.lenient(value)
