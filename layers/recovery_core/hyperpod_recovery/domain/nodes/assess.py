"""Which of the requested nodes may the pipeline touch, and what the orchestrator calls them."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.errors import NodeRoleUnknown, UnsupportedOrchestrator
from hyperpod_recovery.models.common import NODE_LOGICAL_ID_PATTERN, matches
from hyperpod_recovery.models.node_recovery import Assessment, NodeTarget, SkippedNode

if TYPE_CHECKING:
    from hyperpod_recovery.models.cluster import ClusterInfo, ClusterNode


def group_roles(cluster: ClusterInfo, controller_groups: list[str], login_groups: list[str]) -> dict[str, str]:
    """Controller, Login or Compute for every instance group, or NodeRoleUnknown.

    A node is never taken for a compute node by default: SlurmConfig.NodeType (newer clusters) and
    the stack's ControllerGroups/LoginGroups (older clusters, which do not report it) must agree
    where both speak, every group without a NodeType needs the configured lists, and the cluster
    must have a controller group we can name. Otherwise a human fixes the parameters first.
    """
    configured = dict.fromkeys(controller_groups, "Controller") | dict.fromkeys(login_groups, "Login")
    problems = [
        f"{g!r} is listed in ControllerGroups/LoginGroups but the cluster has no such group" for g in configured if g not in cluster.groups
    ]
    unreported = sorted(g for g, info in cluster.groups.items() if info.node_type is None)
    if unreported and "Controller" not in configured.values():
        problems.append(
            f"groups {unreported} do not report SlurmConfig.NodeType and ControllerGroups is empty: "
            "which nodes run slurmctld cannot be told apart from compute nodes"
        )
    roles: dict[str, str] = {}
    for name, info in cluster.groups.items():
        listed = configured.get(name)
        if info.node_type is not None and configured and (listed or "Compute") != info.node_type:
            problems.append(
                f"group {name!r} is {info.node_type} in DescribeCluster but {listed or 'Compute'} by ControllerGroups/LoginGroups"
            )
        roles[name] = info.node_type or listed or "Compute"
    if "Controller" not in roles.values():
        problems.append("no instance group is the Slurm controller (neither SlurmConfig.NodeType nor ControllerGroups names one)")
    if problems:
        raise NodeRoleUnknown(
            f"cluster {cluster.name!r}: " + "; ".join(problems) + ". Set the stack's ControllerGroups/LoginGroups to match."
        )
    return roles


# ListClusterNodes answers at most this many nodes a page (its MaxResults' maximum).
LISTING_PAGE = 100


def listing_pages(cluster: ClusterInfo) -> int | None:
    """The ListClusterNodes pages the whole cluster takes, by DescribeCluster's TargetCounts (None when
    a group does not report one: then only the listing can say)."""
    targets = [group.target_count for group in cluster.groups.values()]
    if any(t is None for t in targets):
        return None
    return max(1, math.ceil(sum(t for t in targets if t is not None) / LISTING_PAGE))


def describe_each(node_ids: list[str], cluster: ClusterInfo) -> bool:
    """Read the incident's nodes one DescribeClusterNode each rather than list the cluster: when they are
    fewer than the listing's pages. So Assess Nodes' reads follow the incident's size (a rack's 16
    nodes), not the fleet's (21 pages at 2,048 nodes, 41 at 4,096)."""
    pages = listing_pages(cluster)
    # (without every CurrentCount the cap's denominator needs the listing anyway)
    counts_reported = all(group.current_count is not None for group in cluster.groups.values())
    return pages is not None and counts_reported and len(set(node_ids)) < pages


def counted_compute_nodes(cluster: ClusterInfo, compute_groups: set[str]) -> int | None:
    """The compute nodes the cap's percent is of, from DescribeCluster: per compute group its
    CurrentCount, or TargetCount when that is smaller (None when a group reports no CurrentCount:
    count the listing instead; TargetCount alone is what was asked for, not what is there).

    ASSUMPTION (AWS documents neither count's exact meaning): CurrentCount is the group's instances
    now, TargetCount the size asked for. The smaller never exceeds the nodes there are, so a cap
    computed from it is never looser than one computed from the listing; during a storm, with nodes
    out of service, it is stricter, which is the direction a safety limit may err in."""
    total = 0
    for name in compute_groups:
        group = cluster.groups[name]
        if group.current_count is None:
            return None
        total += min(c for c in (group.current_count, group.target_count) if c is not None)
    return total


def assess_nodes(
    node_ids: list[str],
    locked: list[str],
    cluster: ClusterInfo,
    nodes: list[ClusterNode],
    controller_groups: list[str],
    login_groups: list[str],
    now: datetime,
    orchestrator: Literal["slurm", "eks"] = "slurm",
    eks_cluster_name: str = "",
    listing: bool = True,
) -> Assessment:
    """``orchestrator``: the one the stack was deployed for (its Orchestrator parameter); a cluster
    orchestrated otherwise is never acted on (its nodes are named and drained another way). On EKS,
    ``eks_cluster_name`` (EksClusterName) must be the EKS cluster HyperPod names. ``listing``: ``nodes``
    is the whole cluster's listing (else only the requested nodes, read by id)."""
    if cluster.orchestrator != orchestrator:
        raise UnsupportedOrchestrator(
            f"cluster {cluster.name!r} is orchestrated by {cluster.orchestrator}, but this stack was deployed for "
            f"{orchestrator} (its Orchestrator parameter): redeploy it with Orchestrator={cluster.orchestrator.capitalize()}"
        )
    if orchestrator == "eks" and eks_cluster_name and cluster.eks_cluster_name and cluster.eks_cluster_name != eks_cluster_name:
        # Its Kubernetes nodes are in another EKS cluster than the one the stack may reach: every
        # node would be "not found" there and nothing cordoned while HyperPod replaced them.
        raise UnsupportedOrchestrator(
            f"cluster {cluster.name!r} runs in EKS cluster {cluster.eks_cluster_name!r}, but this stack's EksClusterName is "
            f"{eks_cluster_name!r}: redeploy it with EksClusterName={cluster.eks_cluster_name}"
        )
    # On EKS every instance group is a worker group: the control plane is EKS's own, never a node here.
    roles = group_roles(cluster, controller_groups, login_groups) if orchestrator == "slurm" else dict.fromkeys(cluster.groups, "Compute")
    by_id = {n.node_id: n for n in nodes}
    targets: list[NodeTarget] = []
    skipped: list[SkippedNode] = []
    for node_id in node_ids:
        if node_id not in locked:
            skipped.append(SkippedNode(node_id=node_id, reason="locked_elsewhere", detail="another incident holds this node"))
            continue
        node = by_id.get(node_id)
        if node is None:
            skipped.append(
                SkippedNode(node_id=node_id, reason="not_found", detail=f"not in cluster {cluster.name!r} (already replaced or removed)")
            )
            continue
        # A node of a group DescribeCluster did not list has no known role: never a target.
        role = roles.get(node.instance_group, "Unknown")
        if role in ("Controller", "Login", "Unknown"):
            # Never act on the nodes Slurm itself runs on; HyperPod cannot replace controllers anyway.
            skipped.append(
                SkippedNode(
                    node_id=node_id,
                    reason="controller" if role == "Controller" else "login" if role == "Login" else "unknown_role",
                    detail=f"{role.lower()} node in group {node.instance_group!r}: a human must handle it",
                )
            )
            continue
        name = node.name_in(orchestrator)
        if name is None:
            skipped.append(SkippedNode(node_id=node_id, reason="not_found", detail="node has no PrivateDnsHostname yet"))
            continue
        targets.append(
            NodeTarget(
                node_id=node_id,
                instance_group=node.instance_group,
                slurm_node=name,
                status=node.status,
                logical_id=node.logical_id if node.logical_id and matches(NODE_LOGICAL_ID_PATTERN, node.logical_id) else None,
            )
        )
    compute_groups = {g for g, role in roles.items() if role == "Compute"}
    counted = counted_compute_nodes(cluster, compute_groups)
    # (a listing that was read counts too, and the smaller wins: a listing leaves out instances not yet
    # given an id, which the counts may hold; a listing by id, of the incident's nodes, counts nothing)
    listed = sum(1 for n in nodes if n.instance_group in compute_groups) if listing else None
    compute_nodes = min(c for c in (counted, listed) if c is not None) if (counted, listed) != (None, None) else 0
    return Assessment(
        at=now,
        compute_nodes=compute_nodes,
        orchestrator=cluster.orchestrator,
        node_recovery=cluster.node_recovery,
        targets=targets,
        skipped=skipped,
        proceed=bool(targets),
        cluster_events=cluster.publishes_cluster_events,
    )
