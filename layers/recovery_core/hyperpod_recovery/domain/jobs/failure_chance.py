"""Could a job's repeated failures be chance? The restart rules (domain/job_failure.plan_restart) page a
human when a job fails too often, or again from the same checkpoint. On a large job, independent
faults alone come that often: at Llama 3's rate of job-only interruptions (software, NCCL, dependency
faults: about 0.6 per 1,000 node-days) a 2,048-node job meets 1.2 a day, so a fixed budget of 3 a day
pages for nothing every few weeks, and two faults within one checkpoint interval look like a loop.

So a count over the limit is taken for a loop (or a runaway job) only when independent faults at the
job's size would reach it with a chance below ``CHANCE_LIMIT``: Poisson arrivals at
``nodes × rate`` over the span the failures came in. With the rate at 0 every count over the limit is
taken, as before; a small job's counts are never chance (16 nodes: 0.04 % for a repeat within an
hour), so only large jobs are given the room their size explains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

# A count chance would reach once in a thousand such decisions or less is not chance: it pages.
CHANCE_LIMIT = 0.001


# A copy that failed from the step it was restarted from ran at most about a checkpoint interval
# (it wrote no checkpoint): its time to meet a fault by chance is counted up to this much. A longer
# interval is counted short, which only ever makes a repeat look less like chance (as before).
COPY_EXPOSURE_CAP_SECONDS = 3600.0


def exposure_seconds(restarted_at: Sequence[datetime], now: datetime) -> float:
    """The time the copies restarted at ``restarted_at`` (oldest first) ran, each until the next one (the
    last until ``now``), each at most COPY_EXPOSURE_CAP_SECONDS: a copy restarted 14 hours ago that
    never checkpointed was not 14 hours at risk of a chance fault before its first checkpoint."""
    if not restarted_at:
        return 0.0
    ends = [*restarted_at[1:], now]
    ran = [max(0.0, (end - start).total_seconds()) for start, end in zip(restarted_at, ends, strict=True)]
    return sum(min(COPY_EXPOSURE_CAP_SECONDS, seconds) for seconds in ran)


def expected_failures(nodes: int, per_1000_node_days: float, seconds: float) -> float:
    return max(0, nodes) * max(0.0, per_1000_node_days) / 1000.0 * max(0.0, seconds) / 86_400.0


def chance_of_at_least(count: int, mean: float) -> float:
    """P(N >= count) for N ~ Poisson(mean), each term in log space (exp(-mean) alone underflows past a
    mean of ~745: a naive sum would then say every count is certain). Above the mean the tail is
    summed upwards from ``count``, below it the head is taken from 1."""
    if count <= 0:
        return 1.0
    if mean <= 0:
        return 0.0

    def term(k: int) -> float:
        return math.exp(k * math.log(mean) - mean - math.lgamma(k + 1))

    if count > mean:
        total, k = 0.0, count
        while True:
            t = term(k)
            total += t
            # (terms fall by mean/(k+1) < 1 from here: stop once they no longer count)
            if t <= total * 1e-17 or t == 0.0:
                return min(1.0, total)
            k += 1
    return max(0.0, 1.0 - math.fsum(term(k) for k in range(count)))


def duration_words(seconds: float) -> str:
    """``45 s``, ``30 min``, ``14.0 h``: a span as a reason says it."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def is_chance(count: int, nodes: int, per_1000_node_days: float, seconds: float) -> tuple[bool, float]:
    """Whether ``count`` failures of a ``nodes``-node job within ``seconds`` are what independent faults
    bring with a chance of at least CHANCE_LIMIT, and that chance."""
    chance = chance_of_at_least(count, expected_failures(nodes, per_1000_node_days, seconds))
    return chance >= CHANCE_LIMIT, chance
