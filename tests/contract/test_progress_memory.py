"""The detector's memory of each job (adapters/progress_memory.py) on moto: what one tick writes the
next recalls, in batches; the largest job's item stays under DynamoDB's 400 KB; the fake agrees."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.progress_memory import ProgressMemoryTable, packed
from hyperpod_recovery.models.progress_memory import PACE_TICKS, STARTED_KEPT, JobMemory, Sighting, Started
from tests.fakes import CLUSTER, T0, FakeProgressMemory
from tests.unit.test_detect_hung_jobs import KEYS

DYNAMODB_ITEM_LIMIT = 400 * 1024


def memory(job: str, nodes: int = 2) -> JobMemory:
    at = int(T0.timestamp())

    def sighting(k: int) -> Sighting:  # (every value different, at its widest: compression gains least)
        ms = at * 1000 + k * 7919
        return Sighting(s=123456789 + k, st=ms, hb=ms + 13, pe=ms + 17, pl=86400, mv=at - k, hd=at - 2 * k, rs=123456789 + k, sk=-3600 - k)

    started = [Started(episode=at - k, execution=f"hpj-{job}-hung-{at - k}", step=123456789) for k in range(STARTED_KEPT)]
    return JobMemory(
        job=job,
        seen_at=T0,
        nodes={f"ip-10-{k // 250}-{k // 250}-{k % 250}.cluster.internal": sighting(k) for k in range(nodes)},
        paces=[86399.123456] * PACE_TICKS,
        started=started,
    )


@pytest.fixture(params=["moto", "fake"])
def store(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    if request.param == "fake":
        yield FakeProgressMemory()
        return
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(TableName="ledger", **KEYS)
        yield ProgressMemoryTable("ledger", dynamodb=dynamodb)


def test_what_a_tick_remembers_the_next_recalls_across_batches(store) -> None:  # type: ignore[no-untyped-def]
    # Given 230 jobs remembered (more than a batch of reads or writes)
    memories = [memory(str(1000 + k)) for k in range(230)]
    assert store.remember(CLUSTER, memories) == 0
    # When the next tick recalls them and a job never seen
    recalled = store.recall(CLUSTER, [m.job for m in memories] + ["9999"])
    # Then each comes back as written, the unseen one absent
    assert recalled == {m.job: m for m in memories}


def test_the_largest_jobs_memory_fits_one_item() -> None:
    # (4,096 nodes of the longest names, every value at its widest)
    item = packed(memory("1001", nodes=4096))
    assert len(item) < DYNAMODB_ITEM_LIMIT / 2, len(item)


def test_a_memory_expires_a_day_after_its_tick() -> None:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(TableName="ledger", **KEYS)
        ProgressMemoryTable("ledger", dynamodb=dynamodb).remember(CLUSTER, [memory("1001")])
        (item,) = dynamodb.scan(TableName="ledger")["Items"]
        assert item["pk"]["S"] == f"PROGRESS#{CLUSTER}#1001" and int(item["expires_at"]["N"]) == int((T0 + timedelta(days=1)).timestamp())


class _PagedAt16MB:
    """BatchGetItem as DynamoDB answers past its 16 MB a response: one item each call, the rest unprocessed."""

    def __init__(self, items: dict[str, bytes]) -> None:
        self.items = items
        self.calls = 0

    def batch_get_item(self, RequestItems: dict) -> dict:
        self.calls += 1
        ((table, request),) = RequestItems.items()
        first, *rest = request["Keys"]
        job = first["pk"]["S"].rsplit("#", 1)[1]
        answered = [{**first, "memory": {"B": self.items[job]}}]
        return {"Responses": {table: answered}, "UnprocessedKeys": {table: {"Keys": rest}} if rest else {}}


def test_given_answers_cut_at_their_16_mb_page_then_every_memory_is_read_without_using_up_the_backoff() -> None:
    # Given 40 large memories that DynamoDB returns one per call (each answer at its size limit)
    memories = [memory(str(1000 + k)) for k in range(40)]
    paged = _PagedAt16MB({m.job: packed(m) for m in memories})
    slept: list[float] = []
    table = ProgressMemoryTable("ledger", dynamodb=paged, sleep=slept.append)
    # When a tick recalls them; Then all are read, in 40 calls, and none waited as for a throttle
    assert table.recall(CLUSTER, [m.job for m in memories]) == {m.job: m for m in memories}
    assert paged.calls == 40 and slept == []
