"""What Detect Hung Jobs remembers of a job between its ticks (docs/progress.md, "What is trusted").

A progress row's times are its writer's clock, and any process on the cluster can write one. The
detector dates everything by its own reads instead: per node, the values it last saw and the tick
at which they last changed; per job, the pace its own nodes reported (a forged fast row cannot lower
the threshold below it), the episodes it started (a started episode is not started again), and the
stalls that cleared by themselves (damping). One ledger item per job, expiring a day after its last
tick (adapters/progress_memory.py).
"""

from datetime import UTC, datetime

from pydantic import ConfigDict, Field

from hyperpod_recovery.models.common import Model, Timestamp

# Paces a job remembers, one a minute at most (an hour): the threshold's floor is their largest.
PACE_TICKS = 60
PACE_EVERY_SECONDS = 60
# Started episodes and self-cleared stalls remembered per job (the newest).
STARTED_KEPT = 8
CLEARED_KEPT = 32


class Sighting(Model):
    """One node's row as the detector last read it: the writer's values, and our ticks (epoch
    seconds) at which they last changed. Short field names: a 2,048-node job's item stays well
    under DynamoDB's 400 KB."""

    model_config = ConfigDict(extra="forbid")
    s: int = Field(ge=0)  # step
    st: int  # the writer's step stamp, ms (a change is a new step or the same step rewritten)
    hb: int  # the writer's heartbeat stamp, ms
    pe: int = 0  # the writer's pause_ended_at stamp, ms (0: none)
    pl: int = 0  # the declared pause's limit (s) in force when read (0: no pause)
    mv: int  # our tick at which its progress last moved (its step changed, or a return from a pause)
    hd: int  # our tick at which its heartbeat last changed (the reporter alive)
    rs: int = -1  # the step at which a return from a pause last counted as progress
    sk: int = 0  # the writer's clock minus ours at the last heartbeat change (s; 0 within reason)
    wg: int = 0  # ms between the writer's last two writes that brought a new step (its clock; 0: not seen yet)


class Started(Model):
    model_config = ConfigDict(extra="forbid")
    episode: int  # the episode's last progress (our clock, epoch seconds)
    execution: str = Field(max_length=80)
    step: int = Field(ge=0)  # the job's newest step when it stalled
    cleared: bool = False  # the job stepped past it since, in the same run (it cleared by itself)


class JobMemory(Model):
    model_config = ConfigDict(extra="forbid")
    job: str
    seen_at: Timestamp
    nodes: dict[str, Sighting] = Field(default_factory=dict)
    paces: list[float] = Field(default_factory=list, max_length=PACE_TICKS)
    paced_at: int = 0  # our read (epoch s) that last added a pace (reads come every few seconds)
    started: list[Started] = Field(default_factory=list, max_length=STARTED_KEPT)
    cleared_at: list[int] = Field(default_factory=list, max_length=CLEARED_KEPT)  # our ticks, epoch s
    # Damping: when the job's self-clearing stalls were last told (one record), and those counted since.
    told_at: int = 0
    damped: int = 0
    damped_episode: int = 0  # the last episode counted as damped (each is counted once)

    def started_episode(self, episode: datetime) -> Started | None:
        at = int(episode.timestamp())
        return next((s for s in self.started if s.episode == at), None)


def epoch_ms(moment: datetime | None) -> int:
    return int(moment.timestamp() * 1000) if moment is not None else 0


def from_epoch(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
