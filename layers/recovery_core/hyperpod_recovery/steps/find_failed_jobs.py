"""Find Failed Jobs (EKS, scheduled every minute): EKS sends no event when a training job fails, so
this asks the Kubernetes API, and starts one JobRecovery per failure, as the Slurm agent's epilog
event starts one through intake.

A failure is started when the job opted in to our recovery, or when its own restarter gave up on it
(the HyperPod training operator, HyperPod's job auto-resume): JobRecovery then classifies it with the
same rules, budget, backoff and crash-loop detection as on Slurm. The execution is named by the
job's uid and the moment it failed (domain/execution_names.py), so a failure seen by many polls
starts one execution: Step Functions turns the same name away. A failure older than
MaxEventAgeSeconds is not started (it would be refused as stale at every poll).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from hyperpod_recovery.adapters.eks_orchestrator import installed_jobs, job_pod_nodes
from hyperpod_recovery.domain.eks_jobs import failed_at, failure_event, recovery_wanted
from hyperpod_recovery.domain.execution_names import job_execution_name
from hyperpod_recovery.domain.normalize import GuardedCluster
from hyperpod_recovery.errors import StartExecutionFailed
from hyperpod_recovery.models.job_events import JobFailedDetail
from hyperpod_recovery.models.kubernetes import JOB_KINDS, KUBE_JOB_NAME_MAX, KubeJobRef, is_dns1123_label, is_dns1123_subdomain
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.observability import logger
from hyperpod_recovery.ports import KubeApi, Workflows


def find_failed_jobs(
    *, kube: KubeApi, workflows: Workflows, guarded: GuardedCluster, max_age_seconds: int, now: datetime
) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for kind in JOB_KINDS:
        # (a kind whose CRD is not installed lists nothing: the training operator is an add-on)
        for job in installed_jobs(kube, kind):
            if not recovery_wanted(job, kind):
                continue
            ended = failed_at(job)
            if ended is None or now - ended > timedelta(seconds=max_age_seconds):
                counts["stale"] += 1  # (refused as stale at every poll: never started, never listed further)
                continue
            try:
                detail = _failure(kube, job, kind, guarded.name)
            except (ValueError, ValidationError) as exc:  # one object we cannot read never starves the others
                logger.warning("a failed job could not be read", extra={"kind": kind, "error": str(exc)[:300]})
                counts["invalid"] += 1
                continue
            if detail is None:
                continue
            request = JobRecoveryRequest(
                cluster=guarded.name,
                job_id=detail.job_id,
                source="job_failed",
                reason=f"{kind} {detail.name} failed: {detail.reason}"[:2048],
                event_id=detail.event_key,
                detected_at=detail.ended_at,
                failure=detail,
            )
            execution = job_execution_name(detail.job_id, detail.ended_at)
            try:
                started = workflows.start(execution, request.model_dump_json(exclude_none=True), "job")
            except StartExecutionFailed:
                # The next poll tries again (the same name: still at most one execution).
                logger.exception("could not start job recovery; the next poll tries again", extra={"incident": execution})
                counts["start_failed"] += 1
                continue
            counts["started" if started == "started" else "already_started"] += 1
            if started == "started":
                logger.info("job recovery started", extra={"incident": execution, "job": detail.name, "kind": kind})
    return dict(counts)


def _failure(kube: KubeApi, job: dict[str, Any], kind: str, cluster: str) -> JobFailedDetail | None:
    metadata = job.get("metadata") or {}
    namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
    if not (is_dns1123_label(namespace) and len(name) <= KUBE_JOB_NAME_MAX and is_dns1123_subdomain(name)):
        return None
    ref = KubeJobRef.model_validate({"kind": kind, "namespace": namespace, "name": name})
    detail = failure_event(job, kind, cluster, job_pod_nodes(kube, ref, job))
    return detail.model_copy(update={"kube": ref}) if detail is not None else None
