"""The cluster port: the fake and the HyperPod adapter, against the sandbox's HyperPod double for the
cluster-node calls moto lacks, meet the same expectations; and the double itself holds to HyperPod's
documented shapes and errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.errors import (
    ClusterNotFound,
    HyperPodApiError,
    HyperPodThrottled,
)
from sandbox.hyperpod import HyperPodDouble
from sandbox.hyperpod_serve import serve
from sandbox.scenario_cluster import ApiErrorSpec, BehaviourSpec, ClusterSpec, InstanceGroupSpec
from tests.contract import adapter_support
from tests.contract.adapter_support import REGION
from tests.fakes import T0, FakeCluster, compute_node, node_id

# The shared fixtures, where pytest finds them: by name in this module.
aws = adapter_support.aws


# --- cluster ------------------------------------------------------------------------------
def _double(workers: int, errors: list[ApiErrorSpec] | None = None) -> HyperPodDouble:
    spec = ClusterSpec(
        name="llm-train",
        instance_groups=[
            InstanceGroupSpec(name="controller", type="Controller", count=1),
            InstanceGroupSpec(name="workers", type="Compute", count=workers),
        ],
    )
    return HyperPodDouble(spec, BehaviourSpec(api_errors=errors or []), REGION, T0, now=lambda: 0.0)


@pytest.fixture(params=["fake", "double"])
def cluster_with_workers(request: pytest.FixtureRequest) -> Iterator[Callable[[int], Any]]:
    """A factory: the number of workers -> a Cluster port (the fake, or the adapter on the double)."""
    if request.param == "fake":
        yield lambda workers: FakeCluster([compute_node(n) for n in range(1, workers + 1)])
        return
    with mock_aws(), ExitStack() as stack:

        def served(workers: int) -> HyperPodCluster:
            stack.enter_context(serve(_double(workers)))
            return HyperPodCluster("llm-train", sagemaker=boto3.client("sagemaker", region_name=REGION))

        yield served


def _worker_ids(cluster: Any) -> list[str]:
    return [n.node_id for n in cluster.list_nodes() if n.instance_group == "workers"]


def test_cluster_lists_every_node_with_its_hostname(cluster_with_workers: Any) -> None:
    cluster = cluster_with_workers(130)  # more than one ListClusterNodes page
    workers = [n for n in cluster.list_nodes() if n.instance_group == "workers"]
    assert len(workers) == 130
    assert all(n.node_id.startswith("i-") and n.private_dns_hostname.startswith("ip-") and n.status == "Running" for n in workers)
    assert cluster.describe().groups["workers"].node_type == "Compute"


def test_cluster_replace_reports_each_node_and_uses_at_most_25_per_call(cluster_with_workers: Any) -> None:
    cluster = cluster_with_workers(30)
    ids = [*_worker_ids(cluster)[:27], node_id(0xDEAD)]
    outcome = cluster.replace_nodes(ids)
    assert outcome.calls == 2
    assert sorted(outcome.successful) == sorted(ids[:27])
    assert [(f.node_id, f.error_code) for f in outcome.failed] == [(node_id(0xDEAD), "InstanceIdNotFound")]


def test_double_gives_a_replacement_a_new_id_under_the_same_hostname(aws: None) -> None:
    clock = {"t": 0.0}
    double = HyperPodDouble(
        _double(2).spec, BehaviourSpec(replacement_seconds=600, shutdown_seconds=45), REGION, T0, now=lambda: clock["t"]
    )
    with serve(double):
        cluster = HyperPodCluster("llm-train", sagemaker=boto3.client("sagemaker", region_name=REGION))
        old = next(n for n in cluster.list_nodes() if n.instance_group == "workers")
        assert cluster.replace_nodes([old.node_id]).successful == [old.node_id]
        again = cluster.replace_nodes([old.node_id])  # HyperPod is busy with it
        assert [(f.node_id, f.error_code) for f in again.failed] == [(old.node_id, "InstanceIdInUse")] and again.successful == []
        clock["t"] = 100.0
        pending = [n for n in cluster.list_nodes() if n.private_dns_hostname == old.private_dns_hostname]
        assert [(n.status, n.node_id != old.node_id) for n in pending] == [("Pending", True)]
        clock["t"] = 600.0
        running = [n for n in cluster.list_nodes() if n.private_dns_hostname == old.private_dns_hostname]
        assert [n.status for n in running] == ["Running"]


def test_double_refuses_more_than_25_ids_and_controller_replacement(aws: None) -> None:
    double = _double(30)
    with serve(double):
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        nodes = sagemaker.list_cluster_nodes(ClusterName="llm-train")["ClusterNodeSummaries"]
        workers = [n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "workers"]
        controller = next(n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "controller")
        with pytest.raises(sagemaker.exceptions.ClientError, match="ValidationException"):
            sagemaker.batch_replace_cluster_nodes(ClusterName="llm-train", NodeIds=workers[:26])
        with pytest.raises(sagemaker.exceptions.ClientError, match="controller"):
            sagemaker.batch_replace_cluster_nodes(ClusterName="llm-train", NodeIds=[controller])
        response = sagemaker.batch_replace_cluster_nodes(ClusterName="llm-train", NodeIds=["i-0000000000000dead"])
        assert "Successful" not in response and response["Failed"][0]["ErrorCode"] == "InstanceIdNotFound"


def test_double_reboot_keeps_the_id_describe_details_a_node_and_delete_reports_code(aws: None) -> None:
    clock = {"t": 0.0}
    double = HyperPodDouble(_double(2).spec, BehaviourSpec(), REGION, T0, now=lambda: clock["t"])
    with serve(double):
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        worker = next(
            n for n in sagemaker.list_cluster_nodes(ClusterName="llm-train")["ClusterNodeSummaries"] if n["InstanceGroupName"] == "workers"
        )
        node_id_ = worker["InstanceId"]
        assert sagemaker.batch_reboot_cluster_nodes(ClusterName="llm-train", NodeIds=[node_id_])["Successful"] == [node_id_]
        details = sagemaker.describe_cluster_node(ClusterName="llm-train", NodeId=node_id_)["NodeDetails"]
        assert details["InstanceStatus"]["Status"] == "Pending" and details["PrivateDnsHostname"] == worker["PrivateDnsHostname"]
        clock["t"] = 300.0
        assert (
            sagemaker.describe_cluster_node(ClusterName="llm-train", NodeId=node_id_)["NodeDetails"]["InstanceStatus"]["Status"]
            == "Running"
        )
        deleted = sagemaker.batch_delete_cluster_nodes(ClusterName="llm-train", NodeIds=[node_id_, "i-0000000000000dead"])
        assert deleted["Successful"] == [node_id_] and deleted["Failed"][0]["Code"] == "NodeIdNotFound"


def test_the_adapter_asks_for_logical_ids_and_carries_them_leaving_out_nodes_without_an_instance() -> None:
    # Given ListClusterNodes as the botocore model shapes it (a Stubber checks every parameter against it)

    sagemaker = boto3.client("sagemaker", region_name=REGION)
    summary = {
        "InstanceGroupName": "workers",
        "InstanceId": node_id(1),
        "NodeLogicalId": "df268d19-f035-4f28-9b80-b956b92ae21e",
        "InstanceType": "ml.p5.48xlarge",
        "LaunchTime": T0,
        "InstanceStatus": {"Status": "Running"},
        "PrivateDnsHostname": "ip-10-1-0-1.us-west-2.compute.internal",
    }
    provisioning = {
        **summary,
        "InstanceId": "",
        "NodeLogicalId": "0a1b2c3d-0000-4000-8000-000000000000",
        "InstanceStatus": {"Status": "Pending"},
    }
    with Stubber(sagemaker) as stub:
        stub.add_response(
            "list_cluster_nodes",
            {"ClusterNodeSummaries": [summary, provisioning]},
            {"ClusterName": "llm-train", "MaxResults": 100, "IncludeNodeLogicalIds": True},
        )
        # When the adapter lists the nodes
        nodes = HyperPodCluster("llm-train", sagemaker=sagemaker).list_nodes()
    # Then it asked for logical ids, carries each node's, and leaves out a node with no instance yet
    assert [(n.node_id, n.logical_id) for n in nodes] == [(node_id(1), "df268d19-f035-4f28-9b80-b956b92ae21e")]


@pytest.mark.parametrize("kept", [True, False], ids=["logical-id-kept", "logical-id-new"])
def test_double_lists_logical_ids_only_when_asked_and_gives_a_replacement_a_new_hostname_when_told(aws: None, kept: bool) -> None:
    clock = {"t": 0.0}
    behaviour = BehaviourSpec(replacement_hostname="new", replacement_logical_id="kept" if kept else "new")
    double = HyperPodDouble(_double(2).spec, behaviour, REGION, T0, now=lambda: clock["t"])
    with serve(double):
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        assert all("NodeLogicalId" not in n for n in sagemaker.list_cluster_nodes(ClusterName="llm-train")["ClusterNodeSummaries"])
        cluster = HyperPodCluster("llm-train", sagemaker=sagemaker)
        old = next(n for n in cluster.list_nodes() if n.instance_group == "workers")
        assert old.logical_id and cluster.replace_nodes([old.node_id]).successful == [old.node_id]
        clock["t"] = 700.0
        (new,) = [n for n in cluster.list_nodes() if n.instance_group == "workers" and n.launch_time and n.launch_time > T0]
        assert new.status == "Running" and new.private_dns_hostname != old.private_dns_hostname
        assert (new.logical_id == old.logical_id) is kept
        by_logical_id = sagemaker.describe_cluster_node(ClusterName="llm-train", NodeLogicalId=new.logical_id)["NodeDetails"]
        assert by_logical_id["InstanceId"] == new.node_id


@pytest.mark.parametrize("reboot_status", ["Pending", "Running"])
def test_double_models_what_slurmctld_sees_of_a_reboot_whatever_hyperpod_shows(aws: None, reboot_status: str) -> None:
    clock = {"t": 0.0}
    double = HyperPodDouble(_double(2).spec, BehaviourSpec(reboot_status=reboot_status), REGION, T0, now=lambda: clock["t"])  # type: ignore[arg-type]
    with serve(double):
        cluster = HyperPodCluster("llm-train", sagemaker=boto3.client("sagemaker", region_name=REGION))
        node = next(n for n in cluster.list_nodes() if n.instance_group == "workers")
        name = node.private_dns_hostname.split(".", 1)[0]  # type: ignore[union-attr]
        booted_before, responding = double.slurm_view(name)
        assert booted_before is not None and booted_before < T0 and responding
        cluster.reboot_nodes([node.node_id])
        # While it reboots: HyperPod shows Pending, or Running all through; slurmd does not answer
        clock["t"] = 60.0
        assert [n.status for n in cluster.list_nodes() if n.node_id == node.node_id] == [reboot_status]
        assert double.slurm_view(name) == (booted_before, False)
        # Once back: a boot time after the request, from a responding slurmd
        clock["t"] = 200.0
        booted_after, responding = double.slurm_view(name)
        assert booted_after is not None and booted_after > T0 and responding
        assert [n.status for n in cluster.list_nodes() if n.node_id == node.node_id] == ["Running"]


def test_hyperpod_errors_are_translated(aws: None) -> None:
    double = _double(
        2,
        errors=[
            ApiErrorSpec(operation="ListClusterNodes", code="ThrottlingException", times=10),
            ApiErrorSpec(operation="DescribeCluster", code="AccessDeniedException"),
        ],
    )
    with serve(double):
        sagemaker = boto3.client("sagemaker", region_name=REGION, config=Config(retries={"max_attempts": 1}))
        with pytest.raises(HyperPodThrottled):
            HyperPodCluster("llm-train", sagemaker=sagemaker).list_nodes()
        with pytest.raises(HyperPodApiError, match="AccessDeniedException"):
            HyperPodCluster("llm-train", sagemaker=sagemaker).describe()
        with pytest.raises(ClusterNotFound):
            HyperPodCluster("no-such-cluster", sagemaker=sagemaker).describe()
