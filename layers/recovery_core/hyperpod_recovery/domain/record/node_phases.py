"""NodeRecovery's phases: how long each part of a recovery took, read back from its state; and the
step a run that ended early was in."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.record.incident import PhaseLog
from hyperpod_recovery.models.commands import CommandReply, ResubmitResult
from hyperpod_recovery.models.node_recovery import ResubmitFailure, WorkflowState

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import Phase
    from hyperpod_recovery.vocabulary import PhaseName


def build_phases(state: WorkflowState, recorded_at: datetime) -> list[Phase]:
    """detect, assess, cordon, find_jobs, replace, find_checkpoint, resubmit (the jobs resubmitted
    at once), wait_for_rejoin, resume, resubmit (the jobs resubmitted after the rejoin), record: the
    steps the incident went through, whatever its outcome. The wait for the replacement starts at
    the replacement and so spans the resubmissions made meanwhile.

    A controller command's phase runs from the command sent to its answer. The step the workflow
    was in when it ended (a command the agent never answered, the rejoin deadline, a Lambda that
    failed) is a phase too, ending at the escalation: ``record`` is only Record Outcome's own
    time, never a wait it did not do.
    """
    log = PhaseLog()
    add = log.add
    request, lock, assessment, replacement, plan = state.request, state.lock, state.assessment, state.replacement, state.checkpoints
    if request is None or request.received_at is None:
        return log.phases
    add("detect", request.detected_at, request.received_at)
    safety = assessment.safety if assessment else None
    add("assess", request.received_at, max((r.at for r in (lock, assessment, safety) if r is not None), default=None))
    if state.cordon is not None:
        add("cordon", state.cordon.requested_at, state.cordon.completed_at)
    if state.jobs is not None and not state.jobs_found_by_cordon:
        add("find_jobs", state.jobs.requested_at, state.jobs.completed_at)  # an earlier version's step of its own
    if replacement is not None:
        add("replace", state.jobs.completed_at if state.jobs else replacement.at, replacement.at)
    # Before the wait (this version), or after the resume (an execution started by an earlier one).
    checkpoint_first = plan is not None and (state.resume is None or plan.at <= state.resume.requested_at)
    if plan is not None and checkpoint_first:
        add("find_checkpoint", replacement.at if replacement else plan.at, plan.at)
        _add_resubmit_phase(log, state.resubmissions_now, recorded_at)
    gate = state.rejoin.first_gate if state.rejoin is not None else None
    if replacement is not None and gate is not None:
        # A repair failed the health gate and was replaced again: wait, resume, replace, wait again.
        add("wait_for_rejoin", replacement.at, gate.requested_at)
        add("resume", gate.requested_at, gate.completed_at)
        add("replace", gate.completed_at, gate.replaced_at)
    waited_since = gate.replaced_at if gate is not None else replacement.at if replacement is not None else None
    if state.rejoin is not None and state.rejoin.done and (gate is None or state.rejoin.replacing_again):
        add("wait_for_rejoin", waited_since, state.rejoin.at)
    if state.last_resume is not None:
        add("resume", state.last_resume.requested_at, state.last_resume.completed_at)
    if plan is not None and not checkpoint_first:
        add("find_checkpoint", state.resume.completed_at if state.resume else plan.at, plan.at)
    _add_resubmit_phase(log, state.resubmissions, recorded_at)
    if state.grow_back is not None and state.grow_back.jobs:
        # The wait for the shrunk copies' next checkpoints, and their grow-backs, to the last check.
        answered = [j.reply.completed_at for j in state.grow_backs if j.reply is not None]
        log.add("grow_back", log.last_end, max([state.grow_back.at, *answered]))
    in_flight = step_in_flight(state)
    if in_flight == "wait_for_rejoin" and waited_since is not None:
        add(in_flight, waited_since, recorded_at)  # it waited from the replacement, resubmissions meanwhile
    elif in_flight is not None:
        add(in_flight, log.last_end, recorded_at)
    add("record", log.last_end, recorded_at)
    return log.phases


def _add_resubmit_phase(log: PhaseLog, results: list[CommandReply[ResubmitResult] | ResubmitFailure], recorded_at: datetime) -> None:
    """The Map's resubmissions, from where the step before it ended: a command tried again (an old copy
    still stopping on EKS) is answered with its last try's request time, and the waits between the
    tries are the phase's too."""
    replies = [r for r in results if isinstance(r, CommandReply)]
    start = min([r.requested_at for r in replies] + ([log.last_end] if log.last_end is not None else []), default=None)
    if any(isinstance(r, ResubmitFailure) for r in results):
        # A job whose resubmission failed (its command unanswered, say) kept the Map busy until the end.
        log.add("resubmit", start, recorded_at)
    elif replies:
        log.add("resubmit", start, max(r.completed_at for r in replies))


def step_in_flight(state: WorkflowState) -> PhaseName | None:
    """The step still running when the workflow ended: the first one its results called for and did not get."""
    lock, assessment, replacement, plan = state.lock, state.assessment, state.replacement, state.checkpoints
    safety = assessment.safety if assessment else None
    if lock is None or (lock.proceed and (assessment is None or (assessment.proceed and safety is None))):
        return "assess"
    if not lock.proceed or assessment is None or not assessment.proceed:
        return None
    if state.cordon is None:
        return "cordon"
    if state.jobs is None:
        return "find_jobs"
    if replacement is None:
        return "replace"
    if not replacement.proceed:
        return None
    rejoined = state.rejoin is not None and state.rejoin.done
    if plan is None:
        # Find Newest Checkpoint runs before the wait; an execution that polled already is an
        # earlier version's, which looked for checkpoints after the resume.
        polled = state.rejoin is not None and state.rejoin.checks > 0
        if polled and not rejoined:
            return "wait_for_rejoin"
        if polled and state.resume is None:
            return "resume"
        return "find_checkpoint"
    if plan.resume_now and not state.resubmissions_now:
        return "resubmit"
    if not rejoined:
        return "wait_for_rejoin"
    gate_ended = state.rejoin is not None and state.rejoin.first_gate is not None and not state.rejoin.replacing_again
    if state.last_resume is None and not gate_ended:
        return "resume"
    if plan.resumable and not state.resubmissions:
        return "resubmit"
    if state.grow_back is not None and state.grow_back.action != "done":
        return "grow_back"
    return None
