"""Record Outcome, for both workflows (NodeRecovery's Record Outcome, Escalate Incident, Record
Duplicate, Record Rejection; JobRecovery's Record Job Outcome, Escalate Job Incident, Record Job
Rejection): decide the outcome, save the incident record, count the incident where the safety rules
look, settle what it holds, notify.

Once however often it runs: Step Functions retries it when its answer is lost (it ran, Lambda's
response did not arrive) or it failed half-way. The notification is an effect of the incident in
the ledger (``NOTIFICATION``), begun before anything is written and done once it went out, with the
answer: a rerun after it was done answers the same and sends nothing; a rerun after a failure
half-way decides again at the first run's moment (the same record, log entry and hold) and sends
it. SNS has no idempotency key for a standard topic, so the one window left is a run that stops
between the publish and the ledger's write: its rerun sends the page again (a page is never lost
for it; docs/decisions.md). It went out once any of its channels took it (adapters/notifier.py): a
channel that failed is counted and alarmed, not retried by failing the step, whose rerun would send
the other channels again; only when none took it does the step fail, to be retried.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from hyperpod_recovery.domain.elastic.estimates import MEASURED_WINDOW_DAYS
from hyperpod_recovery.domain.messages.notification import notification
from hyperpod_recovery.domain.messages.severity import severity_of
from hyperpod_recovery.domain.record.incident import IncidentTable, conclude, submitted_here
from hyperpod_recovery.models.job_recovery import RecordJobOutcomeInput, RestartEntry
from hyperpod_recovery.models.node_recovery import OutcomeResult, RecordOutcomeInput
from hyperpod_recovery.models.records import NOTIFICATION, IncidentRecord, MeasuredRestart, RecoveryLogEntry
from hyperpod_recovery.steps.settle import settle_holdings

if TYPE_CHECKING:
    from hyperpod_recovery.domain.messages.advice import Deployment
    from hyperpod_recovery.ports import IncidentEnd, IncidentStore, Lineages, Notifier, RecoveryLog


def record_outcome(
    step: RecordOutcomeInput | RecordJobOutcomeInput,
    *,
    ledger: IncidentEnd,
    notifier: Notifier,
    cluster: str,
    execution_url: str,
    now: datetime,
    escalation_hold: timedelta = timedelta(0),
    log_seconds: int = 7 * 86_400,
    orchestrator: Literal["slurm", "eks"] = "slurm",
    deployment: Deployment | None = None,
    stack_dry_run: bool = False,
    on_recorded: Callable[[OutcomeResult], None] = lambda result: None,
) -> OutcomeResult:
    """``on_recorded`` is called once with the outcome when this run made it (the handler's metrics),
    not when a rerun answers what an earlier run did. ``stack_dry_run``: the stack's DryRun, which
    keeps the notification off the pager and chat whatever the record says (domain/messages/severity.py)."""
    effect = ledger.begin_effect(step.execution_name, NOTIFICATION, now)
    if effect.done and effect.result is not None:
        return OutcomeResult.model_validate_json(effect.result)
    # A rerun decides at the first run's moment: the same record, log entry and hold as it.
    at = effect.started_at
    # Each workflow's handler loads its own incident table only (a cold start pays for one).
    if isinstance(step, RecordOutcomeInput):
        from hyperpod_recovery.domain.record.node_incident import NODE_INCIDENT

        step, table = with_jobs_from_ledger(step, ledger), cast("IncidentTable[Any]", NODE_INCIDENT)
    else:
        from hyperpod_recovery.domain.record.job_incident import JOB_INCIDENT

        table = cast("IncidentTable[Any]", JOB_INCIDENT)
    result, record, facts = conclude(
        table,
        step,
        cluster=cluster,
        now=at,
        orchestrator=orchestrator,
        claim_of=lambda job_id: ledger.resubmission_claim(cluster, job_id),
    )
    ledger.save_incident(record)
    # Written before settling, so a retried step cannot skip them (each is idempotent per incident).
    if isinstance(step, RecordOutcomeInput):
        count_node_repairs(step, record, ledger=ledger, cluster=cluster, now=at, log_seconds=log_seconds)
    else:
        count_job_restart(step, record, ledger=ledger, cluster=cluster, now=at)
    # Escalated nodes stay locked for a while so the automation does not loop on a node a human is
    # looking at; everything else is released at once.
    hold_until = at + escalation_hold if record.outcome == "escalated" else None
    settle_holdings(ledger, step.execution_name, resubmitted=facts.resubmitted, hold_locks_until=hold_until, now=at)
    if not effect.done:  # (done without an answer: Reconcile Execution sent it; never sent twice)
        subject, body = notification(record, execution_url, hold_until=hold_until if facts.locked_nodes else None, deployment=deployment)
        notifier.publish(
            subject,
            body,
            _attributes(record, cluster) | {"severity": severity_of(record, stack_dry_run=stack_dry_run), "incident": record.incident_id},
        )
        ledger.finish_effect(step.execution_name, NOTIFICATION, now, result=result.model_dump_json())
    on_recorded(result)
    return result


def _attributes(record: IncidentRecord, cluster: str) -> dict[str, str]:
    """SNS message attributes subscribers filter on (docs/runbook.md): JobRecovery's say so."""
    attributes = {"outcome": record.outcome, "cluster": cluster}
    return attributes if record.workflow == "node" else {**attributes, "workflow": record.workflow}


def with_jobs_from_ledger(step: RecordOutcomeInput, ledger: IncidentStore) -> RecordOutcomeInput:
    """The step with the affected jobs' descriptions the workflow forgot (Forget Job Details) back
    from the ledger, where Find Newest Checkpoint put them."""
    jobs = step.state.jobs
    if jobs is None or jobs.result.jobs or not jobs.result.count:
        return step
    found = ledger.jobs_of(step.execution_name) or []
    restored = jobs.model_copy(update={"result": jobs.result.model_copy(update={"jobs": found})})
    return step.model_copy(update={"state": step.state.model_copy(update={"jobs": restored})})


def count_node_repairs(
    step: RecordOutcomeInput, record: IncidentRecord, *, ledger: RecoveryLog, cluster: str, now: datetime, log_seconds: int
) -> None:
    """An incident that acted on nodes counts in the breaker's and the repeat offenders' windows."""
    assessment = step.state.assessment
    safety = assessment.safety if assessment else None
    if assessment is None or safety is None or not safety.reserved or record.outcome not in ("recovered", "escalated"):
        return
    hostnames = [t.slurm_node for t in assessment.targets]
    # A replacement under another name (always on EKS: a Kubernetes node is named after its
    # instance) is the same slot: logged under its new name too, so a slot that fails again after its
    # replacement counts as the same node for the repeat-offender window.
    rejoin = step.state.rejoin
    hostnames += [n.replacement_slurm_node for n in (rejoin.nodes if rejoin else []) if n.replacement_slurm_node]
    ledger.log_recovery(
        cluster,
        RecoveryLogEntry(
            incident=step.execution_name,
            at=now,
            hostnames=hostnames,
            outcome=record.outcome,
            replaced_seconds=replaced_seconds(step, record),
            instance_groups=sorted({t.instance_group for t in assessment.targets})[:20],
            restarts=measured_restarts(step),
        ),
        # (kept for the safety policy's windows, and at least as long as shrink-or-wait reads measured figures)
        max(log_seconds, MEASURED_WINDOW_DAYS * 86_400),
    )


def measured_restarts(step: RecordOutcomeInput) -> list[MeasuredRestart]:
    """The restarts the grow-back loop measured, each by its job's checkpoint location (as Find Newest
    Checkpoint kept the job: the location its next shrink-or-wait looks the figure up by)."""
    specs = {j.job_id: j for j in step.state.jobs.result.jobs} if step.state.jobs is not None else {}
    found = []
    for job in step.state.grow_backs:
        spec = specs.get(job.old_job_id)
        if job.restart_seconds is not None and spec is not None and spec.checkpoint_uri:
            found.append(MeasuredRestart(checkpoint_uri=spec.checkpoint_uri, seconds=job.restart_seconds))
    return found


def replaced_seconds(step: RecordOutcomeInput, record: IncidentRecord) -> int | None:
    """How long the replacement took, from its call to the nodes' return through the health gate
    (Resume Nodes' answer): what a job without a spare waits. None unless every node was replaced
    (a reboot or a hang's check is not a replacement) and the incident recovered."""
    replacement, resume = step.state.replacement, step.state.resume
    if record.outcome != "recovered" or replacement is None or resume is None or replacement.dry_run or resume.dry_run:
        return None
    nodes = replacement.watch.nodes
    if not nodes or any(n.action != "replace" or n.escalated_to_replace_at is not None for n in nodes):
        return None
    return max(0, int((resume.completed_at - replacement.at).total_seconds()))


def count_job_restart(step: RecordJobOutcomeInput, record: IncidentRecord, *, ledger: Lineages, cluster: str, now: datetime) -> None:
    """A restart of the job, by this incident or by the node recovery it started, is one restart of
    the job's lineage: the restart budget and the crash-loop rule count it."""
    state = step.state
    reply, restart, classification = state.resubmission, state.restart, state.classification
    job_id = state.request.job_id if state.request else "?"
    if reply is not None and submitted_here(reply) and reply.result.new_job_id and restart and restart.plan:
        entry = RestartEntry(
            failed_job_id=reply.result.old_job_id,
            new_job_id=reply.result.new_job_id,
            kind=classification.kind if classification and classification.kind in ("node_caused", "hung", "slow") else "application",
            checkpoint_step=restart.plan.checkpoint.step,
            restarted_at=reply.completed_at,
            incident=step.execution_name,
        )
        ledger.record_restart(cluster, restart.lineage_root or reply.result.old_job_id, entry)
    elif restart is not None and restart.action == "resubmitted_by_node_recovery" and restart.resubmitted_as and state.checkpoints:
        # Our nested NodeRecovery resubmitted the job: still one restart of this lineage.
        chosen = state.checkpoints.resumable[0].checkpoint.step if state.checkpoints.resumable else 0
        entry = RestartEntry(
            failed_job_id=job_id,
            new_job_id=restart.resubmitted_as,
            kind=classification.kind if classification and classification.kind in ("hung", "slow") else "node_caused",
            checkpoint_step=chosen,
            restarted_at=now,
            incident=restart.resubmitted_by or step.execution_name,
        )
        ledger.record_restart(cluster, restart.lineage_root or job_id, entry)
