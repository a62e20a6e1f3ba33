"""The JobNodeSource adapters (adapters/job_nodes.py): on Slurm the controller agent's snapshot, as the
agent writes it, read from the ledger on moto; on EKS the live pods of the schema-checked Kubernetes
fake, through the real adapter over TLS as well as in-process, grouped by their controller's uid."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_recovery.adapters.job_nodes import EksJobNodes, SlurmJobNodes
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable
from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.job_nodes_item import SORT_KEY, item, partition_key
from hyperpod_recovery.models.kubernetes import JOB_KINDS
from hyperpod_recovery_agent.job_nodes import JobNodesReporter
from sandbox.template import load_template
from tests.conftest import ROOT
from tests.contract import kube_api_support as kube_api
from tests.fakes import T0
from tests.unit.test_slurm_json import FixtureSlurm

# The Kubernetes API server under test, fake and real-over-TLS (tests/contract/kube_api_support.py).
tls = kube_api.tls
_running_server = kube_api._running_server
server = kube_api.server
api = kube_api.api

CLUSTER = "llm-train"
NODE_A, NODE_B, NODE_C = "hyperpod-i-0123456789abcdef0", "hyperpod-i-0123456789abcdef1", "hyperpod-i-0123456789abcdef2"


# --- Slurm: the agent's snapshot in the ledger --------------------------------------------------
@pytest.fixture
def ledger() -> Iterator[Any]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        props = load_template(ROOT / "template.yaml")["Resources"]["LedgerTable"]["Properties"]
        dynamodb.create_table(
            TableName="ledger",
            KeySchema=props["KeySchema"],
            AttributeDefinitions=props["AttributeDefinitions"],
            GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
            BillingMode="PAY_PER_REQUEST",
        )
        yield dynamodb


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_the_snapshot_the_agent_wrote_is_what_detect_hung_jobs_reads(ledger: Any, version: str) -> None:
    # Given the agent's duty ran against a real squeue answer
    JobNodesReporter(slurm=FixtureSlurm(version), dynamodb=ledger, table_name="ledger", cluster=CLUSTER, clock=T0.timestamp).tick()
    # When the detector's adapter reads it
    snapshot = SlurmJobNodes("ledger", CLUSTER, dynamodb=ledger).running_job_nodes()
    # Then it has each running job's nodes, as of when the agent read slurmctld
    assert snapshot is not None and snapshot.jobs == {"1": ["ip-10-1-0-1"], "2": ["ip-10-1-0-2"]}
    assert snapshot.taken_at == T0 and snapshot.fresh(T0 + timedelta(seconds=60))
    assert snapshot.nodes_of("1") == frozenset({"ip-10-1-0-1"}) and snapshot.nodes_of("3") is None


def test_the_snapshot_stays_out_of_the_ledgers_cluster_index(ledger: Any) -> None:
    # (the incident listings read that index: a snapshot there would be listed as a record)
    JobNodesReporter(slurm=FixtureSlurm("24.11"), dynamodb=ledger, table_name="ledger", cluster=CLUSTER, clock=T0.timestamp).tick()
    [stored] = ledger.scan(TableName="ledger")["Items"]
    assert {"cluster", "recorded_at"}.isdisjoint(stored)


def test_no_snapshot_yet_is_none(ledger: Any) -> None:
    assert SlurmJobNodes("ledger", CLUSTER, dynamodb=ledger).running_job_nodes() is None


def test_another_clusters_snapshot_is_not_this_ones(ledger: Any) -> None:
    JobNodesReporter(slurm=FixtureSlurm("24.11"), dynamodb=ledger, table_name="ledger", cluster="other", clock=T0.timestamp).tick()
    assert SlurmJobNodes("ledger", CLUSTER, dynamodb=ledger).running_job_nodes() is None


def test_a_malformed_snapshot_is_none_logged_and_counted(ledger: Any, caplog: pytest.LogCaptureFixture) -> None:
    # Given an item under the snapshot's key that does not read
    ledger.put_item(
        TableName="ledger",
        Item={"pk": {"S": partition_key(CLUSTER)}, "sk": {"S": SORT_KEY}, "format": {"N": "1"}, "data": {"B": b"garbage"}},
    )
    adapter = SlurmJobNodes("ledger", CLUSTER, dynamodb=ledger)
    # Then the adapter says "no snapshot", counts it and logs why, never failing the detector
    assert adapter.running_job_nodes() is None
    assert adapter.unreadable == 1 and "does not read" in caplog.text


def test_the_snapshot_is_read_consistently() -> None:
    client = boto3.client("dynamodb", region_name="us-west-2")
    written = item(JobNodes(source="slurm", taken_at=T0), CLUSTER)
    with Stubber(client) as stub:
        stub.add_response(
            "get_item",
            {"Item": written},
            {"TableName": "ledger", "Key": {"pk": {"S": partition_key(CLUSTER)}, "sk": {"S": SORT_KEY}}, "ConsistentRead": True},
        )
        assert SlurmJobNodes("ledger", CLUSTER, dynamodb=client).running_job_nodes() is not None


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("ProvisionedThroughputExceededException", LedgerUnavailable),
        ("ThrottlingException", LedgerUnavailable),
        ("AccessDeniedException", LedgerError),
    ],
)
def test_ledger_errors_are_named_as_every_ledger_adapters_are(code: str, error: type[Exception]) -> None:
    client = boto3.client("dynamodb", region_name="us-west-2")
    with Stubber(client) as stub:
        stub.add_client_error("get_item", service_error_code=code, http_status_code=400)
        with pytest.raises(error, match=code):
            SlurmJobNodes("ledger", CLUSTER, dynamodb=client).running_job_nodes()


# --- EKS: the live pods by their controller -----------------------------------------------------
def _nodes(api: Any) -> None:
    for instance in (NODE_A, NODE_B, NODE_C):
        api.fake.add_hyperpod_node(instance.removeprefix("hyperpod-"))


def test_a_jobs_nodes_are_its_own_pods_nodes(api: Any) -> None:
    # Given two jobs' pods (a PyTorchJob, a HyperPodPyTorchJob) and a pod no job owns
    _nodes(api)
    api.fake.add_job("PyTorchJob", "team-a", "llama", nodes=[NODE_A, NODE_B])
    api.fake.add_job("HyperPodPyTorchJob", "team-b", "mistral", nodes=[NODE_C])
    api.fake.add_pod("team-a", "notebook", NODE_C)
    # When the adapter reads the cluster (one list of pods)
    snapshot = EksJobNodes(api.port, lambda: T0).running_job_nodes()
    # Then each job has the nodes of the pods it controls, keyed namespace/name; the stray pod counts for nothing
    assert snapshot is not None and snapshot.source == "eks" and snapshot.taken_at == T0
    assert snapshot.jobs == {"team-a/llama": [NODE_A, NODE_B], "team-b/mistral": [NODE_C]}
    assert snapshot.ambiguous == []
    assert [(c[0], c[1]) for c in api.fake.calls].count(("list", "pods")) == 1


def test_a_pod_not_scheduled_yet_holds_no_node(api: Any) -> None:
    _nodes(api)
    job = api.fake.add_job("PyTorchJob", "team-a", "llama", nodes=[NODE_A])
    api.fake.add_pod("team-a", "llama-worker-1", None, owner=("PyTorchJob", "llama", job["metadata"]["uid"]), phase="Pending")
    snapshot = EksJobNodes(api.port, lambda: T0).running_job_nodes()
    assert snapshot is not None and snapshot.jobs == {"team-a/llama": [NODE_A]}


def test_a_terminating_pod_still_runs_its_job(api: Any) -> None:
    # Given a job whose pod on NODE_B is being deleted (its processes still run through the grace period)
    _nodes(api)
    api.fake.add_job("PyTorchJob", "team-a", "llama", nodes=[NODE_A, NODE_B])
    api.fake.pods[("team-a", "llama-worker-1")]["metadata"]["deletionTimestamp"] = "2026-11-28T00:05:00Z"
    snapshot = EksJobNodes(api.port, lambda: T0).running_job_nodes()
    assert snapshot is not None and snapshot.jobs == {"team-a/llama": [NODE_A, NODE_B]}


def test_two_jobs_under_one_name_make_the_name_ambiguous(api: Any) -> None:
    # Given llama deleted and created again: the old object's pod still terminating on NODE_C
    _nodes(api)
    api.fake.add_job("PyTorchJob", "team-a", "llama", nodes=[NODE_A])
    api.fake.add_pod("team-a", "llama-old-worker-0", NODE_C, owner=("PyTorchJob", "llama", "0b5e0d6c-0000-4000-8000-000000000001"))
    # And another namespace's llama, which is another job
    api.fake.add_job("PyTorchJob", "team-b", "llama", nodes=[NODE_B])
    snapshot = EksJobNodes(api.port, lambda: T0).running_job_nodes()
    # Then no node counts for team-a/llama (which copy wrote a row cannot be told), team-b's is its own
    assert snapshot is not None and snapshot.ambiguous == ["team-a/llama"]
    assert snapshot.nodes_of("team-a/llama") is None and snapshot.jobs == {"team-b/llama": [NODE_B]}


def test_only_a_controlling_owner_of_a_training_kind_makes_a_pod_a_jobs(api: Any) -> None:
    _nodes(api)
    job = api.fake.add_job("PyTorchJob", "team-a", "llama", nodes=[NODE_A])
    uid = job["metadata"]["uid"]
    # a pod that names the job as an owner, but not as its controller
    api.fake.add_pod("team-a", "sidecar", NODE_B, owner=("PyTorchJob", "llama", uid))
    api.fake.pods[("team-a", "sidecar")]["metadata"]["ownerReferences"][0]["controller"] = False
    # a pod controlled by a kind of the same name in another API group
    api.fake.add_pod("team-a", "lookalike", NODE_C, owner=("PyTorchJob", "llama", uid))
    api.fake.pods[("team-a", "lookalike")]["metadata"]["ownerReferences"][0]["apiVersion"] = "example.com/v1"
    snapshot = EksJobNodes(api.port, lambda: T0).running_job_nodes()
    assert snapshot is not None and snapshot.jobs == {"team-a/llama": [NODE_A]}
    assert JOB_KINDS["PyTorchJob"].api_version == "kubeflow.org/v1"
