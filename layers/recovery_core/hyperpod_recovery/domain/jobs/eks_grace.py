"""How long a stopped job's pods may run on, and whether a resubmission's wait covers it (EKS).

A job we stop (runPolicy.suspend, or its Kueue Workload made inactive) has its pods deleted by its
operator; each pod then runs through its ``terminationGracePeriodSeconds`` (a training job that saves
a checkpoint on SIGTERM often sets 120-600 s) before its kubelet kills what is left, and its copy is
made only once they are gone (adapters/eks_stop.py). Resubmit Job waits for them by its own Retry
clause on OldCopyStillStopping (statemachines/*.asl.json): a fixed IntervalSeconds x MaxAttempts,
which tests/contract/test_template.py holds equal to the figures here (the one source of the limit).

A job whose pods may take longer than that is never re-created at once: Find Newest Checkpoint
stops it at once (Resubmit Jobs Now, a stop only) and re-creates it after the rejoin, by which time
its pods have had minutes to go.

Pure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_recovery.models.kubernetes import MAX_GRACE_SECONDS_CARRIED

# Kubernetes' terminationGracePeriodSeconds when a pod spec leaves it unset (k8s.io/api core/v1
# DefaultTerminationGracePeriodSeconds, applied by the API server's defaulting).
DEFAULT_GRACE_SECONDS = 30
# The OldCopyStillStopping Retry clause of Resubmit Job Now, Resubmit Job and Grow Back Job (BackoffRate 1,
# JitterStrategy NONE): its tries come this long after the first, which stopped the job.
OLD_COPY_RETRY_INTERVAL_SECONDS = 45
OLD_COPY_RETRY_ATTEMPTS = 2
OLD_COPY_WAIT_SECONDS = OLD_COPY_RETRY_INTERVAL_SECONDS * OLD_COPY_RETRY_ATTEMPTS


def longest_grace(replica_specs: list[dict[str, Any]]) -> int:
    """The longest terminationGracePeriodSeconds the job's pods get: the largest of its replicas' pod
    templates, DEFAULT_GRACE_SECONDS where one is unset. A value that is no whole number (the API
    server would refuse such a pod) is not guessed at: it counts as the longest we carry."""
    longest = 0
    for replica in replica_specs:
        template = replica.get("template") if isinstance(replica, dict) else None
        spec = template.get("spec") if isinstance(template, dict) else None
        value = spec.get("terminationGracePeriodSeconds") if isinstance(spec, dict) else None
        if value is None:
            value = DEFAULT_GRACE_SECONDS
        elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
            value = MAX_GRACE_SECONDS_CARRIED
        longest = max(longest, min(value, MAX_GRACE_SECONDS_CARRIED))
    return longest if replica_specs else DEFAULT_GRACE_SECONDS


def outlives_the_wait(grace_seconds: int | None) -> bool:
    """A stopped copy's pods may still run when a resubmission's last try comes: their grace period is
    not shorter than the wait (at its end their kubelet has yet to kill what is left and confirm it).
    None (a Slurm job, or an older capture): nothing says so."""
    return grace_seconds is not None and grace_seconds >= OLD_COPY_WAIT_SECONDS


def after_the_rejoin(grace_seconds: int, *, stopped_at_once: bool) -> str:
    """Why the job is re-created after the rejoin, in a human's words (the plan's ``stop_grace_seconds``),
    and whether it was stopped at once (CheckpointPlan.early_stops)."""
    why = (
        f"re-created after the rejoin: its pods may take up to {grace_seconds} s to stop (terminationGracePeriodSeconds) "
        f"and a re-creation waits {OLD_COPY_WAIT_SECONDS} s for them"
    )
    if stopped_at_once:
        return f"{why}, so it is stopped at once: they have until then"
    return f"{why}; it is stopped after the rejoin, not at once (the incident has no room left for the stop)"


def terminating(pod: dict[str, Any]) -> bool:
    """Its deletion was asked: it runs until its grace period ends (deletionTimestamp) and its kubelet confirms it."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def still_running(live: list[dict[str, Any]], now: datetime) -> str:
    """What still runs of a copy (live_pods_of), in words: how many pods, for those Terminating until
    when (the end of their grace period, the latest deletionTimestamp) or, past it, that no kubelet has
    confirmed them stopped; then which (last: a record cuts a long text, and the when matters more)."""
    names = ", ".join(str((p.get("metadata") or {}).get("name")) for p in live[:3]) + (f" +{len(live) - 3}" if len(live) > 3 else "")
    said = f"{len(live)} pod(s) of it still run"
    ending = [p for p in live if terminating(p)]
    if not ending:
        return f"{said} ({names})"
    stamps = [_time((p.get("metadata") or {}).get("deletionTimestamp")) for p in ending]
    known = [t for t in stamps if t is not None]
    which = "all" if len(ending) == len(live) else f"{len(ending)} of them"
    if not known:
        return f"{said}, {which} Terminating ({names})"
    end = max(known)
    when = end.strftime("%Y-%m-%dT%H:%M:%SZ")
    if now <= end:
        return f"{said}, {which} Terminating: their grace period ends at {when} ({names})"
    return (
        f"{said}, {which} Terminating past the end of their grace period ({when}): no kubelet has confirmed "
        f"them stopped (on a node that is not Ready none can) ({names})"
    )


def _time(value: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00")) if isinstance(value, str) else None
    except ValueError:
        return None
    return when if when is not None and when.tzinfo is not None else None
