"""Which version of Kueue's Workload API to speak, from what the API server's discovery says.

Kueue v0.15 added ``kueue.x-k8s.io/v1beta2``; v0.19.2 (what HyperPod task governance v1.6 packages)
stores Workloads as v1beta2 and serves v1beta1 beside it, marked deprecated; a Kueue that no longer
serves v1beta1 answers 404 there. The fields a stop reads and writes (``spec.active``, the controller
owner reference, the ``kueue.x-k8s.io/job-uid`` label, ``status.conditions``) are the same in both
(tests/kube_schemas/README.md). So v1beta2 is spoken where it is served, else v1beta1.

``GET /apis/kueue.x-k8s.io`` answers an APIGroup (k8s.io/apimachinery meta/v1):
``{"kind": "APIGroup", "name": ..., "versions": [{"groupVersion": ..., "version": ...}], "preferredVersion": {...}}``;
404 when no CRD of the group is installed. A group's versions are those of all its CRDs together: a
version listed is a version some kind is served at, so a Workload request can still 404 (said then).
"""

from __future__ import annotations

from typing import Any

from hyperpod_recovery.models.kubernetes import KUEUE_GROUP, WORKLOAD_VERSIONS


class UnreadableDiscovery(ValueError):
    """The API server's answer for the group is not an APIGroup of it."""


def served_versions(group: Any) -> list[str]:
    """The versions an APIGroup answer lists (its preferred one first, as the API server orders them)."""
    if not isinstance(group, dict) or group.get("kind") != "APIGroup" or group.get("name") != KUEUE_GROUP:
        shown = f"{group.get('kind')} {group.get('name')}" if isinstance(group, dict) else type(group).__name__
        raise UnreadableDiscovery(f"the answer is no APIGroup {KUEUE_GROUP} ({shown[:80]})")
    listed = [v.get("version") for v in group.get("versions") or [] if isinstance(v, dict)]
    preferred = (group.get("preferredVersion") or {}).get("version") if isinstance(group.get("preferredVersion"), dict) else None
    versions = [str(v)[:32] for v in [preferred, *listed] if isinstance(v, str) and v]
    return list(dict.fromkeys(versions))


def workload_version(group: Any) -> str | None:
    """The Workload API version to speak (v1beta2 where served, else v1beta1); None: the group serves
    neither (a Kueue newer or older than any this pipeline knows)."""
    served = served_versions(group)
    return next((v for v in WORKLOAD_VERSIONS if v in served), None)
