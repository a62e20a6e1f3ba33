"""The controller agent's job nodes snapshot as one ledger item: its size in bytes as DynamoDB counts
them (and moto stores them) at 2,000 jobs of 2,048 nodes, its round trip, and what a reader refuses.

How many nodes a job lists depends on how jobs share a cluster: exclusive training jobs hold
disjoint nodes (their sum is the cluster's size), jobs that oversubscribe share them, and Slurm
allocates neighbours (a block, a few fragments). Each shape is measured at the issue's figure; a
snapshot no item can carry (jobs scattered node by node over a cluster, the pathological case) is
refused whole, never cut short: a job missing from it would lose its real reports.
"""

from __future__ import annotations

import random
import zlib
from datetime import timedelta

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.job_nodes_item import (
    MAX_ITEM_BYTES,
    JobNodesTooLarge,
    JobNodesUnreadable,
    decode,
    encode,
    item,
    read_item,
)
from tests.contract.test_ledger_item_sizes import ITEM_LIMIT, item_size
from tests.fakes import T0

CLUSTER = "c" * 63  # ClusterName at its longest
JOBS, NODES_PER_JOB = 2_000, 2_048


def hyperpod_name(i: int) -> str:
    """A HyperPod Slurm node's name (ip-<its private address>)."""
    return f"ip-10-{i >> 16 & 255}-{i >> 8 & 255}-{i & 255}"


def snapshot(jobs: dict[str, list[str]]) -> JobNodes:
    return JobNodes(source="slurm", taken_at=T0, jobs=jobs)


def _shared() -> dict[str, list[str]]:
    """2,000 jobs each on all of one 2,048-node block (oversubscribed)."""
    names = sorted(hyperpod_name(i) for i in range(NODES_PER_JOB))
    return {str(100_000 + j): names for j in range(JOBS)}


def _blocks() -> dict[str, list[str]]:
    """2,000 jobs of 2,048 neighbouring nodes each, at random places of a 16,384-node cluster."""
    rng = random.Random(47)  # noqa: S311 - a fixed layout, not a secret
    cluster = 16_384
    return {
        str(100_000 + j): sorted(hyperpod_name((start + k) % cluster) for k in range(NODES_PER_JOB))
        for j, start in enumerate(rng.randrange(cluster) for _ in range(JOBS))
    }


def _exclusive() -> dict[str, list[str]]:
    """2,000 exclusive jobs over a 65,536-node cluster (33 nodes each: the sum is the cluster)."""
    per = 65_536 // JOBS
    return {str(100_000 + j): sorted(hyperpod_name(j * per + k) for k in range(per)) for j in range(JOBS)}


def _put_and_read(written: dict[str, object]) -> dict[str, object]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(
            TableName="ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.put_item(TableName="ledger", Item=written)
        key = {"pk": written["pk"], "sk": written["sk"]}
        found: dict[str, object] = dynamodb.get_item(TableName="ledger", Key=key, ConsistentRead=True)["Item"]
        return found


@pytest.mark.parametrize("shape", [_shared, _blocks, _exclusive], ids=["shared", "blocks", "exclusive"])
def test_2000_jobs_of_2048_nodes_fit_one_item_as_sent(shape: object) -> None:
    # Given 2,000 running jobs' nodes in one of the shapes clusters run
    jobs = shape()  # type: ignore[operator]
    # When the agent's item is built and put
    written = item(snapshot(jobs), CLUSTER)
    size = sum(len(name) + item_size(value) for name, value in written.items())
    found = _put_and_read(written)
    # Then it is within the bound DynamoDB's 400 KB leaves, and reads back whole
    assert size <= MAX_ITEM_BYTES < ITEM_LIMIT, size
    assert read_item(found, CLUSTER).jobs == jobs


def test_a_snapshot_no_item_can_carry_is_refused_whole() -> None:
    # Given 150 jobs each on 2,048 nodes scattered one by one over 4,096 (nothing runs like this)
    rng = random.Random(47)  # noqa: S311 - a fixed layout, not a secret
    jobs = {str(100_000 + j): sorted(hyperpod_name(i) for i in rng.sample(range(4_096), NODES_PER_JOB)) for j in range(150)}
    # Then building the item refuses it, naming the size, rather than leaving jobs out
    with pytest.raises(JobNodesTooLarge, match="over 350000"):
        item(snapshot(jobs), CLUSTER)


_NAMES = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20).map(lambda s: "n" + s)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[0-9]{1,10}(_[0-9]{1,4})?", fullmatch=True),
        st.lists(_NAMES, min_size=0, max_size=30, unique=True).map(sorted),
        max_size=20,
    ),
    st.integers(min_value=0, max_value=10**6),
)
def test_any_snapshot_reads_back_as_written(jobs: dict[str, list[str]], seconds: int) -> None:
    written = JobNodes(source="slurm", taken_at=T0 + timedelta(seconds=seconds), jobs=jobs)
    assert decode(encode(written)) == written


def _valid() -> dict[str, object]:
    return item(snapshot({"42": ["ip-10-1-0-1", "ip-10-1-0-2"]}), CLUSTER)


def _with_data(raw: bytes) -> dict[str, object]:
    return {**_valid(), "data": {"B": zlib.compress(raw)}}


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param({**_valid(), "pk": {"S": "JOBNODES#another-cluster"}}, id="another cluster's key"),
        pytest.param({**_valid(), "format": {"N": "2"}}, id="a format this code does not read"),
        pytest.param({k: v for k, v in _valid().items() if k != "data"}, id="no data"),
        pytest.param({**_valid(), "data": {"B": b"not zlib"}}, id="not compressed"),
        pytest.param({**_valid(), "data": {"B": zlib.compress(b"x" * 10)[:-3]}}, id="cut short"),
        pytest.param(_with_data(b"[1, 2]"), id="not a document"),
        pytest.param(
            _with_data(b'{"source":"slurm","taken_at":"2026-11-28T00:00:00Z","nodes":["a"],"jobs":{"1":[[0,5]]},"ambiguous":[]}'),
            id="a range past the node list",
        ),
        pytest.param(
            _with_data(b'{"source":"eks","taken_at":"2026-11-28T00:00:00Z","nodes":[],"jobs":{},"ambiguous":[]}'),
            id="another orchestrator's",
        ),
        pytest.param(
            _with_data(b'{"source":"slurm","taken_at":"yesterday","nodes":[],"jobs":{},"ambiguous":[]}'),
            id="a time that is none",
        ),
    ],
)
def test_an_item_that_is_not_a_snapshot_of_this_cluster_is_refused(broken: dict[str, object]) -> None:
    with pytest.raises(JobNodesUnreadable):
        read_item(broken, CLUSTER)


def test_a_snapshot_that_inflates_past_its_bound_is_refused_before_it_is_read() -> None:
    bomb = {**_valid(), "data": {"B": zlib.compress(b" " * 70_000_000)}}  # 68 KB that inflate to 70 MB
    with pytest.raises(JobNodesUnreadable, match="within 64000000 bytes"):
        read_item(bomb, CLUSTER)
