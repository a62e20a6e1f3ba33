"""Damping a job whose stalls keep clearing by themselves. Pure (docs/progress.md).

Each enforced stall starts a JobRecovery, and each recovery is an incident, its evidence and a
message, even when Classify Failure finds the job moving again (``recovered_by_itself``). A job
that stalls for a few minutes every few minutes (a slow file system, a flapping link) would send
dozens of those in an hour. Once DAMP_AFTER of a job's started stalls cleared by themselves within
DAMPING_WINDOW_SECONDS, its next stall is acted on only when it lasts its threshold plus a backoff
that doubles with each further self-cleared stall (BACKOFF_BASE_SECONDS up to BACKOFF_MAX_SECONDS):
a real hang is still started, late by at most the backoff. A stall damped is told once (its verdict
recorded, with the count), the later ones only counted, and the recovery that starts at last says
how many were damped. The lineage is the job's key: a job we resubmit or re-create reports under a
new one, and a job restarted from a checkpoint (its steps go backwards) starts its memory again.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from hyperpod_recovery.models.progress_memory import JobMemory, from_epoch

if TYPE_CHECKING:
    from hyperpod_recovery.models.hangs import HangVerdict

DAMPING_WINDOW_SECONDS = 2 * 3600
DAMP_AFTER = 2
BACKOFF_BASE_SECONDS = 300
BACKOFF_MAX_SECONDS = 3600

Damping = Literal["act", "tell", "quiet"]


def cleared_recently(memory: JobMemory, now: datetime) -> int:
    since = now.timestamp() - DAMPING_WINDOW_SECONDS
    return sum(1 for at in memory.cleared_at if at >= since)


def backoff_seconds(memory: JobMemory, now: datetime) -> int:
    cleared = cleared_recently(memory, now)
    if cleared < DAMP_AFTER:
        return 0
    return int(min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (cleared - DAMP_AFTER)))


def damp(memory: JobMemory, verdict: HangVerdict, now: datetime) -> tuple[Damping, JobMemory]:
    """Whether to act on an enforced stall, tell it once as damped, or only count it."""
    backoff = backoff_seconds(memory, now)
    if verdict.rule != "stall" or verdict.mode != "enforce" or not backoff:
        return "act", memory
    if verdict.observed_seconds > verdict.threshold_seconds + backoff:
        return "act", memory
    episode = int(verdict.episode_at.timestamp())
    if memory.damped_episode == episode:
        return "quiet", memory
    if memory.told_at >= now.timestamp() - DAMPING_WINDOW_SECONDS:
        return "quiet", memory.model_copy(update={"damped": memory.damped + 1, "damped_episode": episode})
    return "tell", memory.model_copy(update={"told_at": int(now.timestamp()), "damped": 1, "damped_episode": episode})


def damped_action(memory: JobMemory, verdict: HangVerdict, now: datetime) -> str:
    """The told verdict's recorded action: what was not done, the count, and the backoff."""
    cleared = cleared_recently(memory, now)
    backoff = backoff_seconds(memory, now)
    return (
        f"damped: {cleared} stalls of job {verdict.job} cleared by themselves in the last {DAMPING_WINDOW_SECONDS // 3600} h; "
        f"a stall of it is acted on only past its threshold and {backoff} s more now, "
        "and the ones in between are counted, not told"
    )


def after_damping(memory: JobMemory, now: datetime) -> str:
    """What the recovery that starts at last says of the stalls damped before it ('' when none)."""
    if not memory.damped or memory.told_at < now.timestamp() - DAMPING_WINDOW_SECONDS:
        return ""
    return (
        f" (after {cleared_recently(memory, now)} stalls that cleared by themselves, "
        f"{memory.damped} damped since {from_epoch(memory.told_at):%H:%M} UTC)"
    )
