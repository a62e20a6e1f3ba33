"""Classify Failure for a hang (JobRecovery started by a hang verdict): is the job still stuck, is
it the job its owner opted in, and which of its nodes to check. Pure.

What the progress table says is a signal anyone on the cluster could have written; what decides is
the orchestrator's own view of the job (Capture Job Spec: slurmctld's, or the Kubernetes API's job
object and the nodes its own pods run on) and the hang's evidence (Capture Hang Evidence):
* a job no longer running is left alone (its end, a failure, starts its own recovery);
* a job whose own submission did not opt in to progress monitoring is left alone (a report under
  its id proves nothing);
* a job that made progress since the verdict recovered by itself: nothing is done (a slowdown: its
  pace is back under the verdict's threshold);
* else it is hung (or slow): its suspects are the verdict's, then the evidence's, and only ever nodes
  the orchestrator gave it. No suspect: it is restarted where it was, and the record says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from statistics import median
from typing import Literal

from hyperpod_recovery.domain.hangs import suspects as blame
from hyperpod_recovery.domain.hangs.detect import live_reports, pace
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.domain.intake.execution_names import node_execution_name
from hyperpod_recovery.domain.intake.normalize import within_reason_budget
from hyperpod_recovery.domain.jobs.job_failure import job_label, open_claim_text
from hyperpod_recovery.errors import JobNodesNotCarried
from hyperpod_recovery.models.cluster import ClusterNode
from hyperpod_recovery.models.commands import HangEvidenceResult, JobSpec, left_alone_reason
from hyperpod_recovery.models.common import MAX_JOB_NODES_CARRIED, one_line
from hyperpod_recovery.models.hangs import HangVerdict
from hyperpod_recovery.models.job_recovery import FailureClassification, FaultyNode
from hyperpod_recovery.models.progress import PROGRESS_TABLE_ENV, RECENT_INTERVALS, ProgressReport
from hyperpod_recovery.models.records import ResubmissionClaim
from hyperpod_recovery.models.requests import TRIGGER_REASON_LIMIT, JobRecoveryRequest, RecoveryRequest, Trigger

RULES = HangRules()
HEARTBEAT_STALE_SECONDS = RULES.heartbeat_stale_seconds
# A hung job still runs in these states (squeue); anything else ended, or is ending (COMPLETING: its
# processes are being killed, a cancel is already under way).
STILL_RUNNING = frozenset({"RUNNING", "SUSPENDED", "STOPPED", "RESIZING"})
# EKS: the job object's newest condition (Restarting: its operator is restarting its pods already;
# Created: none runs yet; Succeeded, Failed: it ended).
STILL_RUNNING_EKS = frozenset({"Running"})


def cleared_since(verdict: HangVerdict, reports: Sequence[ProgressReport]) -> ProgressReport | None:
    """A node of the job that stepped past where it stalled (the verdict's newest step), or None
    (still stuck). Steps, not stamps: the verdict is dated by our clock, the rows by their writers'
    (a node an hour ahead would otherwise look as if it moved on)."""
    later = [r for r in reports if r.step > verdict.step]
    return max(later, key=lambda r: r.step) if later else None


def remeasured(verdict: HangVerdict, reports: Sequence[ProgressReport], now: datetime) -> tuple[float, float] | None:
    """(threshold, seconds without progress) when the job's own nodes' pace does not make it a stall
    (the verdict's threshold came from rows that are not its nodes', or a pace it does not have);
    None when it is one by its own pace too."""
    own = pace(reports)
    if own is None or (verdict.step_seconds is not None and own <= verdict.step_seconds):
        return None  # (the verdict's pace is the job's own, or slower: its threshold stands)
    threshold = max(verdict.threshold_seconds, RULES.stall_factor * own)
    idle = (now - verdict.last_progress_at).total_seconds()
    return (threshold, idle) if idle <= threshold else None


def classify_hang(
    request: JobRecoveryRequest,
    job: JobSpec | None,
    evidence: HangEvidenceResult | None,
    reports: Sequence[ProgressReport],
    cluster: list[ClusterNode],
    execution_name: str,
    now: datetime,
    repeat_suspects: frozenset[str] = frozenset(),
    orchestrator: Literal["slurm", "eks"] = "slurm",
    claim: ResubmissionClaim | None = None,
) -> FailureClassification:
    """``reports``: the job's progress read again now; ``repeat_suspects``: nodes an earlier hang on this
    cluster suspected within the repeat-offender window (a suspect again is replaced, not only checked);
    ``claim``: the job's resubmission claim, when an incident already resubmitted it (or is doing so:
    an open claim, until it expires)."""
    verdict = request.hang
    assert verdict is not None, "only a hang's request is classified here"
    label = job_label(request.job_id, job, None)
    if claim is not None and claim.in_force(now):
        return FailureClassification(
            at=now,
            kind="left_alone",
            job=job,
            reason=f"{label} {_claimed_text(claim, orchestrator)}: nothing more is done for its hang",
        )
    if job is None or job.state not in (STILL_RUNNING_EKS if orchestrator == "eks" else STILL_RUNNING):
        state = job.state if job is not None else ("gone from the Kubernetes API" if orchestrator == "eks" else "unknown to slurmctld")
        return FailureClassification(
            at=now, kind="left_alone", job=job, reason=f"{label} is no longer running ({state}): nothing is done for its hang"
        )
    if job.auto_resume or job.restarted_by is not None:
        return FailureClassification(
            at=now,
            kind="left_alone",
            job=job,
            reason=f"{label} {left_alone_reason(job)}: its hang is recorded, and left to it",
        )
    if not job.reports_progress:
        return FailureClassification(
            at=now,
            kind="left_alone",
            job=job,
            reason=(
                f"{label} was not submitted with progress monitoring ({PROGRESS_TABLE_ENV} is not in its "
                f"{'pod template' if orchestrator == 'eks' else 'environment'}): "
                "a progress report under its id is not trusted, nothing is done to it"
            ),
        )
    # Only what the job's own nodes report, of its current run: a row under its key from another
    # node (a forgery, or a job that names itself wrongly) or from an earlier run decides nothing.
    # A job too large for its names to travel is judged on the nodes its verdict names that the
    # orchestrator says it runs on (Capture Job Spec's asked_held): its suspects and the nodes that
    # stopped first, which are what a stall is about. Without even those (an agent that could not be
    # asked), which reports are its own cannot be told.
    large = not job.nodes and job.num_nodes > MAX_JOB_NODES_CARRIED
    if large and not job.asked_held:
        raise JobNodesNotCarried(
            f"{label} hangs on {job.num_nodes} nodes, more than a workflow carries the names of ({MAX_JOB_NODES_CARRIED}), "
            "and no node its verdict names was answered as one of them (they are asked about only when more nodes report than that): "
            "which progress reports are its own nodes' cannot be told here, so nothing was done to it"
        )
    allocated = set(job.asked_held if large else job.nodes)
    job_size = job.num_nodes if large else len(allocated)
    own = [r for r in live_reports(reports, RULES, now) if r.node in allocated]
    if not own:
        # (none read again, none from its nodes, or every one ended or long gone: nothing confirms the verdict)
        return FailureClassification(
            at=now,
            kind="left_alone",
            job=job,
            reason=f"{label}: no live progress report under its id comes from a node it runs on now: nothing is done for its hang",
        )
    reports = own
    heard = [r for r in reports if not r.ended and (now - r.heartbeat_at).total_seconds() <= HEARTBEAT_STALE_SECONDS]
    if not heard and large:
        # (only the verdict's nodes were read: theirs silent says nothing of the job's other processes)
        raise JobNodesNotCarried(
            f"{label} hangs on {job.num_nodes} nodes, more than a workflow carries the names of ({MAX_JOB_NODES_CARRIED}), "
            "and none of the nodes its verdict names has a reporter heard any more: whether its processes are gone "
            "cannot be told from them, so nothing was done to it"
        )
    if not heard:
        # (read again now: every reporter silent, so its processes are gone or restarting; not a hang)
        return FailureClassification(
            at=now,
            kind="left_alone",
            job=job,
            reason=f"{label}: none of its nodes' progress reporters is heard any more (ended, or restarting): nothing is done for its hang",
        )
    slow = verdict.rule == "slow"
    if slow:
        # A slowdown goes on progressing: measured again, on the job's own nodes only, against their
        # own baseline (the verdict's ratio: its threshold over its baseline).
        ratios = [
            r.step_seconds / r.baseline_step_seconds
            for r in heard
            if r.step_seconds is not None and r.baseline_step_seconds and r.intervals_seen >= 2 * RECENT_INTERVALS
        ]
        allowed = verdict.threshold_seconds / verdict.baseline_step_seconds if verdict.baseline_step_seconds else None
        if not ratios or allowed is None:
            return FailureClassification(
                at=now,
                kind="left_alone",
                job=job,
                reason=f"{label}: its own nodes' reports do not measure its pace against its baseline: nothing is done for its slowdown",
            )
        if median(ratios) <= allowed:
            return FailureClassification(
                at=now,
                kind="recovered_by_itself",
                job=job,
                reason=f"{label} steps at {median(ratios):.2f} × its baseline again, within {allowed:.2f} ×: "
                "the slowdown cleared by itself, nothing was done",
            )
    elif (cleared := cleared_since(verdict, reports)) is not None:
        return FailureClassification(
            at=now,
            kind="recovered_by_itself",
            job=job,
            reason=f"{label} made progress again ({cleared.node} reached step {cleared.step}, past {verdict.step}), "
            f"after {verdict.observed_seconds:.0f} s without: the hang cleared by itself, nothing was done",
        )
    elif (own_pace := remeasured(verdict, heard, now)) is not None:
        return FailureClassification(
            at=now,
            kind="left_alone",
            job=job,
            reason=f"{label}: its own nodes' pace makes {own_pace[0]:.0f} s without progress its threshold, "
            f"not the verdict's {verdict.threshold_seconds:.0f} s; it has been {own_pace[1]:.0f} s: not a hang by its own pace, "
            "nothing is done for it",
        )
    evidence_words = "last log lines" if orchestrator == "eks" else "stacks"
    suspects = [n for n in verdict.suspects if n in allocated]
    why = verdict.suspects_why if suspects else ""
    # The evidence names a node only from stack dumps, which the job cannot shape: a pod's log is what
    # the job prints (rank 0 alone logging an evaluation is not a fault), and a slow job's stacks are
    # where the others' are, a step later (its slow node is named by its waits).
    # (not for a job too large for its names to travel: its sample is the verdict's nodes, the ones
    # that stopped first, whose stacks would be the majority and the healthy nodes the odd ones out)
    if not suspects and evidence is not None and not slow and orchestrator == "slurm" and not large:
        suspects, why = blame.from_evidence([s for s in evidence.nodes if s.node in allocated], job_size, evidence_words)
    if not suspects:
        if large:
            said = "; its evidence (taken on the nodes that stopped first) blames no node of a job this large"
        elif evidence is not None and not slow:
            said = f"; evidence: {blame.from_evidence(evidence.nodes, job_size, evidence_words)[1]}"
        else:
            said = ""
        why = (verdict.suspects_why or "progress names no node") + said
    stuck = f"{label} is {'slow' if slow else 'hung'}: {verdict.summary.split(': ', 1)[-1]}"
    by_name = {name: n for n in cluster if (name := n.name_in(orchestrator))}
    faulty = [
        FaultyNode(slurm_node=name, node_id=by_name[name].node_id if name in by_name else None, why=one_line(why, 256) or "suspect")
        for name in suspects
    ]
    checkable = [f for f in faulty if f.node_id]
    node_request = None
    if checkable:
        node_request = RecoveryRequest(
            cluster=request.cluster,
            node_ids=sorted({f.node_id for f in checkable if f.node_id}),
            triggers=within_reason_budget(
                [
                    Trigger(
                        source="job_hung",
                        node_ids=[f.node_id],
                        reason=one_line(f"{stuck}; suspect {f.slurm_node}: {why}", TRIGGER_REASON_LIMIT),
                        # A first suspicion is checked (the health gate); a node suspected again is replaced.
                        # (a slowdown's suspect is only ever checked: waits are a weaker sign than a stall)
                        recommends="replace" if f.slurm_node in repeat_suspects and not slow else "check",
                        event_id=request.event_id,
                        detected_at=request.detected_at,
                    )
                    for f in checkable
                    if f.node_id
                ]
            ),
            detected_at=request.detected_at,
            dry_run=request.dry_run,
        )
    blamed = f"suspects {', '.join(suspects)} ({why})" if suspects else f"no node blamed ({why}): it is restarted where it was"
    return FailureClassification(
        at=now,
        kind="slow" if slow else "hung",
        job=job,
        jobs=[job],
        reason=one_line(f"{stuck}; {blamed}", 2048),
        faulty_nodes=faulty,
        recover_nodes=node_request is not None,
        node_request=node_request,
        node_execution_name=node_execution_name(execution_name) if node_request else None,
    )


def _claimed_text(claim: ResubmissionClaim, orchestrator: Literal["slurm", "eks"]) -> str:
    """What the job's claim says another incident did: restarted it already, or holds it open."""
    made = "re-created" if orchestrator == "eks" else "resubmitted"
    if claim.new_job_id:
        copy = f"the job of uid {claim.new_job_id}" if orchestrator == "eks" else f"job {claim.new_job_id}"
        return f"was already {made} by incident {claim.incident_id} as {copy}"
    return open_claim_text(claim, orchestrator == "eks")
