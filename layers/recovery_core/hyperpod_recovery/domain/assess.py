"""Which of the requested nodes may the pipeline touch, and what are they called in Slurm."""

from __future__ import annotations

from datetime import datetime

from hyperpod_recovery.errors import UnsupportedOrchestrator
from hyperpod_recovery.models.cluster import ClusterInfo, ClusterNode
from hyperpod_recovery.models.common import slurm_node_name
from hyperpod_recovery.models.workflow import Assessment, NodeTarget, SkippedNode


def node_role(group: str, cluster: ClusterInfo, controller_groups: list[str], login_groups: list[str]) -> str:
    """Controller, Login or Compute. SlurmConfig.NodeType wins; older clusters that do not report
    it rely on the stack's ControllerGroups/LoginGroups parameters."""
    info = cluster.groups.get(group)
    if info is not None and info.node_type is not None:
        return info.node_type
    if group in controller_groups:
        return "Controller"
    if group in login_groups:
        return "Login"
    return "Compute"


def assess_nodes(
    node_ids: list[str],
    locked: list[str],
    cluster: ClusterInfo,
    nodes: list[ClusterNode],
    controller_groups: list[str],
    login_groups: list[str],
    now: datetime,
) -> Assessment:
    if cluster.orchestrator != "slurm":
        raise UnsupportedOrchestrator(
            f"cluster {cluster.name!r} is orchestrated by {cluster.orchestrator}; this release recovers Slurm clusters only"
        )
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
        role = node_role(node.instance_group, cluster, controller_groups, login_groups)
        if role in ("Controller", "Login"):
            # Never act on the nodes Slurm itself runs on; HyperPod cannot replace controllers anyway.
            skipped.append(
                SkippedNode(
                    node_id=node_id,
                    reason="controller" if role == "Controller" else "login",
                    detail=f"{role.lower()} node in group {node.instance_group!r}: a human must handle it",
                )
            )
            continue
        if not node.private_dns_hostname:
            skipped.append(SkippedNode(node_id=node_id, reason="not_found", detail="node has no PrivateDnsHostname yet"))
            continue
        targets.append(
            NodeTarget(
                node_id=node_id,
                instance_group=node.instance_group,
                slurm_node=slurm_node_name(node.private_dns_hostname),
                status=node.status,
                launch_time=node.launch_time,
            )
        )
    compute_groups = {g for g in cluster.groups if node_role(g, cluster, controller_groups, login_groups) == "Compute"}
    compute_nodes = sum(1 for n in nodes if n.instance_group in compute_groups)
    return Assessment(
        at=now,
        compute_nodes=compute_nodes,
        orchestrator=cluster.orchestrator,
        node_recovery=cluster.node_recovery,
        targets=targets,
        skipped=skipped,
        proceed=bool(targets),
    )
