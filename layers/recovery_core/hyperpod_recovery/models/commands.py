"""The controller command protocol: what the workflow puts on the command queue and what the
controller agent answers through SendTaskSuccess.

Commands are typed (never shell strings) and every node name and job id is validated here, on
both sides of the queue. Mutating commands carry a ``command_id`` the agent uses as an
idempotency key, so a redelivered message is never executed twice.
"""

from collections.abc import Iterable
from typing import Annotated, Generic, Literal, Self, TypeVar

from pydantic import ConfigDict, Field, field_validator, model_validator

from hyperpod_recovery.models.common import (
    MAX_JOB_NODES_CARRIED,
    MAX_JOBS_PER_INCIDENT,
    MAX_NODES_PER_REQUEST,
    GateDetailText,
    JobId,
    Model,
    ShortText,
    SlurmJobId,
    SlurmNodeName,
    SlurmText,
    StrictFlag,
    Timestamp,
)

# A job as the protocol describes it lives in job_spec.py; its names are exported from here too.
from hyperpod_recovery.models.job_spec import CHECKPOINT_URI_PATTERN as CHECKPOINT_URI_PATTERN
from hyperpod_recovery.models.job_spec import JOB_NAME_LIMIT as JOB_NAME_LIMIT
from hyperpod_recovery.models.job_spec import MAX_CHECKPOINT_URI as MAX_CHECKPOINT_URI
from hyperpod_recovery.models.job_spec import MAX_JOB_NODES as MAX_JOB_NODES
from hyperpod_recovery.models.job_spec import MAX_NODES_ASKED as MAX_NODES_ASKED
from hyperpod_recovery.models.job_spec import MAX_RESUME_DATA_PARALLEL as MAX_RESUME_DATA_PARALLEL
from hyperpod_recovery.models.job_spec import OWNER_TAG_PREFIX as OWNER_TAG_PREFIX
from hyperpod_recovery.models.job_spec import RESTARTED_BY_TEXT as RESTARTED_BY_TEXT
from hyperpod_recovery.models.job_spec import RESUME_POLICIES as RESUME_POLICIES
from hyperpod_recovery.models.job_spec import CheckpointRef as CheckpointRef
from hyperpod_recovery.models.job_spec import CopyMark as CopyMark
from hyperpod_recovery.models.job_spec import JobRef as JobRef
from hyperpod_recovery.models.job_spec import JobSpec as JobSpec
from hyperpod_recovery.models.job_spec import RestartedBy as RestartedBy
from hyperpod_recovery.models.job_spec import ResumePolicy as ResumePolicy
from hyperpod_recovery.models.job_spec import copy_mark_in_comment as copy_mark_in_comment
from hyperpod_recovery.models.job_spec import is_false, is_none
from hyperpod_recovery.models.job_spec import job_display_name as job_display_name
from hyperpod_recovery.models.job_spec import left_alone_reason as left_alone_reason
from hyperpod_recovery.models.job_spec import resume_choice_in_comment as resume_choice_in_comment
from hyperpod_recovery.models.kubernetes import KubeJobRef, RecreationToken
from hyperpod_recovery.redact import after_cut, printable, redact_within

# Every state the controller agent answers has this HeartbeatSeconds: an agent that is down (or a
# command nobody took) is noticed within it, instead of at the state's TimeoutSeconds. The agent
# heartbeats every command it holds, the one it runs and those waiting their turn, at most every
# half of it (agent config heartbeat_seconds).
AGENT_HEARTBEAT_DEADLINE_SECONDS = 60
# The error Step Functions gives such a state when the deadline passes without a heartbeat.
AGENT_HEARTBEAT_TIMEOUT = "States.HeartbeatTimeout"


def owner_tag(incident_id: str) -> str:
    """The drain reason marker; the agent only ever resumes nodes whose reason carries our prefix."""
    return f"{OWNER_TAG_PREFIX}:{incident_id}"


def carries_owner_tag(reason: str, tag: str) -> bool:
    """Whether a drain reason was written by the incident ``tag`` names: the reason's first word is
    the tag itself. A prefix test would let drill-1's resume undo drill-10's drain."""
    return reason.split(maxsplit=1)[:1] == [tag]


# The nodes of one incident (drain, resume, jobs on them), and of one failed job (node states).
NodeList = Annotated[list[SlurmNodeName], Field(min_length=1, max_length=MAX_NODES_PER_REQUEST)]
JobNodeList = Annotated[list[SlurmNodeName], Field(min_length=1, max_length=MAX_JOB_NODES_CARRIED)]
NodeNames = Annotated[list[SlurmNodeName], Field(max_length=MAX_NODES_PER_REQUEST)]


class DrainNodes(Model):
    model_config = ConfigDict(extra="forbid")
    type: Literal["drain_nodes"] = "drain_nodes"
    nodes: NodeList
    reason: SlurmText = Field(min_length=1, max_length=256)


class CordonNodes(Model):
    """Cordon Nodes: drain the nodes under ``reason`` (our tag first), then capture the jobs holding
    them (as ``jobs_on_nodes`` does): one round trip to the controller, and no job can start on them
    between the drain and the listing.

    ``drain`` false is a dry run's cordon (the gate, adapters/dry_run.py, sends it so): nothing is
    drained, the answer says what would be (and is marked dry_run), the jobs are real. An agent
    older than this command refuses it (an unknown type): never a listing without the drain."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["cordon_nodes"] = "cordon_nodes"
    nodes: NodeList
    reason: SlurmText = Field(min_length=1, max_length=256)
    drain: StrictFlag = Field(default=True, exclude_if=lambda v: v is True)


# A replacement's health gate: a program run on the node as a Slurm step before it takes jobs.
HealthCheckArg = Annotated[str, Field(max_length=2048, pattern=r"^[^\x00-\x1f]*$")]


class HealthCheck(Model):
    """The program (an argument list, never a shell string) the agent runs on each node before it
    resumes it, and how long it may take; a non-zero exit, or no exit in time, fails the gate."""

    model_config = ConfigDict(extra="forbid")
    argv: list[HealthCheckArg] = Field(min_length=1, max_length=1024)
    timeout_seconds: int = Field(ge=10, le=3600)


class ResumeNodes(Model):
    model_config = ConfigDict(extra="forbid")
    type: Literal["resume_nodes"] = "resume_nodes"
    nodes: NodeList
    owner_tag: SlurmText = Field(min_length=1, max_length=128, pattern=rf"^{OWNER_TAG_PREFIX}:\S+$")
    # Run on each node before it takes jobs (left out when none is configured, so an agent older
    # than the gate still reads the command).
    health_check: HealthCheck | None = Field(default=None, exclude_if=is_none)


class JobsOnNodes(Model):
    model_config = ConfigDict(extra="forbid")
    type: Literal["jobs_on_nodes"] = "jobs_on_nodes"
    nodes: NodeList


class ResubmitJob(Model):
    """Resubmit the job the agent captured as ``job_id``, as its owner, from ``checkpoint``. The
    script, owner and options come from the agent's capture, never from this message."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["resubmit_job"] = "resubmit_job"
    job_id: JobId
    checkpoint: CheckpointRef
    # The replaced nodes come back under the same names; excluding nothing lets Slurm use them.
    exclude_nodes: NodeNames = Field(default_factory=list)
    # EKS: the job object to re-create (left out on Slurm, where the agent holds the capture), and the
    # token our ledger recorded for its re-creation before it is made: the re-creation carries it.
    kube: KubeJobRef | None = Field(default=None, exclude_if=is_none)
    recreation_token: RecreationToken | None = Field(default=None, exclude_if=is_none)
    # Shrink-and-continue: the node count to submit the copy at (None: the size the job ran at), and
    # the data-parallel degree that gives, both exported to the copy (RESUME_NODES_ENV, RESUME_DATA_PARALLEL_ENV).
    nodes: int | None = Field(default=None, ge=1, le=MAX_JOB_NODES, exclude_if=is_none)
    data_parallel: int | None = Field(default=None, ge=1, le=MAX_RESUME_DATA_PARALLEL, exclude_if=is_none)
    # A grow-back: the old copy (ours, shrunk) is stopped only when this many nodes can take the new
    # one at once (its own nodes plus free ones); else nothing is stopped or submitted (``declined``).
    require_free_nodes: int | None = Field(default=None, ge=1, le=MAX_JOB_NODES, exclude_if=is_none)
    # EKS grow-back: the token our ledger recorded for the re-creation that made the shrunk copy
    # ``job_id`` (``kube`` then names the job it was re-created from): the copy is ours only if it carries it.
    copy_token: RecreationToken | None = Field(default=None, exclude_if=is_none)
    # EKS: only stop the job, for its re-creation after the rejoin (its pods may take longer to stop than a
    # re-creation waits: domain/jobs/eks_grace.py); nothing is created, and the pods are not waited for.
    stop_only: StrictFlag = Field(default=False, exclude_if=is_false)

    @model_validator(mode="after")
    def _stop_only_on_eks(self) -> Self:
        # (a Slurm agent would take it for a resubmission: the stop is a Kubernetes job's, with its token)
        if self.stop_only and (self.kube is None or self.recreation_token is None or self.require_free_nodes is not None):
            raise ValueError("stop_only stops an EKS job object (kube, recreation_token) for its re-creation; never a grow-back")
        return self


class NodeStates(Model):
    """Slurm's view of nodes: state, flags and drain reason (read-only). ``nodes``: those nodes; or, for
    a job on more nodes than a command carries the names of, ``not_plainly_healthy`` and no names:
    every node of the cluster whose state is not plainly healthy (``plainly_healthy``), which is all
    the job-failure classifier needs (a job's node absent from the answer is healthy)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["node_states"] = "node_states"
    nodes: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_JOB_NODES_CARRIED)
    not_plainly_healthy: StrictFlag = Field(default=False, exclude_if=is_false)

    @model_validator(mode="after")
    def _one_way_of_asking(self) -> Self:
        if bool(self.nodes) == self.not_plainly_healthy:
            raise ValueError("NodeStates: name the nodes, or ask for every node not plainly healthy (not_plainly_healthy), one of the two")
        return self


# What the job-failure classifier (domain/job_failure.faulty_nodes) reads in a node's Slurm state: an
# unhealthy state or flag, a drain (ours, HyperPod's or someone else's), a repair reason.
UNHEALTHY_SLURM_STATES = frozenset({"down", "fail", "failing", "unknown"})
UNHEALTHY_SLURM_FLAGS = frozenset({"NOT_RESPONDING", "FAIL", "FAILING"})
DRAINED_SLURM_STATES = frozenset({"drained", "draining"})
# Drain reasons that mean "this node is being repaired": ours, and HyperPod's own health agent's.
REPAIR_REASON_PREFIXES = (f"{OWNER_TAG_PREFIX}:", "Action:Replace", "Action:Reboot")
# A NodeStates answer for a large job (not_plainly_healthy) names at most this many nodes, each reason
# cut to this: with a 10,000-node job's own list beside it, the state stays far below 256 KiB.
MAX_UNHEALTHY_ANSWERED = 256
UNHEALTHY_REASON_KEPT = 80


def plainly_healthy(state: str, flags: Iterable[str], reason: str) -> bool:
    """Whether a node's Slurm state says nothing the job-failure classifier acts on (exactly its rule:
    tests/unit/test_large_jobs.py checks both directions)."""
    base = state.lower().split("+", 1)[0]
    flagged = set(flags)
    return not (
        base in UNHEALTHY_SLURM_STATES
        or UNHEALTHY_SLURM_FLAGS & flagged
        or reason.startswith(REPAIR_REASON_PREFIXES)
        or "DRAIN" in flagged
        or base in DRAINED_SLURM_STATES
    )


class CaptureJobSpec(Model):
    """One job's spec (script, name, partition, nodes, time limit, work dir, checkpoint) (read-only)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["capture_job_spec"] = "capture_job_spec"
    job_id: JobId
    # EKS: the job object, when the failure names it (read by name; else found by its uid).
    kube: KubeJobRef | None = Field(default=None, exclude_if=is_none)
    # A hang's: the nodes its verdict names (suspects, then the ones that stopped first). A job on more
    # nodes than an answer carries the names of is answered with those of them it runs on (asked_held).
    asked: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_NODES_ASKED, exclude_if=lambda v: not v)


class RequeueJob(Model):
    """``scontrol requeue``: Slurm restarts the same job id (a job already pending is left as is)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["requeue_job"] = "requeue_job"
    job_id: SlurmJobId


class BootTimes(Model):
    """Each node's boot time and state as slurmctld knows them (read-only): slurmd reports the host's
    boot time when it registers, so a boot time later than a reboot request proves the reboot."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["boot_times"] = "boot_times"
    nodes: NodeList


# A hang's evidence: stack dumps from at most this many nodes (the suspects first), each cut to its
# bound, so the answer (and the state it lands in) stays small; the whole goes to the ledger.
MAX_EVIDENCE_NODES = 16
STACKS_TEXT_LIMIT = 2048
JOB_TEXT_LIMIT = 4096
# The same bounds in bytes of UTF-8, as the ledger stores them (redact.py redacted_evidence cuts
# to them): a node's text, the job's, and the whole evidence item as stored (JSON doubles at most each
# byte of a text: a quote, a backslash, a newline; control characters are spaces by then).
NODE_EVIDENCE_BYTES = 2048
JOB_TEXT_BYTES = 4096
INCIDENT_EVIDENCE_BYTES = 96 * 1024
EvidenceText = Annotated[str, Field(max_length=STACKS_TEXT_LIMIT)]


class CaptureHangEvidence(Model):
    """A hung job's evidence, read-only and bounded in time: ``scontrol show job`` and a stack dump
    of the job's processes on ``nodes`` (``py-spy dump`` through ``srun --overlap --jobid``; the
    answer says when py-spy is not installed). On EKS: the job's conditions and events and, on each
    node, the last lines of its pod's log (adapters/eks_orchestrator/). Nothing is signalled,
    nothing cancelled."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["capture_hang_evidence"] = "capture_hang_evidence"
    job_id: JobId
    nodes: Annotated[list[SlurmNodeName], Field(min_length=1, max_length=MAX_EVIDENCE_NODES)]
    # The whole capture's bound: the dumps run at once, each killed at this time.
    timeout_seconds: int = Field(default=60, ge=5, le=300)
    kube: KubeJobRef | None = Field(default=None, exclude_if=is_none)


EvidenceOutcome = Literal["captured", "tool_absent", "timed_out", "failed", "no_process"]


class NodeStacks(Model):
    """One node's stack dump of the job's processes."""

    model_config = ConfigDict(extra="forbid")
    node: SlurmNodeName
    outcome: EvidenceOutcome
    # The dump (its end, when longer), or why there is none.
    text: EvidenceText = ""
    # A digest of the innermost frame of every thread of the job's processes, order-free (EKS: of the
    # pod log's last line, numbers taken out): nodes stuck in the same place share it, and a node
    # whose differs from the others' is the odd one.
    signature: str | None = Field(default=None, max_length=64, exclude_if=is_none)


class HangEvidenceResult(Model):
    job_id: JobId
    # The job's state now (RUNNING...), None when the orchestrator no longer knows it.
    job_state: str | None = Field(default=None, max_length=32)
    # ``scontrol show job`` (EKS: the job object's status and the pods' events), cut to its bound.
    job_text: str = Field(default="", max_length=JOB_TEXT_LIMIT)
    nodes: list[NodeStacks] = Field(default_factory=list, max_length=MAX_EVIDENCE_NODES)
    # The dumping tool (EKS: the log call), and whether it was there (said, never silently skipped).
    tool: str = Field(default="py-spy", max_length=32)
    tool_absent: StrictFlag = False

    @model_validator(mode="after")
    def _redacted(self) -> Self:
        """Every text redacted and within its bound in bytes wherever evidence is made or read (the
        agent's answer, the EKS reader's, the state each function reads, the ledger): the one place a
        job's words enter the record (redact.py)."""
        for node in self.nodes:
            node.text = redact_within(after_cut(printable(node.text)), NODE_EVIDENCE_BYTES, "end")
        self.job_text = redact_within(printable(self.job_text), JOB_TEXT_BYTES, "start")
        return self


class CheckAgent(Model):
    """Is the agent there, which version, does slurmctld answer, and which jobs run with which
    checkpoint location (read-only): what ``hyperpod-recovery preflight`` asks before a stack is armed."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["check"] = "check"


ControllerCommand = Annotated[
    DrainNodes
    | CordonNodes
    | ResumeNodes
    | JobsOnNodes
    | ResubmitJob
    | NodeStates
    | CaptureJobSpec
    | RequeueJob
    | BootTimes
    | CheckAgent
    | CaptureHangEvidence,
    Field(discriminator="type"),
]
COMMAND_TYPES = frozenset(
    {
        "drain_nodes",
        "cordon_nodes",
        "resume_nodes",
        "jobs_on_nodes",
        "resubmit_job",
        "node_states",
        "capture_job_spec",
        "requeue_job",
        "boot_times",
        "check",
        "capture_hang_evidence",
    }
)
# (cordon_nodes: its drain; a dry run sends it with drain false, which only reads.)
MUTATING_COMMANDS = frozenset({"drain_nodes", "cordon_nodes", "resume_nodes", "resubmit_job", "requeue_job"})


class CommandEnvelope(Model):
    """One SQS message on the command queue."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    command_id: str = Field(min_length=1, max_length=256)
    incident_id: str = Field(min_length=1, max_length=80)
    execution_name: str = Field(min_length=1, max_length=80)
    task_token: str = Field(min_length=1, max_length=8192)
    requested_at: Timestamp
    command: ControllerCommand


class DrainResult(Model):
    drained: NodeNames = Field(default_factory=list)
    already_drained: NodeNames = Field(default_factory=list)
    # Of those, drained under this incident's own tag already (a command retried after a lost
    # answer): ours to give back. The others were someone else's (an admin, HyperPod's health
    # agent) and are never given back by us, nor by a human on our word.
    ours_already: NodeNames = Field(default_factory=list, exclude_if=lambda v: not v)


# Unhealthy nodes whose check output a ResumeResult carries: a 100-node storm whose replacements
# all fail must not carry 100 outputs through the state (each node's is in its drain reason, sinfo -R).
UNHEALTHY_DETAILS_KEPT = 10


class UnhealthyNode(Model):
    node: SlurmNodeName
    # "failed": the check ran and said no (an exit other than 0, or none in time): the instance is
    # sick. "could_not_run": the check never ran (srun's own error, slurmctld away, a reservation
    # refused): nothing is known of the instance. Only a failed check replaces it again; the
    # default is the careful one (an agent older than this field says nothing of it).
    verdict: Literal["failed", "could_not_run"] = "could_not_run"
    # The check's exit and the end of its output ("" past UNHEALTHY_DETAILS_KEPT).
    detail: GateDetailText = Field(default="", exclude_if=lambda v: not v)


class ResumeResult(Model):
    resumed: NodeNames = Field(default_factory=list)
    not_drained: NodeNames = Field(default_factory=list)
    # Drained by someone else (reason without our tag): left alone on purpose.
    not_ours: NodeNames = Field(default_factory=list)
    # Failed the health check: drained again under our tag, never resumed.
    unhealthy: list[UnhealthyNode] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST, exclude_if=lambda v: not v)

    @field_validator("unhealthy", mode="after")
    @classmethod
    def _bounded_details(cls, value: list[UnhealthyNode]) -> list[UnhealthyNode]:
        return [u if i < UNHEALTHY_DETAILS_KEPT else u.model_copy(update={"detail": ""}) for i, u in enumerate(value)]


class JobsOnNodesResult(Model):
    jobs: list[JobSpec] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    # Jobs past MAX_JOBS_PER_INCIDENT, counted but not described (the incident escalates for them).
    omitted: int = Field(default=0, ge=0)
    # Set when Forget Job Details replaced ``jobs`` (kept in the ledger) with their number.
    count: int | None = None


class CordonResult(JobsOnNodesResult):
    """Cordon Nodes' answer: the nodes drained (or, in a dry run, that would be), those already
    drained (ours from a retry, or someone else's: kept as they are), and the jobs on them.
    Every field is always present: the workflow's paths read them (Forget Job Details)."""

    drained: NodeNames = Field(default_factory=list)
    already_drained: NodeNames = Field(default_factory=list)
    ours_already: NodeNames = Field(default_factory=list, exclude_if=lambda v: not v)  # (as DrainResult's)
    # Nodes the orchestrator has no record of (EKS: no Node object, as when HyperPod is replacing
    # the instance already): nothing cordoned, nothing can run there.
    absent: NodeNames = Field(default_factory=list, exclude_if=lambda v: not v)


class ResubmitResult(Model):
    old_job_id: JobId
    new_job_id: JobId | None = None  # None only in a dry run, or when another incident has not finished yet
    # Another incident resubmitted the job (its claim in the ledger, or its copy in Slurm): nothing submitted now.
    already_submitted: StrictFlag = Field(default=False, exclude_if=is_false)
    submitted_by: str | None = Field(default=None, max_length=80, exclude_if=is_none)
    # Slurm had requeued the old job itself (new_job_id is then the old id): nothing submitted.
    restarted_by_slurm: StrictFlag = Field(default=False, exclude_if=is_false)
    # The old job still ran (on the replaced nodes, or hung) and was cancelled before resubmitting.
    cancelled_old: StrictFlag = Field(default=False, exclude_if=is_false)
    # EKS: the re-created job object, <namespace>/<name> (its uid is new_job_id), for people to read.
    new_job_name: str | None = Field(default=None, max_length=128, exclude_if=is_none)
    # The new copy's state as the orchestrator showed it right after the submission (Slurm: squeue's
    # PENDING, RUNNING...; EKS: the object's newest condition, or Created): what a human is told,
    # never "runs again" of a job that waits. None: an older agent, or unknown.
    new_job_state: str | None = Field(default=None, max_length=32, exclude_if=is_none)
    # The node count the copy was submitted at (a shrink or a grow-back); None: the size the job ran at.
    nodes: int | None = Field(default=None, ge=1, le=MAX_JOB_NODES, exclude_if=is_none)
    # Why nothing was stopped or submitted (a grow-back whose nodes were taken): the old copy runs on,
    # unless ``copy_ended``: it had ended without this grow-back (done, failed, stopped by a human).
    declined: ShortText | None = Field(default=None, exclude_if=is_none)
    copy_ended: StrictFlag = Field(default=False, exclude_if=is_false)
    # The answer to a stop only (ResubmitJob.stop_only): nothing created; ``cancelled_old`` says whether
    # it was stopped now, ``declined`` why it was not (the re-creation after the rejoin tries the stop again).
    stop_only: StrictFlag = Field(default=False, exclude_if=is_false)


class NodeStatus(Model):
    name: SlurmNodeName
    state: str = Field(max_length=32)  # idle, allocated, mixed, down, ...
    flags: list[Annotated[str, Field(max_length=32)]] = Field(default_factory=list, max_length=16)  # DRAIN, NOT_RESPONDING, ...
    reason: str = Field(default="", max_length=256)


class NodeStatesResult(Model):
    nodes: list[NodeStatus] = Field(default_factory=list, max_length=MAX_JOB_NODES_CARRIED)


class JobSpecResult(Model):
    job: JobSpec | None = None  # None: slurmctld no longer knows the job

    @model_validator(mode="after")
    def _nodes_carried(self) -> Self:
        # (the workflow's state carries this answer: Step Functions refuses a state over 256 KiB)
        if self.job is not None and len(self.job.nodes) > MAX_JOB_NODES_CARRIED:
            raise ValueError(f"job.nodes: {len(self.job.nodes)} names, more than a workflow carries ({MAX_JOB_NODES_CARRIED})")
        return self


def carried(spec: JobSpec, asked: Iterable[str] = ()) -> JobSpec:
    """The job as Capture Job Spec's answer carries it: a job on more than MAX_JOB_NODES_CARRIED nodes
    without its node list (``num_nodes`` still says its size; a failure's own list comes with its
    event), with those of the ``asked`` nodes it runs on (``asked_held``)."""
    if len(spec.nodes) <= MAX_JOB_NODES_CARRIED:
        return spec
    own = set(spec.nodes)
    return spec.model_copy(update={"nodes": [], "asked_held": [n for n in dict.fromkeys(asked) if n in own][:MAX_NODES_ASKED]})


class RequeueResult(Model):
    job_id: SlurmJobId
    requeued: bool  # False: the job was already pending (requeued before), nothing done


# Slurm node state flags (scontrol's State=, e.g. DOWN+DRAIN+NOT_RESPONDING) that say slurmd is not
# there to answer. DOWN alone is not one of them: slurmctld sets a node that rebooted without
# `scontrol reboot` DOWN ("Node unexpectedly rebooted") although its slurmd has just registered.
NOT_RESPONDING_FLAGS = frozenset({"NOT_RESPONDING", "UNKNOWN", "FUTURE", "POWERED_DOWN", "POWERING_UP", "POWERING_DOWN"})


class NodeBoot(Model):
    """One node as slurmctld knows it: when its host last booted (the BootTime its slurmd registered
    with; None when slurmctld has none or does not know the node) and its state."""

    model_config = ConfigDict(extra="forbid")
    name: SlurmNodeName
    boot_time: Timestamp | None = Field(default=None, exclude_if=is_none)
    state: str = Field(default="", max_length=64, exclude_if=lambda v: v == "")  # "" : unknown to slurmctld

    @property
    def responding(self) -> bool:
        flags = set(self.state.upper().split("+"))
        return bool(self.state) and not flags & NOT_RESPONDING_FLAGS


class BootTimesResult(Model):
    nodes: list[NodeBoot] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)


# A check names at most this many running jobs (the preflight probes each one's checkpoints).
MAX_JOBS_CHECKED = 50


class RunningJob(Model):
    """A running job as a check reports it: enough to find its checkpoints."""

    model_config = ConfigDict(extra="forbid")
    job_id: JobId  # a Slurm job id, or on EKS the job object's uid
    name: str = Field(max_length=JOB_NAME_LIMIT)
    checkpoint_uri: str | None = Field(default=None, max_length=MAX_CHECKPOINT_URI, pattern=CHECKPOINT_URI_PATTERN)


class AgentCheckResult(Model):
    agent_version: str = Field(max_length=64)
    slurm_reachable: bool
    # Why slurmctld did not answer, or what it said (its node count).
    slurm_detail: str = Field(default="", max_length=512)
    running_jobs: list[RunningJob] = Field(default_factory=list, max_length=MAX_JOBS_CHECKED)
    running_jobs_omitted: int = Field(default=0, ge=0)
    # The command types this agent executes (empty: an agent older than this field). The preflight
    # fails when the stack sends one it does not know: every recovery would escalate at that step.
    commands: list[Annotated[str, Field(max_length=32)]] = Field(default_factory=list, max_length=32)


# Every reply the stack reads is parametrized with its result model (CommandReply[ResubmitResult]).
# Unconstrained on purpose: pydantic builds the bare class's validator the first time it is
# parametrized, and a union of every result model there cost each handler's cold start ~20 ms.
ResultT = TypeVar("ResultT")


class CommandReply(Model, Generic[ResultT]):
    """The SendTaskSuccess output: the agent echoes the envelope's id and times its work. (Resubmit
    Jobs keeps only the times, dry_run and the result of each answer in the state: the rest may be
    absent.)"""

    command_id: str = Field(default="", max_length=256)
    type: str = Field(default="", max_length=32)
    requested_at: Timestamp
    started_at: Timestamp | None = None
    completed_at: Timestamp
    dry_run: StrictFlag = False
    result: ResultT
