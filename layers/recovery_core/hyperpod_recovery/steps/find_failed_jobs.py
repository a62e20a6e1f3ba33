"""Find Failed Jobs (EKS, scheduled every minute): EKS sends no event when a training job fails, so
this asks the Kubernetes API, and starts one JobRecovery per failure, as the Slurm agent's epilog
event starts one through intake.

A failure is started when the job opted in to our recovery, or when its own restarter gave up on it
(the HyperPod training operator, HyperPod's job auto-resume): JobRecovery then classifies it with the
same rules, budget, backoff and crash-loop detection as on Slurm. The execution is named by the
job's uid and the moment it failed (domain/intake/execution_names.py), so a failure seen by many polls
starts one execution: Step Functions turns the same name away. A failure older than
MaxEventAgeSeconds is not started (it would be refused as stale at every poll).

At scale (a shared file system failing 500 jobs at once) a poll is bounded by its function's time:
* it remembers what it started (one ledger entry per failure, read with one query per poll), so a
  failure costs its pod list and its start once, not at every tick;
* the failures not started yet go oldest first (the nearest to going stale), and the poll stops
  starting more while it still has STOP_WITH_MS of its time left; the next tick goes on with the rest
  (counted ``deferred``);
* one job it cannot read (a Failed condition without a readable time, a name Kubernetes could not
  hold) is that job's problem: counted ``invalid`` and logged, never the poll's.

A HyperPodPyTorchJob whose log monitoring rule evaluated to HANGING or SLOW (the training operator
restarts it itself) is recorded as a verdict of rule hpto_hang or hpto_slow, once per episode, told
once (an informational notice), and left to the operator (steps/verdicts.py
record_operator_faults).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from hyperpod_recovery.domain.intake.execution_names import job_execution_name
from hyperpod_recovery.domain.intake.freshness import EventAgeLimits
from hyperpod_recovery.domain.jobs.eks_jobs import failed_at, failed_exit_code, failure_event, recovery_wanted
from hyperpod_recovery.errors import KubeObjectGone, LedgerError, LedgerUnavailable, StartExecutionFailed
from hyperpod_recovery.models.kubernetes import JOB_KINDS, KUBE_JOB_NAME_MAX, KubeJobRef, is_dns1123_label, is_dns1123_subdomain
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.observability import logger
from hyperpod_recovery.steps.verdicts import Teller, record_operator_faults

if TYPE_CHECKING:
    from hyperpod_recovery.domain.intake.normalize import GuardedCluster
    from hyperpod_recovery.models.job_events import JobFailedDetail
    from hyperpod_recovery.ports import FailurePolls, Marks, TrainingJobs, Workflows

__all__ = ["STOP_WITH_MS", "Teller", "find_failed_jobs"]

# A poll starts no more failures once less than this is left of its function's time: one failure's
# pod list and start (each call well under a second; the adapters' timeouts bound a slow one), the
# ledger's note, and the metrics flush fit in it. What is left goes to the next tick, a minute later.
STOP_WITH_MS = 10_000


def find_failed_jobs(
    *,
    jobs: TrainingJobs,
    workflows: Workflows,
    ledger: FailurePolls,
    guarded: GuardedCluster,
    teller: Teller,
    max_age_seconds: int,
    max_skew_seconds: int,
    now: datetime,
    remaining_ms: Callable[[], int],
) -> dict[str, int]:
    """``jobs``: the cluster's training jobs, read for this poll; ``remaining_ms``: the function's time
    left (Lambda's context.get_remaining_time_in_millis);
    ``teller``: where an operator fault's verdict, once kept, is told."""
    counts: Counter[str] = Counter()
    limits = EventAgeLimits(max_age_seconds, max_skew_seconds)
    try:
        started = ledger.failures_started(guarded.name, now)
    except (LedgerUnavailable, LedgerError):
        # (a poll without its memory still starts each failure once: the execution's name is the failure)
        logger.warning("could not read which failures were started; starting them again, by the same names")
        started = set()
    due: list[tuple[datetime, str, str, dict[str, Any]]] = []
    for kind in JOB_KINDS:
        # (a kind whose CRD is not installed lists nothing: the training operator is an add-on)
        for job in jobs.installed(kind):
            if kind == "HyperPodPyTorchJob":
                # Its log monitoring's HANGING and SLOW faults, which the operator restarts itself: recorded as
                # verdicts (observe-only), the job left to the operator.
                record_operator_faults(job=job, cluster=guarded.name, ledger=ledger, teller=teller, now=now, limits=limits, counts=counts)
            try:
                ended = failed_at(job) if recovery_wanted(job, kind) else None
            except ValueError as exc:  # one object we cannot read never starves the others
                _unreadable(counts, job, kind, exc)
                continue
            if ended is None:
                continue
            uid = str((job.get("metadata") or {}).get("uid") or "")
            if now - ended > timedelta(seconds=max_age_seconds):
                counts["stale"] += 1  # (refused as stale at every poll: never started, never listed further)
            elif f"{uid}:{int(ended.timestamp())}" in started:
                counts["already_started"] += 1
            else:
                due.append((ended, uid, kind, job))
    due.sort(key=lambda d: (d[0], d[1]))
    for position, (ended, _, kind, job) in enumerate(due):
        if remaining_ms() < STOP_WITH_MS:
            counts["deferred"] += len(due) - position
            logger.warning("poll out of time; the next tick goes on", extra={"deferred": len(due) - position})
            break
        _start(jobs, workflows, ledger, guarded, job, kind, ended + timedelta(seconds=max_age_seconds), counts)
    return dict(counts)


def _start(
    jobs: TrainingJobs,
    workflows: Workflows,
    ledger: Marks,
    guarded: GuardedCluster,
    job: dict[str, Any],
    kind: str,
    stale_at: datetime,
    counts: Counter[str],
) -> None:
    try:
        detail = _failure(jobs, job, kind, guarded.name)
    except KubeObjectGone:
        return  # (deleted since it was listed: nothing to recover)
    except (ValueError, ValidationError) as exc:
        _unreadable(counts, job, kind, exc)
        return
    if detail is None:
        _unreadable(counts, job, kind, ValueError("its namespace, name or uid is none Kubernetes could hold"))
        return
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
        return
    counts["started" if started == "started" else "already_started"] += 1
    if started == "started":
        logger.info("job recovery started", extra={"incident": execution, "job": detail.name, "kind": kind})
    try:
        ledger.note_failure_started(guarded.name, detail.event_key, stale_at)
    except (LedgerUnavailable, LedgerError):
        logger.warning(
            "could not remember a started failure; the next poll starts it again (the same execution)", extra={"incident": execution}
        )


def _unreadable(counts: Counter[str], job: dict[str, Any], kind: str, exc: Exception) -> None:
    metadata = job.get("metadata") or {}
    logger.warning(
        "a failed job could not be read",
        extra={"kind": kind, "job": f"{metadata.get('namespace')}/{metadata.get('name')}"[:300], "error": str(exc)[:300]},
    )
    counts["invalid"] += 1


def _failure(jobs: TrainingJobs, job: dict[str, Any], kind: str, cluster: str) -> JobFailedDetail | None:
    metadata = job.get("metadata") or {}
    namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
    if not (is_dns1123_label(namespace) and len(name) <= KUBE_JOB_NAME_MAX and is_dns1123_subdomain(name)):
        return None
    ref = KubeJobRef.model_validate({"kind": kind, "namespace": namespace, "name": name})
    pods = jobs.pods(ref, job)  # (one list: where it ran, and how its containers ended)
    detail = failure_event(job, kind, cluster, jobs.pod_nodes(ref, job, pods), exit_code=failed_exit_code(pods))
    return detail.model_copy(update={"kube": ref}) if detail is not None else None
