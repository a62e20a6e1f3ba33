"""How an incident ends, for both workflows: the outcome, the summary, the incident record with its
timeline and phases, and the phase durations the metrics publish.

One spine, one small table per workflow. What every incident shares is decided here: how a step
that failed ends it, that a dry run is a dry run, which resubmissions count as this incident's,
how long it waited on the orchestrator, how the record is put together. What differs per workflow
(what a completed run decided, the words of its summary, its own timeline events and phases) is
its table: ``NODE_INCIDENT`` in domain/record/node_incident.py (NodeRecovery) and ``JOB_INCIDENT`` in
domain/record/job_incident.py (JobRecovery). Record Outcome (steps/record_outcome.py) is the one step that
records either; Reconcile Execution (domain/record/reconcile.py) records the ends no step saw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

from hyperpod_recovery.domain.record.causes import error_message
from hyperpod_recovery.domain.record.durations import phase_durations
from hyperpod_recovery.domain.record.fates import acted, with_claims
from hyperpod_recovery.models.commands import AGENT_HEARTBEAT_DEADLINE_SECONDS, AGENT_HEARTBEAT_TIMEOUT, CommandReply, ResubmitResult
from hyperpod_recovery.models.node_recovery import OutcomeResult, ResumePlan, StepError
from hyperpod_recovery.models.records import IncidentRecord, JobFate, NodeFate, Phase, Resubmission, ResubmissionClaim, TimelineEntry
from hyperpod_recovery.vocabulary import Outcome, PhaseName

StateT = TypeVar("StateT")
StateT_co = TypeVar("StateT_co", covariant=True)
Decision = tuple[Outcome, str | None, str | None]  # (outcome, error name, cause)
Disposition = Literal["completed", "duplicate", "rejected", "escalated", "stale"]


class RecordStep(Protocol[StateT_co]):
    """What a Record step receives (RecordOutcomeInput, RecordJobOutcomeInput): how the workflow
    got there (the ASL's Catch, or its end), its state, and the error that ended it."""

    @property
    def execution_name(self) -> str: ...
    @property
    def disposition(self) -> Disposition: ...
    @property
    def state(self) -> StateT_co: ...
    @property
    def error(self) -> StepError | None: ...


# --- rules both workflows' records follow ---------------------------------------------------
def submitted_here(reply: CommandReply[ResubmitResult]) -> bool:
    """This incident submitted the job: not a dry run, not a job another incident resubmitted, not
    one Slurm requeued itself (its "new" id is the old one), and a new job id came back."""
    result = reply.result
    return not reply.dry_run and bool(result.new_job_id) and not result.already_submitted and not result.restarted_by_slurm


def resubmission(plan: ResumePlan, reply: CommandReply[ResubmitResult]) -> Resubmission | None:
    """The record's entry for a job this incident resubmitted, None when it submitted nothing."""
    if not submitted_here(reply):
        return None
    return Resubmission(
        job=plan.job.job_id,
        job_name=plan.job.name,
        new_job_id=reply.result.new_job_id,
        checkpoint_step=plan.checkpoint.step,
        checkpoint_uri=plan.checkpoint.uri,
        new_job_name=reply.result.new_job_name,
        **sizes_of(plan, reply),
    )


def sizes_of(plan: ResumePlan, reply: CommandReply[ResubmitResult]) -> dict[str, int]:
    """An elastic job's copy: the size the orchestrator says it submitted, and the size the job ran
    at (grows back to); nothing for a copy submitted at the size it ran at."""
    decision, nodes = plan.elastic, reply.result.nodes
    if decision is None or nodes is None:
        return {}
    return {"nodes": nodes, "full_nodes": decision.full_nodes}


def orchestrator_seconds(replies: Iterable[CommandReply[Any] | None]) -> float:
    """How long the incident waited on the orchestrator's commands (dry-run answers took none)."""
    return round(sum((r.completed_at - r.requested_at).total_seconds() for r in replies if r is not None and not r.dry_run), 3)


class PhaseLog:
    """The phases an incident went through, each kept only when it has a start and an end in order.

    ``add`` takes both ends; ``then`` starts where the cursor is (the last phase's end, or where it
    was set) and moves it on, for a workflow whose steps run one after the other."""

    def __init__(self) -> None:
        self.phases: list[Phase] = []
        self.cursor: datetime | None = None

    def add(self, name: PhaseName, start: datetime | None, end: datetime | None) -> None:
        if start is not None and end is not None and end >= start:
            self.phases.append(Phase(name=name, start=start, end=end))
            self.cursor = end

    def then(self, name: PhaseName, end: datetime | None) -> None:
        self.add(name, self.cursor, end)

    @property
    def last_end(self) -> datetime | None:
        return max((p.end for p in self.phases), default=None)


# --- what differs per workflow ---------------------------------------------------------------
@dataclass(frozen=True)
class IncidentFacts:
    """What a workflow's state says about its incident, in the record's terms."""

    dry_run: bool
    detected_at: datetime | None
    trigger: list[str]
    nodes: list[str]
    hostnames: list[str]
    jobs: list[dict[str, Any]]
    resubmissions: list[Resubmission]
    # old job id -> new job id for the jobs this incident submitted: their claims are completed
    resubmitted: dict[str, str]
    orchestrator_replies: list[CommandReply[Any] | None]
    job_id: str | None = None
    # Nodes this incident locked (not in a dry run): an escalation keeps them locked a while.
    locked_nodes: list[str] = field(default_factory=list)
    # What became of each job and node (domain/record/fates.py): what every message is rendered from.
    job_fates: list[JobFate] = field(default_factory=list)
    node_fates: list[NodeFate] = field(default_factory=list)
    jobs_omitted: int = 0
    nodes_omitted: int = 0


@dataclass(frozen=True)
class IncidentTable(Generic[StateT]):
    """One workflow's part of the record: what its completed run decided and how its incident reads."""

    workflow: Literal["node", "job"]
    decide: Callable[[StateT], Decision]  # a run that completed, not a dry run
    # (state, outcome, cause, the jobs' fates as the record has them)
    summarize: Callable[[StateT, Outcome, str | None, Sequence[JobFate]], str]
    timeline: Callable[[StateT, datetime], list[TimelineEntry]]  # its own events, without the outcome
    phases: Callable[[StateT, datetime], list[Phase]]
    facts: Callable[[StateT, Outcome, str | None], IncidentFacts]
    # A failure this workflow reads better than its Error and Cause say (JobRecovery: the nested
    # NodeRecovery's own error); None when it has nothing to add.
    read_failure: Callable[[StepError], Decision | None] = lambda _error: None


# --- the spine --------------------------------------------------------------------------------
def decide_outcome(table: IncidentTable[StateT], step: RecordStep[StateT]) -> Decision:
    """(outcome, error name, cause) for the end of an execution.

    A step that raised ends the incident ``escalated`` (``rejected`` for a bad request, ``stale``
    for a signal too old to act on) with its error; a controller command nobody answered says so.
    A dry run that ran to its end is ``dry_run``. Anything else is the workflow's own decision."""
    disposition, state, error = step.disposition, step.state, step.error
    if disposition == "duplicate":
        return "duplicate", None, None
    if disposition in ("rejected", "escalated", "stale"):
        if error is not None and (read := table.read_failure(error)) is not None:
            return read
        name = error.Error if error else "Unknown"
        cause = error_message(error.Cause) if error else ""
        if name == AGENT_HEARTBEAT_TIMEOUT:
            cause = f"no heartbeat from the controller agent for {AGENT_HEARTBEAT_DEADLINE_SECONDS} s: it is down or stuck. {cause}".strip()
        elif name == "States.Timeout":
            cause = f"no answer from the controller agent before the timeout. {cause}".strip()
        return disposition, name, cause
    if _requested_dry_run(state):
        return "dry_run", None, None
    return table.decide(state)


def _requested_dry_run(state: Any) -> bool:
    """Both workflows' states say whether they are a dry run (models: ``WorkflowState.dry_run``)."""
    return bool(getattr(state, "dry_run", False))


def conclude(
    table: IncidentTable[StateT],
    step: RecordStep[StateT],
    *,
    cluster: str,
    now: datetime,
    orchestrator: Literal["slurm", "eks"] = "slurm",
    claim_of: Callable[[str], ResubmissionClaim | None] = lambda _job: None,
) -> tuple[OutcomeResult, IncidentRecord, IncidentFacts]:
    """The outcome (with the durations the metrics publish), the incident record and the facts
    the Record step settles the incident's holdings with.

    ``claim_of`` reads a job's resubmission claim in the ledger: a job this incident did not
    resubmit may have a copy another incident made (the node recovery it started, which escalated
    after resubmitting it at once), and the human must be told of that copy, never to make another."""
    state, incident_id = step.state, step.execution_name
    outcome, error_code, cause = decide_outcome(table, step)
    facts = table.facts(state, outcome, cause)
    job_fates = with_claims(facts.job_fates, claim_of, incident_id) if not facts.dry_run else facts.job_fates
    if outcome == "recovered" and not acted(job_fates, facts.node_fates):
        # Nothing of ours changed anything: someone else had done it (or nothing needed doing).
        outcome = "duplicate"
    facts = replace(facts, job_fates=job_fates)
    # The verdict as Step Functions and the metrics get it, its cause and summary cut to their
    # bounds (models/common.py): the record, its timeline and the notification carry the same text.
    verdict = OutcomeResult(
        at=now,
        incident_id=incident_id,
        outcome=outcome,
        error=error_code,
        cause=cause,
        summary=table.summarize(state, outcome, cause, job_fates),
    )
    timeline = [*table.timeline(state, now), TimelineEntry(at=now, event=f"outcome: {outcome}", detail=verdict.summary)]
    record = IncidentRecord(
        incident_id=incident_id,
        cluster=cluster,
        workflow=table.workflow,
        job_id=facts.job_id,
        outcome=outcome,
        dry_run=facts.dry_run,
        trigger=facts.trigger,
        nodes=facts.nodes,
        hostnames=facts.hostnames,
        error=error_code,
        cause=verdict.cause,
        summary=verdict.summary,
        detected_at=facts.detected_at,
        recorded_at=now,
        timeline=sorted(timeline, key=lambda e: e.at),
        phases=table.phases(state, now),
        resubmissions=facts.resubmissions,
        jobs=facts.jobs,
        agent_seconds=orchestrator_seconds(facts.orchestrator_replies),
        orchestrator=orchestrator,
        job_fates=job_fates,
        node_fates=facts.node_fates,
        jobs_omitted=facts.jobs_omitted,
        nodes_omitted=facts.nodes_omitted,
    )
    result = verdict.model_copy(update={"durations": phase_durations(record)})
    return result, record, facts
