"""An enforced at-risk verdict's outcome reads its planned swap's record (INCIDENT#<hps-...>/SWAP): it
is ``swapped`` only when the swap took the node out of service (moved, node_repaired; never a dry
run). A swap that left the node settles like an observed verdict, so the signal's precision and recall
see its true hits and misses; a record not written yet keeps the verdict pending, for a bounded time."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import get_args

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.at_risk.outcomes import SWAP_RECORD_GRACE, settle
from hyperpod_recovery.models.at_risk import AtRiskRecord
from hyperpod_recovery.models.planned_swap import SwapOutcome, SwapRecord
from hyperpod_recovery.steps import at_risk_tick
from hyperpod_recovery.steps.at_risk import at_risk
from tests.unit.test_at_risk import CLUSTER, FIXTURES, KEYS, NODE, NOW, alert, deliver, incident, ports

ENFORCED = "row_remap_pending=enforce,row_remap_failure=enforce"


@pytest.fixture
def ledger() -> Iterator[DynamoLedger]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(TableName="ledger", **KEYS)
        yield DynamoLedger("ledger", dynamodb=dynamodb)


def enforced(ledger: DynamoLedger, signal: str = "row_remap_pending") -> AtRiskRecord:
    at_risk(deliver(alert(signal)), ports(ledger, ENFORCED))
    record = next(r for r in ledger.at_risk_records(CLUSTER) if r.verdict.signal == signal)
    assert record.execution is not None
    return record


def swap(record: AtRiskRecord, outcome: SwapOutcome, *, dry_run: bool = False) -> SwapRecord:
    return SwapRecord(
        swap_id=record.execution or "", cluster=CLUSTER, verdict_id=record.verdict.verdict_id, signal=record.verdict.signal,
        node_id=NODE, outcome=outcome, dry_run=dry_run, summary=f"planned swap {outcome}", recorded_at=NOW + timedelta(minutes=40),
    )  # fmt: skip


def tick_at(ledger: DynamoLedger, now: datetime) -> dict[str, int]:
    given = ports(ledger, ENFORCED, now=now)
    at_risk_tick.tick(given)
    return dict(given.counts)


def outcome(ledger: DynamoLedger, record: AtRiskRecord) -> AtRiskRecord:
    return next(r for r in ledger.at_risk_records(CLUSTER) if r.verdict.verdict_id == record.verdict.verdict_id)


def horizon_end(record: AtRiskRecord) -> datetime:
    return record.verdict.observed_at + timedelta(seconds=record.verdict.horizon_seconds)


def test_given_a_swap_that_left_the_job_on_the_node_when_the_node_then_fails_then_the_verdict_failed(ledger: DynamoLedger) -> None:
    # Given an enforced verdict whose planned swap decided to leave the job (its record written)
    record = enforced(ledger)
    ledger.save_swap(swap(record, "left"))
    # When the tick runs after the swap ended, and again after the node failed within the horizon
    tick_at(ledger, NOW + timedelta(hours=1))
    ledger.save_incident(incident(NOW + timedelta(days=2)))
    counts = tick_at(ledger, NOW + timedelta(days=2, hours=1))
    # Then the verdict is a true hit of its signal, with the node's incident
    settled = outcome(ledger, record)
    assert (counts["outcome_failed"], settled.outcome, settled.incident) == (1, "failed", "hpr-1")


def test_given_a_swap_that_left_the_node_and_no_failure_when_the_horizon_passes_then_the_verdict_did_not_fail(
    ledger: DynamoLedger,
) -> None:
    # Given an enforced verdict whose planned swap found no checkpoint commit within its wait
    record = enforced(ledger)
    ledger.save_swap(swap(record, "no_commit"))
    # When the tick runs past the horizon with no failure of the node
    tick_at(ledger, horizon_end(record))
    # Then the verdict is a false alarm of its signal
    assert outcome(ledger, record).outcome == "not_failed"


def test_given_a_swap_that_moved_the_job_when_the_tick_runs_then_the_verdict_is_swapped(ledger: DynamoLedger) -> None:
    # Given an enforced verdict whose planned swap moved the job off the node
    record = enforced(ledger)
    ledger.save_swap(swap(record, "moved"))
    # When the tick runs
    counts = tick_at(ledger, NOW + timedelta(hours=1))
    # Then the verdict is swapped at once (whether the node would have failed is unknown)
    assert (counts["outcome_swapped"], outcome(ledger, record).outcome) == (1, "swapped")


def test_given_a_dry_run_swap_when_the_horizon_passes_then_the_verdict_is_not_swapped(ledger: DynamoLedger) -> None:
    # Given an enforced verdict on a dry-run stack: its swap only said what it would have done
    record = enforced(ledger)
    ledger.save_swap(swap(record, "dry_run", dry_run=True))
    # When the tick runs before and after the horizon
    tick_at(ledger, NOW + timedelta(hours=1))
    before = outcome(ledger, record).outcome
    tick_at(ledger, horizon_end(record))
    # Then it waited like an observed verdict and settled as one (the node stayed in service)
    assert (before, outcome(ledger, record).outcome) == ("pending", "not_failed")


def test_given_a_swap_whose_record_is_not_written_yet_when_the_tick_runs_then_the_verdict_stays_pending(ledger: DynamoLedger) -> None:
    # Given an enforced verdict whose planned swap has not recorded its end
    record = enforced(ledger)
    # When the tick runs, even past the horizon
    counts = tick_at(ledger, horizon_end(record))
    # Then the verdict stays pending (its swap's record was read, and counted missing)
    assert (outcome(ledger, record).outcome, counts["swap_unrecorded"], counts.get("settled", 0)) == ("pending", 1, 0)


def test_given_a_swap_record_never_written_when_the_grace_past_the_horizon_ends_then_the_verdict_counts_in_neither_measure(
    ledger: DynamoLedger,
) -> None:
    # Given an enforced verdict whose planned swap never recorded its end
    record = enforced(ledger)
    # When the tick runs SWAP_RECORD_GRACE past the horizon
    tick_at(ledger, horizon_end(record) + SWAP_RECORD_GRACE)
    # Then it is settled swapped: whether the node was taken is unknown, so it counts in neither measure
    assert outcome(ledger, record).outcome == "swapped"


def test_given_more_swap_records_to_read_than_the_bound_when_the_tick_runs_then_it_reads_the_bound_and_counts_the_rest(
    ledger: DynamoLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two enforced verdicts whose swaps moved the job, and a bound of one read a tick
    first, second = enforced(ledger, "row_remap_pending"), enforced(ledger, "row_remap_failure")
    ledger.save_swap(swap(first, "moved"))
    ledger.save_swap(swap(second, "moved"))
    monkeypatch.setattr(at_risk_tick, "MAX_SWAP_RECORDS_READ", 1)
    # When the tick runs twice
    counts = tick_at(ledger, NOW + timedelta(hours=1))
    later = tick_at(ledger, NOW + timedelta(hours=1, minutes=15))
    # Then one record is read a tick, the other left to the next
    assert (counts["swap_records_read"], counts["swap_read_left"], later["swap_records_read"]) == (1, 1, 1)
    assert {outcome(ledger, first).outcome, outcome(ledger, second).outcome} == {"swapped"}


@given(st.sampled_from(get_args(SwapOutcome)), st.booleans())
def test_given_any_swap_record_then_the_verdict_is_swapped_only_when_the_node_was_taken_out_for_real(
    swap_outcome: SwapOutcome, dry_run: bool
) -> None:
    # Given an enforced verdict without a failure, and its swap's record (any outcome, dry run or not)
    record = AtRiskRecord.model_validate_json((FIXTURES / "at_risk_record.json").read_text())
    record = record.model_copy(update={"execution": f"hps-{record.verdict.verdict_id}"})
    # When it is settled within the horizon
    settled = settle(record, [], record.verdict.observed_at + timedelta(hours=1), swap(record, swap_outcome, dry_run=dry_run))
    # Then it is swapped exactly when the swap moved the job or repaired the node for real; else still pending
    took_out = swap_outcome in ("moved", "node_repaired") and not dry_run
    assert (settled.outcome if settled else "pending") == ("swapped" if took_out else "pending")
