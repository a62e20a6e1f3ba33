"""kube-scheduler's filters, as far as a training pod meets them: which node may take a pod (Ready, not
cordoned, every NoSchedule/NoExecute taint tolerated, its nodeSelector and required node affinity
met) and whether its GPUs are free (the pod's nvidia.com/gpu requests against the node's allocatable,
less what the live pods bound there request). The scheduler's filter plugins, as documented:
https://kubernetes.io/docs/reference/scheduling/config/#scheduling-plugins (NodeUnschedulable,
TaintToleration, NodeAffinity, NodeResourcesFit)."""

from __future__ import annotations

import json
from typing import Any

from sandbox.kube.objects import _ready

GPU = "nvidia.com/gpu"
# ASSUMPTION: a pod the scheduler binds runs 5 s later: the Kubernetes scalability SLO for pod startup
# latency (99th percentile <= 5 s from creation to all containers started, for a schedulable stateless
# pod, image pulls excluded:
# https://github.com/kubernetes/community/blob/main/sig-scalability/slos/pod_startup_latency.md). A
# training image not yet on the node (a fresh replacement) takes its pull longer; not modelled.
POD_START_SECONDS = 5
# A node's nvidia.com/gpu allocatable by its instance type (the NVIDIA device plugin advertises every
# GPU: 8 on each of these, AWS's instance type pages); 0 on a type with none (ml.m5.*).
GPUS_BY_INSTANCE_TYPE = {
    "ml.p4d.24xlarge": 8,
    "ml.p4de.24xlarge": 8,
    "ml.p5.48xlarge": 8,
    "ml.p5e.48xlarge": 8,
    "ml.p5en.48xlarge": 8,
    "ml.p6-b200.48xlarge": 8,
    "ml.g5.48xlarge": 8,
    "ml.g6.48xlarge": 8,
}


def gpus_of(instance_type: str) -> int:
    return GPUS_BY_INSTANCE_TYPE.get(instance_type, 0)


def gpu_request(pod: dict[str, Any]) -> int:
    """The GPUs a pod asks for: its containers' requests (an extended resource's request is its limit
    when only the limit is given, as the API server defaults it)."""
    total = 0
    for container in pod["spec"].get("containers") or []:
        resources = container.get("resources") or {}
        wanted = (resources.get("requests") or {}).get(GPU, (resources.get("limits") or {}).get(GPU, 0))
        total += int(wanted)
    return total


def allocatable_gpus(node: dict[str, Any]) -> int:
    return int(((node.get("status") or {}).get("allocatable") or {}).get(GPU, 0))


def takes_pods(node: dict[str, Any]) -> bool:
    """Ready and not cordoned (NodeUnschedulable: a training pod does not tolerate node.kubernetes.io/unschedulable)."""
    return _ready(node) and not node["spec"].get("unschedulable")


def tolerated(taint: dict[str, Any], tolerations: list[dict[str, Any]]) -> bool:
    """A taint some toleration matches (core/v1 Toleration.ToleratesTaint): its effect (or all), its key
    (or every key with Exists and no key), its value under Equal (the default operator)."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("key") and toleration["key"] != taint.get("key"):
            continue
        if not toleration.get("key") and toleration.get("operator") != "Exists":
            continue
        if toleration.get("operator", "Equal") == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression_holds(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    key, operator, values = expression.get("key", ""), expression.get("operator"), expression.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and key in labels and values:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def placement_fits(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """The pod's own terms for a node: every NoSchedule/NoExecute taint tolerated (PreferNoSchedule is
    a preference), its nodeSelector's labels, and one of its required node affinity terms (their
    matchExpressions all holding)."""
    spec = pod["spec"]
    tolerations = spec.get("tolerations") or []
    for taint in node["spec"].get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerated(taint, tolerations):
            return False
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        terms = required.get("nodeSelectorTerms") or []
        return any(all(_expression_holds(e, labels) for e in term.get("matchExpressions") or []) for term in terms)
    return True


def shape(pod: dict[str, Any]) -> str:
    """What of a pod its placement depends on (the pods of one replica set share it): one filter pass a shape."""
    spec = pod["spec"]
    return json.dumps([spec.get("nodeSelector"), spec.get("affinity"), spec.get("tolerations")], sort_keys=True)
