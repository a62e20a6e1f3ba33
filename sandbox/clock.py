"""Virtual time for drills: one timeline per execution, advanced by Wait and Retry instead of sleeping.

Each execution lives on its own timeline, which starts when the execution is started. Time on a
timeline moves only by jumps: a Wait state, a Retry backoff, the agent's modelled latency. A jump
never sleeps. Handler work and state transitions take no virtual time: real elapsed time on a
shared machine is load, not Lambda's duration, and counting it made a drill's report depend on how
busy the machine was (a step timed on a loaded machine could move a poll past a deadline). A drill
against a real Slurm (``counts_real_time``) does count it: its agent is a process working in real time.

The *horizon* keeps cause before effect, between faults and between executions: no timeline may
jump past it. A timeline that wants to jump further parks with its wake-up time, and a new
execution parks at its start. Once every live timeline is parked (or finished), the runner lets
the parked sleeper with the earliest wake-up time go (ties by timeline name), alone, and moves the
horizon there; the next fault is delivered once every sleeper left wants to wake after it (a
discrete-event schedule that runs one execution at a time). So an incident at t=300 sees what the
incident started at t=0 had done by t=300, an execution that polls the ledger for another's
outcome at t=700 sees exactly what that one had recorded by t=700, and two executions at the same
moment act in the same order on every run, however busy the machine is.

A *nested* execution (JobRecovery's Recover Nodes starts NodeRecovery and waits for it) starts at
its parent's present; while the parent waits, it counts as parked whenever its child is, and when
the child ends the parent's timeline moves on to the child's end.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

DRIVER = "__driver__"
# Virtual second 0 of every drill, so reports are comparable across runs.
EPOCH = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
_local = threading.local()


class VirtualClock:
    def __init__(self, *, counts_real_time: bool = False) -> None:
        self._lock = threading.Condition()
        self._counts_real_time = counts_real_time
        self._anchor: dict[str, tuple[float, float]] = {DRIVER: (0.0, time.perf_counter())}
        # Parked sleepers, by (timeline, thread), with the time each wants to jump to.
        self._parked: dict[tuple[str, int], float] = {}
        self._released: set[tuple[str, int]] = set()  # sleepers the runner has let go, not yet running
        self._waiting_on: dict[str, str] = {}  # parent timeline -> the nested execution it waits for
        self._stopped: set[str] = set()  # timelines of executions stopped from outside: they never wait again
        self._started: dict[str, float] = {}  # when each timeline began
        self._woken: set[str] = set()  # timelines let go before their wake-up time (their wait was answered)
        self._horizon = 0.0
        self._closed = False
        # (timeline, reason, start, end) of the jumps made with a reason: the report names these waits.
        self.waits: list[tuple[str, str, float, float]] = []

    # --- which timeline is the current thread on ------------------------------------------
    @staticmethod
    def current() -> str:
        return getattr(_local, "timeline", DRIVER)

    @staticmethod
    @contextmanager
    def on(timeline: str) -> Iterator[None]:
        previous = getattr(_local, "timeline", DRIVER)
        _local.timeline = timeline
        try:
            yield
        finally:
            _local.timeline = previous

    # --- reading and moving time ----------------------------------------------------------
    def now(self, timeline: str | None = None) -> float:
        name = timeline or self.current()
        with self._lock:
            return self._now_locked(self._anchored(name))

    def _anchored(self, name: str) -> str:
        if name not in self._anchor:
            # A new execution starts at the driver's present (the moment it was started).
            self._anchor[name] = (self._now_locked(DRIVER), time.perf_counter())
            self._started[name] = self._anchor[name][0]
        return name

    def started_at(self, timeline: str) -> float:
        """When a timeline began (an execution's start), in virtual seconds."""
        with self._lock:
            return self._started.get(timeline, self._now_locked(self._anchored(timeline)))

    def _now_locked(self, name: str) -> float:
        virtual, real = self._anchor[name]
        return virtual + (time.perf_counter() - real if self._counts_real_time else 0.0)

    def sleep(self, seconds: float, timeline: str | None = None, reason: str | None = None) -> None:
        """Jump ``seconds`` ahead on a timeline, parking at the horizon if it is nearer. A ``reason``
        records the jump in ``waits`` (e.g. a retry backoff, which the report must not call overhead)."""
        name = timeline or self.current()
        with self._lock:
            start = self._now_locked(self._anchored(name))
            if name in self._stopped:
                return  # a stopped execution's thread winds down at once, as StopExecution ends it at once
            target = start + max(0.0, seconds)
            if reason is not None and target > start:
                self.waits.append((name, reason, start, target))
            # The driver is the runner's own thread: it moves the horizon, it never waits for it.
            if target > self._horizon and name != DRIVER:
                self._anchor[name] = (max(start, self._horizon), time.perf_counter())
                self._park(name, target)
                if name in self._stopped or name in self._woken:
                    self._woken.discard(name)
                    return  # woken early: its time stays where the wake found it
            # Real time spent parked is the runner's, not the pipeline's: restart the real anchor.
            self._anchor[name] = (target, time.perf_counter())

    def sleep_until(self, moment: float, timeline: str | None = None) -> None:
        self.sleep(moment - self.now(timeline), timeline)

    def hold(self, timeline: str) -> None:
        """Park a new execution at its start until the runner gives it its turn, as if it had slept
        until then: executions started at the same moment then run one after the other, in the
        runner's order, instead of racing each other in real time."""
        with self._lock:
            self._park(timeline, self._now_locked(self._anchored(timeline)))
            self._woken.discard(timeline)

    def _park(self, name: str, wake: float) -> None:
        sleeper = (name, threading.get_ident())
        self._parked[sleeper] = wake
        self._lock.notify_all()
        while sleeper not in self._released and not self._closed:
            self._lock.wait()
        self._released.discard(sleeper)
        self._parked.pop(sleeper, None)

    # --- nested executions ------------------------------------------------------------------
    def start_timeline(self, name: str, parent: str) -> None:
        """A nested execution starts at its parent's present, not the driver's."""
        with self._lock:
            if name not in self._anchor:
                self._anchor[name] = (self._now_locked(parent) if parent in self._anchor else self._now_locked(DRIVER), time.perf_counter())
                self._started[name] = self._anchor[name][0]

    def wait_on(self, parent: str, child: str) -> None:
        with self._lock:
            self._waiting_on[parent] = child
            self._lock.notify_all()

    def child_finished(self, parent: str, child: str) -> None:
        """The parent resumes at the child's end (never earlier than it already is)."""
        with self._lock:
            self._waiting_on.pop(parent, None)
            end = self._now_locked(child) if child in self._anchor else self._now_locked(parent)
            self._anchor[parent] = (max(self._now_locked(parent), end), time.perf_counter())

    # --- the runner's side ----------------------------------------------------------------
    def stop(self, timeline: str) -> None:
        """An execution was stopped (StopExecution): let its parked thread go now, without the
        jump it waited for, and never park it again, so the interpreter sees the stop and ends."""
        with self._lock:
            self._stopped.add(timeline)
            self._anchor[timeline] = (max(self._now_locked(self._anchored(timeline)), self._horizon), time.perf_counter())
        # Let go at once, not in turn: a stopped execution only winds down (no Lambda runs after
        # StopExecution), and the runner waits for it to end before anything else moves.
        self._release_stopped(timeline)

    def wake(self, timeline: str) -> bool:
        """Make a timeline's parked thread due now, at the horizon, instead of at the wake-up time
        it asked for: what it waited for (a task token's answer) came early. It still goes in
        ``run_until``'s order, one at a time. False if none was parked."""
        with self._lock:
            sleepers = [s for s in self._parked if s[0] == timeline]
            for sleeper in sleepers:
                self._parked[sleeper] = self._horizon
            if sleepers:
                self._woken.add(timeline)
                # It goes on from the present (the horizon), where what woke it happened.
                self._anchor[timeline] = (max(self._now_locked(timeline), self._horizon), time.perf_counter())
            return bool(sleepers)

    def _release_stopped(self, timeline: str) -> None:
        with self._lock:
            for sleeper in [s for s in self._parked if s[0] == timeline]:
                self._parked.pop(sleeper)
                self._released.add(sleeper)
            self._lock.notify_all()

    def stopped(self, timeline: str) -> bool:
        with self._lock:
            return timeline in self._stopped

    @property
    def horizon(self) -> float:
        with self._lock:
            return self._horizon

    def next_wake(self) -> float:
        """The earliest a parked timeline asked to wake (inf: none is parked)."""
        with self._lock:
            return min(self._parked.values(), default=math.inf)

    def advance_horizon(self, moment: float) -> None:
        """Move the present on to ``moment``, before any parked timeline's wake-up (the runner
        delivers there something that happens between two of them: a Cluster Event)."""
        with self._lock:
            assert moment <= min(self._parked.values(), default=math.inf), "a timeline would be left in the past"
            self._horizon = max(self._horizon, moment)

    def set_driver_time(self, moment: float) -> None:
        with self._lock:
            self._anchor[DRIVER] = (moment, time.perf_counter())

    def run_until(self, moment: float, running: Callable[[], set[str]], between: Callable[[], None] | None = None) -> None:
        """Let every live timeline reach ``moment``, one parked sleeper at a time.

        The next to go is the earliest wake-up time, ties broken by timeline name; it runs alone
        until it parks again (or ends). One at a time is what makes a drill repeatable: two
        executions waking at the same virtual moment (a replacement starting while another
        execution classifies the job on that node) would otherwise race in real time, and which
        one a loaded machine ran first decided what the other saw. ``moment`` may be inf: run
        until no execution is left. ``between`` runs each time every execution is parked, before
        the next one goes: the runner delivers there what AWS would deliver on its own (the
        status-change events of executions that ended).
        """
        while True:
            self.wait_until_parked(running)
            if between is not None:
                between()
                self.wait_until_parked(running)
            with self._lock:
                sleeper = min(self._parked, key=lambda s: (self._parked[s], s[0]), default=None)
                if sleeper is None or self._parked[sleeper] > moment:
                    break
                self._horizon = max(self._horizon, self._parked.pop(sleeper))
                self._released.add(sleeper)
                self._lock.notify_all()
        if moment != math.inf:
            with self._lock:
                self._horizon = max(self._horizon, moment)

    def wait_until_parked(self, running: Callable[[], set[str]], timeout: float = 120.0) -> None:
        """Block (real time) until every running execution is parked at the horizon.

        ``running`` is re-read each round: an execution that finishes never parks.
        """
        deadline = time.monotonic() + timeout
        while True:
            live = running()
            with self._lock:
                if live <= self._effectively_parked():
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"executions did not reach the horizon: {sorted(live - self._effectively_parked())}")
                self._lock.wait(min(remaining, 0.02))

    def _effectively_parked(self) -> set[str]:
        """Parked timelines, plus parents whose nested execution is (transitively) parked."""
        parked = {name for name, _ in self._parked}
        grew = True
        while grew:
            grew = False
            for parent, child in self._waiting_on.items():
                if parent not in parked and child in parked:
                    parked.add(parent)
                    grew = True
        return parked

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
