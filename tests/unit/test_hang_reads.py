"""Detect Hung Jobs reads every few seconds within its minute (steps/detect_hung_jobs.py), and what keeps a
lower threshold from calling normal training a hang (domain/hangs/observed.py, detect.py): the
reporters' write gap, a write that shows the job still, our own dating against skewed clocks."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.hangs.detect import job_verdicts
from hyperpod_recovery.domain.hangs.observed import STILL_AFTER_SECONDS, observe, still
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.models.progress import (
    HEARTBEAT_SECONDS,
    PROGRESS_IDLE_WRITE_SECONDS,
    PROGRESS_WRITE_SECONDS,
    Pause,
    ProgressReport,
)
from hyperpod_recovery.models.progress_memory import JobMemory
from hyperpod_recovery.steps.detect_hung_jobs import READ_RESERVE_MS, READ_WINDOW_SECONDS, read_repeatedly
from tests.fakes import CLUSTER, T0


class Invocation:
    """A Lambda invocation's clock, its waits and its remaining time, moved by hand."""

    def __init__(self, timeout_s: float = 59.0, read_seconds: float = 0.2) -> None:
        self.t = 0.0
        self.timeout_s = timeout_s
        self.read_seconds = read_seconds
        self.reads: list[float] = []

    def clock(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    def pause(self, seconds: float) -> None:
        assert seconds > 0
        self.t += seconds

    def remaining_ms(self) -> int:
        return int((self.timeout_s - self.t) * 1000)

    def read(self, now: datetime) -> dict[str, int]:
        self.reads.append(round((now - T0).total_seconds(), 3))
        self.t += self.read_seconds
        return {"jobs_reporting": 2, "stall_verdicts": 1, "recoveries_started": 1}

    def run(self, every: float) -> dict[str, int]:
        return read_repeatedly(self.read, clock=self.clock, pause=self.pause, every_seconds=every, remaining_ms=self.remaining_ms)


# --- the reads within a minute ------------------------------------------------------------------------
def test_given_reads_every_5s_then_an_invocation_reads_twelve_times_on_its_own_slots_within_its_window() -> None:
    invocation = Invocation()
    counts = invocation.run(5)
    assert invocation.reads == [float(s) for s in range(0, 60, 5)]
    assert max(invocation.reads) <= READ_WINDOW_SECONDS and counts["reads"] == 12


def test_given_a_slow_read_then_the_next_read_skips_its_slot_and_never_drifts() -> None:
    # Given reads that take 7 s (a throttled table), every 5 s
    invocation = Invocation(read_seconds=7.0)
    invocation.run(5)
    # Then each read starts on a slot of the invocation's start, the slots it ran over skipped
    assert invocation.reads == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]


def test_given_reads_every_60s_then_an_invocation_reads_once_as_before() -> None:
    invocation = Invocation()
    assert invocation.run(60)["reads"] == 1 and invocation.reads == [0.0]


def test_given_little_of_the_functions_time_left_then_no_read_is_begun_that_would_outlive_it() -> None:
    # Given a function whose Timeout leaves less than the reserve after the read at 20 s
    invocation = Invocation(timeout_s=20 + READ_RESERVE_MS / 1000 + 4)
    invocation.run(5)
    assert invocation.reads == [0.0, 5.0, 10.0, 15.0, 20.0]


def test_given_a_wait_that_does_not_wait_then_the_invocation_reads_once() -> None:
    invocation = Invocation()
    counts = read_repeatedly(
        invocation.read, clock=invocation.clock, pause=lambda s: None, every_seconds=5, remaining_ms=invocation.remaining_ms
    )
    assert counts["reads"] == 1


def test_given_twelve_reads_then_levels_are_their_largest_and_events_their_sum() -> None:
    counts = Invocation().run(5)
    # (a job reporting in twelve reads is one job; twelve starts are twelve, as the metric counts them)
    assert (counts["jobs_reporting"], counts["stall_verdicts"], counts["recoveries_started"]) == (2, 1, 12)


# --- the reporters' write gap, learned by their own clock ---------------------------------------------
def row(step: int, step_at: float, heartbeat_at: float, node: str = "ip-10-1-0-1", pause: Pause | None = None) -> ProgressReport:
    return ProgressReport(
        job="1001",
        node=node,
        step=step,
        step_at=T0 + timedelta(seconds=step_at),
        heartbeat_at=T0 + timedelta(seconds=heartbeat_at),
        started_at=T0 - timedelta(hours=1),
        intervals_seen=100,
        step_seconds=2.0,
        pause=pause,
    )


def test_given_writes_of_new_steps_5s_apart_on_a_skewed_clock_then_the_gap_learned_is_5s() -> None:
    # Given a node 40 s ahead of us, writing a new step every 5 s, read every 5 s
    memory: JobMemory | None = None
    seen = None
    for k in range(4):
        seen = observe(memory, "1001", [row(100 + k, 40 + 5 * k - 1, 40 + 5 * k)], T0 + timedelta(seconds=5 * k))
        memory = seen.memory
    assert seen is not None and seen.write_gap == PROGRESS_WRITE_SECONDS


def test_given_a_reporter_never_seen_writing_twice_then_its_gap_is_taken_as_a_heartbeats() -> None:
    seen = observe(None, "1001", [row(100, 0, 1)], T0 + timedelta(seconds=1))
    assert seen.write_gap == HEARTBEAT_SECONDS


def test_given_a_hang_then_its_heartbeats_do_not_teach_a_longer_gap() -> None:
    # Given steps written 5 s apart, then the same step rewritten every 10 s (the job stopped)
    memory = None
    writes = [row(100, 0, 0), row(101, 4, 5), row(101, 4, 15), row(101, 4, 25), row(101, 4, 35)]
    for k, r in enumerate(writes):
        seen = observe(memory, "1001", [r], T0 + timedelta(seconds=5 + 10 * k))
        memory = seen.memory
    assert seen.write_gap == PROGRESS_WRITE_SECONDS


def test_given_a_declared_pause_between_two_steps_then_its_length_is_no_write_gap() -> None:
    pause = Pause(kind="checkpoint", since=T0 + timedelta(seconds=5), limit_seconds=3600)
    memory = None
    for k, r in enumerate([row(100, 0, 0), row(101, 4, 5), row(101, 4, 6, pause=pause), row(102, 900, 901)]):
        seen = observe(memory, "1001", [r], T0 + timedelta(seconds=[1, 6, 7, 902][k]))
        memory = seen.memory
    assert seen.write_gap == PROGRESS_WRITE_SECONDS


# --- a write that shows the job still -------------------------------------------------------------
def test_given_a_row_written_within_a_write_interval_of_its_step_then_it_shows_nothing_still() -> None:
    assert not still(row(100, 0, STILL_AFTER_SECONDS))
    assert still(row(100, 0, STILL_AFTER_SECONDS + 0.5))


def test_given_writes_that_stopped_coming_then_no_stall_however_long_the_silence_looks() -> None:
    # Given a 2 s job whose last write (a new step, written at once) is followed by nothing: the writes
    # are lost or late, the reporter still alive by the rules' bound
    memory = observe(None, "1001", [row(100, 0, 1)], T0 + timedelta(seconds=1)).memory
    seen = observe(memory, "1001", [row(100, 0, 1)], T0 + timedelta(seconds=60))
    # Then the silence is only writes not seen: no verdict
    assert not seen.confirmed
    now = T0 + timedelta(seconds=60)
    assert job_verdicts(CLUSTER, "1001", seen.reports, HangRules(), now, write_gap=5.0, confirmed=seen.confirmed) == []


# --- the class: a healthy fast job under jitter, late and lost writes, skewed clocks, read every 5 s --
class Reporter:
    """The library's write rule for one node: a newer step once its last write is 5 s old (at once,
    or when it becomes so), else its step again every 10 s; each write lands ``latency`` late, or is
    lost (tried again 5 s on); its stamps are its own clock, ``skew`` off ours."""

    def __init__(self, node: str, skew: float) -> None:
        self.node, self.skew = node, skew
        self.last_write = -1e9
        self.written: int | None = None
        self.row: ProgressReport | None = None
        self.pending: list[tuple[float, ProgressReport]] = []

    def tick(self, t: float, step: int, step_at: float, latency: float, lost: bool) -> None:
        newer = step != self.written
        due = self.last_write + (PROGRESS_WRITE_SECONDS if newer else PROGRESS_IDLE_WRITE_SECONDS)
        if t < due:
            return
        self.last_write = t
        if lost:
            return
        self.written = step
        self.pending.append((t + latency, row(step, step_at + self.skew, t + self.skew, node=self.node)))

    def table(self, t: float) -> ProgressReport | None:
        while self.pending and self.pending[0][0] <= t:
            self.row = self.pending.pop(0)[1]
        return self.row


def simulate(
    pace: float,
    jitter: list[float],
    skews: list[float],
    latencies: list[float],
    losses: set[int],
    hang_at: float | None,
    until: float,
    outage: tuple[float, float] = (0.0, 0.0),
) -> tuple[float | None, float]:
    """Steps of ``pace`` times a jitter each, reporters on a 0.5 s tick, our reads every 5 s, every
    write lost during ``outage`` (start, seconds): the first stall verdict's moment (None: none), and
    the job's last step."""
    steps, t, step = [], 0.0, 0
    while t < until:
        t += pace * jitter[step % len(jitter)]
        if hang_at is not None and t > hang_at:
            break
        steps.append(t)
        step += 1
    reporters = [Reporter(f"ip-10-1-0-{i}", s) for i, s in enumerate(skews, start=1)]
    memory, k, read_at = None, 0, 5.0
    now = 0.0
    while now < until:
        now = round(now + 0.5, 3)
        done = sum(1 for s in steps if s <= now)
        for i, r in enumerate(reporters):
            lost = (k + i) in losses or outage[0] <= now < outage[0] + outage[1]
            r.tick(now, 100 + done, steps[done - 1] if done else 0.0, latencies[(k + i) % len(latencies)], lost)
        k += 1
        if now >= read_at:
            read_at += 5.0
            rows = [x for r in reporters if (x := r.table(now)) is not None]
            if not rows:
                continue
            seen = observe(memory, "1001", rows, T0 + timedelta(seconds=now))
            memory = seen.memory
            found = job_verdicts(
                CLUSTER, "1001", seen.reports, HangRules(), T0 + timedelta(seconds=now), seen.learned_pace, seen.write_gap, seen.confirmed
            )
            if found:
                return now, (steps[-1] if steps else 0.0)
    return None, (steps[-1] if steps else 0.0)


JOBS = {
    "pace": st.sampled_from([0.5, 1.0, 2.0, 3.0, 4.0, 5.0]),
    "jitter": st.lists(st.floats(min_value=0.7, max_value=2.0), min_size=3, max_size=12),
    "skews": st.lists(st.floats(min_value=-120, max_value=120), min_size=2, max_size=4),
    "latencies": st.lists(st.floats(min_value=0.0, max_value=3.0), min_size=1, max_size=6),
    "losses": st.sets(st.integers(min_value=0, max_value=2000), max_size=30),
    "outage": st.tuples(st.floats(min_value=60, max_value=300), st.floats(min_value=0, max_value=60)),
}


@settings(max_examples=40, deadline=None)
@given(**JOBS)
def test_a_healthy_job_of_steps_up_to_5s_is_never_a_stall_under_jitter_late_or_lost_writes_outages_and_skewed_clocks(
    pace: float, jitter: list[float], skews: list[float], latencies: list[float], losses: set[int], outage: tuple[float, float]
) -> None:
    # (steps up to twice their pace, writes up to 3 s late, some lost and all lost for up to a minute
    # (the table throttled, the network out), clocks two minutes apart)
    verdict, _ = simulate(pace, jitter, skews, latencies, losses, hang_at=None, until=400.0, outage=outage)
    assert verdict is None


@settings(max_examples=30, deadline=None)
@given(
    pace=st.sampled_from([0.5, 1.0, 2.0, 3.0, 4.0, 5.0]),
    skews=st.lists(st.floats(min_value=-1, max_value=1), min_size=2, max_size=4),
    hang_at=st.floats(min_value=120, max_value=180),
)
def test_a_hang_of_a_job_of_steps_up_to_5s_is_a_stall_within_30s_of_its_last_step(pace: float, skews: list[float], hang_at: float) -> None:
    # (clocks as EC2's Time Sync keeps them; writes on time: jitter and latency are the property above's;
    # the simulation's own 0.5 s tick is the slack)
    verdict, last = simulate(pace, [1.0], skews, [0.0], set(), hang_at=hang_at, until=hang_at + 120)
    assert verdict is not None and verdict - last <= 30.5


@settings(max_examples=20, deadline=None)
@given(
    pace=st.sampled_from([1.0, 2.0, 5.0]),
    skews=st.lists(st.floats(min_value=-120, max_value=120), min_size=2, max_size=4),
    hang_at=st.floats(min_value=120, max_value=180),
)
def test_a_hang_seen_through_clocks_minutes_apart_is_a_stall_at_most_a_read_later(pace: float, skews: list[float], hang_at: float) -> None:
    # (a clock ahead of ours has its step dated at the read that saw it: up to one read, 5 s, later)
    verdict, last = simulate(pace, [1.0], skews, [0.0], set(), hang_at=hang_at, until=hang_at + 120)
    assert verdict is not None and verdict - last <= 35.5
