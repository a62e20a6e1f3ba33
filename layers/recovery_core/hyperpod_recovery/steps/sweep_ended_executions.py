"""Sweep Ended Executions (scheduled, every 5 minutes): every end of an execution is recorded,
released and notified, whether or not its status-change event arrives.

Reconcile Execution hears of an end through Step Functions' "Execution Status Change" event, which
EventBridge delivers "best effort" (EventBridge events reference, Step Functions events): one may
never arrive, and the incident would hold its node locks, its places under the cluster cap and its
job claims until they expire, with nobody told. This sweep asks Step Functions instead
(ListExecutions, by status, of both workflows) for the executions that ended FAILED, TIMED_OUT or
ABORTED since its last sweep, and hands each to the same reconcile the event takes. Both paths are
idempotent with each other: an end already settled is skipped without a read of its history, and
its one notification is claimed in the ledger before it is sent.

The sweep's mark (``CLUSTER#<cluster>`` / ``ENDS_SWEPT``) moves only past what it finished: an end
it could not finish, or had no time left for, is where the next sweep starts again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hyperpod_recovery.observability import logger
from hyperpod_recovery.steps.ends import EndContext, Reconciled, end_settled, reconcile_end

if TYPE_CHECKING:
    from hyperpod_recovery.ports import Marks

# ListExecutions "is eventually consistent. The results are best effort and may not reflect very
# recent updates and changes" (ListExecutions, API reference): each sweep looks this far back before
# its mark again, so an end listed late is in the next window.
OVERLAP = timedelta(minutes=10)
# The first sweep (no mark yet) looks back this far.
FIRST_LOOKBACK = timedelta(hours=1)
# Time kept back from the function's timeout before another end is started: a reconcile reads the
# ledger, the execution's history and SNS, each call within its own budget.
RESERVE = timedelta(seconds=60)
# An end younger than this is its event's (delivered within seconds when it is delivered): the next
# sweep takes it if it is still unsettled, and two paths seldom work on one end at once.
GRACE = timedelta(minutes=1)


@dataclass
class Swept:
    found: int = 0
    recorded: list[Reconciled] = field(default_factory=list)  # ends no other path had recorded: their event never came (or not yet)
    settled: int = 0  # ends the event path had reached, finished here if it had not
    skipped: int = 0  # ends already settled (nothing read, nothing written), or no longer kept by Step Functions
    unfinished: list[str] = field(default_factory=list)  # failed, or no time left: the next sweep starts at the first of them
    deferred: list[str] = field(default_factory=list)  # ended less than GRACE ago: left to their event, and to the next sweep
    until: datetime | None = None  # the mark saved: every end before it (less OVERLAP) is settled

    @property
    def complete(self) -> bool:
        return not self.unfinished


def sweep_ended_executions(
    *, context: EndContext, marks: Marks, clock: Callable[[], datetime], longest_run: timedelta, time_left: Callable[[], timedelta]
) -> Swept:
    """``marks``: where the last sweep stopped; ``longest_run``: the longest either workflow can run
    (domain/policy/limits.py), which bounds how far back the listing reads; ``time_left``: the
    function's remaining time."""
    history, ledger = context.history, context.ledger
    swept, now = Swept(), clock()
    since = (marks.ends_swept_until(context.cluster) or now - FIRST_LOOKBACK) - OVERLAP
    listed = sorted(history.closed_since(since, started_after=since - longest_run), key=lambda e: (e.stopped_at, e.name))
    ended = [e for e in listed if e.stopped_at <= now - GRACE]
    swept.found, swept.deferred = len(listed), [e.name for e in listed if e.stopped_at > now - GRACE]
    unfinished_since = min((e.stopped_at for e in listed if e.name in swept.deferred), default=None)
    for index, end in enumerate(ended):
        if time_left() < RESERVE:
            swept.unfinished += [e.name for e in ended[index:]]
            unfinished_since = end.stopped_at if unfinished_since is None else min(unfinished_since, end.stopped_at)
            logger.warning("no time left to sweep every end: the next sweep goes on", extra={"left": len(ended) - index})
            break
        try:
            detail = None if end_settled(ledger, end.name) else history.describe_end(end.execution_arn)
            if detail is None:
                swept.skipped += 1
                continue
            result = reconcile_end(detail, context, clock())
        except Exception:  # one end's failure is that end's: the others are swept, and the mark stays before it
            logger.exception("could not reconcile an ended execution", extra={"incident": end.name, "status": end.status})
            swept.unfinished.append(end.name)
            unfinished_since = end.stopped_at if unfinished_since is None else min(unfinished_since, end.stopped_at)
            continue
        if result.action == "recorded":
            swept.recorded.append(result)
            logger.warning(
                "an ended execution was recorded by the sweep: its status-change event never came, or not yet",
                extra={"incident": end.name, "status": end.status, "outcome": result.outcome},
            )
        else:
            swept.settled += 1
    swept.until = min(now, unfinished_since) if unfinished_since is not None else now
    marks.save_ends_swept_until(context.cluster, swept.until)
    return swept
