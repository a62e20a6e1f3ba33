"""The controller command protocol: what the workflow puts on the command queue and what the
controller agent answers through SendTaskSuccess.

Commands are typed (never shell strings) and every node name and job id is validated here, on
both sides of the queue. Mutating commands carry a ``command_id`` the agent uses as an
idempotency key, so a redelivered message is never executed twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hyperpod_recovery.models.common import (
    MAX_JOB_NODES_CARRIED,
    MAX_JOBS_PER_INCIDENT,
    MAX_NODES_PER_REQUEST,
    GateDetailText,
    JobId,
    JobNameText,
    ShortText,
    SlurmJobId,
    SlurmNodeName,
    SlurmText,
    StrictFlag,
    Timestamp,
)
from hyperpod_recovery.models.elastic import ElasticPolicy
from hyperpod_recovery.models.kubernetes import MAX_GRACE_SECONDS_CARRIED, KubeJobRef, RecreationToken
from hyperpod_recovery.models.manifest import MAX_FRAMEWORK_CHARS, MAX_JOB_CHARS, CheckpointLayout, manifest_job
from hyperpod_recovery.redact import after_cut, printable, redact_within

OWNER_TAG_PREFIX = "hyperpod-recovery"

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


JOB_NAME_LIMIT = MAX_JOB_CHARS  # one rule with the checkpoint manifest


def job_display_name(name: str) -> str:
    """A Slurm job name as the workflow carries it: its first 256 characters (Slurm allows 1024
    bytes), the same rule the checkpoint manifest's ``job`` follows (``manifest_job``). The full name
    stays in the agent's capture and is what a resubmission is given."""
    return manifest_job(name)


def carries_owner_tag(reason: str, tag: str) -> bool:
    """Whether a drain reason was written by the incident ``tag`` names: the reason's first word is
    the tag itself. A prefix test would let drill-1's resume undo drill-10's drain."""
    return reason.split(maxsplit=1)[:1] == [tag]


MAX_JOB_NODES = 10_000
# The data-parallel degree a resubmitted copy may be told (ResubmitJob.data_parallel).
MAX_RESUME_DATA_PARALLEL = MAX_JOB_NODES * 8

# When a job on a failed node is resubmitted (the stack's ResumePolicy, a job's own choice):
# "immediate": as soon as its nodes are cordoned and its checkpoint is known, so the scheduler can
# start it on idle healthy nodes at once, or on the replacement when it is back (the cordon keeps
# it off the failed node); "after_rejoin": once the replacement is back and resumed.
ResumePolicy = Literal["immediate", "after_rejoin"]
RESUME_POLICIES: tuple[ResumePolicy, ...] = ("immediate", "after_rejoin")
RESUME_COMMENT_KEY = "resume="


def resume_choice_in_comment(comment: str) -> ResumePolicy | None:
    """A job's own resume choice, ``resume=immediate`` or ``resume=after_rejoin`` as one word of its
    comment (beside ``checkpoint=s3://...``); None when the comment makes none, or an unknown one
    (the stack's policy then applies: a typo must not hold a job back)."""
    for token in comment.split():
        if token.startswith(RESUME_COMMENT_KEY):
            value = token.removeprefix(RESUME_COMMENT_KEY)
            return next((policy for policy in RESUME_POLICIES if policy == value), None)
    return None


# Fields at their default are left out of what the agent answers and what the workflow carries:
# a storm's 64 jobs pass through the state three times (found, planned, resubmitted).
def _is_none(value: object) -> bool:
    return value is None


def _is_false(value: object) -> bool:
    return value is False


# A checkpoint prefix longer than this is not carried (the job is unresumable, and says why).
MAX_CHECKPOINT_URI = 256
CHECKPOINT_URI_PATTERN = r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$"


class CopyMark(BaseModel):
    """``hyperpod-recovery:resubmission-of=<job_id> incident=<incident>``, as a copy's comment starts."""

    model_config = ConfigDict(extra="forbid")
    job_id: JobId
    incident: str = Field(min_length=1, max_length=80)


COPY_MARK_PATTERN = re.compile(rf"^{re.escape(OWNER_TAG_PREFIX)}:resubmission-of=(\S+) incident=(\S+)")


def copy_mark_in_comment(comment: str) -> CopyMark | None:
    """Our resubmission mark at the start of a Slurm comment, or None (none, or one that does not parse)."""
    found = COPY_MARK_PATTERN.match(comment)
    if found is None:
        return None
    try:
        return CopyMark(job_id=found[1], incident=found[2])
    except ValueError:
        return None


# The nodes a hang's verdict names (its suspects, then its nodes): what Capture Job Spec may ask about.
# models/hangs.py MAX_SUSPECTS + MAX_VERDICT_NODES (not imported: the agent loads only the contract
# modules; tests/unit/test_large_jobs.py holds them equal).
MAX_NODES_ASKED = 72


class JobSpec(BaseModel):
    """What the workflow knows about a job: who it is, where its checkpoints are, whether it can be
    resubmitted. Everything needed to resubmit it (script, owner, submission environment, sbatch
    options) is captured and kept on the controller by the agent, referenced by the job id: it never
    travels through the queue or the workflow's state."""

    model_config = ConfigDict(extra="forbid")

    job_id: JobId
    name: str = Field(max_length=JOB_NAME_LIMIT)  # job_display_name(): the first 256 characters
    user: str | None = Field(default=None, max_length=64, exclude_if=_is_none)
    partition: str | None = Field(default=None, max_length=128, exclude_if=_is_none)
    num_nodes: int = Field(ge=1, le=MAX_JOB_NODES)
    # The job's nodes, as the agent holds them (every one: a grow-back counts them). What travels is
    # bounded apart: a jobs-on-nodes answer leaves them out, and Capture Job Spec's answer carries at
    # most MAX_JOB_NODES_CARRIED (JobSpecResult), a larger job's none.
    nodes: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_JOB_NODES, exclude_if=lambda v: not v)
    # Of the nodes Capture Job Spec asked about (a hang's verdict's: CaptureJobSpec.asked), those the
    # job runs on, when ``nodes`` is not carried: what a large job's hang is judged on.
    asked_held: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_NODES_ASKED, exclude_if=lambda v: not v)
    state: str = Field(max_length=32)
    checkpoint_uri: str | None = Field(default=None, max_length=MAX_CHECKPOINT_URI, pattern=CHECKPOINT_URI_PATTERN, exclude_if=_is_none)
    # Jobs someone else restarts (Slurm: launched with `srun --auto-resume=1`, HyperPod restarts
    # them; EKS: see ``restarted_by``): never resubmitted by us.
    auto_resume: StrictFlag = Field(default=False, exclude_if=_is_false)
    # Who restarts it, when not us (EKS: the HyperPod training operator, HyperPod's job auto-resume,
    # Kubeflow's own restart policy); None on Slurm, where auto_resume says it.
    restarted_by: RestartedBy | None = Field(default=None, exclude_if=_is_none)
    # EKS: the job object (``job_id`` is its uid; ``name`` the name its checkpoints are written under).
    kube: KubeJobRef | None = Field(default=None, exclude_if=_is_none)
    # EKS: the longest terminationGracePeriodSeconds of its pod templates (Kubernetes' 30 where unset):
    # how long its pods may run on once it is stopped (domain/jobs/eks_grace.py). None on Slurm.
    stop_grace_seconds: int | None = Field(default=None, ge=0, le=MAX_GRACE_SECONDS_CARRIED, exclude_if=_is_none)
    # The owner's own choice of when to resubmit it (its comment's resume=...); None: the stack's.
    resume: ResumePolicy | None = Field(default=None, exclude_if=_is_none)
    # Why the agent could not capture the job faithfully (an array or heterogeneous job, an salloc
    # allocation, an unknown owner...): decided before anything is sent, never resubmitted.
    unresumable: ShortText | None = Field(default=None, exclude_if=_is_none)
    # The owner's own submission opted in to progress monitoring (its environment names the progress
    # table, models/progress.py): what a hang verdict needs before anything is done to the job, since
    # anyone on the cluster can write a progress report under any job's id.
    reports_progress: StrictFlag = Field(default=False, exclude_if=_is_false)
    # Shrink-and-continue (models/elastic.py): how far the job may shrink when no spare fits it; None:
    # rigid (it waits for its replacement). ``elastic_problem``: an opt-in that could not be read.
    elastic: ElasticPolicy | None = Field(default=None, exclude_if=_is_none)
    elastic_problem: ShortText | None = Field(default=None, exclude_if=_is_none)
    # Nodes that could take the job at once when it was captured (Slurm: idle, not drained, responding,
    # in its partition; after the cordon, so never the failed ones). None: not counted (an older agent).
    spare_nodes: int | None = Field(default=None, ge=0, le=MAX_JOB_NODES, exclude_if=_is_none)
    # How many of the job's nodes the cordon took (the incident's nodes it ran on). None: not counted.
    lost_nodes: int | None = Field(default=None, ge=0, le=MAX_JOB_NODES, exclude_if=_is_none)
    # What the job's comment says it is a copy of (our resubmission mark at its start): the owner could
    # have written it, so it is only a lead; the ledger's claim by that incident on that job is proof
    # (steps/find_newest_checkpoint.py lineage_nodes).
    copy_of: CopyMark | None = Field(default=None, exclude_if=_is_none)


# Who restarts a job when we do not (JobSpec.restarted_by): never us on top of them.
RestartedBy = Literal["hyperpod_auto_resume", "hyperpod_training_operator", "kubeflow"]
RESTARTED_BY_TEXT: dict[str, str] = {
    "hyperpod_auto_resume": "HyperPod's job auto-resume restarts it",
    "hyperpod_training_operator": "the HyperPod training operator restarts it",
    "kubeflow": "the Kubeflow training operator restarts its pods (restartPolicy)",
}


def left_alone_reason(job: JobSpec) -> str:
    """Why a job someone else restarts is left alone, naming who."""
    if job.restarted_by is not None:
        return RESTARTED_BY_TEXT[job.restarted_by]
    return "uses srun --auto-resume=1: HyperPod restarts it itself"


class JobRef(BaseModel):
    """A job as a plan names it: the agent holds the rest, the ledger its description."""

    model_config = ConfigDict(extra="forbid")

    job_id: JobId
    name: JobNameText  # for people: the first 64 characters
    # EKS: the job object to re-create (Resubmit Job reads it from here; the agent keeps Slurm's).
    kube: KubeJobRef | None = Field(default=None, exclude_if=_is_none)


class CheckpointRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    uri: str = Field(max_length=MAX_CHECKPOINT_URI + 32)  # s3://bucket/prefix/step-000012000/
    step: int = Field(ge=0)
    # As long as a manifest may name it: a longer limit here made a valid checkpoint crash discovery.
    framework: str | None = Field(default=None, max_length=MAX_FRAMEWORK_CHARS, exclude_if=_is_none)
    # Manifest v1.1: the world size and parallel layout it was written at, and whether it reshards
    # (loads at another data-parallel width). None: v1, or a checkpoint found without our manifest.
    layout: CheckpointLayout | None = Field(default=None, exclude_if=_is_none)


# The nodes of one incident (drain, resume, jobs on them), and of one failed job (node states).
NodeList = Annotated[list[SlurmNodeName], Field(min_length=1, max_length=MAX_NODES_PER_REQUEST)]
JobNodeList = Annotated[list[SlurmNodeName], Field(min_length=1, max_length=MAX_JOB_NODES_CARRIED)]
NodeNames = Annotated[list[SlurmNodeName], Field(max_length=MAX_NODES_PER_REQUEST)]


class DrainNodes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["drain_nodes"] = "drain_nodes"
    nodes: NodeList
    reason: SlurmText = Field(min_length=1, max_length=256)


class CordonNodes(BaseModel):
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


class HealthCheck(BaseModel):
    """The program (an argument list, never a shell string) the agent runs on each node before it
    resumes it, and how long it may take; a non-zero exit, or no exit in time, fails the gate."""

    model_config = ConfigDict(extra="forbid")
    argv: list[HealthCheckArg] = Field(min_length=1, max_length=1024)
    timeout_seconds: int = Field(ge=10, le=3600)


class ResumeNodes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["resume_nodes"] = "resume_nodes"
    nodes: NodeList
    owner_tag: SlurmText = Field(min_length=1, max_length=128, pattern=rf"^{OWNER_TAG_PREFIX}:\S+$")
    # Run on each node before it takes jobs (left out when none is configured, so an agent older
    # than the gate still reads the command).
    health_check: HealthCheck | None = Field(default=None, exclude_if=_is_none)


class JobsOnNodes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["jobs_on_nodes"] = "jobs_on_nodes"
    nodes: NodeList


class ResubmitJob(BaseModel):
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
    kube: KubeJobRef | None = Field(default=None, exclude_if=_is_none)
    recreation_token: RecreationToken | None = Field(default=None, exclude_if=_is_none)
    # Shrink-and-continue: the node count to submit the copy at (None: the size the job ran at), and
    # the data-parallel degree that gives, both exported to the copy (RESUME_NODES_ENV, RESUME_DATA_PARALLEL_ENV).
    nodes: int | None = Field(default=None, ge=1, le=MAX_JOB_NODES, exclude_if=_is_none)
    data_parallel: int | None = Field(default=None, ge=1, le=MAX_RESUME_DATA_PARALLEL, exclude_if=_is_none)
    # A grow-back: the old copy (ours, shrunk) is stopped only when this many nodes can take the new
    # one at once (its own nodes plus free ones); else nothing is stopped or submitted (``declined``).
    require_free_nodes: int | None = Field(default=None, ge=1, le=MAX_JOB_NODES, exclude_if=_is_none)
    # EKS grow-back: the token our ledger recorded for the re-creation that made the shrunk copy
    # ``job_id`` (``kube`` then names the job it was re-created from): the copy is ours only if it carries it.
    copy_token: RecreationToken | None = Field(default=None, exclude_if=_is_none)
    # EKS: only stop the job, for its re-creation after the rejoin (its pods may take longer to stop than a
    # re-creation waits: domain/jobs/eks_grace.py); nothing is created, and the pods are not waited for.
    stop_only: StrictFlag = Field(default=False, exclude_if=_is_false)

    @model_validator(mode="after")
    def _stop_only_on_eks(self) -> ResubmitJob:
        # (a Slurm agent would take it for a resubmission: the stop is a Kubernetes job's, with its token)
        if self.stop_only and (self.kube is None or self.recreation_token is None or self.require_free_nodes is not None):
            raise ValueError("stop_only stops an EKS job object (kube, recreation_token) for its re-creation; never a grow-back")
        return self


class NodeStates(BaseModel):
    """Slurm's view of nodes: state, flags and drain reason (read-only). ``nodes``: those nodes; or, for
    a job on more nodes than a command carries the names of, ``not_plainly_healthy`` and no names:
    every node of the cluster whose state is not plainly healthy (``plainly_healthy``), which is all
    the job-failure classifier needs (a job's node absent from the answer is healthy)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["node_states"] = "node_states"
    nodes: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_JOB_NODES_CARRIED)
    not_plainly_healthy: StrictFlag = Field(default=False, exclude_if=_is_false)

    @model_validator(mode="after")
    def _one_way_of_asking(self) -> NodeStates:
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


class CaptureJobSpec(BaseModel):
    """One job's spec (script, name, partition, nodes, time limit, work dir, checkpoint) (read-only)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["capture_job_spec"] = "capture_job_spec"
    job_id: JobId
    # EKS: the job object, when the failure names it (read by name; else found by its uid).
    kube: KubeJobRef | None = Field(default=None, exclude_if=_is_none)
    # A hang's: the nodes its verdict names (suspects, then the ones that stopped first). A job on more
    # nodes than an answer carries the names of is answered with those of them it runs on (asked_held).
    asked: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_NODES_ASKED, exclude_if=lambda v: not v)


class RequeueJob(BaseModel):
    """``scontrol requeue``: Slurm restarts the same job id (a job already pending is left as is)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["requeue_job"] = "requeue_job"
    job_id: SlurmJobId


class BootTimes(BaseModel):
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


class CaptureHangEvidence(BaseModel):
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
    kube: KubeJobRef | None = Field(default=None, exclude_if=_is_none)


EvidenceOutcome = Literal["captured", "tool_absent", "timed_out", "failed", "no_process"]


class NodeStacks(BaseModel):
    """One node's stack dump of the job's processes."""

    model_config = ConfigDict(extra="forbid")
    node: SlurmNodeName
    outcome: EvidenceOutcome
    # The dump (its end, when longer), or why there is none.
    text: EvidenceText = ""
    # A digest of the innermost frame of every thread of the job's processes, order-free (EKS: of the
    # pod log's last line, numbers taken out): nodes stuck in the same place share it, and a node
    # whose differs from the others' is the odd one.
    signature: str | None = Field(default=None, max_length=64, exclude_if=_is_none)


class HangEvidenceResult(BaseModel):
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
    def _redacted(self) -> HangEvidenceResult:
        """Every text redacted and within its bound in bytes wherever evidence is made or read (the
        agent's answer, the EKS reader's, the state each function reads, the ledger): the one place a
        job's words enter the record (redact.py)."""
        for node in self.nodes:
            node.text = redact_within(after_cut(printable(node.text)), NODE_EVIDENCE_BYTES, "end")
        self.job_text = redact_within(printable(self.job_text), JOB_TEXT_BYTES, "start")
        return self


class CheckAgent(BaseModel):
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
    drained: NodeNames = Field(default_factory=list)
    already_drained: NodeNames = Field(default_factory=list)
    # Of those, drained under this incident's own tag already (a command retried after a lost
    # answer): ours to give back. The others were someone else's (an admin, HyperPod's health
    # agent) and are never given back by us, nor by a human on our word.
    ours_already: NodeNames = Field(default_factory=list, exclude_if=lambda v: not v)


# Unhealthy nodes whose check output a ResumeResult carries: a 100-node storm whose replacements
# all fail must not carry 100 outputs through the state (each node's is in its drain reason, sinfo -R).
UNHEALTHY_DETAILS_KEPT = 10


class UnhealthyNode(BaseModel):
    node: SlurmNodeName
    # "failed": the check ran and said no (an exit other than 0, or none in time): the instance is
    # sick. "could_not_run": the check never ran (srun's own error, slurmctld away, a reservation
    # refused): nothing is known of the instance. Only a failed check replaces it again; the
    # default is the careful one (an agent older than this field says nothing of it).
    verdict: Literal["failed", "could_not_run"] = "could_not_run"
    # The check's exit and the end of its output ("" past UNHEALTHY_DETAILS_KEPT).
    detail: GateDetailText = Field(default="", exclude_if=lambda v: not v)


class ResumeResult(BaseModel):
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


class JobsOnNodesResult(BaseModel):
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


class ResubmitResult(BaseModel):
    old_job_id: JobId
    new_job_id: JobId | None = None  # None only in a dry run, or when another incident has not finished yet
    # Another incident resubmitted the job (its claim in the ledger, or its copy in Slurm): nothing submitted now.
    already_submitted: StrictFlag = Field(default=False, exclude_if=_is_false)
    submitted_by: str | None = Field(default=None, max_length=80, exclude_if=_is_none)
    # Slurm had requeued the old job itself (new_job_id is then the old id): nothing submitted.
    restarted_by_slurm: StrictFlag = Field(default=False, exclude_if=_is_false)
    # The old job still ran (on the replaced nodes, or hung) and was cancelled before resubmitting.
    cancelled_old: StrictFlag = Field(default=False, exclude_if=_is_false)
    # EKS: the re-created job object, <namespace>/<name> (its uid is new_job_id), for people to read.
    new_job_name: str | None = Field(default=None, max_length=128, exclude_if=_is_none)
    # The new copy's state as the orchestrator showed it right after the submission (Slurm: squeue's
    # PENDING, RUNNING...; EKS: the object's newest condition, or Created): what a human is told,
    # never "runs again" of a job that waits. None: an older agent, or unknown.
    new_job_state: str | None = Field(default=None, max_length=32, exclude_if=_is_none)
    # The node count the copy was submitted at (a shrink or a grow-back); None: the size the job ran at.
    nodes: int | None = Field(default=None, ge=1, le=MAX_JOB_NODES, exclude_if=_is_none)
    # Why nothing was stopped or submitted (a grow-back whose nodes were taken): the old copy runs on,
    # unless ``copy_ended``: it had ended without this grow-back (done, failed, stopped by a human).
    declined: ShortText | None = Field(default=None, exclude_if=_is_none)
    copy_ended: StrictFlag = Field(default=False, exclude_if=_is_false)
    # The answer to a stop only (ResubmitJob.stop_only): nothing created; ``cancelled_old`` says whether
    # it was stopped now, ``declined`` why it was not (the re-creation after the rejoin tries the stop again).
    stop_only: StrictFlag = Field(default=False, exclude_if=_is_false)


class NodeStatus(BaseModel):
    name: SlurmNodeName
    state: str = Field(max_length=32)  # idle, allocated, mixed, down, ...
    flags: list[Annotated[str, Field(max_length=32)]] = Field(default_factory=list, max_length=16)  # DRAIN, NOT_RESPONDING, ...
    reason: str = Field(default="", max_length=256)


class NodeStatesResult(BaseModel):
    nodes: list[NodeStatus] = Field(default_factory=list, max_length=MAX_JOB_NODES_CARRIED)


class JobSpecResult(BaseModel):
    job: JobSpec | None = None  # None: slurmctld no longer knows the job

    @model_validator(mode="after")
    def _nodes_carried(self) -> JobSpecResult:
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


class RequeueResult(BaseModel):
    job_id: SlurmJobId
    requeued: bool  # False: the job was already pending (requeued before), nothing done


# Slurm node state flags (scontrol's State=, e.g. DOWN+DRAIN+NOT_RESPONDING) that say slurmd is not
# there to answer. DOWN alone is not one of them: slurmctld sets a node that rebooted without
# `scontrol reboot` DOWN ("Node unexpectedly rebooted") although its slurmd has just registered.
NOT_RESPONDING_FLAGS = frozenset({"NOT_RESPONDING", "UNKNOWN", "FUTURE", "POWERED_DOWN", "POWERING_UP", "POWERING_DOWN"})


class NodeBoot(BaseModel):
    """One node as slurmctld knows it: when its host last booted (the BootTime its slurmd registered
    with; None when slurmctld has none or does not know the node) and its state."""

    model_config = ConfigDict(extra="forbid")
    name: SlurmNodeName
    boot_time: Timestamp | None = Field(default=None, exclude_if=_is_none)
    state: str = Field(default="", max_length=64, exclude_if=lambda v: v == "")  # "" : unknown to slurmctld

    @property
    def responding(self) -> bool:
        flags = set(self.state.upper().split("+"))
        return bool(self.state) and not flags & NOT_RESPONDING_FLAGS


class BootTimesResult(BaseModel):
    nodes: list[NodeBoot] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)


# A check names at most this many running jobs (the preflight probes each one's checkpoints).
MAX_JOBS_CHECKED = 50


class RunningJob(BaseModel):
    """A running job as a check reports it: enough to find its checkpoints."""

    model_config = ConfigDict(extra="forbid")
    job_id: JobId  # a Slurm job id, or on EKS the job object's uid
    name: str = Field(max_length=JOB_NAME_LIMIT)
    checkpoint_uri: str | None = Field(default=None, max_length=MAX_CHECKPOINT_URI, pattern=CHECKPOINT_URI_PATTERN)


class AgentCheckResult(BaseModel):
    agent_version: str = Field(max_length=64)
    slurm_reachable: bool
    # Why slurmctld did not answer, or what it said (its node count).
    slurm_detail: str = Field(default="", max_length=512)
    running_jobs: list[RunningJob] = Field(default_factory=list, max_length=MAX_JOBS_CHECKED)
    running_jobs_omitted: int = Field(default=0, ge=0)
    # The command types this agent executes (empty: an agent older than this field). The preflight
    # fails when the stack sends one it does not know: every recovery would escalate at that step.
    commands: list[Annotated[str, Field(max_length=32)]] = Field(default_factory=list, max_length=32)


ResultT = TypeVar(
    "ResultT",
    DrainResult,
    CordonResult,
    ResumeResult,
    JobsOnNodesResult,
    ResubmitResult,
    NodeStatesResult,
    JobSpecResult,
    RequeueResult,
    BootTimesResult,
    AgentCheckResult,
    HangEvidenceResult,
)


class CommandReply(BaseModel, Generic[ResultT]):
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
