"""JobRecovery's part of an incident's record (the spine is domain/record/incident.py): what a completed
run decided, the summary a human reads, the timeline of what it did and its phases."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from hyperpod_recovery import errors
from hyperpod_recovery.domain.jobs.job_failure import job_nodes, nodes_text
from hyperpod_recovery.domain.record.causes import CAUSE_LIMIT
from hyperpod_recovery.domain.record.fate_words import copy_label, copy_state_text, fate_text, job_label, kube_copy_text, made_again
from hyperpod_recovery.domain.record.fates import job_incident_job_fates
from hyperpod_recovery.domain.record.incident import Decision, IncidentFacts, IncidentTable, PhaseLog, resubmission, submitted_here
from hyperpod_recovery.models.common import one_line
from hyperpod_recovery.models.records import JobFate, Phase, TimelineEntry
from hyperpod_recovery.vocabulary import Outcome, PhaseName, error_name

if TYPE_CHECKING:
    from hyperpod_recovery.models.commands import HangEvidenceResult
    from hyperpod_recovery.models.job_recovery import JobWorkflowState
    from hyperpod_recovery.models.kubernetes import KubeJobRef
    from hyperpod_recovery.models.node_recovery import StepError

# The job's nodes a job incident's record names (the rest are counted): 64 names are ~1 KB, where a
# 2,048-node job's three copies of its list made a 67 KB item and a 10,000-node job's would pass
# DynamoDB's 400 KB (found by the fleet drill).
MAX_RECORD_JOB_NODES = 64


def _child_failure(cause: str | None) -> tuple[str, str] | None:
    """The nested NodeRecovery's own error, from the States.TaskFailed cause (its DescribeExecution)."""
    try:
        described = json.loads(cause or "")
    except json.JSONDecodeError:
        return None
    if not isinstance(described, dict):
        return None
    error = described.get("Error") or described.get("error")
    if not error:
        return None
    arn = str(described.get("ExecutionArn") or described.get("executionArn") or "")
    child_cause = str(described.get("Cause") or described.get("cause") or "")
    return str(error), f"node recovery {arn.rsplit(':', 1)[-1] or '(nested)'} ended {error}: {child_cause}"


def read_failure(error: StepError) -> Decision | None:
    """A nested NodeRecovery that failed ends this incident with its own error, not States.TaskFailed."""
    if error.Error != "States.TaskFailed":
        return None
    child = _child_failure(error.Cause)
    if child is None:
        return None
    return "escalated", error_name(errors.NodeRecoveryEscalated), child[1][:CAUSE_LIMIT]


def _kube_ref(state: JobWorkflowState) -> KubeJobRef | None:
    """EKS: the job object, as the failure event (the job poller's) or the job's description names it."""
    request = state.request
    if request is not None and request.failure is not None and request.failure.kube is not None:
        return request.failure.kube
    spec = state.classification.job if state.classification is not None else None
    if spec is None and state.inspection is not None:
        spec = state.inspection.result.job
    return spec.kube if spec is not None else None


def _job_text(state: JobWorkflowState, with_uid: bool = False) -> str | None:
    """EKS: the job as kubectl shows it, ``PyTorchJob kubeflow/llama`` (``(uid …)`` after it on its
    first line); None on Slurm, whose ``job 1001`` is said as it always was."""
    ref, request = _kube_ref(state), state.request
    if ref is None or request is None:
        return None
    return f"{ref.kind} {ref.namespace}/{ref.name}" + (f" (uid {request.job_id})" if with_uid else "")


def decide_completed(state: JobWorkflowState) -> Decision:
    """Recovered when the job was resubmitted (by us or by the nested node recovery); left alone
    (``duplicate``) when someone else restarts it; escalated when the run ended with neither."""
    if state.classification is not None and state.classification.kind == "left_alone":
        return "duplicate", None, None
    if state.classification is not None and state.classification.kind == "recovered_by_itself":
        return "recovered_by_itself", None, None
    restart = state.restart
    if restart is not None and restart.action == "capped":
        return "capped", error_name(errors.CircuitBreakerOpen), restart.reason
    if restart is not None and restart.action == "left_alone":
        return "duplicate", None, None
    if restart is not None and restart.action == "resubmitted_by_node_recovery":
        return "recovered", None, None
    reply = state.resubmission
    if reply is not None:
        if reply.result.restarted_by_slurm or (reply.result.already_submitted and not reply.result.new_job_id):
            return "duplicate", None, None
        if reply.result.new_job_id:
            return "recovered", None, None
    return "escalated", error_name(errors.JobNotResubmitted), "the workflow ended without resubmitting the job or finding it restarted"


def summarize_job(state: JobWorkflowState, outcome: Outcome, cause: str | None, job_fates: Sequence[JobFate] | None = None) -> str:
    job_id = state.request.job_id if state.request else "?"
    fates = list(job_fates) if job_fates is not None else job_incident_job_fates(state, outcome, cause)
    fate = fates[0] if fates else None
    classification, restart, reply = state.classification, state.restart, state.resubmission
    kind = {"node_caused": "node failure", "application": "application failure", "hung": "hang", "slow": "slowdown"}.get(
        classification.kind if classification else "", ""
    )
    label = job_label(fate) if fate is not None else f"job {job_id}"
    copy = f"; {fate_text(fate)}" if fate is not None and fate.live_copy else ""
    if outcome == "rejected":
        return f"Rejected, nothing was changed: {cause}"
    if outcome == "capped":
        return f"Capped, {label} was not restarted: {cause}{copy}"
    if outcome == "stale":
        return f"Not acted on, nothing was changed: {cause}{copy}"
    if outcome == "escalated":
        reason = (cause or "see the incident timeline").rstrip(".")
        about = "" if f"job {job_id}" in reason or label in reason else f"{label}" + (f", {kind}" if kind else "") + ": "
        return f"Escalated to a human: {about}{reason}{copy}."
    if outcome == "recovered_by_itself":
        return f"Nothing was done: {classification.reason if classification else 'the hang cleared by itself'}."
    if outcome == "duplicate" and fate is not None and fate.fate == "resubmitted_before":
        return f"Nothing was done by this incident: {fate_text(fate)}."
    if outcome == "duplicate":
        why = restart.reason if restart is not None else classification.reason if classification else "already handled"
        if reply is not None and reply.result.restarted_by_slurm:
            why = f"{label} was requeued by Slurm before we resubmitted it"
        return f"Left alone: {why}."
    step = restart.plan.checkpoint.step if restart and restart.plan else None
    if outcome == "dry_run":
        would = f"would resubmit it from step {step}" if step is not None else (restart.reason if restart else "would do nothing")
        return f"Dry run for {label}, {kind or 'not classified'}: every step ran, nothing was changed; {would}."
    if fate is not None and fate.fate == "resubmitted":
        repaired = "replaced its node(s)"
        if classification is not None and classification.kind in ("hung", "slow"):
            asked = {t.recommends for t in (classification.node_request.triggers if classification.node_request else [])}
            repaired = (
                "checked its suspect node(s) (replaced only if they failed the check)"
                if asked == {"check"}
                else "replaced its suspect node(s), suspected before"
            )
        how = f"node recovery {fate.by} {repaired} and {made_again(fate)} it" if fate.by else made_again(fate)
        where = f" from step {fate.checkpoint_step}" if fate.checkpoint_step is not None else ""
        # a copy another execution made: its state is in that execution's record, not read here
        copy_state = f" ({copy_state_text(fate)})" if fate.copy_state or not fate.by else ""
        return f"Recovered {label}, {kind}: {how} as {copy_label(fate)}{where}{copy_state}."
    return f"Recovered {label}, {kind}: {fate_text(fate) if fate is not None else 'resubmitted'}."


def innermost_frame(dump: str) -> str | None:
    """Where a py-spy dump's main thread is: its first frame (``all_reduce (…/distributed_c10d.py:2050)``)."""
    lines = dump.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Thread ") and "MainThread" in line and i + 1 < len(lines) and lines[i + 1].startswith("    "):
            frame = lines[i + 1].strip()
            name, _, where = frame.partition(" (")
            return f"{name} ({where.rsplit('/', 1)[-1]}" if where else name
    return None


def stuck_at(text: str, signature: str) -> str:
    """Where a node was, in the evidence's own words: a stack dump's innermost frame, else (a pod's
    log, on EKS) the log's last line, else the signature."""
    frame = innermost_frame(text)
    if frame is not None:
        return f"in {frame}"
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return f'(log: "{one_line(last, 120)}")' if last else f"in the stacks {signature}"


def evidence_text(evidence: HangEvidenceResult) -> str:
    """What a hang's evidence showed, for the timeline: where each node's processes were (grouped by
    their stacks' signature), or why there are no stacks."""
    if not evidence.nodes:
        return f"no node to dump: the job is {evidence.job_state or 'unknown to slurmctld'}"
    if evidence.tool_absent:
        state = evidence.job_state or "state unknown"
        return f"{evidence.tool} is not installed on the nodes: no stacks; scontrol show job taken (job {state})"
    groups: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for node in evidence.nodes:
        key = node.signature if node.outcome == "captured" and node.signature else node.outcome.replace("_", " ")
        groups.setdefault(key, []).append(node.node)
        if node.outcome == "captured":
            where.setdefault(key, stuck_at(node.text, key))
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    parts = [f"{nodes_text(nodes)} {where.get(key, key)}" for key, nodes in ordered]
    return f"{evidence.tool} on {len(evidence.nodes)} node(s) (job {evidence.job_state or 'state unknown'}): " + "; ".join(parts)


def _node_recovery_end(state: JobWorkflowState) -> datetime | None:
    if state.node_recovery is None:
        return None
    at = state.node_recovery.outcome.get("at")
    return datetime.fromisoformat(at) if isinstance(at, str) else None


def build_job_timeline(state: JobWorkflowState, recorded_at: datetime) -> list[TimelineEntry]:
    """What the incident did, in the order it did it (the spine adds the outcome)."""
    entries: list[TimelineEntry] = []
    request = state.request
    if request is not None:
        failure = request.failure
        if failure is not None:
            who = _job_text(state, with_uid=True) or f"job {failure.job_id} ({failure.name})"
            detail = f"{who} ended {failure.state} on {nodes_text(failure.nodes)}"
            detail += f": {failure.reason or 'no reason'}, exit code {failure.exit_code}"
            entries.append(TimelineEntry(at=failure.ended_at, event="job failed", detail=detail))
        else:
            entries.append(
                TimelineEntry(
                    at=request.detected_at,
                    event="recovery requested",
                    detail=f"{_job_text(state, with_uid=True) or f'job {request.job_id}'}: {request.reason}",
                )
            )
        if request.received_at:
            mode = " (dry run)" if request.dry_run else ""
            entries.append(TimelineEntry(at=request.received_at, event="event received", detail=f"incident {request.incident_id}{mode}"))
    if state.inspection is not None:
        job = state.inspection.result.job
        detail = "slurmctld no longer knows the job"
        if job is not None:
            detail = f"state {job.state}, {job.num_nodes} node(s), checkpoint {job.checkpoint_uri or 'none'}"
            detail += ", srun --auto-resume=1" if job.auto_resume else ""
        entries.append(TimelineEntry(at=state.inspection.completed_at, event="job inspected", detail=detail))
    if state.node_states is not None and state.node_states.result.nodes:
        # The unusual states first: what an operator needs is which node was not idle or allocated.
        ordered = sorted(state.node_states.result.nodes, key=lambda n: (n.state in ("idle", "allocated", "mixed") and not n.flags, n.name))
        states = nodes_text([f"{n.name} {n.state}{'+' + '+'.join(n.flags) if n.flags else ''}" for n in ordered])
        entries.append(TimelineEntry(at=state.node_states.completed_at, event="job nodes checked", detail=states))
    if state.evidence is not None:
        entries.append(
            TimelineEntry(at=state.evidence.completed_at, event="hang evidence taken", detail=evidence_text(state.evidence.result))
        )
    if state.classification is not None:
        c = state.classification
        entries.append(TimelineEntry(at=c.at, event=f"classified: {c.kind.replace('_', ' ')}", detail=c.reason))
    end = _node_recovery_end(state)
    if state.node_recovery is not None and end is not None:
        run = state.node_recovery
        child = run.execution_arn.rsplit(":", 1)[-1]
        held = f"; nodes held by {', '.join(sorted(set(run.held_elsewhere.values())))}" if run.held_elsewhere else ""
        entries.append(
            TimelineEntry(
                at=end, event="node recovery ended", detail=f"{child}: {run.outcome_name}: {run.outcome.get('summary', '')}{held}"
            )
        )
    if state.other_recovery is not None and state.other_recovery.at is not None:
        other = state.other_recovery
        outcomes = ", ".join(f"{i}: {o}" for i, o in other.outcomes.items()) or "none finished"
        entries.append(TimelineEntry(at=other.at, event="other recovery ended", detail=f"{outcomes} after {other.checks} check(s)"))
    if state.checkpoints is not None:
        plan = state.checkpoints
        chosen = [f"step {p.checkpoint.step} ({p.checkpoint.uri})" for p in plan.resumable]
        chosen += [f"{j.reason}" for j in plan.unresumable + plan.left_alone]
        entries.append(TimelineEntry(at=plan.at, event="checkpoint chosen", detail="; ".join(chosen) or "no checkpoint"))
    if state.restart is not None:
        entries.append(
            TimelineEntry(
                at=state.restart.at,
                event=f"restart: {state.restart.action.replace('_', ' ')}",
                detail=state.restart.reason,
            )
        )
    if state.resubmission is not None:
        reply = state.resubmission
        verb = "would resubmit job" if reply.dry_run else "job resubmitted"
        if reply.result.restarted_by_slurm:
            verb = "requeued by Slurm"
        elif reply.result.already_submitted:
            verb = "already resubmitted"
        detail = _resubmitted_text(state)
        # Slurm cancels the old job first; EKS suspends it once the new one exists
        detail += (
            (" (old job suspended)" if reply.result.new_job_name else " (old job cancelled first)") if reply.result.cancelled_old else ""
        )
        entries.append(TimelineEntry(at=reply.completed_at, event=verb, detail=detail))
    return entries


def _resubmitted_text(state: JobWorkflowState) -> str:
    """``1001 -> 1002`` on Slurm (as it always read); on EKS, as the node path's timeline says it,
    ``PyTorchJob kubeflow/llama -> PyTorchJob kubeflow/llama-r1 (uid 056d…), Created``."""
    reply = state.resubmission
    if reply is None:
        return ""
    result, ref = reply.result, _kube_ref(state)
    if ref is None and not result.new_job_name:
        return f"{result.old_job_id} -> {result.new_job_id or '-'}"
    old = f"{ref.kind} {ref.namespace}/{ref.name}" if ref is not None else f"job with uid {result.old_job_id}"
    kind = ref.kind if ref is not None else None
    if result.new_job_name:
        new = kube_copy_text(kind, result.new_job_name, result.new_job_id)
    else:
        new = f"{kind or 'job'} with uid {result.new_job_id}" if result.new_job_id else "-"
    new += f", {result.new_job_state}" if result.new_job_state and result.new_job_id else ""
    return f"{old} -> {new}"


def build_job_phases(state: JobWorkflowState, recorded_at: datetime) -> list[Phase]:
    """detect, inspect, recover_nodes, wait_other_recovery, find_checkpoint, backoff, resubmit,
    record: the steps the incident went through, one after the other, whatever its outcome.

    The step the workflow was in when it ended (a command the agent never answered, a node
    recovery that escalated, a watch past its deadline) is a phase too, ending at the escalation:
    ``record`` is only Record Job Outcome's own time, never a wait it did not do.
    """
    log = PhaseLog()
    add = log.then

    def step(name: PhaseName, end: datetime | None) -> bool:
        """The step's phase; False when it had not ended when the workflow did (it ends there)."""
        add(name, recorded_at if end is None else end)
        return end is not None

    request, classification, restart = state.request, state.classification, state.restart
    if request is None or request.received_at is None:
        return log.phases
    log.add("detect", request.detected_at, request.received_at)
    log.cursor = request.received_at
    if step("inspect", classification.at if classification else None) and classification and classification.kind != "left_alone":
        recovered = True
        if classification.recover_nodes:
            recovered = step("recover_nodes", _node_recovery_end(state))
            if recovered and state.node_recovery is not None and state.node_recovery.outcome_name == "duplicate":
                other = state.other_recovery
                recovered = step("wait_other_recovery", other.at if other is not None and other.done else None)
        if recovered and step("find_checkpoint", restart.at if restart else None) and restart and restart.action == "resubmit":
            reply = state.resubmission
            # Without an answer, the Wait still ended after its backoff, and Resubmit Job ran from there.
            waited = datetime.fromtimestamp(restart.at.timestamp() + restart.backoff_seconds, restart.at.tzinfo)
            add("backoff", reply.requested_at if reply else min(waited, recorded_at))
            step("resubmit", reply.completed_at if reply else None)
    add("record", recorded_at)
    return log.phases


def incident_facts(state: JobWorkflowState, outcome: Outcome = "recovered", cause: str | None = None) -> IncidentFacts:
    request, classification, reply = state.request, state.classification, state.resubmission
    plan = state.restart.plan if state.restart is not None else None
    entry = resubmission(plan, reply) if reply is not None and plan is not None else None
    job = classification.job if classification else state.inspection.result.job if state.inspection else None
    every = list(job_nodes(request, job)) if request else []
    # a job's nodes are not the incident's: a record names a few, the faulty ones first, and counts the
    # rest, so that a 10,000-node job's record stays an item DynamoDB takes; squeue/sacct name them all
    faulty = [f.slurm_node for f in classification.faulty_nodes] if classification else []
    nodes = every
    if len(every) > MAX_RECORD_JOB_NODES:
        nodes = list(dict.fromkeys([*(n for n in faulty if n in every), *every]))[:MAX_RECORD_JOB_NODES]
    done = reply is not None and submitted_here(reply) and bool(reply.result.new_job_id)
    return IncidentFacts(
        dry_run=state.dry_run,
        detected_at=request.detected_at if request else None,
        job_id=request.job_id if request else None,
        trigger=[request.source] if request else [],
        nodes=nodes,
        hostnames=list(nodes),  # the job's nodes are Slurm names already
        jobs=[job.model_dump(mode="json", exclude={"nodes"} if len(job.nodes) > MAX_RECORD_JOB_NODES else None)] if job else [],
        resubmissions=[entry] if entry is not None else [],
        resubmitted={reply.result.old_job_id: reply.result.new_job_id} if done and reply and reply.result.new_job_id else {},
        orchestrator_replies=[state.inspection, state.node_states, reply],
        job_fates=job_incident_job_fates(state, outcome, cause),
        nodes_omitted=len(every) - len(nodes),
    )


JOB_INCIDENT: IncidentTable[JobWorkflowState] = IncidentTable(
    workflow="job",
    decide=decide_completed,
    summarize=summarize_job,
    timeline=build_job_timeline,
    phases=build_job_phases,
    facts=incident_facts,
    read_failure=read_failure,
)
