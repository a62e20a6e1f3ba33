"""Virtual time for drills: one timeline per execution, advanced by Wait and Retry instead of sleeping.

Each execution lives on its own timeline, which starts when the execution is started. Time on a
timeline moves two ways: real elapsed time while code runs (so handler work counts as pipeline
time), and jumps when the workflow waits (a Wait state, a Retry backoff, the agent's modelled
latency). A jump never sleeps.

The *horizon* keeps cause before effect when a scenario has faults at different times: a timeline
may not jump past the time of the next fault that has not been injected yet. It parks there; the
runner injects the fault once every live timeline is parked or finished, then moves the horizon
on. So an incident at t=300 sees what the incident started at t=0 had done by t=300, not later.
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
        self._parked: set[str] = set()
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
                self._parked.add(name)
                self._lock.notify_all()
                self._lock.wait()
            self._parked.discard(name)
            # Real time spent parked is the runner's, not the pipeline's: restart the real anchor.
            self._anchor[name] = (target, time.perf_counter())

    def sleep_until(self, moment: float, timeline: str | None = None) -> None:
        self.sleep(moment - self.now(timeline), timeline)

    # --- the runner's side ----------------------------------------------------------------
    def set_driver_time(self, moment: float) -> None:
        with self._lock:
            self._anchor[DRIVER] = (moment, time.perf_counter())

    def set_horizon(self, moment: float) -> None:
        with self._lock:
            self._horizon = moment
            self._lock.notify_all()

    def wait_until_parked(self, running: Callable[[], set[str]], timeout: float = 120.0) -> None:
        """Block (real time) until every running execution is parked at the horizon.

        ``running`` is re-read each round: an execution that finishes never parks.
        """
        deadline = time.monotonic() + timeout
        while True:
            live = running()
            with self._lock:
                if live <= self._parked:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"executions did not reach the horizon: {sorted(live - self._parked)}")
                self._lock.wait(min(remaining, 0.02))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
