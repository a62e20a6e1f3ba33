"""A job's Kueue Workloads, found and made inactive at the Workload API version the cluster serves.

The version is discovered once per command (``GET /apis/kueue.x-k8s.io``: domain/jobs/eks_kueue.py), and
what discovery says decides what a stop may conclude:

| discovery / the Workload request          | concluded                                                    |
|-------------------------------------------|--------------------------------------------------------------|
| the group is not served (404)             | Kueue is not installed: no Workload manages the job           |
| served at v1beta2 (and v1beta1, or not)   | Workloads read and written at v1beta2                         |
| served at v1beta1 only                    | at v1beta1                                                    |
| served, neither version; unreadable; a    | cannot be stopped for certain: JobSpecUnavailable, nothing    |
|   Workload request at the version 404s    |   created (never "Kueue is not installed")                    |
|   without naming an object                |                                                               |
| a Workload's 404 names it (deleted since  | the job's Workloads read once more and decided again (Kueue   |
|   it was listed)                          |   may have replaced it); still none: refused, nothing created |
| unanswered, 5xx, 429                      | the same error, said so: retried by the workflow              |
| refused (403)                             | KubeAccessDenied, said so: escalated                          |

The two 404s are told apart by the answer's Status, as the API server writes it: an object it serves
the resource of and has none of is NotFound with ``details: {name, group, kind}`` (apimachinery
errors.NewNotFound, from the registry's Get); a group, version or resource it does not serve falls
through the CRD handler (apiextensions-apiserver customresource_handler: HasServedCRDVersion, else the
delegate) to the not-found handler, a bare NotFound without details (apiserver util/notfoundhandler).
An answer that names no object is taken for the second: never for a deleted Workload, never for
"Kueue is not installed".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.jobs.eks_jobs import kueue_managed, workloads_of
from hyperpod_recovery.domain.jobs.eks_kueue import UnreadableDiscovery, served_versions, workload_version
from hyperpod_recovery.errors import (
    JobSpecUnavailable,
    KubeAccessDenied,
    KubeObjectGone,
    KubeRequestRejected,
    KubeThrottled,
    KubeUnavailable,
)
from hyperpod_recovery.models.kubernetes import KUEUE_GROUP, KUEUE_JOB_UID_LABEL, WORKLOAD_VERSIONS, KubeJobRef

if TYPE_CHECKING:
    from hyperpod_recovery.ports import KubeApi

_NOT_DISCOVERED = object()


class KueueWorkloads:
    """Kueue's Workloads as one command sees them (discovery read at most once)."""

    def __init__(self, kube: KubeApi) -> None:
        self._kube = kube
        self._version: object = _NOT_DISCOVERED
        self._served: list[str] = []

    def version(self, where: str) -> str | None:
        """The Workload API version to speak; None: Kueue is not installed (its group is not served).
        ``where``: the job this is for, in the words of an error."""
        if self._version is _NOT_DISCOVERED:
            self._version = self._discover(where)
        return self._version  # type: ignore[return-value]

    def _discover(self, where: str) -> str | None:
        uncertain = f"whether Kueue manages {where} cannot be told, so it cannot be stopped for certain; nothing created"
        try:
            group = self._kube.api_group(KUEUE_GROUP)
        except KubeObjectGone:
            return None
        except (KubeUnavailable, KubeThrottled, KubeAccessDenied) as exc:
            raise type(exc)(f"Kueue's API could not be discovered ({exc}): {uncertain}") from exc
        except KubeRequestRejected as exc:
            raise JobSpecUnavailable(f"Kueue's API could not be discovered ({exc}): {uncertain}") from exc
        try:
            self._served = served_versions(group)
            version = workload_version(group)
        except UnreadableDiscovery as exc:
            raise JobSpecUnavailable(f"GET /apis/{KUEUE_GROUP}: {exc}: {uncertain}") from exc
        if version is None:
            raise JobSpecUnavailable(
                f"Kueue is installed but serves {KUEUE_GROUP} at {', '.join(self._served) or 'no version'} only, and this "
                f"pipeline reads Workloads at {' or '.join(WORKLOAD_VERSIONS)}: {uncertain}"
            )
        return version

    def of_job(self, ref: KubeJobRef, job: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        """The Workloads of this very job (its controller reference: workloads_of; the job-uid label only
        narrows the list), and the version they were read at (None: Kueue is not installed)."""
        where = f"{ref.kind} {ref.namespace}/{ref.name}"
        version = self.version(where)
        if version is None:
            return [], None
        uid = str(job["metadata"]["uid"])
        try:
            found = workloads_of(self._kube.list_workloads(version, ref.namespace, f"{KUEUE_JOB_UID_LABEL}={uid}"), job)
            if not found and kueue_managed(job):  # (a Workload made before Kueue labelled them: by its owner)
                found = workloads_of(self._kube.list_workloads(version, ref.namespace), job)
        except KubeObjectGone as exc:
            raise JobSpecUnavailable(self._gone(where, version, exc)) from exc
        return found, version

    def deactivate_all(self, ref: KubeJobRef, job: dict[str, Any], workloads: list[dict[str, Any]], version: str) -> None:
        """Every Workload of the job inactive (``workloads``: of_job's). One deleted since it was listed
        may have been replaced (Kueue makes a job without one a new Workload): the job's Workloads are
        read once more and decided again; where that still leaves none to make inactive, nothing is created."""
        try:
            for workload in workloads:
                self.deactivate(ref, workload, version)
            return
        except _WorkloadDeleted as gone:
            deleted = gone.name
        again, _ = self.of_job(ref, job)
        try:
            for workload in again:
                self.deactivate(ref, workload, version)
        except _WorkloadDeleted as gone:
            deleted = gone.name
        else:
            if again:
                return
        raise JobSpecUnavailable(
            f"Workload {ref.namespace}/{deleted} of {ref.kind} {ref.namespace}/{ref.name} was deleted while we stopped the job "
            "(the API server's 404 names it), and no Workload of the job was left to make inactive in its place: whether Kueue "
            "would start the job again cannot be told, so it cannot be stopped for certain; nothing created"
        )

    def deactivate(self, ref: KubeJobRef, workload: dict[str, Any], version: str) -> None:
        """``spec.active: false`` on the Workload (conditional on its uid), read back."""
        name = str(workload["metadata"]["name"])
        where = f"{ref.kind} {ref.namespace}/{ref.name}"
        try:
            if (workload.get("spec") or {}).get("active", True) is not False:
                operations = [
                    {"op": "test", "path": "/metadata/uid", "value": workload["metadata"]["uid"]},
                    {"op": "add", "path": "/spec/active", "value": False},
                ]
                self._kube.patch_workload(version, ref.namespace, name, operations)
            now = self._kube.get_workload(version, ref.namespace, name)
        except KubeObjectGone as exc:
            if exc.named == name:
                raise _WorkloadDeleted(name) from exc
            raise JobSpecUnavailable(self._gone(where, version, exc)) from exc
        if (now.get("spec") or {}).get("active", True) is not False:
            raise JobSpecUnavailable(
                f"Workload {ref.namespace}/{name} of {ref.name} took spec.active: false and reads back active: "
                "it cannot be stopped for certain; nothing created"
            )

    def _gone(self, where: str, version: str, exc: Exception) -> str:
        return (
            f"Kueue is installed (the API server serves {KUEUE_GROUP} at {', '.join(self._served)}), but a Workload request "
            f"at {version} answered 404 naming no object (how the API server answers a version or resource it does not "
            f"serve: {str(exc)[:200]}): whether Kueue manages {where} cannot be told, so it cannot be stopped for certain; "
            "nothing created"
        )


class _WorkloadDeleted(Exception):
    """A Workload's own 404 (its Status names it): deleted since it was listed."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name
