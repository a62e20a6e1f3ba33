"""NodeRecovery's part of an incident's record (the spine is domain/record/incident.py): what a completed
run decided and the summary a human reads; its timeline is node_timeline.py's, its phases node_phases.py's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hyperpod_recovery import errors
from hyperpod_recovery.domain.nodes.health_gate import CHECK_DID_NOT_RUN
from hyperpod_recovery.domain.nodes.rejoin import renamed_text
from hyperpod_recovery.domain.record.causes import CAUSE_LIMIT, error_message
from hyperpod_recovery.domain.record.fate_words import jobs_sentence
from hyperpod_recovery.domain.record.fates import node_incident_job_fates, node_incident_node_fates
from hyperpod_recovery.domain.record.incident import Decision, IncidentFacts, IncidentTable, resubmission, submitted_here
from hyperpod_recovery.domain.record.node_phases import build_phases, step_in_flight
from hyperpod_recovery.domain.record.node_timeline import build_timeline as build_timeline
from hyperpod_recovery.domain.record.node_timeline import gate_output, job_names, named_in_full, not_replaced_why
from hyperpod_recovery.domain.record.node_timeline import trigger_text as trigger_text
from hyperpod_recovery.models.commands import owner_tag
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.vocabulary import Outcome, error_name

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import WorkflowState
    from hyperpod_recovery.models.records import JobFate


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
    named = job_names(state)
    if state.checkpoints is not None:
        problems += [
            (error_name(errors.NoVerifiedCheckpoint), f"{named_in_full(named, j.job_id, j.name)}: {j.reason}")
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
        + f" ({gate_output(first_said.get(n.slurm_node, ''))}); not replaced again ({not_replaced_why(gate, n.gate_failure)}); left drained"
        for n in watched.values()
        if gate is not None and n.left_unhealthy and n.gate_failure is not None
    ]
    resume = state.last_resume
    for u in resume.result.unhealthy if resume is not None else []:
        node = watched.get(u.node)
        first = node.gate_failure if node is not None and node.replaced_again else None
        if first is not None:
            before = first_said.get(u.node, "")
            said = "the same" if before and before == u.detail else gate_output(before)
            texts.append(
                f"{u.node}: its second replacement failed the health check too ({gate_output(u.detail)}; "
                f"the first, {first.instance}: {said}); left drained"
            )
        else:
            texts.append(f"{u.node}: failed the health check ({gate_output(u.detail)}); left drained")
    return texts


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
    if step_in_flight(state) != "cordon" or state.request is None:
        return ""
    tag = owner_tag(state.request.incident_id or "")
    if state.assessment is not None and state.assessment.orchestrator == "eks":
        names = " ".join(t.slurm_node for t in state.assessment.targets)
        return f" (Cordon Nodes did not answer: its nodes may be cordoned under {tag}; `kubectl describe nodes {names}` shows it)"
    return f" (Cordon Nodes did not answer: its nodes may be drained under {tag}; `sinfo -R` shows it)"


def _found_otherwise(state: WorkflowState) -> str:
    """Replacements that did not come back under the node's hostname: said in the summary, since
    a human expects the same Slurm node name back."""
    if state.rejoin is None:
        return ""
    # On EKS every replacement has a new node name, its instance's: nothing a human needs told.
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
