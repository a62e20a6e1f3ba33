"""BatchGetItem's unprocessed keys (issue 46): asked again after a jittered wait that grows, a bounded
number of times and for a bounded total wait, and never answered partially: keys still unread at the
end are LedgerUnavailable, the error Apply Safety Policy's state retries.

The client is botocore's own, stubbed (Stubber checks every request against DynamoDB's model); the
waits go to a recorder, never to real time."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.adapters.backoff import BATCH_GET_BACKOFF, Backoff
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.errors import LedgerUnavailable
from hyperpod_recovery.models.records import NodeHold
from tests.fakes import T0

TABLE = "ledger"
CLUSTER = "llm-train"
# What Apply Safety Policy's Retry names (statemachines/node_recovery.asl.json): a partial read must
# end in an error the workflow retries, not in a node whose hold was missed.
RETRIED_BY_THE_STATE = "LedgerUnavailable"


def _key(node: str) -> dict[str, Any]:
    return {"pk": {"S": f"NODE#{CLUSTER}#{node}"}, "sk": {"S": "HOLD"}}


def _item(node: str) -> dict[str, Any]:
    hold = NodeHold(node=node, by="dan", reason="rack inspection", at=T0)
    return {**_key(node), "hold": {"S": hold.model_dump_json()}}


def _answer(read: list[str], unread: list[str]) -> dict[str, Any]:
    answer: dict[str, Any] = {"Responses": {TABLE: [_item(n) for n in read]}}
    if unread:
        answer["UnprocessedKeys"] = {TABLE: {"Keys": [_key(n) for n in unread], "ConsistentRead": True}}
    return answer


def _asked(nodes: list[str]) -> dict[str, Any]:
    return {"RequestItems": {TABLE: {"Keys": [_key(n) for n in nodes], "ConsistentRead": True}}}


class Waits:
    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def _ledger(client: Any, waits: Waits, draw: float = 1.0) -> DynamoLedger:
    return DynamoLedger(TABLE, client, sleep=waits.sleep, draw=lambda: draw)


@pytest.fixture
def dynamodb() -> Any:
    return boto3.client("dynamodb", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")


def test_given_keys_left_unprocessed_twice_then_they_are_asked_again_after_growing_waits_and_all_are_read(dynamodb: Any) -> None:
    # Given a table that reads one key of three, then one more, then the last
    waits = Waits()
    with Stubber(dynamodb) as stub:
        stub.add_response("batch_get_item", _answer(["a"], ["b", "c"]), _asked(["a", "b", "c"]))
        stub.add_response("batch_get_item", _answer(["b"], ["c"]), _asked(["b", "c"]))
        stub.add_response("batch_get_item", _answer(["c"], []), _asked(["c"]))
        # When the holds of the three nodes are read (each jitter draw at its most)
        holds = _ledger(dynamodb, waits).node_holds(CLUSTER, ["a", "b", "c"])
        stub.assert_no_pending_responses()
    # Then every hold is read, and only what was left was asked again, after a wait that doubled
    assert sorted(holds) == ["a", "b", "c"]
    assert waits.slept == [BATCH_GET_BACKOFF.base_seconds, 2 * BATCH_GET_BACKOFF.base_seconds]


def test_given_keys_never_processed_then_it_gives_up_after_its_bounded_retries_with_the_error_the_state_retries(dynamodb: Any) -> None:
    # Given a table that never reads the key (throttled throughout)
    waits = Waits()
    calls = BATCH_GET_BACKOFF.retries + 1
    with Stubber(dynamodb) as stub:
        for _ in range(calls):
            stub.add_response("batch_get_item", _answer([], ["a"]), _asked(["a"]))
        # When its hold is read, Then the answer is an error, not an empty answer that misses the hold
        with pytest.raises(LedgerUnavailable, match=r"1 hold\(s\) unread after 7 retries") as raised:
            _ledger(dynamodb, waits).node_holds(CLUSTER, ["a"])
        stub.assert_no_pending_responses()
    assert type(raised.value).__name__ == RETRIED_BY_THE_STATE
    # And it waited a bounded number of times, for a bounded total
    assert len(waits.slept) == BATCH_GET_BACKOFF.retries
    assert sum(waits.slept) <= BATCH_GET_BACKOFF.total_seconds + 1e-9


def test_given_more_than_a_call_takes_then_pages_of_100_and_the_unprocessed_are_asked_before_the_rest(dynamodb: Any) -> None:
    # Given 150 nodes: the first page of 100 comes back with 10 unprocessed
    nodes = [f"ip-10-0-0-{n}" for n in range(150)]
    waits = Waits()
    with Stubber(dynamodb) as stub:
        stub.add_response("batch_get_item", _answer(nodes[:90], nodes[90:100]), _asked(nodes[:100]))
        stub.add_response("batch_get_item", _answer(nodes[90:150], []), _asked(nodes[90:150]))
        holds = _ledger(dynamodb, waits, draw=0.5).node_holds(CLUSTER, nodes)
        stub.assert_no_pending_responses()
    # Then all 150 are read in two calls, one wait of half the first ceiling between them
    assert len(holds) == 150 and waits.slept == [0.5 * BATCH_GET_BACKOFF.base_seconds]


def test_given_every_key_read_at_once_then_nothing_waits(dynamodb: Any) -> None:
    waits = Waits()
    with Stubber(dynamodb) as stub:
        stub.add_response("batch_get_item", _answer(["a"], []), _asked(["a", "b"]))
        assert list(_ledger(dynamodb, waits).node_holds(CLUSTER, ["a", "b"])) == ["a"]
    assert waits.slept == []


@given(
    draws=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=20, max_size=20),
    base=st.floats(min_value=0.001, max_value=2.0),
    cap=st.floats(min_value=0.001, max_value=30.0),
    retries=st.integers(min_value=0, max_value=15),
    total=st.floats(min_value=0.0, max_value=60.0),
)
def test_given_any_draws_then_the_waits_stay_under_their_ceilings_and_bounds(
    draws: list[float], base: float, cap: float, retries: int, total: float
) -> None:
    backoff = Backoff(base_seconds=base, cap_seconds=cap, retries=retries, total_seconds=total)
    delays = list(backoff.delays(iter(draws).__next__))
    # Then no more waits than retries, each within [0, its ceiling], all of them within the total
    assert len(delays) <= retries
    assert all(0.0 <= d <= backoff.ceiling(i) + 1e-12 for i, d in enumerate(delays))
    assert sum(delays) <= total + 1e-9
    # And the ceilings double up to the cap, never past it
    ceilings = [backoff.ceiling(i) for i in range(retries)]
    assert ceilings == sorted(ceilings) and all(c <= cap for c in ceilings)


def test_given_the_largest_draws_then_the_stacks_waits_double_up_to_the_cap_and_the_last_is_cut_to_the_total() -> None:
    delays = list(BATCH_GET_BACKOFF.delays(lambda: 1.0))
    # (the stack's figures: 50 ms doubling to 1 s, 7 retries, at most 3 s of waiting in one read)
    assert delays[:-1] == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.0])
    assert len(delays) == BATCH_GET_BACKOFF.retries and sum(delays) == pytest.approx(BATCH_GET_BACKOFF.total_seconds)
    print(json.dumps({"delays_at_most": delays, "total": sum(delays)}))
