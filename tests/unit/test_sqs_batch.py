"""The partial-batch contract of Lambda's SQS event source, as sqs_events.process_batch keeps it:
each record on its own, the failed ones named for redelivery, a batch that failed whole fails the
invocation, and an event that is not from SQS is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.errors import EveryRecordFailed
from hyperpod_recovery.sqs_events import process_batch, sqs_records


def _records(*ids: str) -> list[dict[str, str]]:
    return [{"messageId": m, "body": f"body of {m}"} for m in ids]


def test_only_the_records_whose_handling_raised_are_reported_for_redelivery() -> None:
    seen: list[tuple[str, str]] = []

    def handle(message_id: str, body: str) -> None:
        seen.append((message_id, body))
        if message_id == "b":
            raise RuntimeError("ledger throttled")

    # When the second of three records fails
    response = process_batch(_records("a", "b", "c"), handle)
    # Then the others were still handled, and only it is redelivered
    assert [m for m, _ in seen] == ["a", "b", "c"] and seen[0][1] == "body of a"
    assert response == {"batchItemFailures": [{"itemIdentifier": "b"}]}


def test_a_batch_that_failed_whole_fails_the_invocation() -> None:
    def handle(message_id: str, body: str) -> None:
        raise RuntimeError("SNS down")

    with pytest.raises(EveryRecordFailed, match="all 2 records"):
        process_batch(_records("a", "b"), handle)


def test_an_empty_batch_is_no_failure() -> None:
    assert process_batch([], lambda m, b: None) == {"batchItemFailures": []}


@pytest.mark.parametrize("event", [{}, {"Records": "x"}, {"Records": [{"body": "no id"}]}, {"records": []}, []])
def test_an_event_that_is_not_from_sqs_is_refused(event: object) -> None:
    with pytest.raises(ValueError, match="not an SQS event"):
        sqs_records(event)  # type: ignore[arg-type]


@given(st.lists(st.tuples(st.uuids().map(str), st.booleans()), min_size=1, max_size=20, unique_by=lambda t: t[0]))
def test_the_reported_failures_are_exactly_the_records_that_raised_in_order(batch: list[tuple[str, bool]]) -> None:
    failing = {m for m, fails in batch if fails}

    def handle(message_id: str, body: str) -> None:
        if message_id in failing:
            raise RuntimeError("transient")

    if len(failing) == len(batch):
        with pytest.raises(EveryRecordFailed):
            process_batch(_records(*(m for m, _ in batch)), handle)
        return
    response = process_batch(_records(*(m for m, _ in batch)), handle)
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [m for m, fails in batch if fails]
