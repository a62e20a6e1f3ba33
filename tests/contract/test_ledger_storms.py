"""The ledger under storms: two writers that both read before either writes keep what each wrote
(or the second is told to decide again).

The writers are DynamoLedger on moto, each with its own client whose first write waits until every
writer has done its reads (a barrier), then writes one after the other: the interleaving that made
two incidents ending together erase each other's entry in the one-item recovery log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.errors import LedgerUnavailable
from hyperpod_recovery.models.job_recovery import RestartEntry
from hyperpod_recovery.models.node_recovery import ApplySafetyPolicyInput
from hyperpod_recovery.models.records import BreakerState, RecoveryLogEntry, RejoinWait
from hyperpod_recovery.steps.apply_safety_policy import apply_safety_policy
from tests.contract.adapter_support import REGION, ledger_table_from_template
from tests.fakes import CLUSTER, T0
from tests.unit.test_safety import _assessment
from tests.unit.test_steps import _request

WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
DAY = 86_400


class ReadsFirst:
    """A DynamoDB client whose first write waits at ``barrier`` (until every writer has read), and
    whose writes then go one at a time (``turn``), in the order the writers reach it."""

    def __init__(self, client: Any, barrier: threading.Barrier, turn: threading.Lock) -> None:
        self._client, self._barrier, self._turn, self._waited = client, barrier, turn, False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name not in WRITES:
            return method

        def write(**kwargs: Any) -> Any:
            if not self._waited:
                self._waited = True
                self._barrier.wait(timeout=30)
            with self._turn:
                return method(**kwargs)

        return write


@pytest.fixture
def table() -> Iterator[str]:
    with mock_aws():
        yield ledger_table_from_template()


def at_once(*writers: Callable[[DynamoLedger], Any]) -> list[Any]:
    """Run each writer on its own ledger, all reading before any writes: what each returned or raised."""
    barrier, turn = threading.Barrier(len(writers)), threading.Lock()
    results: list[Any] = [None] * len(writers)

    def run(n: int) -> None:
        ledger = DynamoLedger("ledger", dynamodb=ReadsFirst(boto3.client("dynamodb", region_name=REGION), barrier, turn))
        try:
            results[n] = writers[n](ledger)
        except Exception as exc:  # what a writer raised is its result here
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def _ledger() -> DynamoLedger:
    return DynamoLedger("ledger", dynamodb=boto3.client("dynamodb", region_name=REGION))


def _entry(incident: str, at_minutes: int = 0, outcome: str = "recovered") -> RecoveryLogEntry:
    return RecoveryLogEntry(incident=incident, at=T0 + timedelta(minutes=at_minutes), hostnames=[f"ip-{incident}"], outcome=outcome)  # type: ignore[arg-type]


def test_given_two_incidents_ending_at_the_same_instant_when_both_log_then_the_breaker_counts_both(table: str) -> None:
    # Given one recovery already in the log
    _ledger().log_recovery("c", _entry("a"), DAY)
    # When two incidents end together: both read the log, then both write
    results = at_once(
        lambda ledger: ledger.log_recovery("c", _entry("b", 5), DAY), lambda ledger: ledger.log_recovery("c", _entry("c", 5), DAY)
    )
    # Then all three are in the log (the one-item log kept only the last writer's view: a, c)
    assert results == [None, None]
    assert [e.incident for e in _ledger().recovery_log("c", since=T0 - timedelta(hours=1))] == ["a", "b", "c"]


def test_given_a_storm_of_incidents_ending_together_then_each_is_counted_and_the_breaker_trips_on_them(table: str) -> None:
    # Given BreakerMaxRecoveries incidents ending at the same instant, each logging itself
    from tests.unit.test_safety import POLICY

    results = at_once(
        *(lambda ledger, n=n: ledger.log_recovery(CLUSTER, _entry(f"i{n}", 10), DAY) for n in range(POLICY.breaker_max_recoveries))
    )
    assert results == [None] * POLICY.breaker_max_recoveries
    # When the next fault comes
    verdict = apply_safety_policy(
        ApplySafetyPolicyInput(execution_name="next", request=_request(9, incident="next"), assessment=_assessment(9)),
        ledger=_ledger(),
        policy=POLICY,
        reservation_ttl=timedelta(hours=6),
        now=T0 + timedelta(minutes=20),
    )
    # Then the breaker counted every one of them and trips
    assert verdict.safety is not None and verdict.safety.breaker_tripped_now and not verdict.proceed
    assert _ledger().breaker(CLUSTER).state == "open"


def test_given_two_incidents_tripping_the_breaker_together_then_one_opens_it_and_the_other_decides_again(table: str) -> None:
    # When two incidents both read the closed breaker and both decide to open it
    def trip(by: str) -> Callable[[DynamoLedger], None]:
        return lambda ledger: ledger.save_breaker("c", ledger.breaker("c").changed_to("open", reason="storm", by=by, at=T0))

    results = at_once(trip("inc-1"), trip("inc-2"))
    # Then the first to write stands, whole, and the other is told to decide again on what is there
    # now (its step is retried: it reads an open breaker and is capped), never written over it
    refused = [n for n, r in enumerate(results) if isinstance(r, LedgerUnavailable)]
    assert len(refused) == 1 and results[1 - refused[0]] is None
    breaker = _ledger().breaker("c")
    assert (breaker.state, breaker.changed_by, len(breaker.history)) == ("open", f"inc-{2 - refused[0]}", 1)


def test_given_a_human_resetting_the_breaker_while_an_incident_trips_it_then_neither_change_is_lost_silently(table: str) -> None:
    # Given an open breaker
    ledger = _ledger()
    ledger.save_breaker("c", BreakerState().changed_to("open", reason="storm", by="inc-0", at=T0))
    # When a human closes it while an incident that read it open... writes its own view
    reset = at_once(
        lambda mine: mine.save_breaker("c", mine.breaker("c").changed_to("closed", reason="rack fixed", by="alice", at=T0)),
        lambda mine: mine.save_breaker("c", mine.breaker("c").changed_to("open", reason="storm again", by="inc-9", at=T0)),
    )
    # Then the one that wrote second is refused, and the history has every change that was written
    refused = [n for n, r in enumerate(reset) if isinstance(r, LedgerUnavailable)]
    assert len(refused) == 1 and reset[1 - refused[0]] is None
    written = "inc-9" if refused == [0] else "alice"
    assert [h.split(" by ")[1].split(":")[0] for h in _ledger().breaker("c").history] == ["inc-0", written]


def _restart(n: int) -> RestartEntry:
    return RestartEntry(
        failed_job_id="8", new_job_id=str(100 + n), kind="application", checkpoint_step=n, restarted_at=T0, incident=f"i{n}"
    )


# Each: what writer n writes, and how many of the writers' entries a reader finds afterwards.
CONCURRENT_WRITES: dict[str, tuple[Callable[[int], Callable[[DynamoLedger], Any]], Callable[[DynamoLedger], int]]] = {
    # The cap's places: a version-conditioned write, read again on a conflict
    "cap places": (
        lambda n: lambda ledger: ledger.reserve_capacity("c", f"inc-{n}", [f"i-{n}"], 100, T0, timedelta(hours=1)),
        lambda ledger: len(ledger.nodes_in_recovery("c", T0)),
    ),
    # An incident's holdings: ADD to a string set, atomic in DynamoDB
    "holdings": (
        lambda n: lambda ledger: ledger.acquire_locks("inc", "c", [f"i-{n}"], T0, timedelta(hours=1)),
        lambda ledger: len(ledger.holdings("inc").locks),
    ),
    # A lineage's restarts and a cluster's rejoin waits: an item each
    "restarts": (
        lambda n: lambda ledger: ledger.record_restart("c", "8", _restart(n)),
        lambda ledger: len(ledger.restart_history("c", "8")),
    ),
    "rejoin waits": (
        lambda n: lambda ledger: ledger.await_rejoin("c", RejoinWait(execution=f"inc-{n}", task_token=f"t{n}", until=T0), T0),
        lambda ledger: len(ledger.rejoin_waits("c")),
    ),
}


@pytest.mark.parametrize("kind", sorted(CONCURRENT_WRITES))
def test_given_writers_that_all_read_before_any_writes_then_every_write_is_kept(table: str, kind: str) -> None:
    write, count = CONCURRENT_WRITES[kind]
    results = at_once(*(write(n) for n in range(4)))
    assert all(not isinstance(r, Exception) for r in results), results
    assert count(_ledger()) == 4
