"""A side effect happens once however often its step runs: the incident's page (Record Outcome,
Record Job Outcome, Reconcile Execution) is an effect of the incident in the ledger, begun before
it is made and done after, so a rerun after a lost answer, a failure half-way or a redelivered end
sends it once, answers what the first run answered, and never loses it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hyperpod_recovery.errors import LedgerUnavailable, NotifierUnavailable
from hyperpod_recovery.models.job_recovery import RecordJobOutcomeInput
from hyperpod_recovery.models.node_recovery import ApplySafetyPolicyInput, OutcomeResult, RecordOutcomeInput, StepError, WorkflowState
from hyperpod_recovery.steps.apply_safety_policy import apply_safety_policy
from hyperpod_recovery.steps.record_outcome import NOTIFICATION, record_outcome
from tests.fakes import CLUSTER, T0, FakeLedger, FakeNotifier
from tests.unit.test_exactly_once import _plan, _reply
from tests.unit.test_reconcile import _detail, _reconcile
from tests.unit.test_safety import POLICY, _assessment
from tests.unit.test_steps import _request

TTL = timedelta(hours=6)
INCIDENT = "hpr-i-0391f86fa0fe0d465-20260314T0920"  # the name the reconcile samples carry


def _acted(ledger: FakeLedger, incident: str = INCIDENT) -> WorkflowState:
    """An incident that passed the safety policy (locked, counted against the cap) and resubmitted
    job 1001 as 1002."""
    request = _request(1, incident=incident)
    assessment = apply_safety_policy(
        ApplySafetyPolicyInput(execution_name=incident, request=request, assessment=_assessment(1)),
        ledger=ledger,
        policy=POLICY,
        reservation_ttl=TTL,
        now=T0,
    )
    ledger.claim_resubmission(CLUSTER, "1001", incident, T0, TTL)
    return WorkflowState(request=request, assessment=assessment, checkpoints=_plan("1001"), resubmissions=[_reply("1001", "1002")])


def _run(
    state: WorkflowState,
    ledger: FakeLedger,
    notifier: FakeNotifier,
    *,
    at: timedelta = timedelta(0),
    disposition: str = "completed",
    error: StepError | None = None,
    counted: list[OutcomeResult] | None = None,
) -> OutcomeResult:
    return record_outcome(
        RecordOutcomeInput(execution_name=INCIDENT, disposition=disposition, state=state, error=error),  # type: ignore[arg-type]
        ledger=ledger,
        notifier=notifier,
        cluster=CLUSTER,
        escalation_hold=timedelta(hours=24),
        execution_url="https://console/x",
        now=T0 + timedelta(minutes=30) + at,
        log_seconds=POLICY.log_seconds,
        on_recorded=(counted if counted is not None else []).append,
    )


@pytest.mark.parametrize("disposition", ["completed", "escalated"])
def test_given_record_outcome_ran_and_its_answer_was_lost_when_it_runs_again_then_one_page_and_the_same_answer(
    disposition: str,
) -> None:
    # Given Record Outcome ran to its end (recorded, counted, settled, paged) and Lambda's answer was lost
    ledger, notifier, counted = FakeLedger(), FakeNotifier(), []
    state = _acted(ledger)
    error = StepError(Error="RejoinDeadlineExceeded", Cause="1 node(s) not back") if disposition == "escalated" else None
    first = _run(state, ledger, notifier, disposition=disposition, error=error, counted=counted)
    record, log = ledger.incidents[INCIDENT], ledger.recovery_log(CLUSTER)
    # When Step Functions retries it, three times (the retry policy's most), seconds later
    again = [
        _run(state, ledger, notifier, at=timedelta(seconds=s), disposition=disposition, error=error, counted=counted) for s in (2, 6, 14)
    ]
    # Then the human got one page, the outcome was counted once, and every rerun answered what the
    # first run answered (the execution ends as it would have: Recovery Complete / Recovery Escalated)
    assert len(notifier.published) == 1 and counted == [first]
    assert all(a == first for a in again)
    # And nothing the first run wrote was written differently
    assert ledger.incidents[INCIDENT] == record and ledger.recovery_log(CLUSTER) == log
    assert ledger.resubmission_claim(CLUSTER, "1001").new_job_id == "1002"


@pytest.mark.parametrize("stops_at", ["save_incident", "log_recovery", "release_capacity", "finish_effect"])
def test_given_record_outcome_stopped_half_way_when_it_runs_again_then_it_ends_as_the_first_run_would_have(stops_at: str) -> None:
    # Given Record Outcome's first run stops at one of its writes (the ledger throttled past its retries)
    ledger, notifier = FakeLedger(), FakeNotifier()
    state = _acted(ledger)
    original = getattr(ledger, stops_at)

    def unavailable(*args: Any, **kwargs: Any) -> None:
        raise LedgerUnavailable("injected")

    setattr(ledger, stops_at, unavailable)
    with pytest.raises(LedgerUnavailable):
        _run(state, ledger, notifier)
    setattr(ledger, stops_at, original)
    # When Step Functions runs it again, 30 s later
    result = _run(state, ledger, notifier, at=timedelta(seconds=30))
    # Then it decided at the first run's moment (the same record and log entry), settled everything,
    # and the page went out: once, unless the first run stopped after sending it (the one window left:
    # SNS cannot tell a repeat, and a page must never be lost)
    assert result.outcome == "recovered" and ledger.incidents[INCIDENT].recorded_at == T0 + timedelta(minutes=30)
    assert [e.at for e in ledger.recovery_log(CLUSTER)] == [T0 + timedelta(minutes=30)]
    assert ledger.holdings(INCIDENT).empty and ledger.nodes_in_recovery(CLUSTER, T0) == set()
    assert len(notifier.published) == (2 if stops_at == "finish_effect" else 1)
    assert ledger.effect_of(INCIDENT, NOTIFICATION).done


def test_given_sns_refused_the_page_when_record_outcome_runs_again_then_the_page_is_sent_not_lost() -> None:
    # Given SNS refuses the first run's publish (the effect begun, not done)
    ledger, notifier = FakeLedger(), FakeNotifier()
    state = _acted(ledger)
    publish = notifier.publish

    def refused(*args: Any) -> None:
        raise NotifierUnavailable("SNS publish: throttled")

    notifier.publish = refused  # type: ignore[method-assign]
    with pytest.raises(NotifierUnavailable):
        _run(state, ledger, notifier)
    assert not ledger.effect_of(INCIDENT, NOTIFICATION).done
    notifier.publish = publish  # type: ignore[method-assign]
    # When Step Functions retries it (NotifierUnavailable is retried)
    _run(state, ledger, notifier, at=timedelta(seconds=4))
    # Then the page goes out, once
    assert len(notifier.published) == 1


def test_given_record_outcome_died_after_recording_and_before_paging_when_the_end_is_reconciled_then_the_human_is_paged_once() -> None:
    # Given Record Outcome saved the record and settled, then died before its publish, past its retries
    ledger, notifier = FakeLedger(), FakeNotifier()
    state = _acted(ledger)
    publish = notifier.publish

    def dies(*args: Any) -> None:
        raise SystemExit("the Lambda timed out")

    notifier.publish = dies  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        _run(state, ledger, notifier)
    notifier.publish = publish  # type: ignore[method-assign]
    # When the failed execution's end reaches Reconcile Execution, and SQS delivers it twice
    detail = _detail("stepfunctions/execution_failed.json", error="Lambda.Unknown")
    _reconcile(detail, ledger, notifier)
    _reconcile(detail, ledger, notifier)
    # Then the recovered incident's own page goes out once (today nobody is told), the record unchanged
    assert len(notifier.published) == 1 and "recovered" in notifier.published[0][0]
    assert ledger.incidents[INCIDENT].outcome == "recovered" and ledger.effect_of(INCIDENT, NOTIFICATION).done


def test_given_an_escalation_that_paged_when_its_failed_end_is_reconciled_then_nobody_is_paged_again() -> None:
    # Given an escalated incident, recorded and paged (escalations end in a Fail state by design)
    ledger, notifier = FakeLedger(), FakeNotifier()
    _run(_acted(ledger), ledger, notifier, disposition="escalated", error=StepError(Error="RejoinDeadlineExceeded", Cause="late"))
    # When its failed end is reconciled
    result = _reconcile(_detail("stepfunctions/execution_failed.json", error="RejoinDeadlineExceeded"), ledger, notifier)
    # Then it is only settled: one page in all
    assert result.action == "settled" and len(notifier.published) == 1


def test_given_an_aborted_execution_whose_record_step_had_begun_the_page_then_reconcile_pages_once() -> None:
    # Given Record Outcome began the page, then failed before writing the record, and the execution ended
    ledger, notifier = FakeLedger(), FakeNotifier()
    _acted(ledger)
    ledger.begin_effect(INCIDENT, NOTIFICATION, T0 + timedelta(minutes=30))
    # When the end is reconciled (recorded aborted) and redelivered
    _reconcile(_detail(), ledger, notifier)
    _reconcile(_detail(), ledger, notifier)
    # Then the human hears of the aborted incident once
    assert len(notifier.published) == 1 and "aborted" in notifier.published[0][0]


def test_given_a_job_incident_whose_answer_was_lost_when_record_job_outcome_runs_again_then_one_page() -> None:
    # Given JobRecovery's Record Job Outcome ran (job 8 restarted as 9) and its answer was lost
    from tests.unit.test_job_recovery import _completed_state

    ledger, notifier = FakeLedger(), FakeNotifier()
    ledger.claim_resubmission(CLUSTER, "8", "hpj-8", T0, TTL)
    step = RecordJobOutcomeInput(execution_name="hpj-8", disposition="completed", state=_completed_state())
    first = record_outcome(step, ledger=ledger, notifier=notifier, cluster=CLUSTER, execution_url="u", now=T0)
    # When it runs again
    again = record_outcome(step, ledger=ledger, notifier=notifier, cluster=CLUSTER, execution_url="u", now=T0 + timedelta(seconds=3))
    # Then one page, the same answer, the lineage's restart counted once
    assert len(notifier.published) == 1 and again == first
    assert [e.new_job_id for e in ledger.restart_history(CLUSTER, "8")] == ["9"]
