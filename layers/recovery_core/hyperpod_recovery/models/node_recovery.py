"""Payloads passed between the NodeRecovery states. Each step's result lands at its own key of
the execution state ($.lock, $.assessment, ...), so later steps and Record Outcome see what
every earlier step did, with the time it did it."""

from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hyperpod_recovery.models.commands import (
    UNHEALTHY_DETAILS_KEPT,
    BootTimesResult,
    CommandReply,
    CordonResult,
    JobsOnNodesResult,
    JobSpec,
    ResubmitResult,
    ResumeResult,
)
from hyperpod_recovery.models.common import (
    MAX_JOBS_PER_INCIDENT,
    MAX_NODES_PER_REQUEST,
    CauseText,
    GateDetailText,
    Model,
    NodeId,
    NodeLogicalId,
    ShortText,
    SlurmNodeName,
    StepResult,
    SummaryText,
    Timestamp,
    format_validation_error,
)
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest
from hyperpod_recovery.models.resume_plan import (
    MAX_ELASTIC_DECISIONS,
    MAX_GROW_BACK_CHECKS,
    MAX_SHRUNK_JOBS_PER_INCIDENT,
    CheckpointPlan,
    ElasticAction,
    ElasticDecision,
    ElasticWhy,
    EstimateSource,
    GrowBackJob,
    GrowBackState,
    GrowBackStatus,
    ResubmitFailure,
    ResumePlan,
    StepError,
    UnresumableJob,
)
from hyperpod_recovery.vocabulary import Outcome

# The jobs' plan and grow-back live in models/resume_plan.py; importable from here as well.
__all__ = [
    "MAX_ELASTIC_DECISIONS",
    "MAX_GROW_BACK_CHECKS",
    "MAX_SHRUNK_JOBS_PER_INCIDENT",
    "CheckpointPlan",
    "ElasticAction",
    "ElasticDecision",
    "ElasticWhy",
    "EstimateSource",
    "GrowBackJob",
    "GrowBackState",
    "GrowBackStatus",
    "ResubmitFailure",
    "ResumePlan",
    "StepError",
    "UnresumableJob",
]


class LockResult(StepResult):
    locked: list[NodeId] = Field(max_length=MAX_NODES_PER_REQUEST)
    # node id -> incident holding it
    held_elsewhere: dict[NodeId, Annotated[str, Field(max_length=80)]] = Field(default_factory=dict, max_length=MAX_NODES_PER_REQUEST)
    dry_run: bool = False
    proceed: bool


class NodeTarget(Model):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeId
    instance_group: str = Field(max_length=63)
    slurm_node: SlurmNodeName
    status: str = Field(max_length=32)
    logical_id: NodeLogicalId | None = Field(default=None, exclude_if=lambda v: v is None)


class SkippedNode(Model):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeId
    # held: a human's `hyperpod-recovery hold` on the node (its instance id or hostname)
    reason: Literal["controller", "login", "unknown_role", "not_found", "locked_elsewhere", "repeat_offender", "stale", "held"]
    detail: ShortText = ""


class SafetyDecision(Model):
    """Apply Safety Policy's verdict: the circuit breaker, the cluster cap, repeat offenders."""

    model_config = ConfigDict(extra="forbid")
    at: Timestamp
    capped: bool = False
    error: Literal["CircuitBreakerOpen", "ClusterCapReached"] | None = None
    reason: ShortText = ""
    in_recovery_before: int = 0  # nodes other incidents had in recovery
    limit: int = 0  # at most this many nodes in recovery at once (min of the percent and the count)
    # nodes counted against the cap until Record Outcome (in a dry run: the nodes it would count;
    # the dry-run gate, adapters/dry_run.py, writes nothing)
    reserved: list[NodeId] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)
    breaker_tripped_now: bool = False


class Assessment(StepResult):
    orchestrator: Literal["slurm", "eks"]
    node_recovery: str = Field(max_length=32)
    targets: list[NodeTarget] = Field(max_length=MAX_NODES_PER_REQUEST)
    skipped: list[SkippedNode] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)
    proceed: bool
    compute_nodes: int = 0  # the cluster's compute nodes (the cap's percent is of these)
    safety: SafetyDecision | None = None
    # The cluster publishes Cluster Events (NodeProvisioningMode Continuous): a replacement's end is announced.
    cluster_events: bool = Field(default=False, exclude_if=lambda v: not v)


Initiation = Literal["initiated", "already_in_progress", "vanished", "dry_run"]


class ReplaceFailure(Model):
    model_config = ConfigDict(extra="forbid")
    node_id: NodeId
    error_code: str = Field(max_length=64)
    message: ShortText = ""


# How a watched node was found again: its own instance back from a reboot (instance_id), or a new
# instance that carries its NodeLogicalId, its hostname (= its Slurm name), or that is the only new
# node of its instance group where only it is missing (instance_group).
IdentityMatch = Literal["instance_id", "logical_id", "hostname", "instance_group"]


class GateFailure(Model):
    """A node's repair that failed the health gate (Resume Nodes), and whether Replace Unhealthy
    Nodes replaced it again. What the check said is in the watch's ``first_gate`` (and in the
    node's drain reason); this stays small, a 100-node watch carries 100 of them."""

    model_config = ConfigDict(extra="forbid")
    instance: NodeId  # the instance that failed the check: never anyone's replacement again
    replaced_again: bool = Field(default=False, exclude_if=lambda v: not v)
    # Why it was not replaced again: a BatchReplaceClusterNodes error code for it, or the watch's
    # first_gate.refused reason when none was asked for.
    error: Annotated[str, Field(max_length=40)] = Field(default="", exclude_if=lambda v: not v)
    # The node was a hang's suspect, only checked (nothing replaced) until it failed this gate.
    checked_first: bool = Field(default=False, exclude_if=lambda v: not v)


class WatchedNode(Model):
    """One node of a replacement, from the call that started its repair to its rejoin. A field at
    its default value is left out of the state: a 100-node storm carries 100 of these, twice
    over its life, and the state must stay far below Step Functions' 256 KiB."""

    model_config = ConfigDict(extra="forbid")
    node_id: NodeId  # the instance that failed
    slurm_node: SlurmNodeName
    instance_group: str | None = Field(default=None, max_length=63, exclude_if=lambda v: v is None)
    logical_id: NodeLogicalId | None = Field(default=None, exclude_if=lambda v: v is None)
    initiation: Initiation = Field(default="initiated", exclude_if=lambda v: v == "initiated")
    status: str | None = Field(default=None, max_length=32, exclude_if=lambda v: v is None)
    replacement_node_id: NodeId | None = Field(default=None, exclude_if=lambda v: v is None)
    matched_by: IdentityMatch | None = Field(default=None, exclude_if=lambda v: v is None)
    # The replacement's name in the orchestrator when it is not the node's own (Slurm: found by
    # logical id or group; EKS: always, a Kubernetes node is named after its instance).
    replacement_slurm_node: SlurmNodeName | None = Field(default=None, exclude_if=lambda v: v is None)
    # EKS: the replacement's new name is the one to check and give back (nothing of ours is left on
    # the old one: its Node object went with its instance). On Slurm a renamed replacement is left
    # drained for a human, the old name's drain being ours.
    renamed_in_service: bool = Field(default=False, exclude_if=lambda v: not v)
    # The boot time slurmctld reported for the node after its reboot was requested: the evidence
    # that its own instance is back from the reboot.
    booted_at: Timestamp | None = Field(default=None, exclude_if=lambda v: v is None)
    rejoined: bool = Field(default=False, exclude_if=lambda v: not v)
    # The ladder's rung (domain/nodes/ladder.py): check is a hang's suspect, back at once, gated by Resume Nodes.
    action: Literal["reboot", "replace", "check"] = Field(default="replace", exclude_if=lambda v: v == "replace")
    # Set when a reboot did not bring the node back in time and it was replaced instead.
    escalated_to_replace_at: Timestamp | None = Field(default=None, exclude_if=lambda v: v is None)
    # Set when its repair failed the health gate: replaced once more, or left drained for a human.
    gate_failure: GateFailure | None = Field(default=None, exclude_if=lambda v: v is None)
    # Set when Resume Nodes put it in service before another node of the watch was replaced again:
    # the second Resume Nodes leaves it alone (it may be running jobs by then).
    resumed_at: Timestamp | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def first_action(self) -> Literal["reboot", "replace", "check"]:
        """The ladder's first rung for this node (``action`` is its current one)."""
        if self.gate_failure is not None and self.gate_failure.checked_first:
            return "check"
        return "reboot" if self.escalated_to_replace_at is not None else self.action

    @property
    def may_return_as_itself(self) -> bool:
        """Its own instance counts if it comes back from a reboot: ours, or HyperPod's own repair
        (which may be one). Never once we replaced it."""
        if self.replaced_again:
            return False
        return self.action in ("reboot", "check") or (self.initiation == "already_in_progress" and self.escalated_to_replace_at is None)

    @property
    def replaced_again(self) -> bool:
        """Its repair failed the health gate and was replaced once more: watched for that replacement."""
        return self.gate_failure is not None and self.gate_failure.replaced_again

    @property
    def left_unhealthy(self) -> bool:
        """Its repair failed the health gate and was not replaced again: drained, for a human."""
        return self.gate_failure is not None and not self.gate_failure.replaced_again

    @property
    def to_resume(self) -> bool:
        """Resume Nodes asks the orchestrator for it: back under its own name (or, on EKS, under the
        new name its replacement was born with), not in service already, and not left drained after
        a failed gate."""
        named = self.replacement_slurm_node is None or self.renamed_in_service
        return self.rejoined and named and self.resumed_at is None and not self.left_unhealthy

    @property
    def service_name(self) -> str:
        """The name Resume Nodes gives back and the health gate checks: the replacement's own on EKS."""
        return self.replacement_slurm_node if self.renamed_in_service and self.replacement_slurm_node else self.slurm_node


class FirstGate(Model):
    """The first Resume Nodes, when its health gate failed a node and Replace Unhealthy Nodes ran:
    when (its phase in the record), what the check said, and why nothing was replaced if so. The
    second Resume Nodes' answer takes the first one's place ($.resume): this keeps the first."""

    model_config = ConfigDict(extra="forbid")
    requested_at: Timestamp
    completed_at: Timestamp
    replaced_at: Timestamp
    # What the check said, on the first UNHEALTHY_DETAILS_KEPT nodes that failed it (every node's
    # output is also in its drain reason, sinfo -R).
    said: dict[SlurmNodeName, GateDetailText] = Field(default_factory=dict, max_length=UNHEALTHY_DETAILS_KEPT)
    refused: ShortText = Field(default="", exclude_if=lambda v: not v)  # no replacement was asked for: why
    checks: int = Field(default=0, ge=0)  # the watch's checks by then (the second pass counts on from it)


class RejoinWatch(StepResult):
    started_at: Timestamp
    deadline: Timestamp
    reboot_deadline: Timestamp | None = None  # rebooted nodes not back by then are replaced
    checks: int = 0
    nodes: list[WatchedNode] = Field(max_length=MAX_NODES_PER_REQUEST)
    done: bool = False
    next_wait_seconds: int = Field(ge=0)
    dry_run: bool = False
    # When the replacements are typically back (ExpectedReplacementSeconds after the call), for a
    # watch of replacements: the checks are paced by it (domain/nodes/rejoin.py next_wait_seconds).
    expected_at: Timestamp | None = Field(default=None, exclude_if=lambda v: v is None)
    # The cluster announces a replacement's end (Continuous mode: a Cluster Event wakes the wait):
    # Wait For Rejoin registers for it, and no check is made before expected_at.
    announced: bool = Field(default=False, exclude_if=lambda v: not v)
    # Nodes whose boot time Check Rejoin wants from slurmctld before it decides (Read Boot Times).
    boot_check: list[SlurmNodeName] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST, exclude_if=lambda v: not v)
    # Read Boot Times' answer, put here for the Check Rejoin that follows it, which consumes it.
    boot_reading: CommandReply[BootTimesResult] | None = Field(default=None, exclude_if=lambda v: v is None)
    boot_readings: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)  # taken so far (they are budgeted)
    # The first Resume Nodes, when its health gate failed a node and Replace Unhealthy Nodes ran:
    # set once, so a second failed gate escalates (the workflow's Check Health Gate reads it).
    first_gate: FirstGate | None = Field(default=None, exclude_if=lambda v: v is None)
    # The cluster's orchestrator: how a node is named (Slurm: its hostname; EKS: hyperpod-<instance>)
    # and what proves a node back (EKS: its Kubernetes node Ready with HyperPod's checks settled).
    orchestrator: Literal["slurm", "eks"] = Field(default="slurm", exclude_if=lambda v: v == "slurm")

    @property
    def replacing_again(self) -> bool:
        """A repair failed the health gate and was replaced once more: the watch is on its second pass."""
        return any(n.replaced_again for n in self.nodes)

    @property
    def excluded_instances(self) -> set[str]:
        """Instances that are nobody's replacement: the watched nodes' own, and every repair that
        failed the health gate (it may still show Running for a while after it is replaced)."""
        return {w.node_id for w in self.nodes} | {w.gate_failure.instance for w in self.nodes if w.gate_failure is not None}


class Replacement(StepResult):
    """Replace Nodes' result, which Check Rejoin then keeps up to date in place ($.replacement.watch):
    one record of each node from its repair call to its rejoin, never a second copy of it."""

    failed: list[ReplaceFailure] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)
    calls: int = Field(ge=0)
    dry_run: bool = False
    proceed: bool
    watch: RejoinWatch

    @property
    def replaced(self) -> list[WatchedNode]:
        """The nodes whose repair started (or was under way already): the ones watched."""
        return self.watch.nodes


CORDON_NODES = "cordon_nodes"  # the command type of Cordon Nodes' answer (models/commands.py CordonNodes)


class WorkflowState(Model):
    """The execution state as Record Outcome sees it: whatever steps ran before the end."""

    model_config = ConfigDict(extra="ignore")

    request: RecoveryRequest | None = None
    lock: LockResult | None = None
    assessment: Assessment | None = None
    # Cordon Nodes' answer: the drain and the jobs on the nodes (an execution started by an earlier
    # version drained here, and found the jobs in a step of their own, at ``jobs``).
    cordon: CommandReply[CordonResult] | None = None
    jobs: CommandReply[JobsOnNodesResult] | None = None
    replacement: Replacement | None = None
    resume: CommandReply[ResumeResult] | None = None
    checkpoints: CheckpointPlan | None = None
    # Resubmit Jobs Now (before the wait for the replacement) and Resubmit Jobs (after it).
    resubmissions_now: list[CommandReply[ResubmitResult] | ResubmitFailure] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    resubmissions: list[CommandReply[ResubmitResult] | ResubmitFailure] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    # Check Shrunk Jobs: the shrunk jobs and what became of growing them back (None: none shrank, or
    # the workflow did not get that far).
    grow_back: GrowBackState | None = None
    # Parts of the state that did not parse (a crash or a hand-made input): named in the record.
    unreadable: list[Annotated[str, Field(max_length=500)]] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _jobs_from_the_cordon(self) -> Self:
        """The jobs Cordon Nodes found, where every reader looks for them (``jobs``): the same answer."""
        if self.jobs is None and self.cordon is not None and self.cordon.type == CORDON_NODES:
            found = JobsOnNodesResult(jobs=self.cordon.result.jobs, omitted=self.cordon.result.omitted, count=self.cordon.result.count)
            self.jobs = CommandReply[JobsOnNodesResult](**{**self.cordon.model_dump(exclude={"result"}), "result": found})
        return self

    @field_validator("grow_back", mode="before")
    @classmethod
    def _grow_back_begun(cls, value: Any) -> Any:
        # Start Growing Back's placeholder ({"checks": 0}, maybe with Check Shrunk Jobs' error): no check answered yet.
        return value if not isinstance(value, dict) or "at" in value else None

    @property
    def jobs_found_by_cordon(self) -> bool:
        """The jobs came in Cordon Nodes' answer (this version), not from a step of their own."""
        return self.jobs is not None and self.jobs.type == CORDON_NODES

    @classmethod
    def lenient(cls, raw: Any) -> Self:
        """The state, key by key: a part that does not parse is left out and named, so recording an
        incident's end never fails because of what the execution carried."""
        return lenient_state(cls, raw)

    @property
    def rejoin(self) -> RejoinWatch | None:
        """The rejoin watch as Check Rejoin last left it."""
        return self.replacement.watch if self.replacement is not None else None

    @property
    def last_resume(self) -> CommandReply[ResumeResult] | None:
        """Resume Nodes' answer for the nodes as they are now: None when it is the first one and a
        node it found unhealthy was replaced since (its verdicts are in the watch, domain/nodes/health_gate.py)."""
        gate = self.rejoin.first_gate if self.rejoin is not None else None
        if self.resume is None or (gate is not None and self.resume.requested_at <= gate.requested_at):
            return None
        return self.resume

    @property
    def replies(self) -> list[CommandReply[ResubmitResult]]:
        """The resubmissions' answers (a stop only's is none: ``early_stop_replies``)."""
        return [r for r in (*self.resubmissions_now, *self.resubmissions) if isinstance(r, CommandReply) and not r.result.stop_only]

    @property
    def early_stop_replies(self) -> list[CommandReply[ResubmitResult]]:
        """Resubmit Jobs Now's stops only (CheckpointPlan.early_stops): the jobs re-created after the rejoin."""
        return [r for r in self.resubmissions_now if isinstance(r, CommandReply) and r.result.stop_only]

    @property
    def resubmit_failures(self) -> list[ResubmitFailure]:
        """The jobs whose resubmission failed. A job stopped at once and re-created after the rejoin is
        told by its later try, which stops it again first: its stop's failure stands only without one."""
        later = {r.job_id if isinstance(r, ResubmitFailure) else r.result.old_job_id for r in self.resubmissions}
        now = [r for r in self.resubmissions_now if isinstance(r, ResubmitFailure) and r.job_id not in later]
        return [*now, *(r for r in self.resubmissions if isinstance(r, ResubmitFailure))]

    @property
    def grow_backs(self) -> list[GrowBackJob]:
        """Every shrunk job's grow-back, the last answer folded in."""
        return self.grow_back.folded().jobs if self.grow_back is not None else []

    @property
    def grow_back_replies(self) -> list[CommandReply[ResubmitResult]]:
        """The full-size copies' submissions (old_job_id is the shrunk copy)."""
        return [job.reply for job in self.grow_backs if job.reply is not None]

    @property
    def dry_run(self) -> bool:
        """A dry run, by its request; when the request did not parse, by what its steps said they
        did (a dry run's lock, drain, replacement, resume and resubmissions are labelled so): the
        Record step must not act for real on a drill whose request it cannot read."""
        if self.request is not None:
            return bool(self.request.dry_run)
        results = [self.lock, self.cordon, self.replacement, self.resume, *self.replies]
        return any(result.dry_run for result in results if result is not None)


ModelT = TypeVar("ModelT", bound=BaseModel)


def lenient_state(model: type[ModelT], raw: Any) -> ModelT:
    if not isinstance(raw, dict):
        return model.model_validate({"unreadable": [f"state: not an object ({type(raw).__name__})"]})
    kept: dict[str, Any] = {}
    unreadable: list[str] = []
    for name in model.model_fields:
        if name in raw and name != "unreadable":
            try:
                model.model_validate({name: raw[name]})
                kept[name] = raw[name]
            except ValidationError as exc:
                unreadable.append(f"{name}: {format_validation_error(exc)}"[:500])
    return model.model_validate({**kept, "unreadable": unreadable})


class SafetyState(Model):
    """What Report Safety State publishes: the breaker and how many nodes are in recovery now."""

    cluster: str
    breaker_open: bool
    breaker_reason: str | None = None
    breaker_changed_at: Timestamp | None = None
    nodes_in_recovery: int


class OutcomeResult(StepResult):
    incident_id: str = Field(max_length=80)
    outcome: Outcome
    error: str | None = Field(default=None, max_length=256)
    cause: CauseText | None = None
    summary: SummaryText
    # phase durations (metric name -> seconds)
    durations: dict[Annotated[str, Field(max_length=64)], float] = Field(default_factory=dict, max_length=20)


# --- step inputs: what each Lambda receives (the ASL builds these from the state) -------------
class StepInput(Model):
    model_config = ConfigDict(extra="forbid")
    execution_name: str = Field(min_length=1, max_length=80)


class ValidateRequestInput(StepInput):
    request: Any  # whatever start-execution was given; Validate Request says what is wrong with it


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


class ApplySafetyPolicyInput(StepInput):
    request: RecoveryRequest
    assessment: Assessment


class ReplaceNodesInput(StepInput):
    request: RecoveryRequest
    assessment: Assessment
    # The workflow's Wait For Rejoin can be answered by a Cluster Event, so a long first wait is
    # safe. An execution started before it could (a plain Wait state) leaves it out: it polls.
    announced_wait: bool = False


class CheckRejoinInput(StepInput):
    request: RecoveryRequest
    rejoin: RejoinWatch


class ResumeNodesInput(ControllerStepInput):
    rejoin: RejoinWatch


class ReplaceUnhealthyNodesInput(StepInput):
    request: RecoveryRequest
    rejoin: RejoinWatch
    resume: CommandReply[ResumeResult]


class ReadBootTimesInput(ControllerStepInput):
    rejoin: RejoinWatch


class FindNewestCheckpointInput(StepInput):
    jobs: list[JobSpec] = Field(max_length=MAX_JOBS_PER_INCIDENT)
    omitted: int = Field(default=0, ge=0)  # jobs the agent counted past MAX_JOBS_PER_INCIDENT
    # The workflow can resubmit before the wait for the replacement (NodeRecovery's Resubmit Jobs
    # Now). An execution started before that state existed, or JobRecovery, leaves it out: every
    # job is then planned for the workflow's one resubmission point, whatever the policy says.
    resume_now_allowed: bool = False
    # Shrink-and-continue (NodeRecovery): the nodes this incident takes out of service (Assess Nodes'
    # targets). A job's own count of lost nodes comes from the agent (JobSpec.lost_nodes); without it,
    # all of them. Their instance groups are whose measured replacements decide.
    targets: list[NodeTarget] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)
    # NodeRecovery: each node's repair as Replace Nodes started it (a reboot, a replacement, a check).
    repairs: list[WatchedNode] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)
    # NodeRecovery: its request, which names a hang's job (RecoveryRequest.hung_job). JobRecovery leaves
    # it out: it resubmits at one point only, where a hang's job and any other are planned alike.
    request: RecoveryRequest | None = None

    @property
    def hung_job(self) -> str | None:
        """The job whose hang (or slowdown) this incident recovers, resubmitted at once."""
        return self.request.hung_job if self.request is not None else None

    @property
    def swapped_job(self) -> str | None:
        """The job a planned swap moves off its node, resubmitted at once (and, elastic, free to shrink)."""
        return self.request.swapped_job if self.request is not None else None

    @property
    def rebooting(self) -> bool:
        """Some node of the incident is being rebooted (its own instance comes back)."""
        return any(r.action == "reboot" for r in self.repairs)

    @property
    def lost_nodes(self) -> int:
        return max(1, len(self.targets))

    @property
    def instance_groups(self) -> list[str]:
        return sorted({t.instance_group for t in self.targets})


class WaitForRejoinInput(StepInput):
    """Wait For Rejoin: register the task token where a Cluster Event finds it."""

    task_token: str = Field(min_length=1)
    request: RecoveryRequest
    rejoin: RejoinWatch


class CheckShrunkJobsInput(StepInput):
    request: RecoveryRequest
    # Resubmit Jobs Now's answers and the plans they were sent for (which shrank), Resume Nodes' last
    # answer (a replacement that failed the health gate is no node to grow onto), and the loop's state.
    replies: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    plans: list[ResumePlan] = Field(default_factory=list, max_length=MAX_JOBS_PER_INCIDENT)
    resume: dict[str, Any] | None = None
    previous: GrowBackState | None = None

    @field_validator("previous", mode="before")
    @classmethod
    def _first_pass(cls, value: Any) -> Any:
        return value if isinstance(value, dict) and "at" in value else None  # (Start Growing Back's placeholder)


class ResubmitJobInput(StepInput):
    """Shared by NodeRecovery (a job on a replaced node) and JobRecovery (the failed job)."""

    task_token: str = Field(min_length=1)
    request: RecoveryRequest | JobRecoveryRequest
    plan: ResumePlan


class RecordOutcomeInput(StepInput):
    disposition: Literal["completed", "duplicate", "rejected", "escalated", "stale"]
    state: WorkflowState = Field(default_factory=WorkflowState)
    error: StepError | None = None

    @field_validator("state", mode="before")
    @classmethod
    def _state_never_blocks_the_record(cls, value: Any) -> Any:
        return value if isinstance(value, WorkflowState) else WorkflowState.lenient(value)
