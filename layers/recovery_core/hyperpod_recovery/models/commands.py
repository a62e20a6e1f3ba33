"""The controller command protocol: what the workflow puts on the command queue and what the
controller agent answers through SendTaskSuccess.

Commands are typed (never shell strings) and every node name and job id is validated here, on
both sides of the queue. Mutating commands carry a ``command_id`` the agent uses as an
idempotency key, so a redelivered message is never executed twice.
"""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from hyperpod_recovery.models.common import SlurmJobId, SlurmNodeName, Timestamp

OWNER_TAG_PREFIX = "hyperpod-recovery"


def owner_tag(incident_id: str) -> str:
    """The drain reason marker; the agent only ever resumes nodes whose reason carries our prefix."""
    return f"{OWNER_TAG_PREFIX}:{incident_id}"


class JobSpec(BaseModel):
    """What the controller knows about a job, enough to resubmit it after its nodes are replaced."""

    model_config = ConfigDict(extra="forbid")

    job_id: SlurmJobId
    name: str = Field(max_length=256)
    user: str | None = Field(default=None, max_length=64)
    partition: str | None = Field(default=None, max_length=128)
    num_nodes: int = Field(ge=1, le=10_000)
    nodes: list[SlurmNodeName] = Field(default_factory=list)
    state: str = Field(max_length=32)
    time_limit: str | None = Field(default=None, max_length=32)
    work_dir: str | None = Field(default=None, max_length=4096)
    checkpoint_uri: str | None = Field(default=None, pattern=r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")
    # Jobs launched with `srun --auto-resume=1` are restarted by HyperPod itself: never resubmit them.
    auto_resume: bool = False
    batch_script: str | None = Field(default=None, max_length=1_000_000)


class CheckpointRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    uri: str  # s3://bucket/prefix/step-000012000/
    step: int = Field(ge=0)
    framework: str | None = None


NodeList = Annotated[list[SlurmNodeName], Field(min_length=1, max_length=1000)]


class DrainNodes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["drain_nodes"] = "drain_nodes"
    nodes: NodeList
    reason: str = Field(min_length=1, max_length=256)


class ResumeNodes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["resume_nodes"] = "resume_nodes"
    nodes: NodeList
    owner_tag: str = Field(min_length=1, max_length=128)


class JobsOnNodes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["jobs_on_nodes"] = "jobs_on_nodes"
    nodes: NodeList


class ResubmitJob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["resubmit_job"] = "resubmit_job"
    job: JobSpec
    checkpoint: CheckpointRef
    # The replaced nodes come back under the same names; excluding nothing lets Slurm use them.
    exclude_nodes: list[SlurmNodeName] = Field(default_factory=list)


class NodeStates(BaseModel):
    """Slurm's view of nodes: state, flags and drain reason (read-only)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["node_states"] = "node_states"
    nodes: NodeList


class CaptureJobSpec(BaseModel):
    """One job's spec (script, name, partition, nodes, time limit, work dir, checkpoint) (read-only)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["capture_job_spec"] = "capture_job_spec"
    job_id: SlurmJobId


class RequeueJob(BaseModel):
    """``scontrol requeue``: Slurm restarts the same job id (a job already pending is left as is)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["requeue_job"] = "requeue_job"
    job_id: SlurmJobId


ControllerCommand = Annotated[
    DrainNodes | ResumeNodes | JobsOnNodes | ResubmitJob | NodeStates | CaptureJobSpec | RequeueJob,
    Field(discriminator="type"),
]
COMMAND_TYPES = frozenset(
    {"drain_nodes", "resume_nodes", "jobs_on_nodes", "resubmit_job", "node_states", "capture_job_spec", "requeue_job"}
)
MUTATING_COMMANDS = frozenset({"drain_nodes", "resume_nodes", "resubmit_job", "requeue_job"})


class CommandEnvelope(BaseModel):
    """One SQS message on the command queue."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    command_id: str = Field(min_length=1, max_length=256)
    incident_id: str = Field(min_length=1, max_length=80)
    execution_name: str = Field(min_length=1, max_length=80)
    task_token: str = Field(min_length=1, max_length=8192)
    requested_at: Timestamp
    command: ControllerCommand


class DrainResult(BaseModel):
    drained: list[SlurmNodeName] = Field(default_factory=list)
    already_drained: list[SlurmNodeName] = Field(default_factory=list)


class ResumeResult(BaseModel):
    resumed: list[SlurmNodeName] = Field(default_factory=list)
    not_drained: list[SlurmNodeName] = Field(default_factory=list)
    # Drained by someone else (reason without our tag): left alone on purpose.
    not_ours: list[SlurmNodeName] = Field(default_factory=list)


class JobsOnNodesResult(BaseModel):
    jobs: list[JobSpec] = Field(default_factory=list)


class ResubmitResult(BaseModel):
    old_job_id: SlurmJobId
    new_job_id: SlurmJobId | None = None  # None only in a dry run
    already_submitted: bool = False
    # Slurm had requeued the old job itself (new_job_id is then the old id): nothing submitted.
    restarted_by_slurm: bool = False
    # The old job still ran (on the replaced nodes, or hung) and was cancelled before resubmitting.
    cancelled_old: bool = False


class NodeStatus(BaseModel):
    name: SlurmNodeName
    state: str  # idle, allocated, mixed, down, ...
    flags: list[str] = Field(default_factory=list)  # DRAIN, NOT_RESPONDING, ...
    reason: str = ""


class NodeStatesResult(BaseModel):
    nodes: list[NodeStatus] = Field(default_factory=list)


class JobSpecResult(BaseModel):
    job: JobSpec | None = None  # None: slurmctld no longer knows the job


class RequeueResult(BaseModel):
    job_id: SlurmJobId
    requeued: bool  # False: the job was already pending (requeued before), nothing done


ResultT = TypeVar("ResultT", DrainResult, ResumeResult, JobsOnNodesResult, ResubmitResult, NodeStatesResult, JobSpecResult, RequeueResult)


class CommandReply(BaseModel, Generic[ResultT]):
    """The SendTaskSuccess output: the agent echoes the envelope's id and times its work."""

    command_id: str
    type: str
    requested_at: Timestamp
    started_at: Timestamp
    completed_at: Timestamp
    dry_run: bool = False
    result: ResultT
