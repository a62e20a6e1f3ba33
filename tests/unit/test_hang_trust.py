"""Detect Hung Jobs against rows it should not trust (issue 47 items 1-3): rows from nodes the
orchestrator does not give the job, writers' clocks that disagree with ours, hundreds of stalls in
one tick, and a job whose stalls keep clearing by themselves. Each job here is simulated minute by
minute: its reporters write what the training library would, the detector ticks each minute."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.hangs.detect import stall_threshold
from hyperpod_recovery.domain.hangs.observed import observe
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.errors import LedgerUnavailable
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.progress import Pause, ProgressReport
from hyperpod_recovery.models.progress_memory import JobMemory
from hyperpod_recovery.models.records import ResubmissionClaim
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.detect_hung_jobs import MAX_STARTS_PER_TICK, detect_hung_jobs
from tests.fakes import CLUSTER, T0, FakeJobNodes, FakeProgressMemory, FakeWorkflows

MINUTE = timedelta(minutes=1)


@dataclass
class Node:
    name: str
    skew: float = 0.0  # its clock minus ours (s)
    silent_from: float | None = None  # its reporter stops writing then (s from T0)
    written_by_test: bool = False  # its row is what the test writes (World.forger), not the simulation


@dataclass
class SimJob:
    """A synchronous job: every node steps each ``pace`` s until ``hang_at`` (s from T0), then none does."""

    job: str
    nodes: list[Node]
    pace: float = 2.0
    hang_at: float | None = None
    stalls: list[tuple[float, float]] = field(default_factory=list)  # (from, to): no step in between

    def stepping(self, t: float) -> float:
        """The moment of its last step at ``t``."""
        last = t
        if self.hang_at is not None:
            last = min(last, self.hang_at)
        for begin, end in self.stalls:
            if begin <= last < end:
                last = begin
        return last

    def rows(self, t: float) -> list[ProgressReport]:
        rows = []
        for node in (n for n in self.nodes if not n.written_by_test):
            at = t if node.silent_from is None else min(t, node.silent_from)
            last = self.stepping(at)
            written = at - at % 30  # (a report every 30 s)
            rows.append(
                row(
                    self.job,
                    node.name,
                    step=int(last // self.pace),
                    step_at=last + node.skew,
                    heartbeat_at=written + node.skew,
                    pace=self.pace,
                )
            )
        return rows


def row(job: str, node: str, *, step: int, step_at: float, heartbeat_at: float, pace: float, pause: Pause | None = None) -> ProgressReport:
    return ProgressReport(
        job=job,
        node=node,
        step=step,
        step_at=T0 + timedelta(seconds=step_at),
        heartbeat_at=T0 + timedelta(seconds=heartbeat_at),
        started_at=T0 - timedelta(hours=1),
        intervals_seen=50,
        step_seconds=pace,
        pause=pause,
    )


class Rows:
    def __init__(self) -> None:
        self.reports: list[ProgressReport] = []

    def running_jobs(self) -> dict[str, list[ProgressReport]]:
        jobs: dict[str, list[ProgressReport]] = {}
        for r in self.reports:
            jobs.setdefault(r.job, []).append(r)
        return jobs

    def job(self, job: str) -> list[ProgressReport]:
        return self.running_jobs().get(job, [])


class Verdicts:
    """The ledger's verdicts (once per episode, a later start updates one) and no claims."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, object], RecordedVerdict] = {}

    def record_verdict(self, recorded: RecordedVerdict) -> bool:
        key = (recorded.verdict.job, recorded.verdict.episode_at)
        first = key not in self.kept
        if first or recorded.execution:
            self.kept[key] = recorded
        return first

    def resubmission_claim(self, cluster: str, job_id: str) -> ResubmissionClaim | None:
        return None


@dataclass
class World:
    jobs: list[SimJob]
    extra: list[ProgressReport] = field(default_factory=list)  # rows someone else writes (as of each tick: see forged)
    membership: bool = True
    rules: HangRules = field(default_factory=HangRules)
    workflows: FakeWorkflows = field(default_factory=FakeWorkflows)
    memory: FakeProgressMemory = field(default_factory=FakeProgressMemory)
    ledger: Verdicts = field(default_factory=Verdicts)
    forger: object = None  # (t) -> rows written by a foreign job, fresh each tick

    def tick(self, minute: int) -> dict[str, int]:
        t = minute * 60.0
        rows = Rows()
        rows.reports = [r for j in self.jobs for r in j.rows(t)] + (self.forger(t) if callable(self.forger) else [])
        now = T0 + timedelta(seconds=t)
        nodes = FakeJobNodes(JobNodes(source="slurm", taken_at=now, jobs={j.job: sorted(n.name for n in j.nodes) for j in self.jobs}))
        return detect_hung_jobs(
            progress=rows,
            ledger=self.ledger,  # type: ignore[arg-type]
            workflows=self.workflows,
            job_nodes=nodes if self.membership else FakeJobNodes(None),
            memory=self.memory,
            cluster=CLUSTER,
            rules=self.rules,
            now=now,
            remaining_ms=lambda: 40_000,
            kube=None,  # (a Slurm stack has no Kubernetes API)
        )

    def run(self, minutes: int) -> list[dict[str, int]]:
        return [self.tick(m) for m in range(minutes)]

    def started(self, job: str) -> list[JobRecoveryRequest]:
        return [JobRecoveryRequest.model_validate_json(p) for n, p in self.workflows.started.items() if n.startswith(f"hpj-{job}-")]


def names(prefix: str, count: int) -> list[Node]:
    return [Node(f"{prefix}-{i}") for i in range(1, count + 1)]


# --- 1. a row is not the job ---------------------------------------------------------------------
def test_given_foreign_rows_claiming_fast_steps_then_a_slow_healthy_job_is_never_a_stall() -> None:
    # Given job 1001 at 300 s a step on two nodes (threshold 1,500 s), healthy; and rows under its id
    # from three nodes the orchestrator gives it not, claiming half-second steps
    world = World([SimJob("1001", names("ip-10-1-0", 2), pace=300.0)])
    # (alive, and stuck at step 1: only their pace speaks)
    world.forger = lambda t: [row("1001", f"ip-10-9-0-{i}", step=1, step_at=0, heartbeat_at=t, pace=0.5) for i in (1, 2, 3)]
    # When the detector ticks for 30 minutes
    counts = world.run(30)
    # Then no stall is ever decided, nothing started
    assert sum(c.get("stall_verdicts", 0) for c in counts) == 0 and world.workflows.started == {}


def test_given_a_fresh_foreign_row_then_the_real_hang_is_still_found_within_threshold_and_two_ticks() -> None:
    # Given job 1001 hung at minute 5, and a foreign node writing a fresh, stepping row under its id
    world = World([SimJob("1001", names("ip-10-1-0", 4), hang_at=300.0)])
    world.forger = lambda t: [row("1001", "ip-10-9-0-1", step=int(t), step_at=t, heartbeat_at=t, pace=2.0)]
    counts = world.run(10)
    # Then it is started by minute 5 + 60 s threshold + two ticks
    first = next(m for m, c in enumerate(counts) if c.get("recoveries_started"))
    assert first <= 5 + 1 + 2 and len(world.started("1001")) == 1


def test_given_a_long_pause_declared_by_a_foreign_node_then_the_real_hang_is_still_found() -> None:
    world = World([SimJob("1001", names("ip-10-1-0", 4), hang_at=300.0)])
    pause = Pause(kind="checkpoint", since=T0, limit_seconds=24 * 3600)
    world.forger = lambda t: [row("1001", "ip-10-9-0-1", step=1, step_at=0, heartbeat_at=t, pace=2.0, pause=pause)]
    world.run(10)
    assert len(world.started("1001")) == 1


def test_given_its_own_node_rewriting_a_pause_then_the_pause_holds_only_its_limit_from_the_last_progress() -> None:
    # Given job 1001 hung at minute 2, one of its own nodes declaring a fresh 5-minute pause each tick
    world = World([SimJob("1001", [Node("ip-10-1-0-1", written_by_test=True), Node("ip-10-1-0-2")], hang_at=120.0)])

    def rewritten(t: float) -> list[ProgressReport]:
        pause = Pause(kind="checkpoint", since=T0 + timedelta(seconds=t), limit_seconds=300)
        return [row("1001", "ip-10-1-0-1", step=60, step_at=120, heartbeat_at=t, pace=2.0, pause=pause)]

    world.forger = rewritten
    counts = world.run(12)
    # Then it is started once the pause's 300 s from its last progress (minute 2) and the threshold pass
    first = next(m for m, c in enumerate(counts) if c.get("recoveries_started"))
    assert 2 + 5 <= first <= 2 + 5 + 1 + 2


def test_given_no_fresh_membership_then_rows_are_judged_as_before_and_the_verdict_says_it_is_unverified() -> None:
    world = World([SimJob("1001", names("ip-10-1-0", 2), hang_at=60.0)], membership=False)
    counts = world.run(5)
    (request,) = world.started("1001")
    assert request.hang is not None and "membership unverified" in request.hang.summary
    assert all(c["job_nodes_unavailable"] == 1 for c in counts)


def test_given_a_job_the_orchestrator_does_not_run_then_its_rows_count_for_nothing() -> None:
    world = World([SimJob("1001", names("ip-10-1-0", 2), hang_at=60.0)])
    world.forger = lambda t: [row("4242", "ip-10-9-0-1", step=1, step_at=0, heartbeat_at=t, pace=2.0)]
    counts = world.run(5)
    assert world.started("4242") == [] and counts[-1]["not_running"] == 1


def test_given_fast_rows_after_a_slow_history_then_the_threshold_stays_what_the_history_supports() -> None:
    # Given a job whose own nodes reported 100 s steps for ten ticks, then claim 1 s steps
    slow = [row("1001", "ip-10-1-0-1", step=s, step_at=s * 100.0, heartbeat_at=s * 100.0, pace=100.0) for s in range(10)]
    memory = None
    for s, r in enumerate(slow):
        memory = observe(memory, "1001", [r], T0 + timedelta(seconds=s * 60)).memory
    fast = row("1001", "ip-10-1-0-1", step=11, step_at=1000, heartbeat_at=1000, pace=1.0)
    seen = observe(memory, "1001", [fast], T0 + timedelta(minutes=11))
    # Then the stall threshold is still 5 x 100 s
    assert stall_threshold(seen.reports, HangRules(), seen.learned_pace) == 500.0


# --- 2. a node's clock is not ours -----------------------------------------------------------------
def test_given_a_node_two_minutes_behind_then_it_is_not_blamed_but_the_node_that_stopped_is() -> None:
    # Given four nodes; ip-10-1-0-2's clock 2 min behind; ip-10-1-0-4's reporter stops at minute 3, the job hangs
    nodes = [Node("ip-10-1-0-1"), Node("ip-10-1-0-2", skew=-120), Node("ip-10-1-0-3"), Node("ip-10-1-0-4", silent_from=180)]
    # (a 60 s floor: the verdict comes after the 90 s that make a silent reporter gone, which this test blames)
    world = World([SimJob("1001", nodes, hang_at=180.0)], rules=HangRules(stall_floor_seconds=60))
    world.run(10)
    (request,) = world.started("1001")
    assert request.hang is not None and request.hang.suspects == ["ip-10-1-0-4"]
    assert "ip-10-1-0-2 at least 60 s behind ours" in request.hang.suspects_why


def test_given_a_node_an_hour_ahead_then_the_hang_is_found_in_time_and_its_skew_said() -> None:
    nodes = [Node("ip-10-1-0-1", skew=3600), Node("ip-10-1-0-2", skew=3600)]
    world = World([SimJob("1001", nodes, hang_at=120.0)])
    counts = world.run(8)
    first = next(m for m, c in enumerate(counts) if c.get("recoveries_started"))
    (request,) = world.started("1001")
    assert first <= 2 + 1 + 2 and request.hang is not None and "ip-10-1-0-1 at least 3600 s ahead of ours" in request.hang.suspects_why


@settings(max_examples=25, deadline=None)
@given(skews=st.lists(st.integers(min_value=-7200, max_value=7200), min_size=2, max_size=4))
def test_property_whatever_the_writers_clocks_a_hang_is_started_once_within_threshold_and_two_ticks(skews: list[int]) -> None:
    world = World([SimJob("1001", [Node(f"ip-10-1-0-{i}", skew=s) for i, s in enumerate(skews, 1)], hang_at=120.0)])
    counts = world.run(8)
    first = next(m for m, c in enumerate(counts) if c.get("recoveries_started"))
    assert first <= 2 + 1 + 2 and len(world.started("1001")) == 1


# --- 3. many at once ---------------------------------------------------------------------------------
def test_given_1000_jobs_stalling_together_then_starts_are_bounded_oldest_first_and_every_one_started_once() -> None:
    # Given 1,000 jobs on two nodes each, stalling a second apart from minute 2 (a file system going away)
    jobs = [SimJob(f"{5000 + k}", names(f"ip-10-{k // 200}-{k % 200}", 2), hang_at=120.0 + k % 60) for k in range(1000)]
    world = World(jobs)
    ticks = 4 + -(-1000 // MAX_STARTS_PER_TICK) + 1
    counts = world.run(ticks)
    # Then no tick starts more than the bound, the rest is counted as deferred
    assert max(c.get("recoveries_started", 0) for c in counts) == MAX_STARTS_PER_TICK
    assert any(c.get("starts_deferred", 0) for c in counts)
    # And every job is started, once
    assert len(world.workflows.started) == 1000 and {n.split("-hung-")[0] for n in world.workflows.started} == {
        f"hpj-{j.job}" for j in jobs
    }
    # And the oldest stalls first (by our clock: the tick that last saw them move)
    order = [JobRecoveryRequest.model_validate_json(p).hang for p in world.workflows.started.values()]
    assert [v.episode_at for v in order if v] == sorted(v.episode_at for v in order if v)


# --- damping ------------------------------------------------------------------------------------------
def test_given_stalls_that_keep_clearing_by_themselves_then_they_are_damped_and_told_once_with_the_count() -> None:
    # Given a job that stalls 3 minutes every 8 minutes, for 2 hours, then hangs for good
    stalls = [(m * 60.0 + 300, m * 60.0 + 480) for m in range(0, 120, 8)]
    job = SimJob("1001", names("ip-10-1-0", 2), stalls=stalls, hang_at=125 * 60.0)
    world = World([job])
    counts = []
    for minute in range(160):
        counts.append(world.tick(minute))
        world.workflows.ended |= set(world.workflows.started)  # (each recovery ended: recovered by itself)
    # Then the first two stalls started recoveries, the others were damped, and told once
    assert sum(c.get("damped", 0) for c in counts) >= 10
    damped = [v for v in world.ledger.kept.values() if v.action.startswith("damped:")]
    assert len(damped) == 1 and "2 stalls of job 1001 cleared by themselves" in damped[0].action
    # And the real hang is started at last, saying how many were damped
    requests = world.started("1001")
    assert len(requests) == 3 and requests[-1].hang is not None and "damped since" in requests[-1].hang.summary


@settings(max_examples=25, deadline=None)
@given(
    foreign=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10**6),  # step
            st.integers(min_value=-7200, max_value=7200),  # its stamps' offset from now
            st.floats(min_value=0.01, max_value=3600),  # the pace it claims
            st.one_of(st.none(), st.integers(min_value=1, max_value=86_400)),  # a pause it declares
        ),
        min_size=1,
        max_size=4,
    )
)
def test_property_whatever_rows_foreign_nodes_write_the_job_is_judged_as_without_them(
    foreign: list[tuple[int, int, float, int | None]],
) -> None:
    def run(with_foreign: bool) -> list[tuple[int, str]]:
        world = World([SimJob("1001", names("ip-10-1-0", 3), hang_at=180.0)])
        if with_foreign:

            def forger(t: float) -> list[ProgressReport]:
                return [
                    row(
                        "1001",
                        f"ip-10-9-0-{i}",
                        step=step,
                        step_at=t + offset,
                        heartbeat_at=t + offset,
                        pace=pace,
                        pause=Pause(kind="other", since=T0 + timedelta(seconds=t + offset), limit_seconds=limit) if limit else None,
                    )
                    for i, (step, offset, pace, limit) in enumerate(foreign, 1)
                ]

            world.forger = forger
        counts = world.run(8)
        return [(m, name) for m, c in enumerate(counts) if c.get("recoveries_started") for name in world.workflows.started]

    assert run(True) == run(False) != []


def test_given_the_memory_unreadable_then_the_tick_judges_nothing_and_writes_nothing() -> None:
    # Given a hung job, and a memory the ledger does not answer
    world = World([SimJob("1001", names("ip-10-1-0", 2), hang_at=60.0)])
    world.memory.fail_with = LedgerUnavailable("throttled")
    # When ticks run
    counts = world.run(5)
    # Then none judges (every row would look new), none starts, and none overwrites the memory
    assert all(c["memory_unavailable"] == 1 and "stall_verdicts" not in c for c in counts)
    assert world.workflows.started == {} and world.memory.items == {}


def test_given_the_memory_lost_while_its_recovery_runs_then_the_redated_episode_is_left_to_that_recovery() -> None:
    # Given a hung job whose recovery was started, still running
    world = World([SimJob("1001", names("ip-10-1-0", 2), hang_at=60.0)])
    world.run(5)
    (first,) = world.workflows.started
    # When the memory is lost (a new deploy's table, a TTL) and the stall is dated anew
    world.memory.items.clear()
    counts = [world.tick(m) for m in range(5, 9)]
    # Then the new episode starts nothing: it is left to the running recovery
    assert list(world.workflows.started) == [first] and any(c.get("left_to_another_incident") for c in counts)
    kept = [v for v in world.ledger.kept.values() if v.action.startswith("not acted on: left to hang recovery")]
    assert kept and first in kept[0].action


class _Unwritable(FakeProgressMemory):
    def remember(self, cluster: str, memories: Sequence[JobMemory]) -> int:
        raise LedgerUnavailable("throttled")


def test_given_the_memory_unwritable_then_the_tick_still_answers_and_says_so() -> None:
    world = World([SimJob("1001", names("ip-10-1-0", 2), hang_at=60.0)], memory=_Unwritable())
    counts = world.run(3)
    assert all(c["memory_unwritten"] == 1 for c in counts)


def test_given_no_job_reporting_then_membership_is_not_asked_for_and_its_absence_raises_no_alarm() -> None:
    # Given a stack whose progress table holds no job's rows, and no snapshot of the orchestrator
    nodes = FakeJobNodes(None)
    # When a tick runs
    counts = detect_hung_jobs(
        progress=Rows(),
        ledger=Verdicts(),  # type: ignore[arg-type]
        workflows=FakeWorkflows(),
        job_nodes=nodes,
        memory=FakeProgressMemory(),
        cluster=CLUSTER,
        rules=HangRules(),
        now=T0,
        remaining_ms=lambda: 40_000,
        kube=None,  # (a Slurm stack has no Kubernetes API)
    )
    # Then nothing is judged, the snapshot is not read, and the unverified-membership count stays off
    assert counts == {"jobs_reporting": 0} and nodes.reads == 0
