"""Kueue as HyperPod task governance runs it: a managed job suspended as it is created, its Workload
made and admitted, the job un-suspended once admitted, evicted and suspended once inactive."""

from __future__ import annotations

import copy
import hashlib
import uuid
from typing import Any

from hyperpod_recovery.models.kubernetes import (
    DNS1123_LABEL_MAX,
    JOB_KINDS,
    KUEUE_GROUP,
    KUEUE_JOB_UID_LABEL,
    KUEUE_QUEUE_LABEL,
)
from sandbox.kube.objects import (
    ADMITTED,
    CLUSTER_QUEUE,
    DEACTIVATED,
    EVICTED,
    FINISHED,
    QUOTA_RESERVED,
    _condition_true,
    _controller_uid,
    _job_state,
    _replicas,
    _set_condition,
    _stamp,
    _suspended,
)


class Kueue:
    """Mixed into FakeKube: Kueue's controllers, run after every write (Controllers._settle)."""

    def _managed(self, job: dict[str, Any]) -> bool:
        return bool((job["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)) or self._workload_of(job) is not None

    def _workload_of(self, job: dict[str, Any]) -> tuple[str, str] | None:
        """The Workload Kueue made for this very job: its controller reference carries the job's uid."""
        uid = job["metadata"]["uid"]
        return next((key for key, w in self.workloads.items() if _controller_uid(w) == uid), None)

    def _kueue_reconciles(self, key: tuple[str, str, str]) -> None:
        """Kueue's job reconciler (v0.19.2 pkg/controller/jobframework/reconciler.go ReconcileGenericJob),
        the steps that matter here: a Workload for the job; a finished job finishes it; an inactive one
        is evicted and its job stopped (suspended); an active one is admitted (quota is never short
        here); a suspended job whose Workload is admitted is un-suspended ("Job admitted, unsuspending")."""
        job = self.jobs[key]
        wl_key = self._workload_of(job) or self._new_workload(job)
        workload = copy.deepcopy(self.workloads[wl_key])
        if _job_state(job) in FINISHED:
            _set_condition(workload, "Finished", "True", "JobFinished", "the job finished", self.now())
        elif (workload["spec"].get("active", True)) is False:
            if not _condition_true(workload, EVICTED):
                _set_condition(workload, EVICTED, "True", DEACTIVATED, "The workload is deactivated", self.now())
            _set_condition(workload, QUOTA_RESERVED, "False", DEACTIVATED, "The workload is deactivated", self.now())
            _set_condition(workload, ADMITTED, "False", "NoReservation", "The workload has no reservation", self.now())
            workload.get("status", {}).pop("admission", None)
            self._set_suspended(key, True)
        else:
            if not _condition_true(workload, ADMITTED):
                workload.setdefault("status", {})["admission"] = {
                    "clusterQueue": CLUSTER_QUEUE,
                    "podSetAssignments": [{"name": p["name"], "count": p["count"], "flavors": {}} for p in workload["spec"]["podSets"]],
                }
                _set_condition(
                    workload, QUOTA_RESERVED, "True", "QuotaReserved", f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}", self.now()
                )
                _set_condition(workload, ADMITTED, "True", "Admitted", f"Admitted by ClusterQueue {CLUSTER_QUEUE}", self.now())
            if _suspended(job):
                self._set_suspended(key, False)
        if workload != self.workloads[wl_key]:
            self._validate_workload(workload)
            workload["metadata"]["resourceVersion"] = self._next_version()
            self.workloads[wl_key] = workload

    def _new_workload(self, job: dict[str, Any]) -> tuple[str, str]:
        """The Workload Kueue constructs for a job: named <kind>-<job>-<hash>, labelled with the job's
        uid, controlled by the job (jobframework ConstructWorkload, workload_names.go)."""
        metadata, kind = job["metadata"], job["kind"]
        hashed = "\n".join([kind, JOB_KINDS[kind].group, metadata["name"], metadata["uid"]])
        prefix = f"{kind.lower()}-{metadata['name']}"[: DNS1123_LABEL_MAX - 6]
        name = f"{prefix}-{hashlib.sha1(hashed.encode(), usedforsecurity=False).hexdigest()[:5]}"
        pod_sets = [
            {
                "name": replica_type.lower(),
                "count": _replicas(replica),
                "template": copy.deepcopy(replica.get("template") or {}),
            }
            for replica_type, replica in sorted((job["spec"].get("pytorchReplicaSpecs") or {}).items())
        ]
        workload = {
            "apiVersion": f"{KUEUE_GROUP}/{self._workload_storage()}",
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": metadata["namespace"],
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"hyperpod-recovery-sandbox/workload/{metadata['uid']}")),
                "creationTimestamp": _stamp(self.now()),
                "labels": {KUEUE_JOB_UID_LABEL: metadata["uid"]},
                "ownerReferences": [
                    {
                        "apiVersion": job["apiVersion"],
                        "kind": job["kind"],
                        "name": metadata["name"],
                        "uid": metadata["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "resourceVersion": self._next_version(),
            },
            "spec": {"active": True, "queueName": (metadata.get("labels") or {}).get(KUEUE_QUEUE_LABEL, ""), "podSets": pod_sets},
        }
        self._validate_workload(workload)
        self.workloads[(metadata["namespace"], name)] = workload
        return metadata["namespace"], name

    def _set_suspended(self, key: tuple[str, str, str], suspended: bool) -> None:
        job = copy.deepcopy(self.jobs[key])
        if _suspended(job) == suspended:
            return
        job["spec"].setdefault("runPolicy", {})["suspend"] = suspended
        self._prune(job)
        self._validate_job(job)
        job["metadata"]["resourceVersion"] = self._next_version()
        self.jobs[key] = job
