"""The one schema of each command's ``--json`` output (docs/cli-json.md prints them): what a script
may rely on. Each is a pydantic model over the printed document; tests/integration/test_cli_json.py
validates every command's output against its schema and fails on a command with --json and none here.
The records a document carries (an incident, a lock, a verdict) are the ledger's own models."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from hyperpod_recovery.models.at_risk import AtRiskRecord
from hyperpod_recovery.models.commands import CheckpointRef
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.models.manifest import CheckpointLayout
from hyperpod_recovery.models.records import BreakerState, IncidentRecord, NodeHold, NodeLock
from hyperpod_recovery_cli.planner.model import GoodputPlan
from hyperpod_recovery_cli.preflight_checks import Status


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LatestCheckpoint(_Document):
    """``checkpoint latest --json``: the discovery; ``checkpoint`` null when nothing verified (exit 1)."""

    checkpoint: CheckpointRef | None
    rejected: list[str]
    found_by: str
    committed_at: datetime | None


class VerifiedStep(_Document):
    """``checkpoint verify --json``: one step's verdict (``layout`` only for a v1.1 manifest)."""

    uri: str
    step: int
    verified: bool
    framework: str | None
    reason: str
    job: str | None
    layout: CheckpointLayout | None = None


class RunningIncident(_Document):
    """An incident still running: an execution with no record yet."""

    incident_id: str
    state: Literal["running"]
    workflow: Literal["node", "job"]
    started_at: datetime
    nodes: list[str]
    job: str | None = None


class RecordedIncident(IncidentRecord):
    """An incident's record as the ledger keeps it."""

    state: Literal["recorded"]


Incident = Annotated[RunningIncident | RecordedIncident, Field(discriminator="state")]


class Incidents(RootModel[list[Incident]]):
    """``incidents --json``: running and recorded incidents in one list, each with ``incident_id`` and ``state``."""


class OneIncident(RootModel[Incident]):
    """``incidents show ID --json``: the record, or the running execution when none is recorded yet."""


class CapPlace(_Document):
    incident: str
    until: datetime


class Locks(_Document):
    """``locks --json``."""

    cluster: str
    locks: list[NodeLock]
    cap_places: dict[str, CapPlace]
    holds: list[NodeHold]


class ListedVerdict(RecordedVerdict):
    id: str


class RuleCounts(_Document):
    mode: str
    verdicts: int
    confirmed: int
    rejected: int
    open: int
    precision: float | None
    meets_enforce_bar: bool


class Verdicts(_Document):
    """``verdicts list --json``."""

    since: datetime
    verdicts: list[ListedVerdict]
    rules: dict[str, RuleCounts]


class SignalCounts(_Document):
    """One at-risk signal's outcomes in the window, and its measures (None until it has any)."""

    mode: Literal["enforce", "observe", "off"]
    verdicts: int
    failed: int
    not_failed: int
    pending: int
    swapped: int
    precision: float | None
    recall: float | None
    failures_caught: int
    failures: int


class AtRiskVerdicts(_Document):
    """``verdicts at-risk --json``."""

    since: datetime
    node_failures: int
    verdicts: list[AtRiskRecord]
    signals: dict[str, SignalCounts]


class PreflightCheck(_Document):
    check: str
    status: Status
    detail: str
    fix: str


class Preflight(_Document):
    """``preflight --json``."""

    stack: str
    cluster: str
    ready: bool
    checks: list[PreflightCheck]


SCHEMAS: dict[str, type[BaseModel]] = {
    "checkpoint latest": LatestCheckpoint,
    "checkpoint verify": VerifiedStep,
    "breaker status": BreakerState,
    "preflight": Preflight,
    "incidents": Incidents,
    "incidents show": OneIncident,
    "locks": Locks,
    "verdicts list": Verdicts,
    "verdicts at-risk": AtRiskVerdicts,
    "goodput": GoodputPlan,
}


def validate(command: str, printed: str) -> Any:
    """The document ``command --json`` printed, checked against its schema (ValidationError if not)."""
    return SCHEMAS[command].model_validate(json.loads(printed))
