"""Assess Nodes' reads follow the incident's size, not the fleet's (issue 34): a few nodes are read one
DescribeClusterNode each; only an incident with more nodes than the listing has pages lists the cluster.
The cap's denominator comes from DescribeCluster's counts either way, and is never larger than the
listing's count (the direction a safety limit may err in)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.domain.nodes.assess import assess_nodes as assess_domain
from hyperpod_recovery.domain.nodes.assess import counted_compute_nodes, describe_each, listing_pages
from hyperpod_recovery.models.cluster import ClusterInfo, ClusterNode, InstanceGroupInfo
from hyperpod_recovery.models.node_recovery import AssessNodesInput
from hyperpod_recovery.steps.assess_nodes import assess_nodes
from sandbox.hyperpod_serve import serve
from tests.contract.test_rejoin_cost import REGION, _fleet
from tests.fakes import T0
from tests.unit.test_steps import _request


def _assess(workers: int, picked: int, *, gone: int = 0) -> tuple[Any, Counter[str], int]:
    """Assess ``picked`` workers of a ``workers``-node fleet (the first ``gone`` of them already replaced
    and their instances shut down): the assessment, the SageMaker calls it made, the listing's count."""
    clock = {"t": 0.0}
    with mock_aws(), serve(_fleet(workers, clock)):
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        calls: Counter[str] = Counter()
        sagemaker.meta.events.register("before-call.sagemaker", lambda model, **_: calls.update([model.name]))
        cluster = HyperPodCluster("llm-train", sagemaker=sagemaker)
        listed = [n for n in cluster.list_nodes() if n.instance_group == "workers"]
        ids = [n.node_id for n in listed[:picked]]
        if gone:
            assert cluster.replace_nodes(ids[:gone]).successful == ids[:gone]
            clock["t"] = 100.0  # (past the double's 45 s shutdown: the old instances are gone)
        request = _request(1).model_copy(update={"node_ids": ids})
        step = AssessNodesInput.model_validate(
            {
                "execution_name": "inc-1",
                "request": request.model_dump(mode="json"),
                "lock": {"at": T0.isoformat(), "locked": ids, "proceed": True},
            }
        )
        calls.clear()
        assessment = assess_nodes(step, cluster=cluster, controller_groups=[], login_groups=[], now=T0)
        return assessment, calls, len(listed)


@pytest.mark.parametrize(
    ("workers", "reads"),
    [
        (256, Counter({"DescribeCluster": 1, "ListClusterNodes": 3})),  # (3 pages: cheaper than 16 reads)
        (2048, Counter({"DescribeCluster": 1, "DescribeClusterNode": 16})),
        (4096, Counter({"DescribeCluster": 1, "DescribeClusterNode": 16})),
    ],
)
def test_a_rack_costs_the_cheaper_of_its_nodes_and_the_listing(workers: int, reads: Counter[str]) -> None:
    # Given a rack of 16 workers failing on a 256-, a 2,048- and a 4,096-node fleet
    assessment, calls, listed = _assess(workers, 16)
    # Then Assess Nodes reads the cluster once, then each node or the listing, whichever is fewer
    # calls: never more than 17, whatever the fleet
    assert calls == reads
    # And every node is a target with its Slurm name, and the cap's denominator is the fleet's size
    assert [t.slurm_node.startswith("ip-") for t in assessment.targets] == [True] * 16
    assert assessment.compute_nodes == listed == workers


def test_many_nodes_are_listed_rather_than_read_one_by_one() -> None:
    # Given 5 nodes of a 256-node fleet: more than the listing's 3 pages
    assessment, calls, _ = _assess(256, 5)
    # Then the cluster is listed (3 pages), not read node by node
    assert calls == Counter({"DescribeCluster": 1, "ListClusterNodes": 3})
    assert len(assessment.targets) == 5


def test_a_node_already_replaced_is_not_found_when_read_by_id() -> None:
    # Given a rack of 16 on 2,048 nodes, one of which was replaced before Assess Nodes ran
    assessment, calls, _ = _assess(2048, 16, gone=1)
    # Then it is skipped as not found (its instance is gone), the 15 others are targets
    assert [s.reason for s in assessment.skipped] == ["not_found"]
    assert len(assessment.targets) == 15
    assert calls["ListClusterNodes"] == 0


def _info(**groups: tuple[int | None, int | None]) -> ClusterInfo:
    return ClusterInfo(
        name="c",
        arn="arn:aws:sagemaker:us-west-2:1:cluster/c",
        status="InService",
        orchestrator="slurm",
        node_recovery="None",
        groups={
            name: InstanceGroupInfo(name=name, node_type="Compute", current_count=current, target_count=target)
            for name, (current, target) in groups.items()
        },
    )


def test_the_cap_denominator_is_the_smaller_count_and_unknown_without_either() -> None:
    # A group scaling up (more asked for than there are) counts what is there; one with nodes out counts those in
    assert counted_compute_nodes(_info(a=(1000, 2000), b=(250, 256)), {"a", "b"}) == 1250
    # A group that reports neither count leaves the listing to say
    assert counted_compute_nodes(_info(a=(1000, 1000), b=(None, None)), {"a", "b"}) is None
    # TargetCount alone is what was asked for, not what is there: the listing says
    assert counted_compute_nodes(_info(a=(None, 64)), {"a"}) is None
    # CurrentCount alone is enough
    assert counted_compute_nodes(_info(a=(60, None)), {"a"}) == 60


def test_without_every_current_count_the_cluster_is_listed_even_for_one_node() -> None:
    assert describe_each(["i-1"], _info(a=(None, 250))) is False
    assert describe_each(["i-1"], _info(a=(250, 250))) is True


def test_when_the_cluster_was_listed_the_smaller_of_the_listing_and_the_counts_is_the_denominator() -> None:
    # Given counts that say 256 but a listing of 250 (six instances not yet given an id), and the reverse
    info = _info(workers=(256, 256))
    info.groups["controller"] = InstanceGroupInfo(name="controller", node_type="Controller", current_count=1, target_count=1)
    nodes = [ClusterNode(node_id=f"i-{n:017x}", instance_group="workers", status="Running") for n in range(250)]
    listed = assess_domain([nodes[0].node_id], [nodes[0].node_id], info, nodes, [], [], T0, listing=True)
    by_id = assess_domain([nodes[0].node_id], [nodes[0].node_id], info, nodes[:1], [], [], T0, listing=False)
    # Then the listing's 250 wins when listed, and the counts' 256 when only the incident's node was read
    assert (listed.compute_nodes, by_id.compute_nodes) == (250, 256)


def test_without_every_target_count_the_cluster_is_listed() -> None:
    assert listing_pages(_info(a=(10, None))) is None
    assert describe_each(["i-1"], _info(a=(10, None))) is False
    assert listing_pages(_info(a=(0, 0))) == 1
    # One page (100 nodes or fewer): listing is never dearer than reading each node
    assert describe_each(["i-1"], _info(a=(100, 100))) is False
    assert describe_each(["i-1"], _info(a=(101, 101))) is True
    # Repeated ids count once
    assert describe_each(["i-1", "i-1", "i-2"], _info(a=(250, 250))) is True
