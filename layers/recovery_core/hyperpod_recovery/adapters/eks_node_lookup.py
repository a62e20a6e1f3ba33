"""A HyperPod node by the name the workflow knows it by, on a cluster that names its nodes otherwise.

The workflow names a node ``hyperpod-<instance id>`` (HyperPod's own names; ListClusterNodes' instance
ids map to them). A cluster whose nodes are named otherwise (``ip-10-1-2-3.us-west-2.compute.internal``
on older clusters) is read once, by the instance each node's ``spec.providerID`` names
(domain/nodes/eks_provider_id.py: HyperPod's form or EC2's). A node whose providerID names no instance is
never taken for one, and the answer says it was there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hyperpod_recovery.domain.nodes.eks_nodes import NodeView, hyperpod_name
from hyperpod_recovery.domain.nodes.eks_provider_id import instance_of_provider_id, unreadable_provider_id
from hyperpod_recovery.errors import KubeObjectGone
from hyperpod_recovery.models.kubernetes import COMPUTE_TYPE_LABEL, instance_of_node_name

if TYPE_CHECKING:
    from hyperpod_recovery.ports import KubeApi

HYPERPOD_NODES = f"{COMPUTE_TYPE_LABEL}=hyperpod"


class HyperPodNodes:
    """The cluster's HyperPod nodes, listed at most once (one command, or one poll: every node missing
    by name reads the same list)."""

    def __init__(self, kube: KubeApi) -> None:
        self._kube = kube
        self._listed: list[dict[str, Any]] | None = None
        self._by_name: dict[str, str] | None = None

    def listed(self) -> list[dict[str, Any]]:
        if self._listed is None:
            self._listed = self._kube.list_nodes(HYPERPOD_NODES)
        return self._listed

    def known_as(self, name: str) -> str:
        """A Kubernetes node's name -> the name the workflow knows it by (its own, when its providerID names no instance)."""
        if instance_of_node_name(name) is not None:
            return name
        if self._by_name is None:
            self._by_name = {NodeView.of(n).name: hyperpod_name(n) for n in self.listed()}
        return self._by_name.get(name, name)

    def find(self, name: str) -> dict[str, Any] | None:
        """The node by its name; on a cluster that names nodes otherwise, the node whose providerID names
        the instance the name carries (read fresh: the list may be older). None: Kubernetes has no such
        node (replaced, gone), or none that can be told to be it (unmatched says which could not)."""
        try:
            return self._kube.get_node(name)
        except KubeObjectGone:
            pass
        instance = instance_of_node_name(name)
        if instance is None:
            return None
        for node in self.listed():
            if instance_of_provider_id((node.get("spec") or {}).get("providerID")) == instance:
                try:
                    return self._kube.get_node(NodeView.of(node).name)
                except KubeObjectGone:
                    return None
        return None

    def unmatched(self) -> str:
        """The nodes listed whose providerID names no instance (none of them is taken for a missing
        node, though it may be one), in words; "" when every node's names one or none was listed."""
        if self._listed is None:
            return ""
        unread = [n for n in self._listed if instance_of_provider_id((n.get("spec") or {}).get("providerID")) is None]
        unread = [n for n in unread if instance_of_node_name(NodeView.of(n).name) is None]
        if not unread:
            return ""
        first = unread[0]
        why = unreadable_provider_id((first.get("spec") or {}).get("providerID"))
        more = f" (and {len(unread) - 1} more)" if len(unread) > 1 else ""
        return f"; {len(unread)} HyperPod node(s) cannot be matched to an instance: {NodeView.of(first).name}{more}: {why}"
