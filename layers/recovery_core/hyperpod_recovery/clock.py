"""Time, behind one seam so the sandbox can run the real handlers on a virtual clock.

Handlers never call ``datetime.now()`` directly: they ask ``current_clock()``. In Lambda that is
the system clock. The local sandbox installs a virtual clock (sandbox/clock.py) so a 10-minute
replacement drills in a second, and every timestamp the pipeline records is virtual time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime


def system_now() -> datetime:
    return datetime.now(UTC)


_now: Callable[[], datetime] = system_now


def current_clock() -> Callable[[], datetime]:
    """The clock handlers should use: returns a function giving an aware UTC datetime."""
    return _now


def install_clock(now: Callable[[], datetime] | None) -> None:
    """Replace the process clock (sandbox and tests only); ``None`` restores the system clock."""
    global _now
    _now = now or system_now


def system_sleep(seconds: float) -> None:
    import time

    time.sleep(max(0.0, seconds))


_sleep: Callable[[float], None] = system_sleep


def current_sleep() -> Callable[[float], None]:
    """How a handler waits between its reads (Detect Hung Jobs): real time in Lambda; the sandbox
    parks the invocation until the drill's clock reaches the moment."""
    return _sleep


def install_sleep(sleep: Callable[[float], None] | None) -> None:
    """Replace the process's wait (sandbox and tests only); ``None`` restores the real one."""
    global _sleep
    _sleep = sleep or system_sleep
