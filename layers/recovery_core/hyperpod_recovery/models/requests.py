"""What starts a recovery: the manual/drill requests a human sends, and the internal requests
every source is translated into (domain/intake/normalize.py): RecoveryRequest for NodeRecovery,
JobRecoveryRequest for JobRecovery."""

from typing import Annotated, Any, Literal, Self

from pydantic import BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator

from hyperpod_recovery.models.common import MAX_NODES_PER_REQUEST, JobId, Model, NodeId, ShortText, StrictFlag, Timestamp
from hyperpod_recovery.models.hangs import HangVerdict
from hyperpod_recovery.models.job_events import JobFailedDetail

# job_failed: a training job failed. One name for the one signal, whichever workflow it starts:
# JobRecovery for the job, and the NodeRecovery JobRecovery starts for the nodes the job ran on.
# job_hung: a node a hang incident suspects (JobRecovery's nested NodeRecovery checks it first).
# at_risk: a node a planned swap takes out after its job's checkpoint commit (PlannedSwap's nested NodeRecovery).
TriggerSource = Literal["hyperpod_node_health", "cloudwatch_alarm", "manual", "job_failed", "job_hung", "at_risk"]
# Before 2026-11-26 JobRecovery called it "slurm_job_failed": an execution started by the older
# version (in flight through an upgrade) still validates, and reads under today's name.
LEGACY_JOB_SOURCES = {"slurm_job_failed": "job_failed"}
JobTriggerSource = Annotated[
    Literal["job_failed", "manual", "progress", "at_risk"],
    BeforeValidator(lambda value: LEGACY_JOB_SOURCES.get(value, value) if isinstance(value, str) else value),
]
TRIGGER_REASON_LIMIT = 1024
# At most one trigger per node and source: the largest request a storm can make is bounded.
MAX_TRIGGERS_PER_REQUEST = 4 * MAX_NODES_PER_REQUEST
# A request's whole size: intake's grouping keeps a storm's request below it (domain/intake/normalize.py);
# a hand-made request over it is refused, naming the size.
MAX_REQUEST_BYTES = 32 * 1024


class ManualRecoveryRequest(Model):
    """A recovery drill or manual request, started with ``aws stepfunctions start-execution``::

        {"cluster": "llm-train", "node_ids": ["i-0391f86fa0fe0d465"],
         "reason": "quarterly recovery drill", "dry_run": true}

    ``dry_run`` omitted means the stack's default. A stack deployed with DryRun=true cannot be
    made to act by a request (dry_run=false is overruled), so a drill can never arm a stack.
    """

    model_config = ConfigDict(extra="forbid")

    cluster: str = Field(min_length=1, max_length=256)
    node_ids: list[NodeId] = Field(min_length=1, max_length=MAX_NODES_PER_REQUEST)
    reason: str = Field(default="manual recovery request", min_length=1, max_length=1024)
    dry_run: StrictFlag | None = None


class Trigger(Model):
    """One kind of signal with one reason, for the nodes it named: an event, an alarm, a human's
    request. The events of a rack failure (same source, same reason, within a minute) are one
    trigger for all their nodes, so a storm's request stays small (domain/intake/normalize.py)."""

    model_config = ConfigDict(extra="forbid")

    source: TriggerSource
    node_ids: list[NodeId] = Field(min_length=1, max_length=MAX_NODES_PER_REQUEST)
    reason: str = Field(max_length=TRIGGER_REASON_LIMIT)
    # The repair the signal asks for, read from its full text before the reason was shortened.
    # "check": a hang's suspect, sent through the health gate and replaced only if it fails it.
    recommends: Literal["reboot", "replace", "check"] | None = None
    event_id: str | None = Field(default=None, max_length=128)  # the first event's
    detected_at: Timestamp  # the earliest event's
    events: int = Field(default=1, ge=1)  # how many events (duplicates included) this trigger stands for


class RecoveryRequest(Model):
    """The one internal request, whatever the source. Intake starts executions with this shape;
    Validate Request turns a ManualRecoveryRequest into it and fills incident_id/received_at."""

    model_config = ConfigDict(extra="forbid")

    cluster: str = Field(min_length=1, max_length=256)
    node_ids: list[NodeId] = Field(min_length=1, max_length=MAX_NODES_PER_REQUEST)
    triggers: list[Trigger] = Field(min_length=1, max_length=MAX_TRIGGERS_PER_REQUEST)
    dry_run: StrictFlag | None = None
    detected_at: Timestamp
    incident_id: str | None = Field(default=None, max_length=80)
    received_at: Timestamp | None = None
    # Nodes left out because their every signal was stale (node id -> why); set by Validate Request.
    stale: dict[NodeId, ShortText] = Field(default_factory=dict, max_length=MAX_NODES_PER_REQUEST)
    # A NodeRecovery nested in a JobRecovery: the job that recovery is for (its Recover Nodes merges
    # it into the start input). Left out of the state when there is none.
    nested_for_job: JobId | None = Field(default=None, exclude_if=lambda value: value is None)

    @model_validator(mode="after")
    def _fits_the_state(self) -> Self:
        size = len(self.model_dump_json())
        if size > MAX_REQUEST_BYTES:
            raise ValueError(f"the request is {size} bytes; at most {MAX_REQUEST_BYTES} travel through the workflow")
        return self

    @property
    def trigger_sources(self) -> list[str]:
        return sorted({t.source for t in self.triggers})

    def triggers_of(self, node_id: str) -> list[Trigger]:
        return [t for t in self.triggers if node_id in t.node_ids]

    @property
    def hung_job(self) -> str | None:
        """The job a hang's (or slowdown's) node recovery is for: nested in its JobRecovery, with
        the suspects the hang's classification names (every trigger ``job_hung``)."""
        hang = self.nested_for_job is not None and all(t.source == "job_hung" for t in self.triggers)
        return self.nested_for_job if hang else None

    @property
    def swapped_job(self) -> str | None:
        """The job a planned swap's node recovery moves off its node at once (its checkpoint just
        committed), nested in a PlannedSwap: every trigger ``at_risk``."""
        swap = self.nested_for_job is not None and all(t.source == "at_risk" for t in self.triggers)
        return self.nested_for_job if swap else None


def _request_kind(value: Any) -> str:
    # Intake always sends "triggers"; a human never needs to.
    if isinstance(value, dict) and "triggers" in value:
        return "recovery"
    return "manual"


StartExecutionInput = Annotated[
    Annotated[ManualRecoveryRequest, Tag("manual")] | Annotated[RecoveryRequest, Tag("recovery")],
    Discriminator(_request_kind),
]


class ManualJobRecoveryRequest(Model):
    """A human asks for one job to be recovered (or drilled), with ``aws stepfunctions start-execution``
    on the job-recovery state machine::

        {"cluster": "llm-train", "job_id": "1234", "reason": "NCCL timeout at 03:10", "dry_run": true}

    ``dry_run`` omitted means the stack's default; a dry-run stack cannot be made to act by a request.
    """

    model_config = ConfigDict(extra="forbid")

    cluster: str = Field(min_length=1, max_length=256)
    job_id: JobId
    reason: str = Field(default="manual job recovery request", min_length=1, max_length=1024)
    dry_run: StrictFlag | None = None


class JobRecoveryRequest(Model):
    """The one internal job request. Intake starts executions with this shape (``failure`` is the
    agent's event detail); Validate Job Request turns a manual request into it."""

    model_config = ConfigDict(extra="forbid")

    cluster: str = Field(min_length=1, max_length=256)
    job_id: JobId
    source: JobTriggerSource
    reason: str = Field(max_length=2048)
    event_id: str | None = Field(default=None, max_length=256)
    detected_at: Timestamp
    failure: JobFailedDetail | None = None  # None for a manual request: the workflow asks Slurm
    # A running job the hang detector found stuck (source "progress"): the verdict it acts on.
    hang: HangVerdict | None = Field(default=None, exclude_if=lambda v: v is None)
    dry_run: StrictFlag | None = None
    incident_id: str | None = Field(default=None, max_length=80)
    received_at: Timestamp | None = None


def _job_request_kind(value: Any) -> str:
    return "job" if isinstance(value, dict) and "source" in value else "manual"


JobStartInput = Annotated[
    Annotated[ManualJobRecoveryRequest, Tag("manual")] | Annotated[JobRecoveryRequest, Tag("job")],
    Discriminator(_job_request_kind),
]
