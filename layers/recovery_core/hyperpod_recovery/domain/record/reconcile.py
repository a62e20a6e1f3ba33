"""The record of an execution that ended without recording its own outcome.

Step Functions tells us about every end (its "Execution Status Change" event): a human's
StopExecution, the execution timeout, States.Runtime, States.DataLimitExceeded, a Lambda that
failed past its retries, Record Outcome itself failing. For those the incident record is written
here, from what the event and the ledger say, so that every incident ends recorded and notified.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from pydantic import ValidationError

from hyperpod_recovery import errors
from hyperpod_recovery.domain.record.causes import CAUSE_LIMIT, error_message
from hyperpod_recovery.domain.record.fate_words import copy_label, copy_made_text, fate_text, job_label, on_kubernetes
from hyperpod_recovery.domain.record.fates import fate_of_job, with_claims
from hyperpod_recovery.domain.record.locked import locked_nodes, locked_text
from hyperpod_recovery.domain.record.node_incident import trigger_text
from hyperpod_recovery.domain.record.phases import phases_from_states
from hyperpod_recovery.models.kubernetes import instance_of_node_name
from hyperpod_recovery.models.records import (
    Holdings,
    IncidentRecord,
    JobFate,
    NodeFate,
    Phase,
    Resubmission,
    ResubmissionClaim,
    ShrunkCopy,
    TimelineEntry,
)
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest
from hyperpod_recovery.vocabulary import error_name

if TYPE_CHECKING:
    from hyperpod_recovery.models.commands import JobSpec
    from hyperpod_recovery.models.events import ExecutionStatusDetail

# NodeRecovery states entered only once the replaced or rebooted nodes were back. Find Newest
# Checkpoint and Resubmit Jobs Now run before the wait for the replacement: not evidence.
NODES_BACK_STATES = frozenset({"Resume Nodes", "Resubmit Jobs"})
# Entered when a repair failed the health gate: its node is out of service again, being replaced.
NODES_OUT_AGAIN_STATES = frozenset({"Replace Unhealthy Nodes"})
# Entered once its nodes may carry its drain or cordon (an earlier version drained in a step of its own).
CORDONING_STATES = frozenset({"Cordon Nodes", "Drain Nodes"})


@dataclass(frozen=True)
class EndedExecution:
    """One execution's end, as its status-change event tells it."""

    name: str
    workflow: Literal["node", "job"]
    status: str
    error: str | None
    cause: str | None
    started_at: datetime | None
    stopped_at: datetime | None
    request: RecoveryRequest | JobRecoveryRequest | None
    # (state, entered at) from its history, oldest first; None when the history could not be read.
    states_entered: tuple[tuple[str, datetime], ...] | None = None
    # The jobs it resubmitted before it ended, and when, as its history shows them.
    resubmissions: tuple[tuple[Resubmission, datetime], ...] = ()
    # EKS jobs it stopped at once for a re-creation after the rejoin (ResubmissionsRead.stopped).
    stopped: frozenset[str] = frozenset()

    @property
    def last_state(self) -> str | None:
        return self.states_entered[-1][0] if self.states_entered else None

    @property
    def saw_nodes_back(self) -> bool:
        """Its history shows it went past the rejoin wait (Resume Nodes comes after every node is
        back) and did not replace a node again since (a failed health gate); unknown history
        counts as not."""
        last = None
        for name, _ in self.states_entered or ():
            if name in NODES_BACK_STATES or name in NODES_OUT_AGAIN_STATES:
                last = name
        return last in NODES_BACK_STATES

    @property
    def outcome(self) -> Literal["aborted", "failed"]:
        return "aborted" if self.status == "ABORTED" else "failed"

    @classmethod
    def from_event(
        cls,
        detail: ExecutionStatusDetail,
        job_state_machine_arn: str,
        states_entered: Sequence[tuple[str, datetime]] | None = None,
        resubmissions: Sequence[tuple[Resubmission, datetime]] = (),
        stopped: Collection[str] = (),
    ) -> EndedExecution:
        return cls(
            name=detail.name,
            workflow="job" if detail.stateMachineArn == job_state_machine_arn else "node",
            status=detail.status,
            error=detail.error,
            cause=detail.cause,
            started_at=_from_millis(detail.startDate),
            stopped_at=_from_millis(detail.stopDate),
            request=_request_from(detail.input),
            states_entered=tuple(states_entered) if states_entered is not None else None,
            resubmissions=tuple(resubmissions),
            stopped=frozenset(stopped),
        )


def _from_millis(value: int | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value / 1000, UTC)


def _request_from(raw: str | None) -> RecoveryRequest | JobRecoveryRequest | None:
    """The request the execution was started with, when it was one intake sends (a manual
    request's nodes are in the ledger's holdings instead)."""
    try:
        data = json.loads(raw or "null")
    except (ValueError, RecursionError):
        return None
    for model in (RecoveryRequest, JobRecoveryRequest):
        try:
            return model.model_validate(data)
        except (ValidationError, RecursionError):
            continue
    return None


def unrecorded_end_record(
    end: EndedExecution,
    cluster: str,
    held: Holdings | None,
    *,
    hold_until: datetime | None,
    dry_run: bool,
    now: datetime,
    replaced: Sequence[str] = (),
    rebooted: Sequence[str] = (),
    in_flight: Sequence[str] = (),
    in_flight_until: datetime | None = None,
    kept_claims: Collection[str] = (),
    orchestrator: Literal["slurm", "eks"] = "slurm",
    specs: Sequence[JobSpec] = (),
    claim_of: Callable[[str], ResubmissionClaim | None] = lambda _job: None,
) -> IncidentRecord:
    """The incident record of an execution that ended ``aborted``/``failed`` before recording.

    ``specs`` are its jobs as Find Newest Checkpoint kept them (their names, on EKS their objects);
    ``claim_of`` reads a job's resubmission claim: a copy another incident made (the node recovery a
    JobRecovery started, which resubmitted the job before this one was stopped) is named as such."""
    request = end.request
    job_fates = with_claims(_job_fates(end, held, kept_claims, specs), claim_of, end.name)
    # Its nodes: untouched if it never reached the cordon; otherwise they may carry our mark, and a
    # human looks before giving one back (its repair may still be running).
    cordoned = any(name in CORDONING_STATES for name, _ in end.states_entered or ()) or end.states_entered is None
    hostnames = sorted(held.hostnames) if held else []
    instances = locked_nodes(held.locks)[0] if held else []
    # One node: its hostname and its instance are the same node's (several: which is which is not known).
    only = instances[0] if len(instances) == 1 and len(hostnames) == 1 else None
    node_fates = [_node_fate(h, end, cordoned=cordoned, orchestrator=orchestrator, replaced=replaced, instance=only) for h in hostnames]
    error = end.error or error_name(errors.ExecutionAborted if end.outcome == "aborted" else errors.ExecutionFailed)
    how = {"ABORTED": "was stopped", "TIMED_OUT": "timed out", "FAILED": "failed"}[end.status]
    when = f" at {end.stopped_at:%H:%M:%S} UTC" if end.stopped_at else ""
    where = f" in {end.last_state}" if end.last_state else ""
    cause = f"the execution {how}{when}{where} before it recorded an outcome"
    if end.error:
        cause += f": {end.error}: {error_message(end.cause)}"
    released = []
    kept = (
        f"; kept {len(in_flight)} place(s) under the cluster cap until {in_flight_until:%H:%M} UTC"
        " for node(s) still being replaced or rebooted"
        if in_flight and in_flight_until
        else ""
    )
    if held is not None:
        if len(held.reserved) > len(in_flight):
            released.append(f"{len(held.reserved) - len(in_flight)} place(s) under the cluster cap")
        given_back = held.claims - {r.job for r, _ in end.resubmissions} - set(kept_claims)
        if given_back:
            released.append(f"the resubmission claim(s) of {_jobs_text(sorted(given_back), job_fates, orchestrator)}")
    started = [f"replacement of {', '.join(replaced)}"] * bool(replaced) + [f"reboot of {', '.join(rebooted)}"] * bool(rebooted)
    done = f"{' and '.join(started)} had been initiated; " if started else ""
    unknown = (
        f"kept the resubmission claim(s) of {_jobs_text(sorted(kept_claims), job_fates, orchestrator)}"
        " (no incident restarts them until the claim expires); "
        if kept_claims
        else ""
    )
    jobs = "".join(f"{fate_text(f)}; " for f in job_fates if f.fate != "not_resubmitted")
    summary = (
        f"{'Stopped' if end.outcome == 'aborted' else 'Failed'}{where} before it finished ({error}); "
        + done
        + jobs
        + unknown
        + (f"released {' and '.join(released)}" if released else "released nothing")
        + kept
    )
    if hold_until is not None and held is not None and held.locks:
        summary += f"; node(s) {locked_text(held.locks)} stay locked until {hold_until:%Y-%m-%d %H:%M} UTC"
    summary += ". A human finishes what it started."
    nodes = sorted(set(locked_nodes(held.locks)[0]) | held.reserved) if held else []  # instance ids: a hostname's lock is not a node
    if isinstance(request, RecoveryRequest):
        nodes = request.node_ids
    timeline: list[TimelineEntry] = []
    phases: list[Phase] = []
    detected = request.detected_at if request else None
    if isinstance(request, RecoveryRequest):
        timeline += [TimelineEntry(at=t.detected_at, event="fault detected", detail=trigger_text(t)) for t in request.triggers]
    elif isinstance(request, JobRecoveryRequest):
        timeline.append(TimelineEntry(at=request.detected_at, event="job failed", detail=request.reason))
    if end.started_at is not None:
        timeline.append(TimelineEntry(at=end.started_at, event="event received", detail=f"incident {end.name}"))
        if detected is not None and end.started_at >= detected:
            phases.append(Phase(name="detect", start=detected, end=end.started_at))
    if end.states_entered and end.stopped_at is not None:
        # What it did, as its history tells: the same phases Record Outcome would have written.
        phases += phases_from_states(end.states_entered, end.stopped_at)
    if end.stopped_at is not None:
        timeline.append(TimelineEntry(at=end.stopped_at, event=f"execution {end.status.lower()}", detail=cause))
    by_job = {f.job: f for f in job_fates}
    timeline += [
        TimelineEntry(at=at, event="job resubmitted", detail=f"{_resubmitted_text(r, by_job.get(r.job))} from step {r.checkpoint_step}")
        for r, at in end.resubmissions
    ]
    timeline.append(TimelineEntry(at=now, event=f"outcome: {end.outcome}", detail=summary))
    return IncidentRecord(
        incident_id=end.name,
        cluster=cluster,
        workflow=end.workflow,
        job_id=request.job_id if isinstance(request, JobRecoveryRequest) else None,
        outcome=end.outcome,
        dry_run=dry_run,
        trigger=request.trigger_sources if isinstance(request, RecoveryRequest) else [request.source] if request else [],
        nodes=nodes,
        hostnames=sorted(held.hostnames) if held else [],
        error=error,
        cause=cause[:CAUSE_LIMIT],
        summary=summary,
        detected_at=detected,
        recorded_at=now,
        timeline=sorted(timeline, key=lambda e: e.at),
        phases=phases,
        resubmissions=[r for r, _ in end.resubmissions],
        orchestrator=orchestrator,
        job_fates=job_fates,
        node_fates=node_fates,
    )


def _node_fate(
    name: str, end: EndedExecution, *, cordoned: bool, orchestrator: str, replaced: Sequence[str], instance: str | None
) -> NodeFate:
    """A node it held: untouched before the cordon; else in an unknown state, or, on EKS (whose node
    name carries its instance), being replaced when it started a replacement it never saw back: that
    node's name is gone with its instance, and a human looks for what comes up instead."""
    stopped = f"the recovery stopped in {end.last_state or 'an unknown state'}"
    if not cordoned:
        return NodeFate(node=name, instance=instance, fate="untouched", detail="the recovery stopped before it cordoned")
    instance = instance_of_node_name(name) if orchestrator == "eks" else instance
    if orchestrator == "eks" and instance is not None and instance in replaced and not end.saw_nodes_back:
        return NodeFate(node=name, instance=instance, fate="replacing", acted=True, detail=f"its replacement was initiated; {stopped}")
    return NodeFate(node=name, instance=instance, fate="unknown", detail=stopped)


def _jobs_text(jobs: Sequence[str], fates: Sequence[JobFate], orchestrator: Literal["slurm", "eks"]) -> str:
    """``job(s) 1001, 1002`` on Slurm (as it always read); on EKS each job by its fate's label
    (``PyTorchJob kubeflow/llama``), or ``job with uid <uid>`` when nothing more is known of it."""
    by_job = {f.job: f for f in fates}
    if orchestrator != "eks" and not any(j in by_job and on_kubernetes(by_job[j]) for j in jobs):
        return f"job(s) {', '.join(jobs)}"

    def label(job: str) -> str:
        fate = by_job.get(job)
        if fate is not None and (fate.kind or fate.namespace):
            return job_label(fate)
        name = fate.name if fate is not None and fate.name not in ("", job) else ""
        return f"job with uid {job}" + (f" ({name})" if name else "")

    return ", ".join(label(j) for j in jobs)


def _resubmitted_text(r: Resubmission, fate: JobFate | None) -> str:
    """A copy its history shows it made: ``1001 -> 1003`` on Slurm; on EKS by its fate's names,
    ``PyTorchJob kubeflow/llama -> PyTorchJob kubeflow/llama-r1 (uid 056d…)``."""
    if fate is None or not on_kubernetes(fate):
        return f"{r.job} -> {r.new_job_id}"
    uid = f" (uid {fate.copy_id})" if fate.copy_id and fate.copy_id not in copy_made_text(fate) else ""
    return copy_made_text(fate) + uid


def _job_fates(end: EndedExecution, held: Holdings | None, kept_claims: Collection[str], specs: Sequence[JobSpec]) -> list[JobFate]:
    """Its jobs as far as its history, holdings and kept descriptions tell: copies it made,
    resubmissions whose answer was lost (a copy may exist), and claims it gave back (no copy)."""
    by_id = {spec.job_id: spec for spec in specs}

    def named(job: str, name: str = "") -> JobFate:
        spec = by_id.get(job)
        return fate_of_job(job, spec.name if spec else name, spec)

    fates: dict[str, JobFate] = {}
    for r, at in end.resubmissions:
        namespace, _, name = (r.new_job_name or "").partition("/")
        copy = {"copy_name": name, "namespace": namespace} if r.new_job_name else {}
        fates[r.job] = named(r.job, r.job_name).model_copy(
            update={
                "fate": "resubmitted",
                "copy_id": r.new_job_id,
                "copy_seen_at": at,
                "checkpoint_step": r.checkpoint_step,
                "checkpoint_uri": r.checkpoint_uri,
                **copy,
            }
        )
    for job in sorted(kept_claims):
        why = "its resubmission was asked for and the answer was lost with the execution"
        fates.setdefault(job, named(job).model_copy(update={"fate": "copy_unknown", "reason": why}))
    ended = "the recovery ended before it resubmitted it"
    stopped = "it was stopped (suspended) at once and stays stopped, no copy of it made: the recovery ended before its re-creation"
    for job in sorted(held.claims if held else ()):
        fates.setdefault(job, named(job).model_copy(update={"reason": stopped if job in end.stopped else ended}))
    if isinstance(end.request, JobRecoveryRequest):
        fates.setdefault(end.request.job_id, named(end.request.job_id).model_copy(update={"reason": ended}))
    _shrunk_copies(fates, end, kept_claims)
    return list(fates.values())


def _shrunk_copies(fates: dict[str, JobFate], end: EndedExecution, kept_claims: Collection[str]) -> None:
    """Shrink-and-continue, from the history alone: a copy submitted on fewer nodes than its job ran
    at is said so, with what became of growing it back (grown back: the full-size copy is the job's
    copy; asked and unanswered: unknown; else the incident ended first). Never told as running: the
    record knows only what the orchestrator answered before the end."""
    rows = [r for r, _ in end.resubmissions]
    grown = {r.job: (r, at) for r, at in end.resubmissions if r.nodes is not None and r.full_nodes is not None and r.nodes >= r.full_nodes}
    for row in rows:
        fate = fates.get(row.job)
        if row.nodes is None or row.full_nodes is None or row.nodes >= row.full_nodes or not row.new_job_id or fate is None:
            continue
        label = copy_label(fate)
        shrunk = ShrunkCopy(copy_id=row.new_job_id, copy_label=label, nodes=row.nodes, from_step=row.checkpoint_step)
        on = f"{label} was submitted on {row.nodes} of {row.full_nodes} node(s)"
        update: dict[str, object] = {"full_nodes": row.full_nodes, "shrunk": shrunk}
        after = grown.get(row.new_job_id)
        if after is not None and after[0].new_job_id:
            grow, at = after
            fates.pop(grow.job, None)  # the copy's own row: told as this job's grow-back
            namespace, _, name = (grow.new_job_name or "").partition("/")
            update |= {
                "copy_id": grow.new_job_id,
                "copy_seen_at": at,
                "checkpoint_step": grow.checkpoint_step,
                "checkpoint_uri": grow.checkpoint_uri,
                "shrunk": shrunk.model_copy(update={"grown_back": True, "grown_to": grow.nodes}),
                "grow_back": f"grown back to {grow.nodes} node(s)",
                **({"copy_name": name, "namespace": namespace} if grow.new_job_name else {}),
            }
        elif row.new_job_id in kept_claims:
            text = (
                f"its grow-back was asked for and the answer was lost with the execution: {label} may have been stopped, "
                "and a full-size copy may or may not have been submitted"
            )
            update |= {"fate": "copy_unknown", "reason": text[:300], "grow_back": text[:300]}
            fates.pop(row.new_job_id, None)
        else:
            update["grow_back"] = f"not grown back: the incident ended first; {on}"[:300]
        fates[row.job] = fate.model_copy(update=update)
