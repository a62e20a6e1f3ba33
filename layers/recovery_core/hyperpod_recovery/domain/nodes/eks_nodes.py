"""A Kubernetes node through a recovery: cordoned and marked as ours, checked, and given back.

Pure: every function reads a Node object (a dict as the API returns it) and says what to write, as
one JSON Patch whose first operation tests the ``resourceVersion`` read, so the write is atomic and
conflict-checked (the API server refuses it if the node changed in between; the caller re-reads).

The rules are the Slurm agent's, in Kubernetes terms (../shared/reference/hyperpod-eks.md §5.2):

* Cordon: ``spec.unschedulable`` set if it was not, our taint added, and our annotations say which
  incident did it and whether the cordon was there before us (``cordon-pre-existing``). A node we
  marked already (a retry) is left as it is; a stale mark of another incident (its end was never
  reconciled; our lock says it no longer runs) is taken over with its ``cordon-pre-existing``, the
  truth from before either of us.
* Give back (resume): our taint and annotations removed, and the node uncordoned only when our
  incident's mark says the cordon was ours. A cordon someone else made is never undone; one a human
  lifted meanwhile is not put back.
* The health gate: a node takes jobs again only when it is Ready, HyperPod's health label says
  Schedulable, and, where HyperPod runs deep health checks on it (the label is present), they passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from hyperpod_recovery.domain.nodes.eks_provider_id import instance_of_provider_id
from hyperpod_recovery.models.kubernetes import (
    BOOT_ID_ANNOTATION,
    CORDON_PRE_EXISTING_ANNOTATION,
    CORDONED_AT_ANNOTATION,
    DEEP_HEALTH_LABEL,
    DEEP_HEALTH_PASSED,
    HEALTH_STATUS_LABEL,
    HEALTHY_STATUS,
    INCIDENT_ANNOTATION,
    OUR_ANNOTATIONS,
    PENDING_REPAIR_STATUSES,
    QUARANTINE_TAINT_EFFECT,
    QUARANTINE_TAINT_KEY,
    instance_of_node_name,
    node_name_for_instance,
)

Operation = dict[str, Any]
# Taints of others who cordon nodes (aws-node-termination-handler, medik8s' maintenance and
# remediation operators, Kubernetes' non-graceful shutdown): while one is on a node, we do not uncordon it.
OTHER_HOLDERS_TAINT_PREFIXES = (
    "aws-node-termination-handler/",
    "medik8s.io/",
    "remediation.medik8s.io/",
    "node.kubernetes.io/out-of-service",
)


def pointer(*parts: str) -> str:
    """A JSON Pointer (RFC 6901): '~' and '/' in a key escaped, as annotation keys need."""
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass(frozen=True)
class NodeView:
    """What a recovery reads of a Node object."""

    name: str
    resource_version: str
    unschedulable: bool
    annotations: dict[str, str]
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    ready: bool
    ready_since: datetime | None
    boot_id: str

    @classmethod
    def of(cls, node: dict[str, Any]) -> NodeView:
        metadata = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        since = ready.get("lastTransitionTime") if ready else None
        return cls(
            name=str(metadata.get("name") or ""),
            resource_version=str(metadata.get("resourceVersion") or ""),
            unschedulable=spec.get("unschedulable") is True,
            annotations=dict(metadata.get("annotations") or {}),
            labels=dict(metadata.get("labels") or {}),
            taints=list(spec.get("taints") or []),
            ready=ready is not None and ready.get("status") == "True",
            ready_since=datetime.fromisoformat(since.replace("Z", "+00:00")) if isinstance(since, str) and since else None,
            boot_id=str((status.get("nodeInfo") or {}).get("bootID") or ""),
        )

    @property
    def marked_by(self) -> str | None:
        """The incident whose marks the node carries (None: not ours)."""
        return self.annotations.get(INCIDENT_ANNOTATION) or None

    @property
    def our_taint_index(self) -> int | None:
        return next((i for i, t in enumerate(self.taints) if t.get("key") == QUARANTINE_TAINT_KEY), None)

    @property
    def health_status(self) -> str:
        return self.labels.get(HEALTH_STATUS_LABEL, "")


def hyperpod_name(node: dict[str, Any]) -> str:
    """The name the workflow knows a node by: ``hyperpod-<instance id>`` (what HyperPod's own names
    are, and what ListClusterNodes' instance ids map to), from the instance its ``spec.providerID``
    names (HyperPod's form or EC2's: domain/nodes/eks_provider_id.py) when the cluster names its nodes
    otherwise; its own name when it names none."""
    name = str((node.get("metadata") or {}).get("name") or "")
    if instance_of_node_name(name) is not None:
        return name
    instance = instance_of_provider_id((node.get("spec") or {}).get("providerID"))
    return node_name_for_instance(instance) if instance is not None else name


def _guard(view: NodeView) -> Operation:
    return {"op": "test", "path": "/metadata/resourceVersion", "value": view.resource_version}


CordonOutcome = Literal["drained", "already_drained"]


@dataclass(frozen=True)
class CordonPlan:
    outcome: CordonOutcome  # already_drained: the node was cordoned before us (kept as it is)
    operations: list[Operation]  # empty: nothing to write (our own marks, from a retry)


def cordon_plan(node: dict[str, Any], incident: str, now: datetime) -> CordonPlan:
    """The patch that cordons ``node`` and marks it as ``incident``'s, and what to call it."""
    view = NodeView.of(node)
    if view.marked_by == incident:  # our own, from a retry: as the first try left it
        pre_existing = view.annotations.get(CORDON_PRE_EXISTING_ANNOTATION) != "false"
        return CordonPlan("already_drained" if pre_existing else "drained", [])
    # Another incident's stale mark (the lock is ours, so it is not running): its record of the
    # cordon's origin is the one that matters, and it is kept.
    stale = view.marked_by is not None
    pre_existing = view.annotations.get(CORDON_PRE_EXISTING_ANNOTATION) != "false" if stale else view.unschedulable
    marks = {
        INCIDENT_ANNOTATION: incident,
        CORDON_PRE_EXISTING_ANNOTATION: "true" if pre_existing else "false",
        CORDONED_AT_ANNOTATION: now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        # The kernel's boot id when we took the node: a different one later proves it rebooted.
        BOOT_ID_ANNOTATION: view.boot_id,
    }
    operations = [_guard(view)]
    if not view.annotations:  # (an 'add' below a missing map fails: the map is added whole)
        operations.append({"op": "add", "path": "/metadata/annotations", "value": marks})
    else:
        operations += [{"op": "add", "path": pointer("metadata", "annotations", key), "value": value} for key, value in marks.items()]
    taint = {"key": QUARANTINE_TAINT_KEY, "value": "true", "effect": QUARANTINE_TAINT_EFFECT, "timeAdded": marks[CORDONED_AT_ANNOTATION]}
    if view.our_taint_index is None and view.taints:
        operations.append({"op": "add", "path": "/spec/taints/-", "value": taint})
    elif view.our_taint_index is None:
        operations.append({"op": "add", "path": "/spec/taints", "value": [taint]})
    if not view.unschedulable:
        operations.append({"op": "add", "path": "/spec/unschedulable", "value": True})
    return CordonPlan("already_drained" if pre_existing else "drained", operations)


GiveBackOutcome = Literal["resumed", "not_drained", "not_ours"]


@dataclass(frozen=True)
class GiveBackPlan:
    outcome: GiveBackOutcome
    operations: list[Operation]
    uncordoned: bool = False


def give_back_plan(node: dict[str, Any], incident: str) -> GiveBackPlan:
    """The patch that removes ``incident``'s marks from ``node`` (and its cordon, if it was ours).

    ``resumed``: in service again; ``not_ours``: someone else's cordon (or another incident's marks)
    kept as it is; ``not_drained``: neither cordoned nor marked (a replacement's new node, or a node
    a human uncordoned and we had not marked)."""
    view = NodeView.of(node)
    if view.marked_by is None:
        if view.our_taint_index is not None:
            # Our taint without our annotations: not a state we write (a human removed them): kept.
            return GiveBackPlan("not_ours", [])
        return GiveBackPlan("not_ours" if view.unschedulable else "not_drained", [])
    if view.marked_by != incident:
        return GiveBackPlan("not_ours", [])
    operations = [_guard(view)]
    # The node as it was before us: a map or list that only we filled is removed whole.
    if set(view.annotations) <= set(OUR_ANNOTATIONS):
        operations.append({"op": "remove", "path": "/metadata/annotations"})
    else:
        operations += [{"op": "remove", "path": pointer("metadata", "annotations", k)} for k in OUR_ANNOTATIONS if k in view.annotations]
    index = view.our_taint_index
    if index is not None and len(view.taints) == 1:
        operations.append({"op": "remove", "path": "/spec/taints"})
    elif index is not None:
        operations += [
            {"op": "test", "path": f"/spec/taints/{index}/key", "value": QUARANTINE_TAINT_KEY},
            {"op": "remove", "path": f"/spec/taints/{index}"},
        ]
    ours = view.annotations.get(CORDON_PRE_EXISTING_ANNOTATION) == "false"
    # Another party holding the node now (a termination handler's maintenance, a remediation
    # operator's drain) keeps it cordoned: it is theirs to lift.
    held = [t.get("key", "") for t in view.taints if str(t.get("key", "")).startswith(OTHER_HOLDERS_TAINT_PREFIXES)]
    uncordon = ours and view.unschedulable and not held
    if uncordon:
        operations.append({"op": "replace", "path": "/spec/unschedulable", "value": False})
    # A cordon that was there before us stays: the node is given back to whoever holds it.
    return GiveBackPlan("resumed" if ours and not held else "not_ours", operations, uncordoned=uncordon)


GateVerdict = Literal["passed", "failed", "not_ready"]


def health_gate(node: dict[str, Any]) -> tuple[GateVerdict, str]:
    """Whether the node may take jobs, and why not: ``failed`` when HyperPod says it needs a repair
    (its health label, or deep health checks that failed); ``not_ready`` when nothing is known yet
    (not Ready, checks running, no label yet)."""
    view = NodeView.of(node)
    deep = view.labels.get(DEEP_HEALTH_LABEL)
    if view.health_status in PENDING_REPAIR_STATUSES:
        return "failed", f"{HEALTH_STATUS_LABEL}={view.health_status}"
    if deep == "Failed":
        return "failed", f"{DEEP_HEALTH_LABEL}=Failed"
    if not view.ready:
        return "not_ready", "the node is not Ready"
    if view.health_status != HEALTHY_STATUS:
        return "not_ready", f"{HEALTH_STATUS_LABEL}={view.health_status or '(none yet)'}"
    if deep is not None and deep != DEEP_HEALTH_PASSED:
        return "not_ready", f"{DEEP_HEALTH_LABEL}={deep}"
    return "passed", f"Ready, {HEALTH_STATUS_LABEL}={HEALTHY_STATUS}" + (f", {DEEP_HEALTH_LABEL}={deep}" if deep else "")


def rebooted_since_cordon(node: dict[str, Any]) -> bool | None:
    """True when the node's boot id differs from the one our cordon recorded (it rebooted since);
    None when there is nothing to compare (no mark of ours, no boot id)."""
    view = NodeView.of(node)
    recorded = view.annotations.get(BOOT_ID_ANNOTATION)
    if not recorded or not view.boot_id:
        return None
    return view.boot_id != recorded
