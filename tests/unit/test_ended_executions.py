"""No end is lost: an execution that ended without recording (stopped, timed out, crashed) is
recorded, releases what it held and is notified once, whichever path reaches it, how often and in
what order: its status-change event (delivered best effort: it may never come, or come twice, or
come late) and the sweep of ended executions (every 5 minutes, from Step Functions' own listing)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.clock import install_clock
from hyperpod_recovery.errors import EndsNotSwept, LedgerUnavailable, NotificationInProgress
from hyperpod_recovery.models.events import ExecutionStatusChangeEvent, ExecutionStatusDetail
from hyperpod_recovery.ports import ClosedExecution, ResubmissionsRead
from hyperpod_recovery.steps.reconcile_execution import NOTICE_LEASE, EndContext, reconcile_end
from hyperpod_recovery.steps.sweep_ended_executions import FIRST_LOOKBACK, GRACE, OVERLAP, RESERVE, sweep_ended_executions
from sandbox.aws import load_handler
from sandbox.report import parse_emf
from tests.conftest import FakeLambdaContext, load_event
from tests.fakes import CLUSTER, T0, FakeExecutionHistory, FakeLedger, FakeNotifier, fake_dependencies

TTL = timedelta(hours=6)
JOB_MACHINE = "arn:aws:states:us-west-2:111122223333:stateMachine:llm-train-job-recovery"
LONGEST_RUN = timedelta(hours=40)


def _end(n: int = 0, stopped: datetime = T0 + timedelta(minutes=50), status: str = "ABORTED") -> ExecutionStatusDetail:
    """The n-th aborted NodeRecovery of node i-...<n>, which ended at ``stopped``."""
    detail = ExecutionStatusChangeEvent.model_validate(load_event("stepfunctions/execution_aborted.json")).detail
    name = f"hpr-i-{n:017x}-20260314T0920"
    return detail.model_copy(
        update={
            "name": name,
            "executionArn": detail.executionArn.rsplit(":", 1)[0] + f":{name}",
            "status": status,
            "input": None,
            "startDate": int((stopped - timedelta(minutes=30)).timestamp() * 1000),
            "stopDate": int(stopped.timestamp() * 1000),
        }
    )


class _CountingHistory(FakeExecutionHistory):
    """Every end's history reads whole and shows no resubmission; reads and listings are counted."""

    def __init__(self, ends: list[ExecutionStatusDetail]) -> None:
        super().__init__(entered={e.executionArn: [] for e in ends}, ended={e.executionArn: e for e in ends})
        self.reads: list[str] = []
        self.described: list[str] = []
        self.listed: list[tuple[datetime, datetime]] = []

    def resubmissions(self, execution_arn: str) -> ResubmissionsRead:
        self.reads.append(execution_arn)
        return super().resubmissions(execution_arn)

    def closed_since(self, since: datetime, started_after: datetime) -> list[ClosedExecution]:
        self.listed.append((since, started_after))
        return super().closed_since(since, started_after)

    def describe_end(self, execution_arn: str) -> ExecutionStatusDetail | None:
        self.described.append(execution_arn)
        return super().describe_end(execution_arn)


def _holding(ledger: FakeLedger, end: ExecutionStatusDetail, n: int = 0) -> None:
    """The incident locked its node, took a place under the cap and claimed a job, then died."""
    node = f"i-{n:017x}"
    ledger.acquire_locks(end.name, CLUSTER, [node], T0, TTL)
    ledger.reserve_capacity(CLUSTER, end.name, [node], 100, T0, TTL, [f"ip-10-1-0-{n}"])
    ledger.claim_resubmission(CLUSTER, f"{1000 + n}", end.name, T0, TTL)


def _context(ledger: FakeLedger, notifier: FakeNotifier, history: FakeExecutionHistory) -> EndContext:
    return EndContext(
        ledger=ledger,
        notifier=notifier,
        history=history,
        cluster=CLUSTER,
        job_state_machine_arn=JOB_MACHINE,
        stack_dry_run=False,
        escalation_hold=timedelta(hours=24),
        execution_url=lambda name, workflow: f"https://console/{workflow}/{name}",
        log_seconds=86_400,
        rejoin_deadline=timedelta(minutes=45),
    )


def _sweep(context: EndContext, now: datetime, left: timedelta = timedelta(minutes=4)) -> Any:
    return sweep_ended_executions(context=context, marks=context.ledger, clock=lambda: now, longest_run=LONGEST_RUN, time_left=lambda: left)


def _settled_once(ledger: FakeLedger, notifier: FakeNotifier, end: ExecutionStatusDetail) -> bool:
    record = ledger.get_incident(end.name)
    held = ledger.holdings(end.name)
    mine = [p for p in notifier.published if end.name in p[1]]
    return record is not None and record.outcome == "aborted" and (held is None or held.empty) and len(mine) == 1


def test_an_end_whose_event_never_came_is_recorded_released_and_notified_by_the_next_sweep() -> None:
    # Given an incident that held a node, a place under the cap and a job claim, aborted at T0+50m,
    # whose status-change event never came; the last sweep was at T0+45m
    ledger, notifier, end = FakeLedger(), FakeNotifier(), _end()
    _holding(ledger, end)
    history = _CountingHistory([end])
    ledger.save_ends_swept_until(CLUSTER, T0 + timedelta(minutes=45))
    # When the next sweep runs, at T0+55m
    swept = _sweep(_context(ledger, notifier, history), T0 + timedelta(minutes=55))
    # Then the end is recorded aborted, what it held is released (its node locked for a human), and one notification went out
    assert [r.incident for r in swept.recorded] == [end.name] and swept.complete
    assert _settled_once(ledger, notifier, end)
    assert ledger.nodes_in_recovery(CLUSTER, T0 + timedelta(minutes=55)) == set() and ledger.resubmission_claim(CLUSTER, "1000") is None
    # And the sweep's mark moved to when it looked
    assert ledger.ends_swept_until(CLUSTER) == T0 + timedelta(minutes=55)


def test_an_end_the_event_settled_first_is_skipped_by_the_sweep_without_reading_anything() -> None:
    # Given an end its event reached and settled
    ledger, notifier, end = FakeLedger(), FakeNotifier(), _end()
    _holding(ledger, end)
    history = _CountingHistory([end])
    context = _context(ledger, notifier, history)
    assert reconcile_end(end, context, T0 + timedelta(minutes=51)).action == "recorded"
    reads = list(history.reads)
    # When the sweep lists it
    swept = _sweep(context, T0 + timedelta(minutes=55))
    # Then it is skipped: not described, no history read, not notified again
    assert (swept.skipped, swept.recorded, history.described, history.reads) == (1, [], [], reads)
    assert _settled_once(ledger, notifier, end)


def test_an_end_the_sweep_settled_first_is_not_notified_again_by_its_late_event() -> None:
    # Given an end the sweep settled (EventBridge retries a delivery for up to 24 hours)
    ledger, notifier, end = FakeLedger(), FakeNotifier(), _end()
    _holding(ledger, end)
    history = _CountingHistory([end])
    context = _context(ledger, notifier, history)
    _sweep(context, T0 + timedelta(minutes=55))
    reads = list(history.reads)
    # When its event arrives after all
    result = reconcile_end(end, context, T0 + timedelta(hours=3))
    # Then nothing happens twice, and its history is not read again
    assert result.action == "settled" and history.reads == reads
    assert _settled_once(ledger, notifier, end)


def test_two_deliveries_at_once_send_one_notification() -> None:
    # Given the event and the sweep reaching the same end at the same moment: the second arrives
    # while the first holds the right to notify and has not sent yet
    ledger, end = FakeLedger(), _end()
    _holding(ledger, end)
    history = _CountingHistory([end])
    second: list[BaseException] = []

    class Racing(FakeNotifier):
        def publish(self, subject: str, body: str, attributes: dict[str, str]) -> None:
            if not second:
                try:
                    reconcile_end(end, _context(ledger, self, history), T0 + timedelta(minutes=51))
                except NotificationInProgress as exc:
                    second.append(exc)
            super().publish(subject, body, attributes)

    notifier = Racing()
    reconcile_end(end, _context(ledger, notifier, history), T0 + timedelta(minutes=51))
    # Then the second sent nothing and is to be tried again (its queue redelivers it; the sweep sees it)
    assert len(second) == 1 and len(notifier.published) == 1
    # And tried again, it finds the end settled
    assert reconcile_end(end, _context(ledger, notifier, history), T0 + timedelta(minutes=57)).action == "settled"
    assert _settled_once(ledger, notifier, end)


def test_a_notification_whose_sender_died_is_sent_by_another_delivery_once_its_claim_lapses() -> None:
    # Given a delivery that claimed the right to notify, then died before SNS took the message
    ledger, end = FakeLedger(), _end()
    _holding(ledger, end)
    history = _CountingHistory([end])
    failing = FakeNotifier()
    failing.publish = lambda *args: (_ for _ in ()).throw(LedgerUnavailable("injected"))  # type: ignore[method-assign]
    claimed_at = T0 + timedelta(minutes=51)
    with pytest.raises(LedgerUnavailable):
        reconcile_end(end, _context(ledger, failing, history), claimed_at)
    notifier = FakeNotifier()
    # When another delivery comes while the claim holds, it sends nothing and is tried again
    with pytest.raises(NotificationInProgress):
        reconcile_end(end, _context(ledger, notifier, history), claimed_at + NOTICE_LEASE - timedelta(seconds=1))
    # Then, after the claim lapsed, the next one sends it: once
    reconcile_end(end, _context(ledger, notifier, history), claimed_at + NOTICE_LEASE + timedelta(seconds=1))
    assert _settled_once(ledger, notifier, end)


def test_the_sweep_keeps_its_mark_before_an_end_it_could_not_settle_and_says_so() -> None:
    # Given two ends whose events never came; Step Functions cannot describe the first for now
    ledger, notifier = FakeLedger(), FakeNotifier()
    first, second = _end(1, T0 + timedelta(minutes=48)), _end(2, T0 + timedelta(minutes=50))
    history = _CountingHistory([first, second])
    broken = history.describe_end

    def describe(execution_arn: str) -> ExecutionStatusDetail | None:
        if execution_arn == first.executionArn:
            raise LedgerUnavailable("throttled")
        return broken(execution_arn)

    history.describe_end = describe  # type: ignore[method-assign]
    ledger.save_ends_swept_until(CLUSTER, T0 + timedelta(minutes=45))
    context = _context(ledger, notifier, history)
    # When the sweep runs
    swept = _sweep(context, T0 + timedelta(minutes=55))
    # Then the other end is settled, the sweep is incomplete, and its mark stays at the end it could not settle
    assert not swept.complete and swept.unfinished == [first.name] and [r.incident for r in swept.recorded] == [second.name]
    assert ledger.ends_swept_until(CLUSTER) == T0 + timedelta(minutes=48)
    # And the next sweep, Step Functions answering again, settles it
    history.describe_end = broken  # type: ignore[method-assign]
    again = _sweep(context, T0 + timedelta(minutes=60))
    assert again.complete and [r.incident for r in again.recorded] == [first.name] and again.skipped == 1
    assert _settled_once(ledger, notifier, first) and _settled_once(ledger, notifier, second)


def test_the_sweep_reads_back_from_its_mark_less_the_overlap_as_far_as_an_execution_can_run() -> None:
    ledger, notifier = FakeLedger(), FakeNotifier()
    history = _CountingHistory([])
    context = _context(ledger, notifier, history)
    # Given no mark yet: the first sweep looks back its first lookback, and the overlap
    _sweep(context, T0)
    # And later, from the mark it left
    _sweep(context, T0 + timedelta(minutes=5))
    since = T0 - FIRST_LOOKBACK - OVERLAP
    assert history.listed == [(since, since - LONGEST_RUN), (T0 - OVERLAP, T0 - OVERLAP - LONGEST_RUN)]


def test_a_sweep_out_of_time_stops_before_the_next_end_and_the_next_sweep_goes_on_from_it() -> None:
    # Given three ends, and time for one
    ledger, notifier = FakeLedger(), FakeNotifier()
    ends = [_end(n, T0 + timedelta(minutes=40 + n)) for n in range(3)]
    history = _CountingHistory(ends)
    context = _context(ledger, notifier, history)
    lefts = iter([timedelta(minutes=3), RESERVE - timedelta(seconds=1)])
    swept = sweep_ended_executions(
        context=context, marks=ledger, clock=lambda: T0 + timedelta(minutes=55), longest_run=LONGEST_RUN, time_left=lambda: next(lefts)
    )
    # Then it settled the oldest, left the others, and its mark is at the first it left
    assert [r.incident for r in swept.recorded] == [ends[0].name] and swept.unfinished == [ends[1].name, ends[2].name]
    assert ledger.ends_swept_until(CLUSTER) == T0 + timedelta(minutes=41)
    # And the next sweep settles them
    assert [r.incident for r in _sweep(context, T0 + timedelta(minutes=60)).recorded] == [ends[1].name, ends[2].name]


# --- the class: any delivery of events (lost, doubled, late) interleaved with any sweeps --------
_DELIVERY = st.lists(st.tuples(st.sampled_from(["event", "sweep"]), st.integers(0, 3)), max_size=14)


@settings(max_examples=150, deadline=None)
@given(steps=_DELIVERY, ends=st.integers(1, 4), lost=st.sets(st.integers(0, 3)))
def test_whatever_the_deliveries_every_end_is_recorded_released_and_notified_once(
    steps: list[tuple[str, int]], ends: int, lost: set[int]
) -> None:
    # Given several ends, each holding what it held, whose events come or not, once or more, in any order with sweeps
    ledger, notifier = FakeLedger(), FakeNotifier()
    details = [_end(n, T0 + timedelta(minutes=40 + n)) for n in range(ends)]
    for n, end in enumerate(details):
        _holding(ledger, end, n)
    history = _CountingHistory(details)
    context = _context(ledger, notifier, history)
    now = T0 + timedelta(minutes=45)
    for kind, which in steps:
        now += timedelta(minutes=1)
        if kind == "sweep":
            _sweep(context, now)
        elif which < ends and which not in lost:
            reconcile_end(details[which], context, now)
    # When the sweeps go on (every 5 minutes) after the last delivery
    _sweep(context, now + timedelta(minutes=5))
    # Then every end is recorded, holds nothing, and was notified exactly once
    assert all(_settled_once(ledger, notifier, end) for end in details), notifier.published
    assert len(notifier.published) == ends


# --- the scheduled handler: its completion is what the alarm counts ---------------------------
sweep_handler = load_handler("functions/sweep_ended_executions/")


class _SweepContext(FakeLambdaContext):
    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 240_000  # (its Timeout)


def test_a_sweep_that_settled_every_end_counts_itself_complete(capsys: pytest.CaptureFixture[str]) -> None:
    # Given an end whose event never came
    deps = fake_dependencies()
    end = _end()
    deps.history = _CountingHistory([end])
    install_clock(lambda: T0 + timedelta(minutes=55))
    try:
        # When the scheduled sweep runs
        answer = sweep_handler({}, _SweepContext(), deps=deps)
    finally:
        install_clock(None)
    # Then it recorded it, and says it completed (the alarm pages when it has not for 15 minutes)
    metrics = {name: m["values"] for name, m in parse_emf(capsys.readouterr().out).items()}
    assert answer["recorded"] == [end.name]
    assert metrics["EndSweepsCompleted"] == [1.0] and metrics["EndsRecordedBySweep"] == [1.0] and metrics["ExecutionsAborted"] == [1.0]


def test_a_sweep_that_could_not_finish_fails_and_does_not_count_itself_complete(capsys: pytest.CaptureFixture[str]) -> None:
    # Given an end Step Functions will not describe for now
    deps = fake_dependencies()
    history = _CountingHistory([_end()])
    history.describe_end = lambda arn: (_ for _ in ()).throw(LedgerUnavailable("throttled"))  # type: ignore[method-assign]
    deps.history = history
    install_clock(lambda: T0 + timedelta(minutes=55))
    try:
        # When the sweep runs, Then it fails (Lambda's Errors, and no completion for the alarm)
        with pytest.raises(EndsNotSwept):
            sweep_handler({}, _SweepContext(), deps=deps)
    finally:
        install_clock(None)
    assert {name: m["values"] for name, m in parse_emf(capsys.readouterr().out).items()}["EndSweepsCompleted"] == [0.0]


def test_an_end_younger_than_the_grace_is_left_to_its_event_and_to_the_next_sweep() -> None:
    # Given an end younger than the grace, whose event has not been handled yet
    ledger, notifier, end = FakeLedger(), FakeNotifier(), _end(stopped=T0 + timedelta(minutes=50))
    _holding(ledger, end)
    history = _CountingHistory([end])
    context = _context(ledger, notifier, history)
    # When a sweep runs now, Then it leaves it (its event is due) and keeps its mark before it, complete
    swept = _sweep(context, T0 + timedelta(minutes=50) + GRACE / 2)
    assert swept.deferred == [end.name] and swept.recorded == [] and swept.complete and history.described == []
    assert ledger.ends_swept_until(CLUSTER) == T0 + timedelta(minutes=50)
    # And the next sweep, the event having never come, settles it
    assert [r.incident for r in _sweep(context, T0 + timedelta(minutes=55)).recorded] == [end.name]
    assert _settled_once(ledger, notifier, end)
