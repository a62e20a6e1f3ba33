"""A stall storm (sandbox/stall_storm.py): 299 jobs stall together and a real hang follows ten
seconds later; Detect Hung Jobs' ticks on the real adapters (moto) start every one once, at most
MAX_STARTS_PER_TICK a tick, oldest first, within 10 ticks, the real hang among them."""

from __future__ import annotations

import pytest

from hyperpod_recovery.steps.detect_hung_jobs import MAX_STARTS_PER_TICK
from sandbox.stall_storm import REAL_JOB, run_storm

pytestmark = pytest.mark.sandbox

STORM = 299


def test_given_a_storm_of_300_stalls_then_every_one_is_started_once_within_10_ticks_oldest_first_the_real_hang_among_them() -> None:
    # Given 299 jobs stalling at once and a real hang ten seconds later; When Detect Hung Jobs ticks for 17 minutes
    run = run_storm(STORM, minutes=17)
    # Then no tick starts more than its bound, and what it leaves is counted as deferred
    for answer in run.ticks:
        assert answer.get("recoveries_started", 0) <= MAX_STARTS_PER_TICK
        assert answer.get("starts_deferred", 0) == max(
            0, answer.get("stall_verdicts", 0) - answer.get("already_started", 0) - MAX_STARTS_PER_TICK
        )
    # And every stalled job was started once, the real hang among them
    assert len(run.started_at) == STORM + 1 and set(run.jobs_started.values()) == {1} and REAL_JOB in run.jobs_started
    # And all within 10 ticks of the first start, the real hang (the youngest stall) last
    first = min(run.started_at.values())
    assert max(run.started_at.values()) - first < 10
    assert run.real_hang_minute() == max(run.started_at.values())
