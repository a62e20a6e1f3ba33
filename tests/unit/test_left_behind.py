"""What an ended execution left behind (domain/record/left_behind.py): the claims kept, the nodes
still out of service, the hold on its locks. Reconcile Execution's own tests go through the step
(tests/unit/test_reconcile.py, test_ended_executions.py); these pin each decision alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.domain.nodes.replace import REBOOT_MARK, marked_nodes
from hyperpod_recovery.domain.record.left_behind import HistoryAnswers, kept_claims, nodes_left, unknown_state_hold
from hyperpod_recovery.domain.record.reconcile import EndedExecution
from hyperpod_recovery.models.records import Holdings

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
JOBS = st.sets(st.sampled_from(["1001", "1002", "1003", "1004"]))


def _end(states: tuple[str, ...] = ()) -> EndedExecution:
    return EndedExecution(
        name="hpr-i-0abc-20260314T0900",
        workflow="node",
        status="ABORTED",
        error=None,
        cause=None,
        started_at=T0,
        stopped_at=T0 + timedelta(minutes=30),
        request=None,
        states_entered=tuple((s, T0) for s in states),
    )


@given(claims=JOBS, asked=JOBS, answered=JOBS, resubmitted=JOBS)
def test_given_the_whole_history_then_only_claims_asked_for_and_never_answered_are_kept(
    claims: set[str], asked: set[str], answered: set[str], resubmitted: set[str]
) -> None:
    kept = kept_claims(claims, HistoryAnswers(asked=asked, answered=answered, complete=True), resubmitted)
    assert kept == (claims & (asked - answered)) - resubmitted


@given(claims=JOBS, asked=JOBS, answered=JOBS, resubmitted=JOBS)
def test_given_part_of_the_history_then_every_claim_not_known_resubmitted_is_kept(
    claims: set[str], asked: set[str], answered: set[str], resubmitted: set[str]
) -> None:
    kept = kept_claims(claims, HistoryAnswers(asked=asked, answered=answered, complete=False), resubmitted)
    assert kept == claims - resubmitted


def test_given_reboot_and_replace_marks_then_each_node_is_named_under_its_repair() -> None:
    assert marked_nodes({"i-2", f"{REBOOT_MARK}i-3", "i-1"}) == (["i-1", "i-2"], ["i-3"])


def test_given_nodes_it_never_saw_back_then_those_it_holds_places_for_stay_in_flight_until_the_rejoin_deadline() -> None:
    held = Holdings(incident="x", cluster="c", reserved={"i-1", "i-3"})
    left = nodes_left(_end(("Replace Nodes",)), held, {"i-1", "i-2", f"{REBOOT_MARK}i-3"}, timedelta(minutes=45), T0)
    assert left.in_flight == ["i-1", "i-3"]
    assert left.in_flight_until == T0 + timedelta(minutes=75)


def test_given_it_saw_its_nodes_back_then_none_is_in_flight() -> None:
    held = Holdings(incident="x", cluster="c", reserved={"i-1"})
    assert nodes_left(_end(("Replace Nodes", "Resume Nodes")), held, {"i-1"}, timedelta(minutes=45), T0).in_flight == []


def test_given_locks_held_then_they_are_held_for_a_human_as_long_as_an_escalation() -> None:
    hold = timedelta(hours=2)
    assert unknown_state_hold(Holdings(incident="x", cluster="c", locks={"i-1"}), T0, hold) == T0 + hold
    assert unknown_state_hold(Holdings(incident="x", cluster="c"), T0, hold) is None
    assert unknown_state_hold(None, T0, hold) is None
