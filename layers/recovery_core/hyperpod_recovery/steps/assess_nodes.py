"""Assess Nodes: describe the cluster and its nodes; keep only compute nodes we hold."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.domain.nodes.assess import assess_nodes as decide
from hyperpod_recovery.domain.nodes.assess import describe_each

if TYPE_CHECKING:
    from hyperpod_recovery.models.node_recovery import Assessment, AssessNodesInput
    from hyperpod_recovery.ports import Cluster


def assess_nodes(
    step: AssessNodesInput,
    *,
    cluster: Cluster,
    controller_groups: list[str],
    login_groups: list[str],
    now: datetime,
    orchestrator: Literal["slurm", "eks"] = "slurm",
    eks_cluster_name: str = "",
) -> Assessment:
    info = cluster.describe()
    node_ids = step.request.node_ids
    by_id = describe_each(node_ids, info)
    nodes = cluster.describe_nodes(node_ids) if by_id else cluster.list_nodes()
    return decide(
        step.request.node_ids,
        step.lock.locked,
        info,
        nodes,
        controller_groups,
        login_groups,
        now,
        orchestrator,
        eks_cluster_name,
        listing=not by_id,
    )
