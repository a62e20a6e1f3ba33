"""Time sanity: a signal too old (a replay, a redrive, a backlog) or from the future (a wrong
clock) is never acted on automatically; the incident ends stale, recorded and notified."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.intake.freshness import EventAgeLimits, check_job_event_fresh, drop_stale_nodes
from hyperpod_recovery.errors import StaleEvent
from hyperpod_recovery.models.node_recovery import RecordOutcomeInput, StepError, ValidateRequestInput, WorkflowState
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest, Trigger
from hyperpod_recovery.steps.record_outcome import record_outcome
from hyperpod_recovery.steps.validate_request import validate_request
from tests.fakes import CLUSTER, LIMITS, T0, FakeLedger, FakeNotifier, node_id
from tests.unit.test_steps import GUARDED


def _request(*ages: float) -> RecoveryRequest:
    """One node per age (seconds before T0; negative: in the future)."""
    triggers = [
        Trigger(source="hyperpod_node_health", node_ids=[node_id(i + 1)], reason="fault", detected_at=T0 - timedelta(seconds=age))
        for i, age in enumerate(ages)
    ]
    return RecoveryRequest(
        cluster=CLUSTER,
        node_ids=[t.node_ids[0] for t in triggers],
        triggers=triggers,
        detected_at=min(t.detected_at for t in triggers),
    )


def test_a_fresh_event_is_acted_on_unchanged() -> None:
    request = _request(30)
    assert drop_stale_nodes(request, LIMITS, T0) == request


@pytest.mark.parametrize(("age", "says"), [(3 * 86_400, "3.0 days old"), (3601, "older than MaxEventAgeSeconds"), (-301, "in the future")])
def test_an_event_too_old_or_from_the_future_is_stale(age: float, says: str) -> None:
    with pytest.raises(StaleEvent, match=says):
        drop_stale_nodes(_request(age), LIMITS, T0)


def test_stale_nodes_are_left_out_and_named_while_fresh_ones_go_on() -> None:
    # Given a batch that mixes a replayed event (3 days old) with a live one
    request = drop_stale_nodes(_request(3 * 86_400, 20), LIMITS, T0)
    # Then only the live node is recovered; the stale one is named, with why
    assert request.node_ids == [node_id(2)] and [t.node_ids for t in request.triggers] == [[node_id(2)]]
    assert list(request.stale) == [node_id(1)] and "days old" in request.stale[node_id(1)]
    assert request.detected_at == T0 - timedelta(seconds=20)


def test_a_node_with_one_fresh_signal_among_stale_ones_is_fresh() -> None:
    base = _request(3 * 86_400)
    fresh = Trigger(source="cloudwatch_alarm", node_ids=[node_id(1)], reason="alarm", detected_at=T0 - timedelta(seconds=5))
    request = base.model_copy(update={"triggers": [*base.triggers, fresh]})
    assert drop_stale_nodes(request, LIMITS, T0).node_ids == [node_id(1)]


@settings(max_examples=200, deadline=None)
@given(ages=st.lists(st.floats(min_value=-7200, max_value=10 * 86_400), min_size=1, max_size=20))
def test_no_node_is_acted_on_on_a_stale_signal_alone(ages: list[float]) -> None:
    limits = EventAgeLimits(max_age_seconds=3600, max_skew_seconds=300)
    fresh = {node_id(i + 1) for i, age in enumerate(ages) if -300 <= age <= 3600}
    try:
        request = drop_stale_nodes(_request(*ages), limits, T0)
    except StaleEvent:
        assert not fresh
        return
    assert set(request.node_ids) == fresh and set(request.stale) | fresh == {node_id(i + 1) for i in range(len(ages))}


def test_a_replayed_job_failure_is_stale_but_a_manual_request_never_is() -> None:
    old = JobRecoveryRequest(cluster=CLUSTER, job_id="7", source="job_failed", reason="r", detected_at=T0 - timedelta(days=2))
    with pytest.raises(StaleEvent, match="job 7"):
        check_job_event_fresh(old, LIMITS, T0)
    check_job_event_fresh(old.model_copy(update={"source": "manual"}), LIMITS, T0)


def test_validate_request_refuses_a_three_day_old_event_and_record_outcome_says_stale() -> None:
    # Given intake's request for an event replayed three days after it was sent
    raw = _request(3 * 86_400).model_dump(mode="json")
    # When Validate Request runs
    with pytest.raises(StaleEvent) as caught:
        validate_request(
            ValidateRequestInput(execution_name="hpr-old", request=raw), guarded=GUARDED, stack_dry_run=False, limits=LIMITS, now=T0
        )
    # Then the workflow records it as stale (Record Stale Event), notifies, and changes nothing
    ledger, notifier = FakeLedger(), FakeNotifier()
    result = record_outcome(
        RecordOutcomeInput(
            execution_name="hpr-old",
            disposition="stale",
            state=WorkflowState.lenient({"request": raw}),
            error=StepError(Error="StaleEvent", Cause=str(caught.value)),
        ),
        ledger=ledger,
        notifier=notifier,
        cluster=CLUSTER,
        escalation_hold=timedelta(hours=24),
        execution_url="u",
        now=T0,
    )
    assert (result.outcome, result.error) == ("stale", "StaleEvent") and "days old" in (result.cause or "")
    assert ledger.incidents["hpr-old"].outcome == "stale" and ledger.locks == {} and ledger.held == {}
    subject, body, _ = notifier.published[0]
    assert "stale" in subject and "ACTION NEEDED" in body and "StaleEvent" in body
