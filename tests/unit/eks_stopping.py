"""The EKS tests' clock, and a re-creation retried the way the workflow retries it.

A stopped job's pods are Terminating through their grace period (sandbox/kube/), and its copy is
made only once they are gone: Resubmit Job answers OldCopyStillStopping until then, and the workflow
tries it again a while later (its Retry on that error). ``until_stopped`` does the same on a virtual
clock, so a test states what the workflow sees at the end."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from hyperpod_recovery.errors import OldCopyStillStopping

T = TypeVar("T")


class Clock:
    """A virtual now the fake API server and the orchestrator share."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def until_stopped(run: Callable[[], T], clock: Clock, *, step: float = 15, attempts: int = 10) -> tuple[T, int]:
    """``run``'s result once the old copy is gone, and how many times it answered OldCopyStillStopping
    first (the clock moved on ``step`` seconds after each)."""
    for waited in range(attempts):
        try:
            return run(), waited
        except OldCopyStillStopping:
            clock.advance(step)
    raise AssertionError(f"the old copy was still stopping after {attempts} tries")
