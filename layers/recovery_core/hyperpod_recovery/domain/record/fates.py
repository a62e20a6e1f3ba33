"""What became of each job and each node of an incident: the facts every message is rendered from.

A human reads an incident's summary, its notification and its WHAT HAPPENS NEXT; each of those is
written from these facts (domain/messages/advice.py, domain/messages/notification.py), never from prose fixed per error
name, so that a message cannot tell a human to resubmit a job whose copy is already queued, or to
run Slurm's commands on a Kubernetes node. A job's fate names its live copy (id or name, and its
state when last seen) or says why there is none; a node's says whether it is back in service, still
being repaired, or held out of service, and by whom.

Pure: models in, models out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery import errors
from hyperpod_recovery.domain.elastic.decide import elastic_reason
from hyperpod_recovery.domain.intake.execution_names import node_execution_name
from hyperpod_recovery.domain.jobs.early_stops import ended_before_re_creation
from hyperpod_recovery.domain.jobs.states import still_running_on_either
from hyperpod_recovery.domain.record.causes import error_message
from hyperpod_recovery.domain.record.fate_words import copy_label as copy_label

# The words for a fate live in fate_words; these names stay importable from here for the sandbox and tests.
from hyperpod_recovery.domain.record.fate_words import fate_text as fate_text
from hyperpod_recovery.domain.record.fate_words import job_label as job_label
from hyperpod_recovery.domain.record.fate_words import jobs_sentence as jobs_sentence
from hyperpod_recovery.models.commands import AGENT_HEARTBEAT_TIMEOUT, CommandReply, JobSpec, ResubmitResult
from hyperpod_recovery.models.kubernetes import node_name_for_instance
from hyperpod_recovery.models.records import JobFate, NodeFate, ResubmissionClaim, ShrunkCopy
from hyperpod_recovery.vocabulary import Outcome, error_name

if TYPE_CHECKING:
    from hyperpod_recovery.models.job_recovery import JobWorkflowState
    from hyperpod_recovery.models.node_recovery import ResumePlan, WorkflowState

Orchestrator = Literal["slurm", "eks"]
REASON_LIMIT = 300
# A resubmission that ended in one of these had no answer: the command may have run.
UNANSWERED_ERRORS = frozenset(
    {AGENT_HEARTBEAT_TIMEOUT, "States.Timeout", "Lambda.Unknown", "Sandbox.Timedout", error_name(errors.ControllerAgentError)}
)


def _cut(text: str, limit: int = REASON_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fate_of_job(job_id: str, name: str, spec: JobSpec | None) -> JobFate:
    """A fate with the job's names filled in (EKS: its kind, namespace and object name)."""
    kube = spec.kube if spec is not None else None
    prefix = spec.checkpoint_uri if spec is not None else None
    if kube is not None:
        return JobFate(
            job=job_id, name=kube.name, kind=kube.kind, namespace=kube.namespace, fate="not_resubmitted", checkpoint_prefix=prefix
        )
    return JobFate(job=job_id, name=name, fate="not_resubmitted", checkpoint_prefix=prefix)


def _copy_name(result: ResubmitResult) -> str | None:
    """EKS: the new object's name (``new_job_name`` is <namespace>/<name>)."""
    return result.new_job_name.rsplit("/", 1)[-1] if result.new_job_name else None


def fate_of_reply(base: JobFate, reply: CommandReply[ResubmitResult], plan: ResumePlan | None) -> JobFate:
    """What a Resubmit Job answer says became of the job."""
    result = reply.result
    step = {"checkpoint_step": plan.checkpoint.step, "checkpoint_uri": plan.checkpoint.uri} if plan is not None else {}
    copy = {
        "copy_id": result.new_job_id,
        "copy_name": _copy_name(result),
        "copy_state": result.new_job_state,
        "copy_seen_at": reply.completed_at,
    }
    if reply.dry_run:
        return base.model_copy(update={"fate": "would_resubmit", **step})
    if result.restarted_by_slurm:
        return base.model_copy(
            update={"fate": "requeued_by_slurm", "copy_id": result.old_job_id, "reason": "Slurm requeued it: it restarts by itself"}
        )
    if result.already_submitted:
        who = result.submitted_by or "another incident"
        return base.model_copy(update={"fate": "resubmitted_before", "by": result.submitted_by, "reason": f"resubmitted by {who}", **copy})
    if result.new_job_id:
        return base.model_copy(update={"fate": "resubmitted", **copy, **step})
    return base.model_copy(update={"reason": "the resubmission returned no new job"})


def _shrinks_and_grow_backs(fates: dict[str, JobFate], state: WorkflowState, specs: dict[str, JobSpec]) -> None:
    """Shrink-and-continue, told from the record: the decision for each elastic job and why, the copy
    that ran on fewer nodes (only when the orchestrator said it submitted it at that size), and what
    became of growing it back (the full-size copy is then the job's copy)."""
    plans = state.checkpoints.planned if state.checkpoints is not None else []
    sized = {r.result.old_job_id: r.result.nodes for r in state.replies}
    began = state.grow_back is not None
    for plan in plans:
        decision, fate = plan.elastic, fates.get(plan.job.job_id)
        if decision is None or fate is None:
            continue
        spec = specs.get(plan.job.job_id)
        reason = _cut(elastic_reason(decision, plan.checkpoint, problem=spec.elastic_problem if spec is not None else None))
        update: dict[str, object] = {"full_nodes": decision.full_nodes, "elastic": reason}
        if decision.action == "shrink" and fate.fate == "resubmitted" and fate.copy_id:
            if sized.get(plan.job.job_id) == decision.nodes:
                update["shrunk"] = ShrunkCopy(
                    copy_id=fate.copy_id, copy_label=copy_label(fate), nodes=decision.nodes, from_step=plan.checkpoint.step
                )
                when = "its grow-back found nothing to do" if began else "the incident ended before its grow-back began"
                on = f"{copy_label(fate)} runs on {decision.nodes} of {decision.full_nodes} node(s)"
                update["grow_back"] = f"not grown back: {when}; {on}"
            else:
                update["elastic"] = _cut(f"{reason}; the orchestrator submitted it at its full size instead")
        fates[plan.job.job_id] = fate.model_copy(update=update)
    for job in state.grow_backs:
        fate = fates.get(job.old_job_id)
        if fate is None or fate.shrunk is None:
            continue
        on = f"{job.copy_label} runs on {job.nodes} of {job.full_nodes} node(s)"
        result = job.reply.result if job.reply is not None else None
        if job.status == "grown" and job.reply is not None and result is not None and result.new_job_id:
            fates[job.old_job_id] = fate.model_copy(
                update={
                    "copy_id": result.new_job_id,
                    "copy_name": _copy_name(result),
                    "copy_state": result.new_job_state,
                    "copy_seen_at": job.reply.completed_at,
                    "checkpoint_step": job.checkpoint.step if job.checkpoint is not None else fate.checkpoint_step,
                    "checkpoint_uri": job.checkpoint.uri if job.checkpoint is not None else fate.checkpoint_uri,
                    "shrunk": fate.shrunk.model_copy(update={"grown_back": True, "grown_to": job.full_nodes}),
                    "grow_back": _cut(f"grown back to {job.full_nodes} node(s): {job.reason}"),
                }
            )
        elif job.status == "unknown":
            # The grow-back failed or got no answer: the copy may have been stopped, a full-size one may run.
            what = "got no answer" if job.failure in UNANSWERED_ERRORS else f"failed ({job.reason.removeprefix('its grow-back failed: ')})"
            text = f"its grow-back {what}: {job.copy_label} may have been stopped, and a full-size copy may or may not have been submitted"
            fates[job.old_job_id] = fate.model_copy(update={"fate": "copy_unknown", "reason": _cut(text), "grow_back": _cut(text)})
        elif job.status == "ended":
            # It ended without the grow-back (its training done, failed, a human stopped it): never started again.
            ended = fate.shrunk.model_copy(update={"ended": True})
            fates[job.old_job_id] = fate.model_copy(update={"grow_back": _cut(f"not grown back: {job.reason}"), "shrunk": ended})
        elif job.status == "stays" and result is not None and result.already_submitted:
            # Another incident made the next copy: this one no longer knows where the job runs.
            taken = fate.shrunk.model_copy(update={"taken_by": result.submitted_by or "another incident"})
            fates[job.old_job_id] = fate.model_copy(update={"grow_back": _cut(f"not grown back: {job.reason}"), "shrunk": taken})
        elif job.status == "stays":
            fates[job.old_job_id] = fate.model_copy(update={"grow_back": _cut(f"not grown back: {job.reason}; {on}")})
        elif job.status in ("waiting", "growing"):
            fates[job.old_job_id] = fate.model_copy(update={"grow_back": _cut(f"not grown back: the incident ended while it waited; {on}")})


def node_incident_job_fates(state: WorkflowState, outcome: Outcome, cause: str | None) -> list[JobFate]:
    """Every job NodeRecovery found on its nodes, in the order found, with what became of it."""
    specs = {j.job_id: j for j in state.jobs.result.jobs} if state.jobs is not None else {}
    plan = state.checkpoints
    plans = {p.job.job_id: p for p in plan.planned} if plan is not None else {}
    now = {p.job.job_id for p in plan.resume_now if not p.stop_only} if plan is not None else set()
    # Stopped at once for a re-creation after the rejoin: Resubmit Jobs runs only once Resume Nodes answered.
    stops = {r.result.old_job_id: r for r in state.early_stop_replies} if state.resume is None else {}
    fates: dict[str, JobFate] = {}

    def base(job_id: str, name: str) -> JobFate:
        return fates.get(job_id) or fate_of_job(job_id, name, specs.get(job_id))

    for reply in state.replies:
        old = reply.result.old_job_id
        spec = specs.get(old)
        fates[old] = fate_of_reply(base(old, spec.name if spec else old), reply, plans.get(old))
    _shrinks_and_grow_backs(fates, state, specs)
    for failure in state.resubmit_failures:
        why = error_message(failure.failure.Cause) or "no message"
        spec = specs.get(failure.job_id)
        unanswered = failure.failure.Error in UNANSWERED_ERRORS
        reason = (
            f"the orchestrator did not answer its resubmission ({failure.failure.Error}): it may have submitted a copy"
            if unanswered
            else f"its resubmission failed: {failure.failure.Error}: {why}"
        )
        fates[failure.job_id] = base(failure.job_id, spec.name if spec else failure.job_id).model_copy(
            update={"fate": "copy_unknown" if unanswered else "not_resubmitted", "reason": _cut(reason)}
        )
    if plan is not None:
        for p in plan.planned:
            if p.job.job_id in fates:
                continue
            when = "at once" if p.job.job_id in now else "once its nodes were back"
            ended = f"the incident ended {outcome}" + (f" ({_cut(cause, 200)})" if cause else "")
            stopped = ended_before_re_creation(p, stops[p.job.job_id], ended) if p.job.job_id in stops else None
            if stopped is not None:  # its re-creation was never asked: no copy can exist
                fates[p.job.job_id] = base(p.job.job_id, p.job.name).model_copy(
                    update={"reason": _cut(stopped), "checkpoint_step": p.checkpoint.step, "checkpoint_uri": p.checkpoint.uri}
                )
                continue
            fates[p.job.job_id] = base(p.job.job_id, p.job.name).model_copy(
                update={
                    "reason": _cut(f"it was to be resubmitted {when} from step {p.checkpoint.step}; {ended} before that"),
                    "checkpoint_step": p.checkpoint.step,
                    "checkpoint_uri": p.checkpoint.uri,
                    "unanswered": True,
                }
            )
        for j in plan.unresumable:
            fates.setdefault(j.job_id, base(j.job_id, j.name).model_copy(update={"reason": _cut(j.reason)}))
        for j in plan.left_alone:
            fates.setdefault(j.job_id, base(j.job_id, j.name).model_copy(update={"fate": "restarted_by_owner", "reason": _cut(j.reason)}))
    for job_id, spec in specs.items():
        if job_id not in fates:
            fates[job_id] = base(job_id, spec.name).model_copy(
                update={"reason": f"the incident ended {outcome} before it chose a checkpoint"}
            )
    order = [*specs, *(j for j in fates if j not in specs)]
    return [_as_dry_run(fates[j]) if state.dry_run else fates[j] for j in order]


def _as_dry_run(fate: JobFate) -> JobFate:
    """A dry run changed nothing: a job it would not have resubmitted says why, and nobody is told to act."""
    if fate.fate in ("not_resubmitted", "copy_unknown"):
        return fate.model_copy(update={"fate": "would_not_resubmit"})
    return fate


def _node_name(orchestrator: Orchestrator, instance: str | None, known: str | None) -> str | None:
    """The node a replacement is or will be, by the orchestrator's own naming."""
    if known:
        return known
    return node_name_for_instance(instance) if orchestrator == "eks" and instance else None


def node_incident_node_fates(state: WorkflowState) -> list[NodeFate]:
    """Every node NodeRecovery was asked about: its targets, then those it skipped. A node is held
    (ours to give back) only if this incident's own drain or cordon is on it: a drain that was there
    before (an admin's, HyperPod's health agent's) is never ours, whatever else we did to the node."""
    assessment = state.assessment
    if assessment is None:
        return []
    orchestrator: Orchestrator = assessment.orchestrator
    word = "cordoned" if orchestrator == "eks" else "drained"
    cordon = state.cordon
    ours = set(cordon.result.drained + cordon.result.ours_already) if cordon is not None and not cordon.dry_run else set()
    theirs = set(cordon.result.already_drained) - ours if cordon is not None else set()
    absent = set(cordon.result.absent) if cordon is not None else set()
    watch = state.rejoin
    watched = {n.node_id: n for n in watch.nodes} if watch is not None else {}
    failed = {f.node_id: f for f in state.replacement.failed} if state.replacement is not None and not state.replacement.dry_run else {}
    resume = state.last_resume
    live_resume = resume is not None and not resume.dry_run
    resumed = set(resume.result.resumed) if live_resume and resume is not None else set()
    not_drained = set(resume.result.not_drained) if live_resume and resume is not None else set()
    not_ours = set(resume.result.not_ours) if resume is not None else set()
    unhealthy = {u.node: u for u in resume.result.unhealthy} if live_resume and resume is not None else {}
    said = watch.first_gate.said if watch is not None and watch.first_gate is not None else {}
    fates: list[NodeFate] = []
    for target in assessment.targets:
        name, node = target.slurm_node, watched.get(target.node_id)
        repaired = node is not None and node.initiation == "initiated" and not state.dry_run
        held = name in ours
        fate = NodeFate(node=name, instance=target.node_id, fate="untouched", held=held, acted=held or repaired)
        if node is not None:
            new = node.gate_failure.instance if node.left_unhealthy and node.gate_failure else node.replacement_node_id
            fate = fate.model_copy(
                update={
                    "replacement": new,
                    "replacement_node": _node_name(orchestrator, new, node.replacement_slurm_node),
                    "replacement_status": node.status,
                }
            )
        service = node.service_name if node is not None else name
        if state.dry_run:
            fates.append(fate.model_copy(update={"held": False, "acted": False, "detail": "a dry run: nothing was changed"}))
        elif service in resumed or name in resumed:
            back = {"fate": "in_service", "held": False, "acted": True, "replacement_node": service if service != name else None}
            fates.append(fate.model_copy(update=back))
        elif service in not_ours or name in not_ours or (name in theirs and not held):
            # (before the rejoin's resume time: a node the resume left cordoned by someone else is not in service)
            fates.append(fate.model_copy(update={"fate": "not_ours", "held": False, "detail": f"{word} by someone else: left so"}))
        elif node is not None and node.resumed_at is not None and node.gate_failure is None:
            back = {"fate": "in_service", "held": False, "acted": True, "replacement_node": service if service != name else None}
            fates.append(fate.model_copy(update=back))
        elif service in not_drained:
            detail = f"not {word} when it was to be given back (someone had given it back already)"
            fates.append(fate.model_copy(update={"fate": "in_service", "held": False, "detail": detail}))
        elif node is not None and node.left_unhealthy:
            detail = f"its repair {fate.replacement} failed the health check ({said.get(name, '') or 'see its drain reason'}); left {word}"
            fates.append(fate.model_copy(update={"fate": "out_of_service", "held": True, "acted": True, "detail": _cut(detail, 300)}))
        elif service in unhealthy:
            detail = f"its repair failed the health check ({unhealthy[service].detail or 'see its drain reason'}); left {word}"
            update = {"fate": "out_of_service", "node": service, "held": True, "acted": True, "detail": _cut(detail, 300)}
            fates.append(fate.model_copy(update=update))
        elif target.node_id in failed:
            f = failed[target.node_id]
            detail = f"HyperPod did not start its replacement ({f.error_code}: {f.message})" + (f"; left {word}" if held else "")
            fates.append(fate.model_copy(update={"fate": "out_of_service", "replace_refused": True, "detail": _cut(detail, 300)}))
        elif node is not None and not node.rejoined:
            what = "reboot" if node.action == "reboot" else "check" if node.action == "check" else "replacement"
            by = " (started by HyperPod itself)" if node.initiation in ("already_in_progress", "vanished") else ""
            status = f", {node.status}" if node.status else ""
            detail = f"its {what}{by} had not come back{status}" + (f"; left {word}" if held else "")
            fates.append(fate.model_copy(update={"fate": "replacing", "detail": detail}))
        elif node is not None and node.replacement_slurm_node and not node.renamed_in_service:
            detail = f"its replacement came back as {node.replacement_slurm_node}; {name} is left {word} (no host answers to it)"
            fates.append(fate.model_copy(update={"fate": "in_service", "held": False, "detail": detail}))
        elif held:
            detail = f"{word} by this incident, which ended before it was given back"
            fates.append(fate.model_copy(update={"fate": "out_of_service", "detail": detail}))
        elif name in absent:
            fates.append(fate.model_copy(update={"detail": "the orchestrator has no such node: nothing to cordon"}))
        else:
            fates.append(fate)
    fates += [
        NodeFate(node=s.node_id, instance=s.node_id, fate="skipped", detail=_cut(f"{s.reason}: {s.detail}", 300))
        for s in assessment.skipped
    ]
    return fates


def job_incident_job_fates(state: JobWorkflowState, outcome: Outcome, cause: str | None) -> list[JobFate]:
    """The one job JobRecovery is about, with what became of it."""
    request = state.request
    if request is None:
        return []
    classification, restart, reply = state.classification, state.restart, state.resubmission
    spec = classification.job if classification is not None else None
    if spec is None and state.inspection is not None:
        spec = state.inspection.result.job
    base = fate_of_job(request.job_id, spec.name if spec else (request.failure.name if request.failure else request.job_id), spec)
    plan = restart.plan if restart is not None else None
    if reply is not None:
        return [fate_of_reply(base, reply, plan)]
    if classification is not None and request.hang is not None and classification.kind in ("left_alone", "recovered_by_itself"):
        # a hang incident that did nothing: the job runs on untouched, or it ended by itself
        running = spec is not None and (classification.kind == "recovered_by_itself" or still_running_on_either(spec.state))
        return [
            base.model_copy(
                update={
                    "fate": "left_running" if running else "ended_by_itself",
                    "copy_id": request.job_id if running else None,
                    "copy_state": spec.state[:64] if running and spec is not None else None,
                    "reason": _cut(classification.reason),
                }
            )
        ]
    if classification is not None and classification.kind == "left_alone":
        failure = request.failure
        owner_restarts = (spec is not None and (spec.auto_resume or spec.restarted_by is not None)) or (
            failure is not None and failure.auto_resume
        )
        requeued = not owner_restarts
        fate: Literal["requeued_by_slurm", "restarted_by_owner"] = "requeued_by_slurm" if requeued else "restarted_by_owner"
        return [
            base.model_copy(update={"fate": fate, "copy_id": request.job_id if requeued else None, "reason": _cut(classification.reason)})
        ]
    owners = state.checkpoints.left_alone if state.checkpoints is not None else []
    if owners and reply is None:  # someone else restarts it (Find Newest Checkpoint set it aside)
        return [base.model_copy(update={"fate": "restarted_by_owner", "reason": _cut(owners[0].reason)})]
    if restart is not None and restart.action in ("resubmitted_by_node_recovery", "left_alone") and restart.resubmitted_by:
        ours = restart.action == "resubmitted_by_node_recovery"
        return [
            base.model_copy(
                update={
                    "fate": "resubmitted" if ours else "resubmitted_before",
                    "copy_id": restart.resubmitted_as,
                    **({"copy_name": restart.resubmitted_name} if restart.resubmitted_name else {}),
                    "by": restart.resubmitted_by,
                    "reason": "" if ours else _cut(restart.reason),
                }
            )
        ]
    if state.dry_run:
        if plan is not None or (restart is not None and restart.action == "resubmit"):
            step = {"checkpoint_step": plan.checkpoint.step, "checkpoint_uri": plan.checkpoint.uri} if plan is not None else {}
            return [base.model_copy(update={"fate": "would_resubmit", **step})]
        would_not = (restart.reason if restart is not None else cause) or f"the drill ended {outcome} before it decided"
        return [base.model_copy(update={"fate": "would_not_resubmit", "reason": _cut(would_not)})]
    why = restart.reason if restart is not None and restart.action in ("capped", "left_alone") else cause
    why = why or f"the incident ended {outcome} before it resubmitted the job"
    step = {"checkpoint_step": plan.checkpoint.step, "checkpoint_uri": plan.checkpoint.uri} if plan is not None else {}
    return [base.model_copy(update={"reason": _cut(why), **step})]


def with_claims(fates: Sequence[JobFate], claim_of: Callable[[str], ResubmissionClaim | None], incident_id: str) -> list[JobFate]:
    """The jobs this incident did not resubmit, as the ledger's resubmission claims tell them: one
    another incident resubmitted has that copy (the node recovery this incident started counts as
    this incident's own); one whose claim another incident holds without a new job may have a copy."""
    ours = {incident_id, node_execution_name(incident_id)}
    corrected: list[JobFate] = []
    for fate in fates:
        claim = claim_of(fate.job) if fate.fate == "not_resubmitted" else None
        if claim is not None and claim.incident_id == incident_id and not claim.new_job_id and fate.unanswered:
            why = "this incident claimed its resubmission and no answer was recorded: a copy may exist"
            corrected.append(fate.model_copy(update={"fate": "copy_unknown", "reason": why}))
        elif claim is None or (claim.incident_id == incident_id and not claim.new_job_id):
            corrected.append(fate)
        elif claim.new_job_id:
            mine = claim.incident_id in ours
            corrected.append(
                fate.model_copy(
                    update={
                        "fate": "resubmitted" if mine else "resubmitted_before",
                        "copy_id": claim.new_job_id,
                        "copy_state": None,
                        "by": claim.incident_id,
                        "reason": "" if mine else f"resubmitted by {claim.incident_id}",
                    }
                )
            )
        else:
            why = f"incident {claim.incident_id} holds its resubmission claim and has not recorded a copy"
            corrected.append(fate.model_copy(update={"fate": "copy_unknown", "by": claim.incident_id, "reason": why}))
    return corrected


def acted(job_fates: Iterable[JobFate], node_fates: Iterable[NodeFate]) -> bool:
    """The incident (or the node recovery it started) changed something: a copy of a job, or a
    node taken out of service, repaired or given back. Without that it is not ``recovered``."""
    return any(f.fate == "resubmitted" for f in job_fates) or any(n.acted for n in node_fates)
