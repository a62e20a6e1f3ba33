"""Stopping a training job for certain before its copy is made (Resubmit Job, a grow-back, a stop only).

A job Kueue manages is stopped by its Workload's ``spec.active: false`` (Kueue un-suspends a suspended
job whose Workload is admitted); any other by ``runPolicy.suspend``. The stop is read back: the
Workload inactive, the job suspended, and no pod of it left running, pending or Terminating (a
Terminating pod runs through its grace period: domain/jobs/eks_grace.py). Where it cannot be made certain,
nothing is created (JobSpecUnavailable, saying why); while its pods are still going, the copy waits
(OldCopyStillStopping, which the workflow tries again).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.jobs.eks_grace import still_running, terminating
from hyperpod_recovery.domain.jobs.eks_jobs import finished, kueue_managed, live_pods_of, suspended
from hyperpod_recovery.errors import (
    JobSpecUnavailable,
    KubeAccessDenied,
    KubeConflict,
    KubeRequestRejected,
    KubeThrottled,
    KubeUnavailable,
    OldCopyStillStopping,
)
from hyperpod_recovery.models.commands import ResubmitResult
from hyperpod_recovery.models.kubernetes import HPTO_JOB_LABEL, KUBEFLOW_JOB_NAME_LABEL, KUEUE_QUEUE_LABEL, KubeJobRef

if TYPE_CHECKING:
    from hyperpod_recovery.adapters.eks_workloads import KueueWorkloads
    from hyperpod_recovery.ports import KubeApi

# What keeps a stop only from stopping the job now: said in its answer, never raised (the re-creation
# after the rejoin stops the job again first, and fails there, under its own name, if it must).
_NOT_STOPPED_NOW = (JobSpecUnavailable, KubeAccessDenied, KubeRequestRejected, KubeUnavailable, KubeThrottled, KubeConflict)


def _suspend_operation(job: dict[str, Any]) -> dict[str, Any]:
    if isinstance((job.get("spec") or {}).get("runPolicy"), dict):
        return {"op": "add", "path": "/spec/runPolicy/suspend", "value": True}
    return {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}


class JobStopper:
    """One command's stops (Kueue's API discovered at most once: ``kueue``)."""

    def __init__(self, kube: KubeApi, kueue: KueueWorkloads, now: Callable[[], datetime]) -> None:
        self.kube = kube
        self.kueue = kueue
        self.now = now

    def stop(self, ref: KubeJobRef, old: dict[str, Any]) -> bool:
        """Stop the old job for certain, or say why it cannot be; then read back. True: it was running
        and is stopped now. OldCopyStillStopping: stopped, and something of it still runs."""
        if finished(old):
            self.no_pod_left(ref, old, "ended")
            return False
        workloads, version = self.kueue.of_job(ref, old)
        if workloads:
            assert version is not None
            self.kueue.deactivate_all(ref, old, workloads, version)
        elif kueue_managed(old):
            seen = "no Workload of it was found" if version is not None else "Kueue is not installed (no kueue.x-k8s.io is served)"
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name} asks Kueue to admit it ({KUEUE_QUEUE_LABEL}) but {seen}: suspending it "
                "would be undone once Kueue admits it, so it cannot be stopped for certain; nothing created"
            )
        elif not suspended(old):
            self.kube.patch_job(ref, [{"op": "test", "path": "/metadata/uid", "value": old["metadata"]["uid"]}, _suspend_operation(old)])
        now = self.kube.get_job(ref)
        if now["metadata"].get("uid") != old["metadata"].get("uid"):
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name} was replaced by another object while being stopped: nothing created"
            )
        if not suspended(now):
            if workloads:
                raise OldCopyStillStopping(f"Kueue has not suspended {ref.namespace}/{ref.name} yet (its Workload is inactive)")
            if ((now.get("spec") or {}).get("runPolicy") or {}).get("suspend") is False:
                raise JobSpecUnavailable(
                    f"{ref.kind} {ref.namespace}/{ref.name} was suspended and something un-suspended it again (a controller "
                    "we do not know of): it cannot be stopped for certain; nothing created"
                )
            raise JobSpecUnavailable(
                f"{ref.kind} {ref.namespace}/{ref.name} was asked to suspend and the API server accepted it, but "
                "runPolicy.suspend is not on the job read back: its PyTorchJob CRD has no such field (Kubeflow's training "
                "operator older than 1.7 prunes it), so it cannot be stopped by us; nothing created. Stop it by hand "
                f"(kubectl delete pytorchjob -n {ref.namespace} {ref.name}) and re-create it from the checkpoint"
            )
        self.no_pod_left(ref, now, "is stopped (suspended) and stays stopped", waiting=True)
        return True

    def no_pod_left(self, ref: KubeJobRef, job: dict[str, Any], said: str, *, waiting: bool = False) -> None:
        """Nothing of the job runs: no pod of it running, pending, or Terminating (a Terminating pod runs
        through its grace period; the copy waits until it is gone). ``waiting``: we stopped it, and its
        controllers delete its pods; else it ended, and only pods already being deleted are waited for."""
        label = KUBEFLOW_JOB_NAME_LABEL if ref.kind == "PyTorchJob" else HPTO_JOB_LABEL
        live = live_pods_of(self.kube.list_pods(ref.namespace, f"{label}={ref.name}"), job)
        if not live:
            return
        where = f"{ref.kind} {ref.namespace}/{ref.name}"
        running = still_running(live, self.now())
        if waiting or all(terminating(p) for p in live):
            raise OldCopyStillStopping(f"{where} {said}, and no copy of it is made while anything of it runs (nothing created): {running}")
        raise JobSpecUnavailable(
            f"{where} {said}, but {running} and its operator stops nothing of an ended job: nothing created while they run; "
            f"delete them (kubectl delete pod -n {ref.namespace} ...)"
        )


def stop_only(stopper: JobStopper, ref: KubeJobRef, old: dict[str, Any], *, made: dict[str, Any] | None) -> ResubmitResult:
    """The job stopped at once for its re-creation after the rejoin (ResubmitJob.stop_only), its pods not
    waited for: they have until then to go. ``made``: our re-creation of it, if one exists already
    (nothing is stopped then). Checked as a resubmission checks before it stops (the job is this uid,
    its copy's name is free), by the caller."""
    uid = str(old["metadata"]["uid"])
    if made is not None:
        return ResubmitResult(
            old_job_id=uid, stop_only=True, declined=f"its copy {ref.namespace}/{made['metadata']['name']} exists: nothing stopped now"
        )
    try:
        stopped = stopper.stop(ref, old)
    except OldCopyStillStopping:
        stopped = not finished(old)  # (stopped now, its pods going; or it had ended, its pods already going)
    except _NOT_STOPPED_NOW as exc:
        # (ShortText keeps the start of why: the re-creation after the rejoin stops it again first, and says all of it)
        return ResubmitResult(old_job_id=uid, stop_only=True, declined=f"not stopped at once: {exc}")
    return ResubmitResult(old_job_id=uid, stop_only=True, cancelled_old=stopped)
