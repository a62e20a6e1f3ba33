"""NodeRecovery's timeline: what it did, step by step, as the incident record and the report show it;
and the words for a node's trigger, its health gate and its jobs that the summary shares."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery.domain.elastic.decide import elastic_reason, minutes
from hyperpod_recovery.domain.elastic.grow_back import shrunk_copy_label
from hyperpod_recovery.domain.jobs.early_stops import early_stop_entry
from hyperpod_recovery.domain.jobs.eks_grace import after_the_rejoin
from hyperpod_recovery.domain.jobs.job_failure import nodes_text
from hyperpod_recovery.domain.nodes.health_gate import CHECK_DID_NOT_RUN, NOT_ASKED
from hyperpod_recovery.domain.nodes.rejoin import rejoin_text
from hyperpod_recovery.domain.record.causes import error_message
from hyperpod_recovery.domain.record.fate_words import kube_copy_text
from hyperpod_recovery.models.commands import RESTARTED_BY_TEXT, CommandReply, JobSpec, ResubmitResult
from hyperpod_recovery.models.records import TimelineEntry

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import FirstGate, GateFailure, GrowBackJob, WorkflowState
    from hyperpod_recovery.models.requests import Trigger


def trigger_text(trigger: Trigger) -> str:
    """``i-0a.. via hyperpod_node_health: <reason>``; a storm's trigger names its first nodes and how many."""
    events = f" ({trigger.events} events)" if trigger.events > 1 else ""
    return f"{nodes_text(trigger.node_ids)} via {trigger.source}{events}: {trigger.reason}"


def named_in_full(named: Callable[[str], str], job_id: str, name: str) -> str:
    """``job 1001 (llama)`` on Slurm; ``PyTorchJob kubeflow/llama`` on EKS (its name is in its label)."""
    label = named(job_id)
    if label != f"job {job_id}" and not label.startswith("job with uid "):
        return label  # an object found by the incident: kind namespace/name
    return f"{label} ({name})" if name and name != job_id else label


def gate_output(detail: str) -> str:
    """What the health check said of a node, or where its output is."""
    return detail or "its output is in its drain reason, sinfo -R"


def not_replaced_why(gate: FirstGate, failure: GateFailure) -> str:
    if failure.error == NOT_ASKED and gate.refused:
        return gate.refused
    if failure.error == CHECK_DID_NOT_RUN:
        return "the check could not run on it, so nothing is known of the instance"
    if failure.error == "NotAccountedFor":
        return "BatchReplaceClusterNodes did not account for it"
    return f"BatchReplaceClusterNodes failed for it: {failure.error}"


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
        detail = f"{node.slurm_node} ({failure.instance}): {gate_output(said.get(node.slurm_node, ''))}"
        entries.append(TimelineEntry(at=gate.completed_at, event="health check failed", detail=detail))
        if failure.replaced_again:
            detail = f"{node.slurm_node}: {failure.instance} failed the health check: {what.get(node.initiation, node.initiation)}"
            entries.append(TimelineEntry(at=gate.replaced_at, event="replaced again", detail=detail))
        else:
            detail = f"{node.slurm_node}: {not_replaced_why(gate, failure)}"
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
    named = job_names(state)
    if state.checkpoints is not None:
        stopped = {s.job.job_id for s in state.checkpoints.early_stops}
        chosen = [
            f"{named(p.job.job_id)} -> step {p.checkpoint.step} ({p.checkpoint.uri})"
            + (_at_once(state.dry_run) if p in state.checkpoints.resume_now else "")
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


def on_eks(state: WorkflowState) -> bool:
    """The state says the cluster is EKS (its assessment, or its rejoin watch)."""
    if state.assessment is not None:
        return state.assessment.orchestrator == "eks"
    return state.rejoin is not None and state.rejoin.orchestrator == "eks"


def job_names(state: WorkflowState) -> Callable[[str], str]:
    """A job as a human finds it: ``job 1001`` on Slurm, ``PyTorchJob kubeflow/llama`` on EKS (its uid
    is in the "affected jobs found" line), from the jobs the incident found. An EKS job the incident
    did not find is ``job with uid <uid>``, as fates.job_label says it: never a uid passed off as a job id."""
    kube = {j.job_id: j.kube for j in state.jobs.result.jobs if j.kube} if state.jobs is not None else {}
    eks = on_eks(state) or bool(kube)

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
    )  # EKS: a new object, by its name
    if reply.dry_run:
        new = "(dry run)"
    elif result.restarted_by_slurm:
        new = f"{result.old_job_id} (requeued by Slurm, nothing submitted)"
    elif result.already_submitted:
        earlier = copy or result.new_job_id
        new = f"{earlier} (by an earlier incident)" if earlier else "(resubmitted by another incident)"
    else:
        new = copy or result.new_job_id or "(no job id returned)"
        new += f" on {result.nodes} node(s)" if result.nodes else ""  # a shrink: the size it was submitted at
        new += f", {result.new_job_state}" if result.new_job_state else ""
    return f"{named(result.old_job_id)} -> {new}"


def _restarted_by(job: JobSpec) -> str:
    return f"; {RESTARTED_BY_TEXT[job.restarted_by]}" if job.restarted_by else ""


def _at_once(dry_run: bool) -> str:
    """A job planned to run again at once: a dry run resubmits nothing, and its record says so."""
    return ", would be resubmitted at once (dry run)" if dry_run else ", resubmitted at once"
