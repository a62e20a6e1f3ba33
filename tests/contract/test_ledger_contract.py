"""The ledger port: the fake (tests/fakes_ledger.py) and the DynamoDB adapter (against moto, its table made from
template.yaml's key schema) meet the same expectations: locks, claims, holdings, caps, the breaker, effects,
records; and what only the DynamoDB ledger does (its listings, holds, the audit log, its errors)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.errors import LedgerError, LedgerUnavailable
from hyperpod_recovery.models.records import AuditEntry, IncidentRecord, NodeHold
from tests.contract import adapter_support
from tests.contract.adapter_support import REGION, ledger_table_from_template
from tests.fakes import T0

# The shared fixtures, where pytest finds them: by name in this module.
aws = adapter_support.aws


TTL = timedelta(hours=6)


# The fake and the DynamoDB ledger, as every ledger contract module has them.
ledger = adapter_support.ledger


def test_ledger_lock_belongs_to_one_incident_at_a_time(ledger: Any) -> None:
    assert ledger.acquire_locks("a", "c", ["n1", "n2"], T0, TTL).acquired == ["n1", "n2"]
    second = ledger.acquire_locks("b", "c", ["n2", "n3"], T0, TTL)
    assert second.acquired == ["n3"] and second.held_elsewhere == {"n2": "a"}
    assert ledger.acquire_locks("a", "c", ["n1"], T0, TTL).acquired == ["n1"]  # a retry by the holder


def test_ledger_lock_expires(ledger: Any) -> None:
    ledger.acquire_locks("a", "c", ["n1"], T0, TTL)
    assert ledger.lock_holders("c", ["n1"], T0) == {"n1": "a"}
    later = T0 + TTL + timedelta(seconds=1)
    assert ledger.lock_holders("c", ["n1"], later) == {}
    assert ledger.acquire_locks("b", "c", ["n1"], later, TTL).acquired == ["n1"]


def test_ledger_release_frees_and_hold_keeps(ledger: Any) -> None:
    ledger.acquire_locks("a", "c", ["n1", "n2"], T0, TTL)
    ledger.release_locks("a", "c", ["n1"], None)
    ledger.release_locks("a", "c", ["n2"], T0 + timedelta(days=1))
    ledger.release_locks("intruder", "c", ["n2"], None)  # not the holder: no effect
    assert ledger.lock_holders("c", ["n1", "n2"], T0 + TTL + timedelta(hours=1)) == {"n2": "a"}


def test_ledger_remembers_started_replacements(ledger: Any) -> None:
    ledger.mark_replacements_initiated("a", ["n1"], T0)
    ledger.mark_replacements_initiated("a", ["n2"], T0)
    ledger.mark_replacements_initiated("a", [], T0)
    assert ledger.replacements_initiated("a") == {"n1", "n2"}
    assert ledger.replacements_initiated("b") == set()


def test_ledger_job_is_claimed_once(ledger: Any) -> None:
    assert ledger.claim_resubmission("c", "1001", "a", T0, TTL).claimed
    other = ledger.claim_resubmission("c", "1001", "b", T0, TTL)
    assert not other.claimed and other.incident_id == "a" and other.new_job_id is None
    ledger.complete_resubmission("c", "1001", "b", "9999")  # not the claimant: ignored
    ledger.complete_resubmission("c", "1001", "a", "1002")
    assert ledger.claim_resubmission("c", "1001", "b", T0, TTL).new_job_id == "1002"
    # A completed claim does not expire with the claim's TTL: the job was resubmitted
    assert ledger.claim_resubmission("c", "1001", "b", T0 + TTL * 2, TTL).incident_id == "a"


def test_ledger_records_one_re_creation_token_per_job_whoever_asks_first(ledger: Any) -> None:
    # (EKS: recorded before the object is made; every incident and retry re-creating the job uses it)
    uid = "0b0e8b4a-1b0c-4d5e-8f00-000000000001"
    token = ledger.recreation_token("c", uid, T0)
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    assert ledger.recreation_token("c", uid, T0 + timedelta(minutes=5)) == token
    assert ledger.recreation_token("c", "0b0e8b4a-1b0c-4d5e-8f00-000000000002", T0) != token


def test_ledger_counts_job_restarts_in_the_window_up_to_the_limit_once_each(ledger: Any) -> None:
    # Given a limit of 3 job restarts in a window of an hour
    window = timedelta(hours=1)
    assert [ledger.reserve_job_restart("c", f"hpj-{n}", 3, T0, window) for n in range(4)] == [True, True, True, False]
    # Then a retried step keeps its place, another cluster has its own, and the window frees them as they expire
    assert ledger.reserve_job_restart("c", "hpj-1", 3, T0, window) and ledger.job_restarts("c", T0) == ["hpj-0", "hpj-1", "hpj-2"]
    assert ledger.reserve_job_restart("other", "hpj-9", 3, T0, window)
    assert ledger.reserve_job_restart("c", "hpj-4", 3, T0 + window + timedelta(seconds=1), window)
    assert ledger.job_restarts("c", T0 + window + timedelta(seconds=1)) == ["hpj-4"]


def test_ledger_remembers_each_started_failure_until_it_expires(ledger: Any) -> None:
    # (the EKS poller's memory: one entry per failure, however many polls and clusters)
    keys = [f"0b0e8b4a-1b0c-4d5e-8f00-{n:012d}:1773478800" for n in range(150)]
    for key in keys:
        ledger.note_failure_started("c", key, T0 + TTL)
    ledger.note_failure_started("other", "x:1", T0 + TTL)
    assert ledger.failures_started("c", T0) == set(keys) and ledger.failures_started("c", T0 + TTL * 2) == set()


def test_ledger_claim_released_or_expired_frees_the_job(ledger: Any) -> None:
    # Given a claim that a released (nothing submitted) and one that b never settled (it died)
    ledger.claim_resubmission("c", "1", "a", T0, TTL)
    ledger.claim_resubmission("c", "2", "b", T0, TTL)
    ledger.release_resubmission("c", "1", "intruder")  # not the claimant: no effect
    assert ledger.resubmission_claim("c", "1").incident_id == "a"
    ledger.release_resubmission("c", "1", "a")
    # Then job 1 is free at once, job 2 only after its claim's TTL
    assert ledger.resubmission_claim("c", "1") is None and ledger.claim_resubmission("c", "1", "x", T0, TTL).claimed
    assert not ledger.claim_resubmission("c", "2", "x", T0 + TTL - timedelta(seconds=1), TTL).claimed
    assert ledger.claim_resubmission("c", "2", "x", T0 + TTL + timedelta(seconds=1), TTL).claimed
    # And a completed claim cannot be released
    ledger.complete_resubmission("c", "1", "x", "9")
    ledger.release_resubmission("c", "1", "x")
    assert ledger.resubmission_claim("c", "1").new_job_id == "9"


def test_ledger_claim_read_says_when_it_was_taken_and_holds_exactly_while_no_one_can_take_it_over(ledger: Any) -> None:
    # Given a's claim on job 1, taken at T0 for TTL
    ledger.claim_resubmission("c", "1", "a", T0, TTL)
    claim = ledger.resubmission_claim("c", "1")
    assert claim.claimed_at == T0 and claim.open_until == T0 + TTL and not claim.completed
    # Then it is in force exactly as long as another incident cannot take it over (Detect Hung Jobs,
    # Classify Failure and Plan Job Restart read it so: domain/hangs/handled.py, job_failure.py)
    for moment in (T0 + TTL - timedelta(seconds=1), T0 + TTL, T0 + TTL + timedelta(seconds=1), T0 + TTL + timedelta(seconds=2)):
        assert claim.in_force(moment) == (not ledger.claim_resubmission("c", "1", "x", moment, TTL).claimed)
        if not claim.in_force(moment):
            break
    # And once completed, it holds with its copy, no longer until a moment
    ledger.complete_resubmission("c", "1", "x", "9")
    done = ledger.resubmission_claim("c", "1")
    assert done.completed and done.open_until is None and done.in_force(T0 + TTL * 100) and done.claimed_at is not None


def test_ledger_holdings_follow_what_an_incident_takes_and_gives_back(ledger: Any) -> None:
    # Given an incident that locks two nodes, reserves them under the cap and claims a job
    assert ledger.holdings("a") is None
    ledger.acquire_locks("a", "c", ["n1", "n2"], T0, TTL)
    assert ledger.reserve_capacity("c", "a", ["n1", "n2"], 10, T0, TTL, ["ip-1", "ip-2"])
    ledger.claim_resubmission("c", "1001", "a", T0, TTL)
    held = ledger.holdings("a")
    assert (held.cluster, held.locks, held.reserved, held.claims, held.hostnames) == (
        "c",
        {"n1", "n2"},
        {"n1", "n2"},
        {"1001"},
        {"ip-1", "ip-2"},
    )
    # When it gives each back (a lock kept until a later time is no longer an open holding)
    ledger.release_locks("a", "c", ["n1"], None)
    ledger.release_locks("a", "c", ["n2"], T0 + timedelta(days=1))
    ledger.release_capacity("c", "a", ["n1", "n2"], T0)
    ledger.complete_resubmission("c", "1001", "a", "1002")
    # Then nothing is held any more
    assert ledger.holdings("a").empty
    # And giving back what was never taken creates nothing
    ledger.release_capacity("c", "ghost", ["n9"], T0)
    ledger.release_locks("ghost", "c", ["n9"], None)
    assert ledger.holdings("ghost") is None


def test_ledger_keeps_a_job_lineages_restarts(ledger: Any) -> None:
    from hyperpod_recovery.models.job_recovery import RestartEntry

    # Given no restart yet: no lineage, no history, no claim
    assert ledger.lineage_root("c", "9") is None and ledger.restart_history("c", "8") == []
    assert ledger.resubmission_claim("c", "8") is None
    # When job 8 is restarted as 9, then 9 as 10
    first = RestartEntry(failed_job_id="8", new_job_id="9", kind="application", checkpoint_step=2000, restarted_at=T0, incident="a")
    second = first.model_copy(
        update={"failed_job_id": "9", "new_job_id": "10", "checkpoint_step": 3000, "incident": "b", "restarted_at": T0 + timedelta(hours=1)}
    )
    ledger.record_restart("c", "8", first)
    ledger.record_restart("c", "8", second)
    ledger.record_restart("c", "8", second)  # a retried Record Job Outcome
    # Then both jobs point at the lineage, whose history has each restart once, in order
    assert ledger.lineage_root("c", "9") == "8" and ledger.lineage_root("c", "10") == "8"
    assert [(e.new_job_id, e.checkpoint_step) for e in ledger.restart_history("c", "8")] == [("9", 2000), ("10", 3000)]
    # And a claim can be looked at without taking it
    ledger.claim_resubmission("c", "8", "a", T0, TTL)
    ledger.complete_resubmission("c", "8", "a", "9")
    claim = ledger.resubmission_claim("c", "8")
    assert (claim.incident_id, claim.new_job_id, claim.claimed) == ("a", "9", False)


def test_ledger_counts_nodes_against_the_cap_atomically(ledger: Any) -> None:
    # Given a cap of 3 nodes in recovery
    assert ledger.reserve_capacity("c", "a", ["n1", "n2"], 3, T0, TTL) is True
    # Then a third fits, a fourth does not, and a retried reservation of counted nodes is fine
    assert ledger.reserve_capacity("c", "b", ["n3", "n4"], 3, T0, TTL) is False
    assert ledger.reserve_capacity("c", "b", ["n3"], 3, T0, TTL) is True
    assert ledger.reserve_capacity("c", "a", ["n1", "n2"], 3, T0, TTL) is True
    assert ledger.nodes_in_recovery("c", T0) == {"n1", "n2", "n3"}
    # And releasing frees the room, but only the releasing incident's own places
    ledger.release_capacity("c", "a", ["n1", "n3"], T0)
    assert ledger.nodes_in_recovery("c", T0) == {"n2", "n3"}
    ledger.release_capacity("c", "b", ["n3"], T0)
    assert ledger.nodes_in_recovery("c", T0) == {"n2"} and ledger.reserve_capacity("c", "d", ["n4", "n5"], 3, T0, TTL) is True


def test_ledger_reservations_expire_so_a_lost_end_heals_itself(ledger: Any) -> None:
    # Given an incident that reserved the whole cap and then died without settling
    assert ledger.reserve_capacity("c", "dead", ["n1", "n2"], 2, T0, TTL)
    assert ledger.reserve_capacity("c", "next", ["n3"], 2, T0 + TTL - timedelta(seconds=1), TTL) is False
    # Then once its reservations expire they no longer count, and the room is free again
    later = T0 + TTL + timedelta(seconds=1)
    assert ledger.nodes_in_recovery("c", later) == set()
    assert ledger.reserve_capacity("c", "next", ["n3", "n4"], 2, later, TTL) is True


def test_ledger_holds_an_in_flight_place_until_a_deadline_and_no_longer_counts_it_as_held(ledger: Any) -> None:
    # Given an incident holding two places, one node of which is still being replaced when it ends
    assert ledger.reserve_capacity("c", "ended", ["n1", "n2"], 2, T0, TTL)
    deadline = T0 + timedelta(minutes=45)
    # When the place of the node in flight is kept until a deadline (another incident's are untouched)
    ledger.hold_capacity_until("c", "ended", ["n1"], deadline, T0)
    ledger.hold_capacity_until("c", "other", ["n2"], deadline, T0)
    ledger.release_capacity("c", "ended", ["n2"], T0)
    # Then it still counts until the deadline, and not after; the incident holds nothing any more
    assert ledger.nodes_in_recovery("c", deadline) == {"n1"} and ledger.nodes_in_recovery("c", deadline + timedelta(seconds=1)) == set()
    assert ledger.holdings("ended").empty
    # And a deadline later than the reservation's own expiry never lengthens it
    assert ledger.reserve_capacity("c", "x", ["n3"], 2, T0, timedelta(minutes=5))
    ledger.hold_capacity_until("c", "x", ["n3"], T0 + timedelta(hours=1), T0)
    assert "n3" not in ledger.nodes_in_recovery("c", T0 + timedelta(minutes=6))


def test_ledger_keeps_each_executions_latest_wait_until_it_ends(ledger: Any) -> None:
    from hyperpod_recovery.models.records import RejoinWait

    # Given two recoveries of one cluster waiting for their nodes, and one of another cluster
    first = RejoinWait(execution="inc-1", task_token="tok-a", until=T0 + timedelta(minutes=10), logical_ids=["lid-1"], instance_ids=["i-1"])
    ledger.await_rejoin("c", first, T0)
    ledger.await_rejoin("c", RejoinWait(execution="inc-2", task_token="tok-b", until=T0 + timedelta(minutes=1)), T0)
    ledger.await_rejoin("other", RejoinWait(execution="inc-9", task_token="tok-z", until=T0), T0)
    # When inc-1 waits again (a new task token), and an old token's end arrives late
    ledger.await_rejoin("c", first.model_copy(update={"task_token": "tok-a2"}), T0)
    ledger.end_rejoin_wait("c", "inc-1", "tok-a")
    # Then each execution's latest wait is kept, whole, and only its own token ends it
    waits = {w.execution: w for w in ledger.rejoin_waits("c")}
    assert sorted(waits) == ["inc-1", "inc-2"] and waits["inc-1"].task_token == "tok-a2" and waits["inc-1"].logical_ids == ["lid-1"]
    ledger.end_rejoin_wait("c", "inc-1", "tok-a2")
    ledger.end_rejoin_wait("c", "inc-3", "tok-x")  # never waited: nothing happens
    assert [w.execution for w in ledger.rejoin_waits("c")] == ["inc-2"] and ledger.rejoin_waits("none") == []


def test_ledger_keeps_the_breaker_and_the_recovery_log(ledger: Any) -> None:
    from hyperpod_recovery.models.records import BreakerState, RecoveryLogEntry

    assert ledger.breaker("c").state == "closed" and ledger.recovery_log("c") == []
    ledger.save_breaker("c", BreakerState(state="open", reason="r", changed_at=T0, changed_by="i", history=["x"]))
    assert (
        ledger.breaker("c").model_dump()
        == BreakerState(state="open", reason="r", changed_at=T0, changed_by="i", history=["x"]).model_dump()
    )
    old = RecoveryLogEntry(incident="a", at=T0, hostnames=["h1"], outcome="recovered")
    new = RecoveryLogEntry(incident="b", at=T0 + timedelta(days=2), hostnames=["h2"], outcome="escalated")
    ledger.log_recovery("c", old, 86_400)
    ledger.log_recovery("c", new, 86_400)
    ledger.log_recovery("c", new, 86_400)  # a retried Record Outcome
    ledger.log_recovery("c", new.model_copy(update={"at": new.at + timedelta(seconds=5)}), 86_400)  # retried later: still b once
    # A window's read has what happened in it, each incident once (a is older than the window)
    assert [e.incident for e in ledger.recovery_log("c", since=new.at - timedelta(days=1))] == ["b"]
    assert [e.incident for e in ledger.recovery_log("c", since=T0)] == ["a", "b"]


def test_ledger_writes_the_breaker_only_over_the_state_it_was_decided_on(ledger: Any) -> None:
    from hyperpod_recovery.models.records import BreakerState

    # Given two deciders that read the closed breaker
    first, second = ledger.breaker("c"), ledger.breaker("c")
    # When the first opens it, then the second writes what it decided on the old state
    ledger.save_breaker("c", first.changed_to("open", reason="storm", by="inc-1", at=T0))
    with pytest.raises(LedgerUnavailable, match="changed since it was read"):
        ledger.save_breaker("c", second.changed_to("open", reason="storm too", by="inc-2", at=T0))
    # Then the first's change stands, and a decision on what is read now is written
    current = ledger.breaker("c")
    assert (current.state, current.changed_by) == ("open", "inc-1")
    ledger.save_breaker("c", current.changed_to("closed", reason="rack fixed", by="alice", at=T0 + timedelta(hours=1)))
    assert ledger.breaker("c").state == "closed" and len(ledger.breaker("c").history) == 2
    assert BreakerState().version == 0


def test_ledger_begins_an_effect_once_and_keeps_what_was_answered(ledger: Any) -> None:
    # Given no effect yet
    assert ledger.effect_of("a", "notification") is None
    # When a step begins it, and a rerun begins it again later
    first = ledger.begin_effect("a", "notification", T0)
    again = ledger.begin_effect("a", "notification", T0 + timedelta(seconds=30))
    # Then the rerun gets the first run's: begun at its time, not done
    assert (first.started_at, again.started_at, again.done) == (T0, T0, False)
    # And once done, with its answer, every later begin says so
    ledger.finish_effect("a", "notification", T0 + timedelta(seconds=40), result='{"outcome": "recovered"}')
    done = ledger.begin_effect("a", "notification", T0 + timedelta(minutes=5))
    assert done.done and done.started_at == T0 and done.result == '{"outcome": "recovered"}'
    assert ledger.effect_of("a", "notification") == done and ledger.effect_of("b", "notification") is None
    # And an effect of the same name more than 90 days old is an earlier execution's (Step Functions
    # lets a closed execution's name be taken again after 90 days): begun anew
    reborn = ledger.begin_effect("a", "notification", T0 + timedelta(days=91))
    assert not reborn.done and reborn.started_at == T0 + timedelta(days=91)


def test_ledger_never_reopens_a_claim_its_incident_completed(ledger: Any) -> None:
    # Given incident a claimed job 8 and completed it (resubmitted as 9)
    ledger.claim_resubmission("c", "8", "a", T0, TTL)
    ledger.complete_resubmission("c", "8", "a", "9")
    # When a retried step of a claims it again
    again = ledger.claim_resubmission("c", "8", "a", T0 + timedelta(minutes=1), TTL)
    # Then it is answered as done (resubmitted as 9), never reopened for a second submission
    assert again.claimed and again.new_job_id == "9"
    assert ledger.resubmission_claim("c", "8").new_job_id == "9" and not ledger.holdings("a").claims


def test_ledger_keeps_incident_records(ledger: Any) -> None:
    record = IncidentRecord(
        incident_id="a", cluster="c", outcome="recovered", dry_run=False, trigger=["manual"], nodes=["n1"], summary="ok", recorded_at=T0
    )
    ledger.save_incident(record)
    assert ledger.get_incident("a") == record and ledger.get_incident("missing") is None


@pytest.fixture
def dynamo_ledger() -> Iterator[DynamoLedger]:
    with mock_aws():
        yield DynamoLedger(ledger_table_from_template(), dynamodb=boto3.client("dynamodb", region_name=REGION))


def _record(incident: str, cluster: str, at: datetime, outcome: Any = "recovered") -> IncidentRecord:
    return IncidentRecord(
        incident_id=incident, cluster=cluster, outcome=outcome, dry_run=False, trigger=["manual"], nodes=["n1"], summary="s", recorded_at=at
    )


def test_given_records_of_two_clusters_then_incidents_lists_one_clusters_newest_first_from_the_sparse_index(
    dynamo_ledger: DynamoLedger,
) -> None:
    # Given three records of cluster c (one older), one of cluster d, and other items that carry `cluster` (HOLDINGS)
    for n in range(3):
        dynamo_ledger.save_incident(_record(f"c-{n}", "c", T0 + timedelta(minutes=n)))
    dynamo_ledger.save_incident(_record("d-0", "d", T0))
    dynamo_ledger.acquire_locks("c-9", "c", ["n1"], T0, TTL)  # writes a HOLDINGS item with cluster = c
    # Then c's records come newest first, the limit and the since bound hold, and nothing but RECORDs is listed
    assert [r.incident_id for r in dynamo_ledger.incidents("c")] == ["c-2", "c-1", "c-0"]
    assert [r.incident_id for r in dynamo_ledger.incidents("c", limit=2)] == ["c-2", "c-1"]
    assert [r.incident_id for r in dynamo_ledger.incidents("c", since=T0 + timedelta(minutes=1))] == ["c-2", "c-1"]
    assert [r.incident_id for r in dynamo_ledger.incidents("d")] == ["d-0"]
    # And an outcome filter pages on until the limit is met: the older escalation is found past newer recoveries
    dynamo_ledger.save_incident(_record("c-old", "c", T0 - timedelta(days=1), outcome="escalated"))
    assert [r.incident_id for r in dynamo_ledger.incidents("c", limit=1, outcomes=["escalated", "capped"])] == ["c-old"]


def test_given_locks_then_node_locks_lists_the_clusters_live_ones_and_release_deletes_only_the_holders(
    dynamo_ledger: DynamoLedger,
) -> None:
    dynamo_ledger.acquire_locks("a", "c", ["i-1", "host:ip-1"], T0, TTL)
    dynamo_ledger.acquire_locks("b", "c", ["i-2"], T0, timedelta(seconds=1))
    dynamo_ledger.acquire_locks("z", "other", ["i-3"], T0, TTL)
    later = T0 + timedelta(seconds=5)
    # Then only c's live locks are listed, with their holder and expiry
    locks = dynamo_ledger.node_locks("c", later)
    assert [(lock.node, lock.incident) for lock in locks] == [("host:ip-1", "a"), ("i-1", "a")]
    assert locks[0].expires_at == T0 + TTL
    # And a release names the holder it read: another incident's lock is not deleted
    assert dynamo_ledger.release_lock("c", "i-1", "b") is False
    assert dynamo_ledger.release_lock("c", "i-1", "a") is True
    assert dynamo_ledger.lock_holders("c", ["i-1", "host:ip-1"], later) == {"host:ip-1": "a"}


def test_given_a_hold_then_a_second_does_not_overwrite_it_and_unhold_returns_it(dynamo_ledger: DynamoLedger) -> None:
    first = NodeHold(node="ip-1", by="alice", reason="bad DIMM, vendor ticket 42", at=T0)
    assert dynamo_ledger.hold_node("c", first) is None
    assert dynamo_ledger.hold_node("c", first.model_copy(update={"by": "bob"})) == first
    assert dynamo_ledger.node_holds("c", ["i-9", "ip-1"]) == {"ip-1": first}
    assert dynamo_ledger.node_holds("other", ["ip-1"]) == {}
    assert dynamo_ledger.all_node_holds("c") == [first]
    assert dynamo_ledger.unhold_node("c", "ip-1") == first
    assert dynamo_ledger.unhold_node("c", "ip-1") is None and dynamo_ledger.node_holds("c", ["ip-1"]) == {}


def test_given_changes_by_humans_then_the_audit_log_keeps_each_in_order(dynamo_ledger: DynamoLedger) -> None:
    entries = [AuditEntry(at=T0 + timedelta(seconds=n), by="alice", action="hold", target=f"ip-{n}", reason="r") for n in range(3)]
    for entry in [*entries, entries[0]]:  # the same change twice is kept twice: two changes were made
        dynamo_ledger.audit("c", entry)
    log = dynamo_ledger.audit_log("c")
    assert [e.target for e in log] == ["ip-0", "ip-0", "ip-1", "ip-2"] and log[-1] == entries[2]
    assert [e.target for e in dynamo_ledger.audit_log("c", since=T0 + timedelta(seconds=1))] == ["ip-1", "ip-2"]
    # And the breaker's and the recovery log's readers are not confused by audit items in the same partition
    assert dynamo_ledger.recovery_log("c") == [] and dynamo_ledger.breaker("c").state == "closed"


def test_dynamodb_failure_becomes_a_ledger_error(aws: None) -> None:
    ledger = DynamoLedger("no-such-table", dynamodb=boto3.client("dynamodb", region_name=REGION))
    with pytest.raises(LedgerError, match="no-such-table"):
        ledger.acquire_locks("a", "c", ["n1"], T0, TTL)
