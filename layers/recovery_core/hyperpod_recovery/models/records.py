"""What the ledger (DynamoDB) keeps: one incident record per execution, node locks, and one
resubmission claim per job. The incident record is the audit trail an operator reads."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, StringConstraints

from hyperpod_recovery.models.commands import MAX_CHECKPOINT_URI
from hyperpod_recovery.models.common import MAX_NODES_PER_REQUEST, LongText, Model, ShortText, Timestamp
from hyperpod_recovery.models.node_recovery import MAX_SHRUNK_JOBS_PER_INCIDENT
from hyperpod_recovery.vocabulary import PHASES, Outcome, PhaseName


class TimelineEntry(Model):
    model_config = ConfigDict(extra="forbid")
    at: Timestamp
    event: str  # "event received", "nodes cordoned", ...
    detail: str = ""


def _known_phase(name: Any) -> Any:
    """A record stored by another version may name a phase this one does not know (a newer one,
    rolled back): it reads as ``other`` rather than making the incident unreadable. Code that writes
    a phase is held to the vocabulary by mypy."""
    return name if not isinstance(name, str) or name in PHASES else "other"


class Phase(Model):
    model_config = ConfigDict(extra="forbid")
    name: Annotated[PhaseName, BeforeValidator(_known_phase)]
    start: Timestamp
    end: Timestamp


class Resubmission(Model):
    model_config = ConfigDict(extra="forbid")
    job: str
    job_name: str
    new_job_id: str | None
    checkpoint_step: int
    checkpoint_uri: str
    new_job_name: str | None = Field(default=None, exclude_if=lambda v: v is None)  # EKS: <namespace>/<name> of the new object
    # An elastic job's: the size the copy was submitted at and the size the job ran at (a shrink when
    # smaller; a grow-back of a shrunk copy when equal). None: submitted at the size it ran at.
    nodes: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    full_nodes: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)


# What became of a job the incident was about. resubmitted: this incident (or the node recovery it
# started) made the copy; resubmitted_before: another incident (or an earlier run) had; requeued_by_slurm:
# Slurm restarts the same job itself; restarted_by_owner: someone else restarts it (auto-resume, a
# training operator); would_resubmit / would_not_resubmit: a dry run's (``reason`` says why not);
# copy_unknown: a resubmission was asked for and its answer is lost (a copy may exist);
# not_resubmitted: no copy, and ``reason`` says why.
JobFateKind = Literal[
    "resubmitted",
    "resubmitted_before",
    "requeued_by_slurm",
    "restarted_by_owner",
    "would_resubmit",
    "would_not_resubmit",
    "copy_unknown",
    "not_resubmitted",
    # A hang incident that did nothing to the job: it runs on as it was (its hang cleared by itself,
    # or its submission never opted in), or it ended by itself (its end, a failure, is recovered as one).
    "left_running",
    "ended_by_itself",
]
# Fates with a live copy of the job (or one that may be live): a human must never start another.
LIVE_COPY_FATES: frozenset[str] = frozenset(
    {"resubmitted", "resubmitted_before", "requeued_by_slurm", "restarted_by_owner", "copy_unknown", "left_running"}
)


class ShrunkCopy(Model):
    """The copy of a job that ran on fewer nodes while its replacement came: which, on how many, from
    which step. Once grown back, the fate's copy is the full-size one and this is what ran between."""

    model_config = ConfigDict(extra="forbid")
    copy_id: str = Field(max_length=64)
    copy_label: str = Field(default="", max_length=200)  # "job 1002", "PyTorchJob kubeflow/llama-r1"
    nodes: int = Field(ge=1)
    from_step: int = Field(ge=0)
    grown_back: bool = Field(default=False, exclude_if=lambda v: not v)
    grown_to: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)  # the full-size copy's nodes
    # Another incident resubmitted the shrunk copy meanwhile (a fault on it): that incident says where it runs.
    taken_by: str | None = Field(default=None, max_length=80, exclude_if=lambda v: v is None)
    # It ended without the grow-back (done, failed, stopped by a human): not started again.
    ended: bool = Field(default=False, exclude_if=lambda v: not v)


class JobFate(Model):
    """One job's end of the incident, as the human's next step needs it: its live copy (id or name,
    and its state when last seen) or why there is none. Messages are rendered from these."""

    model_config = ConfigDict(extra="forbid")
    job: str = Field(max_length=64)  # Slurm job id, or the EKS job object's uid
    name: str = Field(default="", max_length=256)  # Slurm: the job's name (its first 256 characters); EKS: the object's name
    kind: str | None = Field(default=None, max_length=63, exclude_if=lambda v: v is None)  # EKS: PyTorchJob, ...
    namespace: str | None = Field(default=None, max_length=63, exclude_if=lambda v: v is None)  # EKS
    fate: JobFateKind
    copy_id: str | None = Field(default=None, max_length=64)  # the copy: a Slurm job id, or the new object's uid
    copy_name: str | None = Field(default=None, max_length=253, exclude_if=lambda v: v is None)  # EKS: the new object's name
    copy_state: str | None = Field(default=None, max_length=64, exclude_if=lambda v: v is None)  # as last seen
    copy_seen_at: Timestamp | None = Field(default=None, exclude_if=lambda v: v is None)
    by: str | None = Field(default=None, max_length=80, exclude_if=lambda v: v is None)  # the incident that made it
    checkpoint_step: int | None = Field(default=None, exclude_if=lambda v: v is None)
    checkpoint_uri: str | None = Field(default=None, max_length=288, exclude_if=lambda v: v is None)  # (as CheckpointRef's)
    checkpoint_prefix: str | None = Field(default=None, max_length=256, exclude_if=lambda v: v is None)  # where its steps are
    reason: ShortText = ""  # why not resubmitted, or who restarts it
    # Planned for resubmission with no answer in the state (the Map that asked failed as a whole):
    # with this incident's claim on it in the ledger, the resubmission may have run.
    unanswered: bool = Field(default=False, exclude_if=lambda v: not v)
    # Shrink-and-continue: the size it ran at, what was decided for it and why ("runs on 15 of 16
    # node(s): replacement expected in 10 min, growing back costs ~5 min", "waits for its
    # replacement: ..."), the copy that ran shrunk, and what became of growing it back.
    full_nodes: int | None = Field(default=None, ge=1, exclude_if=lambda v: v is None)
    elastic: ShortText = Field(default="", exclude_if=lambda v: not v)
    shrunk: ShrunkCopy | None = Field(default=None, exclude_if=lambda v: v is None)
    grow_back: ShortText = Field(default="", exclude_if=lambda v: not v)

    @property
    def live_copy(self) -> bool:
        return self.fate in LIVE_COPY_FATES


# What became of a node the incident was about. in_service: back in service (under ``replacement_node``
# when it came back under another name); replacing: its repair was started and had not come back;
# out_of_service: left out of service, ``detail`` says why; not_ours: held out of service by someone
# else, whom we never override; unknown: the recovery ended half-way (Reconcile Execution) and may
# have left it drained; skipped: never touched (a controller, a repeat offender, another incident's
# node); untouched: nothing was done to it (a dry run, a cap).
NodeFateKind = Literal["in_service", "replacing", "out_of_service", "not_ours", "unknown", "skipped", "untouched"]


class NodeFate(Model):
    model_config = ConfigDict(extra="forbid")
    node: str = Field(max_length=253)  # the orchestrator's name: Slurm NodeName, or the Kubernetes node
    instance: str | None = Field(default=None, max_length=32, exclude_if=lambda v: v is None)
    fate: NodeFateKind
    replacement: str | None = Field(default=None, max_length=32, exclude_if=lambda v: v is None)  # its instance
    replacement_node: str | None = Field(default=None, max_length=253, exclude_if=lambda v: v is None)
    replacement_status: str | None = Field(default=None, max_length=32, exclude_if=lambda v: v is None)
    detail: ShortText = ""
    # This incident drained (cordoned) it and still holds it so: the only nodes a message ever tells a
    # human to give back. A drain someone else made (an admin, HyperPod's health agent) is never ours.
    held: bool = Field(default=False, exclude_if=lambda v: not v)
    # This incident changed it: drained it, started its reboot or replacement, or gave it back.
    acted: bool = Field(default=False, exclude_if=lambda v: not v)
    # HyperPod refused to start its replacement (ReplaceNotInitiated names these instances).
    replace_refused: bool = Field(default=False, exclude_if=lambda v: not v)


class IncidentRecord(Model):
    model_config = ConfigDict(extra="forbid")

    incident_id: str
    cluster: str
    workflow: Literal["node", "job"] = "node"
    job_id: str | None = None  # JobRecovery: the failed job
    outcome: Outcome
    dry_run: bool
    trigger: list[str]
    nodes: list[str]
    hostnames: list[str] = Field(default_factory=list)  # the nodes' Slurm names, what a human knows them by
    error: str | None = None
    cause: str | None = None
    summary: str
    detected_at: Timestamp | None = None
    recorded_at: Timestamp
    timeline: list[TimelineEntry] = Field(default_factory=list)
    phases: list[Phase] = Field(default_factory=list)
    resubmissions: list[Resubmission] = Field(default_factory=list)
    jobs: list[dict[str, Any]] = Field(default_factory=list)  # captured job specs, kept for a human
    agent_seconds: float = 0.0  # time spent waiting on the controller agent
    # The facts every message is rendered from (domain/record/fates.py): which orchestrator's commands a
    # human runs, what became of each job and each node.
    orchestrator: Literal["slurm", "eks"] = "slurm"
    job_fates: list[JobFate] = Field(default_factory=list)
    node_fates: list[NodeFate] = Field(default_factory=list)
    jobs_omitted: int = Field(default=0, ge=0)  # jobs past what one incident carries: counted, not named
    # A job incident's nodes past what a record names (domain/job_incident.MAX_RECORD_JOB_NODES): counted.
    nodes_omitted: int = Field(default=0, ge=0)
    # When Reconcile Execution's notification went out, in records an earlier version wrote: read
    # (such an end is not notified again); the notification is now an effect of the incident
    # (Effect, steps/record_outcome.py NOTIFICATION).
    notified_at: Timestamp | None = None


class Holdings(Model):
    """What an incident holds in the ledger right now: node locks, places under the cluster cap,
    resubmission claims (and the hostnames it was about to act on, for the breaker's log). Every
    end of the incident (Record Outcome, or Reconcile Execution after an abort, timeout or crash)
    settles them."""

    incident: str
    cluster: str
    locks: set[str] = Field(default_factory=set)
    reserved: set[str] = Field(default_factory=set)
    claims: set[str] = Field(default_factory=set)
    hostnames: set[str] = Field(default_factory=set)

    @property
    def empty(self) -> bool:
        return not (self.locks or self.reserved or self.claims)


class LockOutcome(Model):
    acquired: list[str]
    held_elsewhere: dict[str, str]


class NodeHold(Model):
    """A human's opt-out for one node (``hyperpod-recovery hold``): the pipeline leaves the node
    alone (Apply Safety Policy skips it, reason ``held``) until ``hyperpod-recovery unhold``.
    ``node`` is what the operator named: an instance id holds that instance, a hostname holds
    whichever instance is that host (a replacement keeps the hostname)."""

    model_config = ConfigDict(extra="forbid")
    node: str
    by: ShortText
    reason: ShortText
    at: Timestamp


# The lock of a logical node: one recovery per hostname, whatever its instance id (Apply Safety Policy).
HOST_LOCK_PREFIX = "host:"


class NodeLock(Model):
    """A node lock as the ledger holds it: the incident that holds it and until when. ``node`` is
    an instance id, or ``host:<hostname>`` for the lock of a logical node (Apply Safety Policy)."""

    model_config = ConfigDict(extra="forbid")
    node: str
    incident: str
    acquired_at: Timestamp | None = None
    expires_at: Timestamp


class AuditEntry(Model):
    """One change a human made through the CLI (a lock released, a hold, a stop, a breaker reset, a verdict reviewed,
    a stack armed or deployed, a live drill started):
    who, why, what, when. Kept in the cluster's partition, an item each."""

    model_config = ConfigDict(extra="forbid")
    at: Timestamp
    by: ShortText
    action: Literal[
        "locks release", "hold", "unhold", "stop", "breaker reset", "verdict confirm", "verdict reject", "arm", "deploy", "drill live"
    ]
    target: ShortText
    reason: ShortText
    detail: ShortText = ""


class ResubmissionClaim(Model):
    """Who resubmits a job. One claim per (cluster, job): a second incident touching the same job
    (another node of it failing minutes later) finds the claim and does not restart it again."""

    job_id: str
    incident_id: str
    claimed: bool  # True when this incident holds the claim
    new_job_id: str | None = None
    # When the holder took it, and until when an open claim holds (None once completed: a
    # completed claim holds until its item's TTL). Unknown (None) on an open claim counts as holding.
    claimed_at: Timestamp | None = None
    open_until: Timestamp | None = None

    @property
    def completed(self) -> bool:
        return self.new_job_id is not None

    def in_force(self, now: datetime) -> bool:
        """Whether the claim still keeps every other incident from restarting the job: a completed
        one always (the job was resubmitted), an open one until it expires (its incident died without
        settling it; Resubmit Job takes an expired one over, ledger.claim_resubmission)."""
        # (in whole seconds, as the ledger's condition compares them: expired once claim_expires_at < now)
        return self.completed or self.open_until is None or int(now.timestamp()) <= int(self.open_until.timestamp())


class MeasuredRestart(Model):
    """One restart of a job, measured from its own checkpoints' commit times, by the job's checkpoint
    location (the same for every copy of it, on Slurm and EKS, where its name is not)."""

    model_config = ConfigDict(extra="forbid")
    checkpoint_uri: str = Field(max_length=MAX_CHECKPOINT_URI)
    seconds: int = Field(ge=0)


class RecoveryLogEntry(Model):
    """One recovery that acted on nodes, in the cluster's log (breaker and repeat-offender windows)."""

    model_config = ConfigDict(extra="forbid")
    incident: str
    at: Timestamp
    hostnames: list[str]  # Slurm node names: the logical node, the same across replacements
    outcome: Outcome
    # Measured: from the replacement call to every node back and through the health gate, per instance
    # group (one instance type), for shrink-or-wait (domain/elastic/estimates.py). None: not a replacement.
    replaced_seconds: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    instance_groups: list[Annotated[str, Field(max_length=63)]] = Field(default_factory=list, max_length=20, exclude_if=lambda v: not v)
    # Measured: what restarting each shrunk job cost (its copy's submission to training again), by its
    # checkpoint location, for the grow-back cost of that job's next shrink-or-wait.
    restarts: list[MeasuredRestart] = Field(default_factory=list, max_length=MAX_SHRUNK_JOBS_PER_INCIDENT, exclude_if=lambda v: not v)


BREAKER_HISTORY = 50  # changes kept in the breaker's history, newest last
# One change in the history: its time, state, who (ShortText) and why (LongText), cut like them.
HistoryEntry = Annotated[str, BeforeValidator(lambda v: v[:2400] if isinstance(v, str) else v), StringConstraints(max_length=2400)]


class BreakerState(Model):
    """The cluster's circuit breaker. Opened by the pipeline, closed only by a human (the CLI).

    Its texts are cut to their bounds (a human's reason is free text), so the item stays far below
    DynamoDB's 400 KB whatever is written into it (tests/contract/test_ledger_item_sizes.py).
    ``version`` is the item's version when it was read (not part of the stored state): a change is
    written only over the state it was decided on (DynamoLedger.save_breaker)."""

    model_config = ConfigDict(extra="forbid")
    state: Literal["closed", "open"] = "closed"
    reason: LongText = ""
    changed_at: Timestamp | None = None
    changed_by: ShortText = ""  # the incident that opened it, or the human who reset it
    history: list[HistoryEntry] = Field(default_factory=list)  # "<time> <state> by <who>: <reason>", newest last
    version: int = Field(default=0, ge=0, exclude=True)

    def changed_to(self, state: Literal["closed", "open"], *, reason: str, by: str, at: datetime) -> "BreakerState":
        """The breaker after a change, with the change kept in its (bounded) history."""
        entry = f"{at.isoformat()} {state} by {by}: {reason}"
        return BreakerState(
            state=state,
            reason=reason,
            changed_at=at,
            changed_by=by,
            history=[*self.history, entry][-BREAKER_HISTORY:],
            version=self.version,
        )


class RejoinWait(Model):
    """A recovery waiting for its replaced nodes (Wait For Rejoin): the task token a Cluster Event
    about one of them completes (Notice Cluster Event), until the wait's own timeout."""

    model_config = ConfigDict(extra="forbid")

    execution: str = Field(min_length=1, max_length=80)
    task_token: str = Field(min_length=1, max_length=8192)
    until: datetime
    logical_ids: list[str] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)
    instance_ids: list[str] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)
    instance_groups: list[str] = Field(default_factory=list, max_length=MAX_NODES_PER_REQUEST)


# The incident's page, among its effects in the ledger (Record Outcome and Reconcile Execution send it).
NOTIFICATION = "notification"


class Effect(Model):
    """An outside effect of an incident that must happen once however often its step runs (the
    incident's notification): begun before it is made, done after (DynamoLedger.begin_effect).
    ``result`` is what the step that made it answered, so a rerun answers the same."""

    model_config = ConfigDict(extra="forbid")
    incident: str
    name: str
    started_at: Timestamp
    done_at: Timestamp | None = None
    result: str | None = None

    @property
    def done(self) -> bool:
        return self.done_at is not None
