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
from dataclasses import dataclass
from datetime import datetime
from statistics import median
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.hangs import suspects as blame
from hyperpod_recovery.domain.hangs.detect import live_reports, pace, slow_ratios
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.domain.intake.execution_names import node_execution_name
from hyperpod_recovery.domain.jobs.job_failure import job_label, open_claim_text
from hyperpod_recovery.domain.jobs.node_request import node_recovery_request
from hyperpod_recovery.domain.jobs.states import still_running
from hyperpod_recovery.errors import JobNodesNotCarried
from hyperpod_recovery.models.commands import HangEvidenceResult, JobSpec, left_alone_reason
from hyperpod_recovery.models.common import MAX_JOB_NODES_CARRIED, one_line
from hyperpod_recovery.models.job_recovery import FailureClassification, FaultyNode
from hyperpod_recovery.models.progress import PROGRESS_TABLE_ENV, ProgressReport

if TYPE_CHECKING:
    from hyperpod_recovery.models.cluster import ClusterNode
    from hyperpod_recovery.models.hangs import HangVerdict
    from hyperpod_recovery.models.records import ResubmissionClaim
    from hyperpod_recovery.models.requests import JobRecoveryRequest

RULES = HangRules()
HEARTBEAT_STALE_SECONDS = RULES.heartbeat_stale_seconds


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
        return None  # the verdict's pace is the job's own, or slower: its threshold stands
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
    case = _Case(request, verdict, job, job_label(request.job_id, job, None), orchestrator, now)
    running = _still_ours_to_judge(case, claim)
    if isinstance(running, FailureClassification):
        return running
    scope = _own_nodes(case, running, reports)
    if isinstance(scope, FailureClassification):
        return scope
    cleared = _cleared_or_not_a_hang(case, scope)
    if cleared is not None:
        return cleared
    suspects, why = _suspects(case, scope, evidence)
    return _hung(case, running, _Blame(suspects, why, cluster, repeat_suspects), execution_name)


@dataclass(frozen=True)
class _Case:
    """What every decision about one hang reads: the request and its verdict, the job, the clock."""

    request: JobRecoveryRequest
    verdict: HangVerdict
    job: JobSpec | None
    label: str
    orchestrator: Literal["slurm", "eks"]
    now: datetime

    @property
    def slow(self) -> bool:
        return self.verdict.rule == "slow"

    def left_alone(self, reason: str) -> FailureClassification:
        return FailureClassification(at=self.now, kind="left_alone", job=self.job, reason=reason)


@dataclass(frozen=True)
class _Scope:
    """The job's own nodes and what they report now: ``own``, live reports from them; ``heard``,
    those whose reporter is still heard. ``large``: a job too large for its names to travel."""

    allocated: set[str]
    job_size: int
    large: bool
    own: list[ProgressReport]
    heard: list[ProgressReport]


@dataclass(frozen=True)
class _Blame:
    """The suspects and why, with what turns them into nodes to recover."""

    suspects: list[str]
    why: str
    cluster: list[ClusterNode]
    repeat_suspects: frozenset[str]


def _still_ours_to_judge(case: _Case, claim: ResubmissionClaim | None) -> JobSpec | FailureClassification:
    """The running job whose reports are to be read, or why it is left alone before that: already
    restarted, no longer running, restarted by another, or never opted in to progress monitoring."""
    job, label, orchestrator = case.job, case.label, case.orchestrator
    if claim is not None and claim.in_force(case.now):
        return case.left_alone(f"{label} {_claimed_text(claim, orchestrator)}: nothing more is done for its hang")
    if job is None or not still_running(job.state, orchestrator):
        state = job.state if job is not None else ("gone from the Kubernetes API" if orchestrator == "eks" else "unknown to slurmctld")
        return case.left_alone(f"{label} is no longer running ({state}): nothing is done for its hang")
    if job.auto_resume or job.restarted_by is not None:
        return case.left_alone(f"{label} {left_alone_reason(job)}: its hang is recorded, and left to it")
    if not job.reports_progress:
        return case.left_alone(
            f"{label} was not submitted with progress monitoring ({PROGRESS_TABLE_ENV} is not in its "
            f"{'pod template' if orchestrator == 'eks' else 'environment'}): "
            "a progress report under its id is not trusted, nothing is done to it"
        )
    return job


def _own_nodes(case: _Case, job: JobSpec, reports: Sequence[ProgressReport]) -> _Scope | FailureClassification:
    """Only what the job's own nodes report, of its current run: a row under its key from another
    node (a forgery, or a job that names itself wrongly) or from an earlier run decides nothing.
    A job too large for its names to travel is judged on the nodes its verdict names that the
    orchestrator says it runs on (Capture Job Spec's asked_held); without even those, which reports
    are its own cannot be told."""
    label = case.label
    large = not job.nodes and job.num_nodes > MAX_JOB_NODES_CARRIED
    if large and not job.asked_held:
        raise JobNodesNotCarried(
            f"{label} hangs on {job.num_nodes} nodes, more than a workflow carries the names of ({MAX_JOB_NODES_CARRIED}), "
            "and no node its verdict names was answered as one of them (they are asked about only when more nodes report than that): "
            "which progress reports are its own nodes' cannot be told here, so nothing was done to it"
        )
    allocated = set(job.asked_held if large else job.nodes)
    own = [r for r in live_reports(reports, RULES, case.now) if r.node in allocated]
    if not own:
        # None read again, none from its nodes, or every one ended or long gone: nothing confirms the verdict.
        return case.left_alone(
            f"{label}: no live progress report under its id comes from a node it runs on now: nothing is done for its hang"
        )
    heard = [r for r in own if not r.ended and (case.now - r.heartbeat_at).total_seconds() <= HEARTBEAT_STALE_SECONDS]
    if not heard and large:
        # Only the verdict's nodes were read: theirs silent says nothing of the job's other processes.
        raise JobNodesNotCarried(
            f"{label} hangs on {job.num_nodes} nodes, more than a workflow carries the names of ({MAX_JOB_NODES_CARRIED}), "
            "and none of the nodes its verdict names has a reporter heard any more: whether its processes are gone "
            "cannot be told from them, so nothing was done to it"
        )
    if not heard:
        # Every reporter silent when read again: its processes are gone or restarting, not hung.
        return case.left_alone(
            f"{label}: none of its nodes' progress reporters is heard any more (ended, or restarting): nothing is done for its hang"
        )
    return _Scope(allocated, job.num_nodes if large else len(allocated), large, own, heard)


def _cleared_or_not_a_hang(case: _Case, scope: _Scope) -> FailureClassification | None:
    """Read again on its own nodes: a slowdown back within its ratio, a hang past its step, or a
    stall only by a pace that is not the job's own. None: it is still slow or hung."""
    label, verdict = case.label, case.verdict
    if case.slow:
        # A slowdown goes on progressing: measured again, on the job's own nodes only, against their
        # own baseline (the verdict's ratio: its threshold over its baseline).
        ratios = slow_ratios(scope.heard)
        allowed = verdict.threshold_seconds / verdict.baseline_step_seconds if verdict.baseline_step_seconds else None
        if not ratios or allowed is None:
            return case.left_alone(
                f"{label}: its own nodes' reports do not measure its pace against its baseline: nothing is done for its slowdown"
            )
        if median(ratios) > allowed:
            return None
        return FailureClassification(
            at=case.now,
            kind="recovered_by_itself",
            job=case.job,
            reason=f"{label} steps at {median(ratios):.2f} × its baseline again, within {allowed:.2f} ×: "
            "the slowdown cleared by itself, nothing was done",
        )
    if (cleared := cleared_since(verdict, scope.own)) is not None:
        return FailureClassification(
            at=case.now,
            kind="recovered_by_itself",
            job=case.job,
            reason=f"{label} made progress again ({cleared.node} reached step {cleared.step}, past {verdict.step}), "
            f"after {verdict.observed_seconds:.0f} s without: the hang cleared by itself, nothing was done",
        )
    if (own_pace := remeasured(verdict, scope.heard, case.now)) is not None:
        return case.left_alone(
            f"{label}: its own nodes' pace makes {own_pace[0]:.0f} s without progress its threshold, "
            f"not the verdict's {verdict.threshold_seconds:.0f} s; it has been {own_pace[1]:.0f} s: not a hang by its own pace, "
            "nothing is done for it"
        )
    return None


def _suspects(case: _Case, scope: _Scope, evidence: HangEvidenceResult | None) -> tuple[list[str], str]:
    """The verdict's suspects among the job's nodes, else the evidence's; and why (or why none)."""
    verdict, slow = case.verdict, case.slow
    evidence_words = "last log lines" if case.orchestrator == "eks" else "stacks"
    suspects = [n for n in verdict.suspects if n in scope.allocated]
    why = verdict.suspects_why if suspects else ""
    # The evidence names a node only from stack dumps, which the job cannot shape: a pod's log is what
    # the job prints, and a slow job's stacks are where the others' are, a step later. Not for a job
    # too large for its names to travel: its sample is the nodes that stopped first, the majority.
    if not suspects and evidence is not None and not slow and case.orchestrator == "slurm" and not scope.large:
        suspects, why = blame.from_evidence([s for s in evidence.nodes if s.node in scope.allocated], scope.job_size, evidence_words)
    if suspects:
        return suspects, why
    if scope.large:
        said = "; its evidence (taken on the nodes that stopped first) blames no node of a job this large"
    elif evidence is not None and not slow:
        said = f"; evidence: {blame.from_evidence(evidence.nodes, scope.job_size, evidence_words)[1]}"
    else:
        said = ""
    return suspects, (verdict.suspects_why or "progress names no node") + said


def _hung(case: _Case, job: JobSpec, blamed: _Blame, execution_name: str) -> FailureClassification:
    """Slow or hung: its suspects as faulty nodes, and the node recovery that checks (or, for a
    suspect again, replaces) those HyperPod knows by id."""
    slow, suspects, why = case.slow, blamed.suspects, blamed.why
    stuck = f"{case.label} is {'slow' if slow else 'hung'}: {case.verdict.summary.split(': ', 1)[-1]}"
    by_name = {name: n for n in blamed.cluster if (name := n.name_in(case.orchestrator))}
    faulty = [
        FaultyNode(slurm_node=name, node_id=by_name[name].node_id if name in by_name else None, why=one_line(why, 256) or "suspect")
        for name in suspects
    ]
    node_request = node_recovery_request(
        case.request,
        faulty,
        "job_hung",
        lambda f: f"{stuck}; suspect {f.slurm_node}: {why}",
        # A first suspicion is checked (the health gate); a node suspected again is replaced. A
        # slowdown's suspect is only ever checked: waits are a weaker sign than a stall.
        lambda f: "replace" if f.slurm_node in blamed.repeat_suspects and not slow else "check",
    )
    said = f"suspects {', '.join(suspects)} ({why})" if suspects else f"no node blamed ({why}): it is restarted where it was"
    return FailureClassification(
        at=case.now,
        kind="slow" if slow else "hung",
        job=job,
        jobs=[job],
        reason=one_line(f"{stuck}; {said}", 2048),
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
