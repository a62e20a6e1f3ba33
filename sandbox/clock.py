"""Virtual time for drills: one timeline per execution, advanced by Wait and Retry instead of sleeping.

Each execution lives on its own timeline, which starts when the execution is started. Time on a
timeline moves two ways: real elapsed time while code runs (so handler work counts as pipeline
time), and jumps when the workflow waits (a Wait state, a Retry backoff, the agent's modelled
latency). A jump never sleeps.

The *horizon* keeps cause before effect, between faults and between executions: no timeline may
jump past it. A timeline that wants to jump further parks with its wake-up time. Once every live
timeline is parked (or finished), the runner moves the horizon to the earliest wake-up time, or to
the next fault if that comes first (a conservative discrete-event schedule). So an incident at
t=300 sees what the incident started at t=0 had done by t=300, and an execution that polls the
ledger for another's outcome at t=700 sees exactly what that one had recorded by t=700.

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
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._anchor: dict[str, tuple[float, float]] = {DRIVER: (0.0, time.perf_counter())}
        # Parked sleepers, by (timeline, thread): a Map state runs several threads of one execution.
        self._parked: set[tuple[str, int]] = set()
        self._wake_at: dict[tuple[str, int], float] = {}  # parked sleeper -> the time it wants to jump to
        self._waiting_on: dict[str, str] = {}  # parent timeline -> the nested execution it waits for
        self._horizon = math.inf
        self._closed = False

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
            if name not in self._anchor:
                # A new execution starts at the driver's present (the moment it was started).
                self._anchor[name] = (self._now_locked(DRIVER), time.perf_counter())
            return self._now_locked(name)

    def _now_locked(self, name: str) -> float:
        virtual, real = self._anchor[name]
        return virtual + (time.perf_counter() - real)

    def sleep(self, seconds: float, timeline: str | None = None) -> None:
        """Jump ``seconds`` ahead on a timeline, parking at the horizon if it is nearer."""
        name = timeline or self.current()
        target = self.now(name) + max(0.0, seconds)
        with self._lock:
            while target > self._horizon and not self._closed:
                self._anchor[name] = (max(self._now_locked(name), self._horizon), time.perf_counter())
                self._parked.add((name, threading.get_ident()))
                self._wake_at[(name, threading.get_ident())] = target
                self._lock.notify_all()
                self._lock.wait()
            self._parked.discard((name, threading.get_ident()))
            self._wake_at.pop((name, threading.get_ident()), None)
            # Real time spent parked is the runner's, not the pipeline's: restart the real anchor.
            self._anchor[name] = (target, time.perf_counter())

    def sleep_until(self, moment: float, timeline: str | None = None) -> None:
        self.sleep(moment - self.now(timeline), timeline)

    # --- nested executions ------------------------------------------------------------------
    def start_timeline(self, name: str, parent: str) -> None:
        """A nested execution starts at its parent's present, not the driver's."""
        with self._lock:
            if name not in self._anchor:
                self._anchor[name] = (self._now_locked(parent) if parent in self._anchor else self._now_locked(DRIVER), time.perf_counter())

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
    def set_driver_time(self, moment: float) -> None:
        with self._lock:
            self._anchor[DRIVER] = (moment, time.perf_counter())

    def set_horizon(self, moment: float) -> None:
        with self._lock:
            self._horizon = moment
            # Timelines whose wake-up time is now reachable are awake from this moment on, even
            # before their thread runs: the runner must wait for them to park again.
            for sleeper, wake in self._wake_at.items():
                if wake <= moment:
                    self._parked.discard(sleeper)
            self._lock.notify_all()

    def next_wake(self) -> float:
        """The earliest time a parked timeline wants to jump to (inf when none is parked)."""
        with self._lock:
            return min((w for s, w in self._wake_at.items() if s in self._parked), default=math.inf)

    def run_until(self, moment: float, running: Callable[[], set[str]]) -> None:
        """Let every live timeline reach ``moment`` in wake-up order, one wake-up time at a time.

        ``moment`` may be inf: run until no execution is left.
        """
        while True:
            self.wait_until_parked(running)
            wake = self.next_wake()
            if wake >= moment or (wake == math.inf and not running()):
                break
            self.set_horizon(max(self._horizon_now(), wake))
        if moment != math.inf:
            self.set_horizon(moment)
            self.wait_until_parked(running)

    def _horizon_now(self) -> float:
        with self._lock:
            return self._horizon

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
