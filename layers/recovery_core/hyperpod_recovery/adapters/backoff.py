"""Asking again for what a call left undone: exponential backoff with full jitter, bounded.

DynamoDB's BatchGetItem answers what it could and leaves the rest as UnprocessedKeys when the table is
throttled or the answer too large; its API reference: "we strongly recommend that you use an
exponential backoff algorithm. If you retry the batch operation immediately, the underlying read or
write requests can still fail due to throttling on the individual tables." Full jitter (AWS
Architecture Blog, "Exponential Backoff And Jitter"): before retry n, wait a uniform draw in
[0, min(cap, base * 2**n)]. The retries and the total wait are both bounded, so a step asking keeps
its time for the rest of its work and fails with a named error its state retries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    base_seconds: float
    cap_seconds: float
    retries: int
    total_seconds: float

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry ``retry`` (0 for the first): doubles, up to the cap."""
        return min(self.cap_seconds, self.base_seconds * float(2**retry))

    def delays(self, draw: Callable[[], float]) -> Iterator[float]:
        """The waits before each retry, ``draw()`` (in [0, 1]) of its ceiling; it ends after
        ``retries`` waits, or once they add up to ``total_seconds`` (the last is cut to it)."""
        spent = 0.0
        for retry in range(self.retries):
            left = self.total_seconds - spent
            if left <= 0:
                return
            delay = min(min(max(draw(), 0.0), 1.0) * self.ceiling(retry), left)
            spent += delay
            yield delay


# BatchGetItem's unprocessed keys: 50 ms doubling to 1 s (botocore's legacy retry mode starts DynamoDB
# at 50 ms too), 7 retries, at most 3 s of waiting in one call: a few of a function's 45 seconds.
BATCH_GET_BACKOFF = Backoff(base_seconds=0.05, cap_seconds=1.0, retries=7, total_seconds=3.0)
