"""JobRecovery's own steps: Validate Job Request, Classify Failure, Check Other Recovery,
Plan Job Restart. (Capture Job Spec and Check Job Nodes are controller commands:
steps/controller_commands.py; Record Job Outcome is steps/record.py's, for both workflows. Find
Newest Checkpoint and Resubmit Job are shared with NodeRecovery.)"""

from __future__ import annotations

from datetime import datetime

from pydantic import TypeAdapter

from hyperpod_recovery.domain.freshness import EventAgeLimits
from hyperpod_recovery.domain.job_failure import RestartPolicy, classify_failure, plan_restart, watch_other_recovery
from hyperpod_recovery.domain.normalize import GuardedCluster, translate_manual_job
from hyperpod_recovery.models.job_recovery import (
    CheckOtherRecoveryInput,
    ClassifyJobFailureInput,
    FailureClassification,
    OtherRecoveryWatch,
    PlanJobRestartInput,
    RestartDecision,
    ValidateJobRequestInput,
)
from hyperpod_recovery.models.requests import JobRecoveryRequest, JobStartInput, ManualJobRecoveryRequest
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import Cluster, Ledger
from hyperpod_recovery.steps.validate import admit, parse_start_input

_START_INPUT: TypeAdapter[ManualJobRecoveryRequest | JobRecoveryRequest] = TypeAdapter(JobStartInput)


def validate_job_request(
    step: ValidateJobRequestInput, *, guarded: GuardedCluster, stack_dry_run: bool, limits: EventAgeLimits, now: datetime
) -> JobRecoveryRequest:
    parsed = parse_start_input(_START_INPUT, step.request)
    request = translate_manual_job(parsed, now) if isinstance(parsed, ManualJobRecoveryRequest) else parsed
    return admit(request, guarded=guarded, execution_name=step.execution_name, stack_dry_run=stack_dry_run, limits=limits, now=now)


def classify_job_failure(
    step: ClassifyJobFailureInput, *, cluster: Cluster, now: datetime, node_timeout_seconds: int
) -> FailureClassification:
    classification = classify_failure(
        step.request,
        step.inspection.result.job,
        step.node_states.result.nodes,
        cluster.list_nodes(),
        step.execution_name,
        now,
    )
    if classification.node_request is not None:
        classification = classification.model_copy(update={"node_timeout_seconds": node_timeout_seconds})
    logger.info(
        "job failure classified",
        extra={"job_id": step.request.job_id, "kind": classification.kind, "reason": classification.reason},
    )
    return classification


def check_other_recovery(
    step: CheckOtherRecoveryInput, *, ledger: Ledger, poll_seconds: int, max_poll_seconds: int, deadline_seconds: int, now: datetime
) -> OtherRecoveryWatch:
    incidents = sorted(set(step.other_recovery.held_elsewhere.values()))
    records = {incident: ledger.get_incident(incident) for incident in incidents}
    return watch_other_recovery(
        step.other_recovery,
        records,
        poll_seconds=poll_seconds,
        max_poll_seconds=max_poll_seconds,
        deadline_seconds=deadline_seconds,
        now=now,
    )


def lineage_root_of(ledger: Ledger, cluster: str, job_id: str, resubmission_of: str | None) -> str:
    """The first job of the lineage: our ledger knows the jobs we resubmitted; a resubmission made
    some other way still names its predecessor in its comment (the event's resubmission_of)."""
    for candidate in (job_id, resubmission_of):
        if candidate:
            root = ledger.lineage_root(cluster, candidate)
            if root:
                return root
    return resubmission_of or job_id


def plan_job_restart(step: PlanJobRestartInput, *, ledger: Ledger, policy: RestartPolicy, now: datetime) -> RestartDecision:
    request, job = step.request, step.classification.job
    assert job is not None, "Plan Job Restart runs only for classified jobs"
    failure = request.failure
    root = lineage_root_of(ledger, request.cluster, job.job_id, failure.resubmission_of if failure else None)
    breaker = ledger.breaker(request.cluster)
    if breaker.state == "open":
        # The breaker stops every automatic restart too: a human is already looking at the cluster.
        # (A dry run says so: it would be capped, as a NodeRecovery drill says.)
        return RestartDecision(
            at=now,
            action="capped",
            reason=f"the circuit breaker is open since {breaker.changed_at}: {breaker.reason}",
            lineage_root=root,
        )
    decision = plan_restart(
        request,
        step.classification,
        step.checkpoints,
        claim=ledger.resubmission_claim(request.cluster, job.job_id),
        lineage_root=root,
        history=ledger.restart_history(request.cluster, root),
        policy=policy,
        execution_name=step.execution_name,
        now=now,
    )
    logger.info("restart planned", extra={"job_id": job.job_id, "action": decision.action, "reason": decision.reason})
    return decision
