"""A look for repaired nodes costs the same whatever the fleet's size (issue 34): Check Rejoin reads
the instances new since the repairs and its own nodes by id, never the whole cluster."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.domain.nodes.replace import classify_replacements
from hyperpod_recovery.models.cluster import BatchOutcome
from hyperpod_recovery.models.node_recovery import CheckRejoinInput, NodeTarget
from hyperpod_recovery.steps.check_rejoin import check_rejoin
from sandbox.hyperpod import HyperPodDouble
from sandbox.hyperpod_serve import serve
from sandbox.scenario_cluster import BehaviourSpec, ClusterSpec, InstanceGroupSpec
from tests.fakes import T0, FakeLedger
from tests.unit.test_steps import _request

REGION = "us-west-2"


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def _adapter() -> tuple[HyperPodCluster, Counter[str]]:
    """The adapter (on the double being served), and a count of the SageMaker calls it makes."""
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    sagemaker.meta.events.register("before-call.sagemaker", count)
    return HyperPodCluster("llm-train", sagemaker=sagemaker), calls


def _fleet(workers: int, clock: dict[str, float]) -> HyperPodDouble:
    spec = ClusterSpec(
        name="llm-train",
        instance_groups=[
            InstanceGroupSpec(name="controller", type="Controller", count=1),
            InstanceGroupSpec(name="workers", type="Compute", count=workers),
        ],
    )
    return HyperPodDouble(spec, BehaviourSpec(replacement_seconds=600, shutdown_seconds=45), REGION, T0, now=lambda: clock["t"])


def test_nodes_since_lists_the_new_instances_and_describes_each_asked_one_still_there(aws: None) -> None:
    # Given three workers: one replaced (its old instance gone after the shutdown), one rebooted, one untouched
    clock = {"t": 0.0}
    with serve(_fleet(130, clock)):
        cluster, calls = _adapter()
        replaced, rebooted, untouched = [n for n in cluster.list_nodes() if n.instance_group == "workers"][:3]
        assert cluster.replace_nodes([replaced.node_id]).successful == [replaced.node_id]
        assert cluster.reboot_nodes([rebooted.node_id]).successful == [rebooted.node_id]
        clock["t"] = 100.0
        calls.clear()
        # When the new instances since the repairs and the two watched nodes are asked for
        nodes = cluster.nodes_since(T0 - timedelta(minutes=5), [replaced.node_id, rebooted.node_id])
        # Then the replacement (new, under the same hostname) and the rebooted node (by its id) are there;
        # the replaced instance is gone (ResourceNotFound: absent), the untouched one is not read
        new = [n for n in nodes if n.private_dns_hostname == replaced.private_dns_hostname]
        assert [(n.node_id != replaced.node_id, n.status, n.logical_id is not None) for n in new] == [(True, "Pending", True)]
        assert {n.node_id for n in nodes} == {new[0].node_id, rebooted.node_id}
        assert untouched.node_id not in {n.node_id for n in nodes}
        assert calls == Counter({"ListClusterNodes": 1, "DescribeClusterNode": 2})


def test_list_nodes_of_one_group_leaves_out_a_group_whose_name_only_contains_it(aws: None) -> None:
    spec = ClusterSpec(
        name="llm-train",
        instance_groups=[
            InstanceGroupSpec(name="workers", type="Compute", count=3),
            InstanceGroupSpec(name="workers-b", type="Compute", count=2),
        ],
    )
    with serve(HyperPodDouble(spec, BehaviourSpec(), REGION, T0, now=lambda: 0.0)):
        cluster, calls = _adapter()
        assert [n.instance_group for n in cluster.list_nodes("workers")] == ["workers"] * 3
        assert calls == Counter({"ListClusterNodes": 1})


def _look_calls(workers: int) -> list[Counter[str]]:
    """The SageMaker calls of each Check Rejoin look while two replaced workers and a rebooted one come back."""
    clock = {"t": 0.0}
    double = _fleet(workers, clock)
    with mock_aws(), serve(double):
        cluster, calls = _adapter()
        a, b, c = [n for n in cluster.list_nodes() if n.instance_group == "workers"][:3]
        assert cluster.replace_nodes([a.node_id, b.node_id]).successful == [a.node_id, b.node_id]
        assert cluster.reboot_nodes([c.node_id]).successful == [c.node_id]
        targets = [
            NodeTarget(
                node_id=n.node_id,
                instance_group=n.instance_group,
                slurm_node=(n.private_dns_hostname or "").split(".")[0],
                status=n.status,
                logical_id=n.logical_id,
            )
            for n in (a, b, c)
        ]
        outcome = BatchOutcome(successful=[a.node_id, b.node_id, c.node_id])
        watch = classify_replacements(
            targets, outcome, set(), T0, 30, 2700, dry_run=False, actions={c.node_id: "reboot"}, reboot_deadline_seconds=900
        ).watch
        looks = []
        for t in (60.0, 300.0, 700.0):
            clock["t"] = t
            calls.clear()
            step = CheckRejoinInput(execution_name="inc-1", request=_request(1), rejoin=watch)
            watch = check_rejoin(
                step, cluster=cluster, ledger=FakeLedger(), poll_seconds=30, max_poll_seconds=60, now=T0 + timedelta(seconds=t)
            )
            looks.append(Counter(calls))
        assert [n.matched_by for n in watch.nodes] == ["logical_id", "logical_id", "instance_id"]
        return looks


def test_a_rejoin_look_costs_the_same_at_256_and_2048_nodes() -> None:
    # Given the same incident (two replacements and a reboot) on a 256-node and a 2,048-node fleet
    small, large = _look_calls(256), _look_calls(2048)
    # Then each look makes the same calls: one ListClusterNodes page of new instances and a
    # DescribeClusterNode for each watched node's own instance while it exists
    print(f"calls per look at 256 nodes: {small}\ncalls per look at 2,048 nodes: {large}")
    assert small == large
    assert all(look["ListClusterNodes"] == 1 and look["DescribeClusterNode"] <= 3 for look in large)
