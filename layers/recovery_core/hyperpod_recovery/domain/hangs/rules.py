"""The hang and fail-slow detectors' settings: template.yaml's Hang* parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hyperpod_recovery.models.progress import HEARTBEAT_SECONDS

if TYPE_CHECKING:
    from hyperpod_recovery.models.hangs import RuleMode

# Steps a node must have timed before its pace is trusted (a threshold from one interval would
# make the first slow step after start-up a hang).
MIN_INTERVALS = 3
# A healthy job's reporters show no new step for up to their write gap (observed.py learns it), and
# our read of a write comes up to a read later, after the write's own latency: the threshold stays
# this far above the gap (a 5 s reporter: 20 s; an older one writing every 30 s: 45 s).
WRITE_GAP_HEADROOM_SECONDS = 15.0


@dataclass(frozen=True)
class HangRules:
    # Stall: no progress for longer than max(stall_factor × the job's recent step time, floor).
    stall_mode: RuleMode = "enforce"
    stall_factor: float = 5.0
    stall_floor_seconds: int = 20
    # Before the job's pace is known (its first steps: compilation, data loading, warm-up).
    startup_seconds: int = 600
    # Slow: the recent step time over the job's own baseline by more than this fraction.
    slow_mode: RuleMode = "observe"
    slow_ratio: float = 0.2
    # A node whose reporter has not written for this long is gone (its process or its host).
    heartbeat_stale_seconds: int = 3 * HEARTBEAT_SECONDS
    # A job whose every reporter is gone this long has ended (its end is the job-failed path's).
    job_gone_seconds: int = 900

    def mode_of(self, rule: str) -> RuleMode:
        return self.stall_mode if rule == "stall" else self.slow_mode
