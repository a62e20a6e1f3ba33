"""What starts a recovery: the manual/drill requests a human sends, and the internal requests
every source is translated into (domain/normalize.py): RecoveryRequest for NodeRecovery,
JobRecoveryRequest for JobRecovery."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from hyperpod_recovery.models.common import NodeId, SlurmJobId, Timestamp
from hyperpod_recovery.models.job_events import JobFailedDetail

# job_failed: NodeRecovery started by JobRecovery for the nodes a failed job ran on.
TriggerSource = Literal["hyperpod_node_health", "cloudwatch_alarm", "manual", "job_failed"]
JobTriggerSource = Literal["slurm_job_failed", "manual"]
MAX_NODES_PER_REQUEST = 100


class ManualRecoveryRequest(BaseModel):
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
    dry_run: bool | None = None


class Trigger(BaseModel):
    """One outside signal that contributed to a request (an event, an alarm, a human)."""

    model_config = ConfigDict(extra="forbid")

    source: TriggerSource
    node_id: NodeId
    reason: str = Field(max_length=2048)
    event_id: str | None = Field(default=None, max_length=256)
    detected_at: Timestamp


class RecoveryRequest(BaseModel):
    """The one internal request, whatever the source. Intake starts executions with this shape;
    Validate Request turns a ManualRecoveryRequest into it and fills incident_id/received_at."""

    model_config = ConfigDict(extra="forbid")

    cluster: str = Field(min_length=1, max_length=256)
    node_ids: list[NodeId] = Field(min_length=1, max_length=MAX_NODES_PER_REQUEST)
    triggers: list[Trigger] = Field(min_length=1, max_length=10 * MAX_NODES_PER_REQUEST)
    dry_run: bool | None = None
    detected_at: Timestamp
    incident_id: str | None = Field(default=None, max_length=80)
    received_at: Timestamp | None = None

    @property
    def trigger_sources(self) -> list[str]:
        return sorted({t.source for t in self.triggers})


def _request_kind(value: Any) -> str:
    # Intake always sends "triggers"; a human never needs to.
    if isinstance(value, dict) and "triggers" in value:
        return "recovery"
    return "manual"


StartExecutionInput = Annotated[
    Annotated[ManualRecoveryRequest, Tag("manual")] | Annotated[RecoveryRequest, Tag("recovery")],
    Discriminator(_request_kind),
]


class ManualJobRecoveryRequest(BaseModel):
    """A human asks for one job to be recovered (or drilled), with ``aws stepfunctions start-execution``
    on the job-recovery state machine::

        {"cluster": "llm-train", "job_id": "1234", "reason": "NCCL timeout at 03:10", "dry_run": true}

    ``dry_run`` omitted means the stack's default; a dry-run stack cannot be made to act by a request.
    """

    model_config = ConfigDict(extra="forbid")

    cluster: str = Field(min_length=1, max_length=256)
    job_id: SlurmJobId
    reason: str = Field(default="manual job recovery request", min_length=1, max_length=1024)
    dry_run: bool | None = None


class JobRecoveryRequest(BaseModel):
    """The one internal job request. Intake starts executions with this shape (``failure`` is the
    agent's event detail); Validate Job Request turns a manual request into it."""

    model_config = ConfigDict(extra="forbid")

    cluster: str = Field(min_length=1, max_length=256)
    job_id: SlurmJobId
    source: JobTriggerSource
    reason: str = Field(max_length=2048)
    event_id: str | None = Field(default=None, max_length=256)
    detected_at: Timestamp
    failure: JobFailedDetail | None = None  # None for a manual request: the workflow asks Slurm
    dry_run: bool | None = None
    incident_id: str | None = Field(default=None, max_length=80)
    received_at: Timestamp | None = None


def _job_request_kind(value: Any) -> str:
    return "job" if isinstance(value, dict) and "source" in value else "manual"


JobStartInput = Annotated[
    Annotated[ManualJobRecoveryRequest, Tag("manual")] | Annotated[JobRecoveryRequest, Tag("job")],
    Discriminator(_job_request_kind),
]
