"""NodeRecovery's part of an incident's record (the spine is domain/record/incident.py): what a completed
run decided, the summary a human reads, the timeline of what it did and its phases."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from hyperpod_recovery import errors
from hyperpod_recovery.domain.elastic.decide import elastic_reason, minutes
from hyperpod_recovery.domain.elastic.grow_back import shrunk_copy_label
from hyperpod_recovery.domain.jobs.early_stops import early_stop_entry
from hyperpod_recovery.domain.jobs.eks_grace import after_the_rejoin
from hyperpod_recovery.domain.jobs.job_failure import nodes_text
from hyperpod_recovery.domain.nodes.health_gate import CHECK_DID_NOT_RUN, NOT_ASKED
from hyperpod_recovery.domain.nodes.rejoin import rejoin_text, renamed_text
from hyperpod_recovery.domain.record.causes import CAUSE_LIMIT, error_message
from hyperpod_recovery.domain.record.fate_words import jobs_sentence, kube_copy_text
from hyperpod_recovery.domain.record.fates import node_incident_job_fates, node_incident_node_fates
from hyperpod_recovery.domain.record.incident import Decision, IncidentFacts, IncidentTable, PhaseLog, resubmission, submitted_here
from hyperpod_recovery.models.commands import RESTARTED_BY_TEXT, CommandReply, JobSpec, ResubmitResult, owner_tag
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.models.node_recovery import FirstGate, GateFailure, GrowBackJob, ResubmitFailure, WorkflowState
from hyperpod_recovery.models.records import JobFate, Phase, TimelineEntry
from hyperpod_recovery.models.requests import Trigger
from hyperpod_recovery.vocabulary import Outcome, PhaseName, error_name


def trigger_text(trigger: Trigger) -> str:
    """``i-0a.. via hyperpod_node_health: <reason>``; a storm's trigger names its first nodes and how many."""
    events = f" ({trigger.events} events)" if trigger.events > 1 else ""
    return f"{nodes_text(trigger.node_ids)} via {trigger.source}{events}: {trigger.reason}"


def decide_completed(state: WorkflowState) -> Decision:
    """A run that completed can still need a human: a protected node was unhealthy, a replacement
    did not start, or a job has no verified checkpoint. Those escalate, named by the first (most
    severe) kind of problem; the cause lists every problem."""
    problems: list[tuple[str, str]] = []
    if state.assessment is not None:
        safety = state.assessment.safety
        if safety is not None and safety.capped:
            return "capped", safety.error, safety.reason
        protected = [s for s in state.assessment.skipped if s.reason in ("controller", "login", "unknown_role")]
        offenders = [s for s in state.assessment.skipped if s.reason == "repeat_offender"]
        problems += [(error_name(errors.ProtectedNodeUnhealthy), f"{s.node_id}: {s.detail}") for s in protected]
        problems += [(error_name(errors.RepeatOffender), f"{s.node_id}: {s.detail}") for s in offenders]
        if not state.assessment.proceed and not protected and not offenders:
            if state.assessment.skipped and all(s.reason == "locked_elsewhere" for s in state.assessment.skipped):
                return "duplicate", None, None  # every node joins a recovery already under way
            reasons = "; ".join(f"{s.node_id}: {s.detail}" for s in state.assessment.skipped)
            return "rejected", error_name(errors.NoActionableNodes), f"nothing to recover: {reasons}"
    if state.replacement is not None:
        problems += [
            (error_name(errors.ReplaceNotInitiated), f"{f.node_id}: replace failed ({f.error_code}: {f.message})")
            for f in state.replacement.failed
        ]
    problems += [(error_name(errors.ReplacementUnhealthy), text) for text in _unhealthy_texts(state)]
    named = _job_names(state)
    if state.checkpoints is not None:
        problems += [
            (error_name(errors.NoVerifiedCheckpoint), f"{_named_in_full(named, j.job_id, j.name)}: {j.reason}")
            for j in state.checkpoints.unresumable
        ]
    if state.checkpoints is not None and state.checkpoints.jobs_omitted:
        problems.append(
            (
                error_name(errors.TooManyJobs),
                f"{state.checkpoints.jobs_omitted} more job(s) ran on these nodes than one incident carries "
                f"({MAX_JOBS_PER_INCIDENT}): they were not resubmitted",
            )
        )
    problems += [
        (
            error_name(errors.ResubmitFailed),
            f"{named(f.job_id)} was not resubmitted ({f.failure.Error}: {error_message(f.failure.Cause)[:300]})",
        )
        for f in state.resubmit_failures
    ]
    if problems:
        return "escalated", problems[0][0], "; ".join(text for _, text in problems)[:CAUSE_LIMIT]
    return "recovered", None, None


def _named_in_full(named: Callable[[str], str], job_id: str, name: str) -> str:
    """``job 1001 (llama)`` on Slurm; ``PyTorchJob kubeflow/llama`` on EKS (its name is in its label)."""
    label = named(job_id)
    if label != f"job {job_id}" and not label.startswith("job with uid "):
        return label  # (an object found by the incident: kind namespace/name)
    return f"{label} ({name})" if name and name != job_id else label


def _said(detail: str) -> str:
    return detail or "its output is in its drain reason, sinfo -R"


def _not_replaced_why(gate: FirstGate, failure: GateFailure) -> str:
    if failure.error == NOT_ASKED and gate.refused:
        return gate.refused
    if failure.error == CHECK_DID_NOT_RUN:
        return "the check could not run on it, so nothing is known of the instance"
    if failure.error == "NotAccountedFor":
        return "BatchReplaceClusterNodes did not account for it"
    return f"BatchReplaceClusterNodes failed for it: {failure.error}"


def _unhealthy_texts(state: WorkflowState) -> list[str]:
    """Each node a failed health gate left drained: its second replacement failed too, it was not
    replaced again (why), or it failed the only gate there was."""
    watch = state.rejoin
    watched = {n.slurm_node: n for n in watch.nodes} if watch is not None else {}
    gate = watch.first_gate if watch is not None else None
    first_said = gate.said if gate is not None else {}
    texts = [
        f"{n.slurm_node}: its repair {n.gate_failure.instance} "
        + ("could not be checked" if n.gate_failure.error == CHECK_DID_NOT_RUN else "failed the health check")
        + f" ({_said(first_said.get(n.slurm_node, ''))}); not replaced again ({_not_replaced_why(gate, n.gate_failure)}); left drained"
        for n in watched.values()
        if gate is not None and n.left_unhealthy and n.gate_failure is not None
    ]
    resume = state.last_resume
    for u in resume.result.unhealthy if resume is not None else []:
        node = watched.get(u.node)
        first = node.gate_failure if node is not None and node.replaced_again else None
        if first is not None:
            before = first_said.get(u.node, "")
            said = "the same" if before and before == u.detail else _said(before)
            texts.append(
                f"{u.node}: its second replacement failed the health check too ({_said(u.detail)}; the first, {first.instance}: {said}); "
                "left drained"
            )
        else:
            texts.append(f"{u.node}: failed the health check ({_said(u.detail)}); left drained")
    return texts


def _first_gate_timeline(state: WorkflowState) -> list[TimelineEntry]:
    """The first rejoin, resume and health gate of a run whose gate failed a node that was then
    replaced again: the watch keeps them (the second Resume Nodes' answer took the first one's place)."""
    watch = state.rejoin
    gate = watch.first_gate if watch is not None else None
    if watch is None or gate is None:
        return []
    first_pass = [n for n in watch.nodes if n.resumed_at is not None or n.gate_failure is not None]
    back = [
        rejoin_text(n, watch.orchestrator) if n.gate_failure is None else f"{n.slurm_node} as {n.gate_failure.instance}" for n in first_pass
    ]
    resumed = ", ".join(n.service_name for n in first_pass if n.resumed_at) or "none"
    entries = [
        TimelineEntry(at=gate.requested_at, event="node rejoined", detail=", ".join(back)),
        TimelineEntry(at=gate.completed_at, event="nodes resumed", detail=resumed),
    ]
    said = gate.said
    what = {"initiated": "replace initiated", "already_in_progress": "HyperPod already replacing it", "vanished": "already gone"}
    for node in watch.nodes:
        failure = node.gate_failure
        if failure is None:
            continue
        detail = f"{node.slurm_node} ({failure.instance}): {_said(said.get(node.slurm_node, ''))}"
        entries.append(TimelineEntry(at=gate.completed_at, event="health check failed", detail=detail))
        if failure.replaced_again:
            detail = f"{node.slurm_node}: {failure.instance} failed the health check: {what.get(node.initiation, node.initiation)}"
            entries.append(TimelineEntry(at=gate.replaced_at, event="replaced again", detail=detail))
        else:
            detail = f"{node.slurm_node}: {_not_replaced_why(gate, failure)}"
            entries.append(TimelineEntry(at=gate.replaced_at, event="not replaced again", detail=detail))
    return entries


def build_timeline(state: WorkflowState, recorded_at: datetime) -> list[TimelineEntry]:
    """What the incident did, in the order it did it (the spine adds the outcome)."""
    entries: list[TimelineEntry] = []
    request = state.request
    if request is not None:
        for trigger in request.triggers:
            entries.append(TimelineEntry(at=trigger.detected_at, event="fault detected", detail=trigger_text(trigger)))
        if request.received_at:
            mode = " (dry run)" if request.dry_run else ""
            entries.append(
                TimelineEntry(
                    at=request.received_at,
                    event="event received",
                    detail=f"incident {request.incident_id}{mode}: {', '.join(request.node_ids)}",
                )
            )
    if state.lock is not None:
        held = f"; held by other incidents: {state.lock.held_elsewhere}" if state.lock.held_elsewhere else ""
        verb = "would lock" if state.lock.dry_run else "nodes locked"
        entries.append(TimelineEntry(at=state.lock.at, event=verb, detail=f"{', '.join(state.lock.locked) or 'none'}{held}"))
    if state.assessment is not None:
        targets = ", ".join(f"{t.slurm_node} ({t.node_id}, {t.instance_group}, {t.status})" for t in state.assessment.targets)
        skipped = (
            "; skipped: " + ", ".join(f"{s.node_id} ({s.reason})" for s in state.assessment.skipped) if state.assessment.skipped else ""
        )
        entries.append(TimelineEntry(at=state.assessment.at, event="nodes assessed", detail=f"{targets or 'no target'}{skipped}"))
    if state.cordon is not None:
        verb = "would cordon" if state.cordon.dry_run else "nodes cordoned"
        nodes = state.cordon.result.drained + state.cordon.result.already_drained
        detail = ", ".join(nodes) or "none"
        if state.cordon.result.absent:
            detail += f"; not known to the orchestrator (nothing to cordon): {', '.join(state.cordon.result.absent)}"
        entries.append(TimelineEntry(at=state.cordon.completed_at, event=verb, detail=detail))
    if state.jobs is not None:
        jobs = ", ".join(
            f"{j.kube.kind} {j.kube.namespace}/{j.kube.name} (uid {j.job_id}, {j.num_nodes} replicas{_restarted_by(j)})"
            if j.kube
            else f"{j.job_id} ({j.name}, {j.num_nodes} nodes)"
            for j in state.jobs.result.jobs
        )
        entries.append(TimelineEntry(at=state.jobs.completed_at, event="affected jobs found", detail=jobs or "no job on these nodes"))
    if state.replacement is not None:
        kinds = {r.first_action for r in state.replacement.replaced}
        what = "reboot" if kinds == {"reboot"} else "check" if kinds == {"check"} else "repair" if len(kinds) > 1 else "replace"
        verb = f"would {what}" if state.replacement.dry_run else "health check next" if what == "check" else f"{what} initiated"
        parts = [
            f"{r.slurm_node} ({r.node_id}: hang suspect, nothing replaced; the health gate decides)"
            if r.first_action == "check"
            else f"{r.slurm_node} ({r.node_id}: {r.first_action} {r.initiation})"
            for r in state.replacement.replaced
        ]
        parts += [f"{f.node_id} FAILED {f.error_code}" for f in state.replacement.failed]
        calls = f" in {state.replacement.calls} call(s)" if what != "check" else ""
        entries.append(TimelineEntry(at=state.replacement.at, event=verb, detail=f"{', '.join(parts)}{calls}"))
    if state.rejoin is not None:
        for node in state.rejoin.nodes:
            if node.escalated_to_replace_at is not None:
                entries.append(
                    TimelineEntry(
                        at=node.escalated_to_replace_at,
                        event="reboot did not help",
                        detail=f"{node.slurm_node}: slurmctld showed no boot since the reboot at the reboot deadline: replace initiated",
                    )
                )
    entries += _first_gate_timeline(state)
    if state.rejoin is not None and state.rejoin.done and not state.rejoin.dry_run:
        second = state.rejoin.first_gate is not None
        back = ", ".join(
            rejoin_text(n, state.rejoin.orchestrator)
            + (" (replaced by HyperPod, not by us)" if n.initiation in ("already_in_progress", "vanished") else "")
            for n in state.rejoin.nodes
            if n.replaced_again or not second
        )
        if back:
            checks = state.rejoin.checks - (state.rejoin.first_gate.checks if second and state.rejoin.first_gate else 0)
            entries.append(TimelineEntry(at=state.rejoin.at, event="node rejoined", detail=f"{back} after {checks} check(s)"))
    resume = state.last_resume
    if resume is not None:
        verb = "would resume" if resume.dry_run else "nodes resumed"
        result = resume.result
        detail = ", ".join(result.resumed) or "none"
        if result.not_ours:
            kept = "cordoned" if state.rejoin is not None and state.rejoin.orchestrator == "eks" else "drained"
            detail += f"; left {kept} by someone else: {', '.join(result.not_ours)}"
        entries.append(TimelineEntry(at=resume.completed_at, event=verb, detail=detail))
        for unhealthy in result.unhealthy:
            entries.append(
                TimelineEntry(at=resume.completed_at, event="health check failed", detail=f"{unhealthy.node}: {unhealthy.detail}")
            )
    named = _job_names(state)
    if state.checkpoints is not None:
        stopped = {s.job.job_id for s in state.checkpoints.early_stops}
        chosen = [
            f"{named(p.job.job_id)} -> step {p.checkpoint.step} ({p.checkpoint.uri})"
            + (", resubmitted at once" if p in state.checkpoints.resume_now else "")
            + (f", {after_the_rejoin(p.stop_grace_seconds, stopped_at_once=p.job.job_id in stopped)}" if p.stop_grace_seconds else "")
            + (f"; {elastic_reason(p.elastic, p.checkpoint, problem=_problem(state, p.job.job_id))}" if p.elastic else "")
            + (f", newer rejected: {'; '.join(p.rejected)}" if p.rejected else "")
            for p in state.checkpoints.planned
        ]
        chosen += [f"{named(j.job_id)}: {j.reason}" for j in state.checkpoints.unresumable + state.checkpoints.left_alone]
        entries.append(TimelineEntry(at=state.checkpoints.at, event="checkpoint chosen", detail="; ".join(chosen) or "no job to resume"))
    for stop in state.early_stop_replies:
        entries.append(early_stop_entry(stop, named))
    for reply in state.replies:
        detail = _resubmit_text(reply, named, _job_kinds(state))
        entries.append(TimelineEntry(at=reply.completed_at, event=_resubmit_event(reply), detail=detail))
    for job in state.grow_backs:
        entry = _grow_back_entry(job, state.grow_back.at if state.grow_back is not None else recorded_at)
        if entry is not None:
            entries.append(entry)
    for failure in state.resubmit_failures:
        entries.append(
            TimelineEntry(
                at=recorded_at,
                event="resubmit failed",
                detail=f"{named(failure.job_id)}: {failure.failure.Error}: {error_message(failure.failure.Cause)[:300]}",
            )
        )
    return entries


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
    in_flight = _step_in_flight(state)
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


def _step_in_flight(state: WorkflowState) -> PhaseName | None:
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


def _grow_back_entry(job: GrowBackJob, checked_at: datetime) -> TimelineEntry | None:
    """A shrunk job's grow-back, as it ended: grown back (the full-size copy), or why it stays shrunk."""
    if job.status == "grown" and job.reply is not None:
        result = job.reply.result
        step = f" from step {job.checkpoint.step}" if job.checkpoint is not None else ""
        stopped = f"{job.copy_label} stopped, " if result.cancelled_old else ""
        state = f" ({result.new_job_state})" if result.new_job_state else ""
        made = "re-created" if job.kind else "resubmitted"
        detail = f"{stopped}{made} as {shrunk_copy_label(result, job.kind)} on {job.full_nodes} node(s){step}{state}: {job.reason}"
        if job.restart_seconds is not None:
            took = minutes(job.restart_seconds)
            detail += f"; {job.copy_label}'s restart took {took} by its checkpoints' times (its next shrink-or-wait counts it)"
        return TimelineEntry(at=job.reply.completed_at, event="grown back", detail=detail)
    if job.status == "unknown":
        return TimelineEntry(at=checked_at, event="grow-back failed", detail=f"{job.copy_label}: {job.reason}")
    if job.status == "ended":
        at = job.reply.completed_at if job.reply is not None else checked_at
        return TimelineEntry(at=at, event="not grown back", detail=f"{job.copy_label}: {job.reason}")
    if job.status == "stays":
        at = job.reply.completed_at if job.reply is not None else checked_at
        detail = f"{job.copy_label} on {job.nodes} of {job.full_nodes} node(s): {job.reason}"
        return TimelineEntry(at=at, event="stays shrunk", detail=detail)
    return None


def _resubmit_event(reply: CommandReply[ResubmitResult]) -> str:
    result = reply.result
    if reply.dry_run:
        return "would resubmit job"
    if result.restarted_by_slurm:
        return "requeued by Slurm"
    if result.already_submitted:
        return "already resubmitted"
    return "job resubmitted"


def _on_eks(state: WorkflowState) -> bool:
    """The state says the cluster is EKS (its assessment, or its rejoin watch)."""
    if state.assessment is not None:
        return state.assessment.orchestrator == "eks"
    return state.rejoin is not None and state.rejoin.orchestrator == "eks"


def _job_names(state: WorkflowState) -> Callable[[str], str]:
    """A job as a human finds it: ``job 1001`` on Slurm, ``PyTorchJob kubeflow/llama`` on EKS (its uid
    is in the "affected jobs found" line), from the jobs the incident found. An EKS job the incident
    did not find is ``job with uid <uid>``, as fates.job_label says it: never a uid passed off as a job id."""
    kube = {j.job_id: j.kube for j in state.jobs.result.jobs if j.kube} if state.jobs is not None else {}
    eks = _on_eks(state) or bool(kube)

    def named(job_id: str) -> str:
        ref = kube.get(job_id)
        if ref is not None:
            return f"{ref.kind} {ref.namespace}/{ref.name}"
        return f"job with uid {job_id}" if eks else f"job {job_id}"

    return named


def _job_kinds(state: WorkflowState) -> Callable[[str], str | None]:
    """EKS: a job's kind (its copy is an object of the same kind); None on Slurm or when not found."""
    kinds = {j.job_id: j.kube.kind for j in state.jobs.result.jobs if j.kube} if state.jobs is not None else {}
    return kinds.get


def _problem(state: WorkflowState, job_id: str) -> str | None:
    """Why the job's elastic opt-in could not be read (the job as the agent described it), if it was not."""
    jobs = state.jobs.result.jobs if state.jobs is not None else []
    return next((j.elastic_problem for j in jobs if j.job_id == job_id), None)


def _resubmit_text(
    reply: CommandReply[ResubmitResult], named: Callable[[str], str], kind_of: Callable[[str], str | None] = lambda _job: None
) -> str:
    """``job 1001 -> 1002, PENDING`` on Slurm; on EKS ``PyTorchJob kubeflow/llama -> PyTorchJob
    kubeflow/llama-r1 (uid 056d…), Created``: told by what happened, never "(dry run)" on a live stack."""
    result = reply.result
    copy = (
        kube_copy_text(kind_of(result.old_job_id), result.new_job_name, result.new_job_id) if result.new_job_name else None
    )  # (EKS: a new object, by its name)
    if reply.dry_run:
        new = "(dry run)"
    elif result.restarted_by_slurm:
        new = f"{result.old_job_id} (requeued by Slurm, nothing submitted)"
    elif result.already_submitted:
        earlier = copy or result.new_job_id
        new = f"{earlier} (by an earlier incident)" if earlier else "(resubmitted by another incident)"
    else:
        new = copy or result.new_job_id or "(no job id returned)"
        new += f" on {result.nodes} node(s)" if result.nodes else ""  # (a shrink: the size it was submitted at)
        new += f", {result.new_job_state}" if result.new_job_state else ""
    return f"{named(result.old_job_id)} -> {new}"


def _not_replaced_by_us(state: WorkflowState) -> str:
    """Nodes this incident watched come back but did not replace itself: never claimed as ours."""
    if state.replacement is None:
        return ""
    theirs = [r.slurm_node for r in state.replacement.replaced if r.initiation in ("already_in_progress", "vanished")]
    return f" ({', '.join(theirs)}: already being replaced by HyperPod, not by this incident, which waited for it)" if theirs else ""


def _replaced_again(state: WorkflowState) -> str:
    """Repairs that failed the health gate and were replaced once more: a recovery a human may want
    to know of (a sick instance HyperPod handed out)."""
    if state.rejoin is None:
        return ""
    again = [n for n in state.rejoin.nodes if n.replaced_again and n.gate_failure is not None]
    shown = "; ".join(f"{n.slurm_node}'s first replacement, {n.gate_failure.instance}" for n in again if n.gate_failure)
    return f" (failed the health check and replaced again: {shown})" if again else ""


def _cordon_unanswered(state: WorkflowState) -> str:
    """Cordon Nodes drains, then captures the jobs: when it ended without an answer, the drain may
    have happened (our tag, which no other incident resumes). Said, so a human looks."""
    if _step_in_flight(state) != "cordon" or state.request is None:
        return ""
    tag = owner_tag(state.request.incident_id or "")
    if state.assessment is not None and state.assessment.orchestrator == "eks":
        names = " ".join(t.slurm_node for t in state.assessment.targets)
        return f" (Cordon Nodes did not answer: its nodes may be cordoned under {tag}; `kubectl describe nodes {names}` shows it)"
    return f" (Cordon Nodes did not answer: its nodes may be drained under {tag}; `sinfo -R` shows it)"


def _restarted_by(job: JobSpec) -> str:
    return f"; {RESTARTED_BY_TEXT[job.restarted_by]}" if job.restarted_by else ""


def _found_otherwise(state: WorkflowState) -> str:
    """Replacements that did not come back under the node's hostname: said in the summary, since
    a human expects the same Slurm node name back."""
    if state.rejoin is None:
        return ""
    # (On EKS every replacement has a new node name, its instance's: nothing a human needs told.)
    other = [n for n in state.rejoin.nodes if n.rejoined and n.replacement_slurm_node and not n.renamed_in_service]
    if not other:
        return ""
    shown = "; ".join(renamed_text(n) for n in other[:3]) + (f"; and {len(other) - 3} more" if len(other) > 3 else "")
    return f" (came back under another hostname: {shown})"


def summarize(state: WorkflowState, outcome: Outcome, cause: str | None, job_fates: Sequence[JobFate] | None = None) -> str:
    """One paragraph, from the state and the jobs' fates: what happened to the nodes, then to each job."""
    request = state.request
    fates = list(job_fates) if job_fates is not None else node_incident_job_fates(state, outcome, cause)
    nodes = ", ".join(t.slurm_node for t in state.assessment.targets) if state.assessment else ""
    nodes = nodes or (", ".join(request.node_ids) if request else "no node")
    if outcome == "duplicate" and not fates:
        held = state.lock.held_elsewhere if state.lock else {}
        joined = [f"{n} is already in recovery by {i}" for n, i in held.items()]
        if state.assessment is not None:
            joined += [f"{s.node_id}: {s.detail}" for s in state.assessment.skipped if s.reason == "locked_elsewhere"]
        return f"Duplicate, nothing was changed: {'; '.join(dict.fromkeys(joined)) or 'already handled'}."
    if outcome == "rejected":
        return f"Rejected, nothing was changed: {cause}"
    if outcome == "capped":
        return f"Capped, nothing was changed for {nodes}: {cause}"
    if outcome == "stale":
        return f"Not acted on, nothing was changed: {cause}"
    omitted = state.checkpoints.jobs_omitted if state.checkpoints else 0
    jobs = jobs_sentence(fates, omitted) if state.jobs is not None or fates else ""
    job_text = f"; {jobs}" if jobs else ""
    if outcome == "dry_run":
        safety = state.assessment.safety if state.assessment else None
        if safety is not None and safety.capped:
            return f"Dry run for {nodes}: would be capped ({safety.error}: {safety.reason}); nothing was changed."
        return f"Dry run for {nodes}: every step ran, nothing was changed{job_text}."
    stale = f" ({len(request.stale)} node(s) left out: their signals were stale)" if request is not None and request.stale else ""
    if outcome == "duplicate":
        return f"Nothing was done by this incident for {nodes}{_not_replaced_by_us(state)}{stale}{job_text}."
    if outcome == "recovered":
        return f"Recovered {nodes}{_not_replaced_by_us(state)}{_replaced_again(state)}{_found_otherwise(state)}{stale}{job_text}."
    escalated = (cause or "see the incident timeline").rstrip(".")
    return f"Escalated to a human: {escalated}{job_text}{stale}{_cordon_unanswered(state)}."


def incident_facts(state: WorkflowState, outcome: Outcome = "recovered", cause: str | None = None) -> IncidentFacts:
    request = state.request
    by_job = {p.job.job_id: p for p in state.checkpoints.planned} if state.checkpoints else {}
    planned = [(by_job[reply.result.old_job_id], reply) for reply in state.replies if reply.result.old_job_id in by_job]
    lock = state.lock
    return IncidentFacts(
        dry_run=state.dry_run,
        detected_at=request.detected_at if request else None,
        trigger=request.trigger_sources if request else [],
        nodes=request.node_ids if request else [],
        hostnames=[t.slurm_node for t in state.assessment.targets] if state.assessment else [],
        jobs=[j.model_dump(mode="json") for j in (state.jobs.result.jobs if state.jobs else [])],
        resubmissions=[entry for plan, reply in planned if (entry := resubmission(plan, reply)) is not None],
        resubmitted={
            r.result.old_job_id: r.result.new_job_id
            for r in (*state.replies, *state.grow_back_replies)
            if r.result.new_job_id and submitted_here(r)
        },
        orchestrator_replies=[
            state.cordon,
            None if state.jobs_found_by_cordon else state.jobs,
            state.resume,
            *state.early_stop_replies,
            *state.replies,
            *state.grow_back_replies,
        ],
        locked_nodes=list(lock.locked) if lock is not None and not lock.dry_run else [],
        job_fates=node_incident_job_fates(state, outcome, cause),
        node_fates=node_incident_node_fates(state),
        jobs_omitted=state.checkpoints.jobs_omitted if state.checkpoints else 0,
    )


NODE_INCIDENT: IncidentTable[WorkflowState] = IncidentTable(
    workflow="node",
    decide=decide_completed,
    summarize=summarize,
    timeline=build_timeline,
    phases=build_phases,
    facts=incident_facts,
)
