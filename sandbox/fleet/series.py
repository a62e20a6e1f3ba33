"""The fleet report's time series (its ``series`` section), from figures the report already holds:
its ``hits`` (one per job a failure stopped), its ``jobs`` and the executions' spans. One entry per
hit, per day or per execution start/end: bounded by the run's incidents, never sampled per second.

``downtime``: per hit, when it happened (``at`` seconds into the run, ``day`` = at / 86,400), its
job, fault and remedy, and its downtime (the failure to the job's next copy starting; to the run's
end for a job never running again, ``restarted`` false).

``ettr_per_day``: for each day of the run (the last one may be partial: ``seconds`` is its length),
per job the share of that day the job kept training::

    ettr(job, day) = max(0, seconds(day) - charged(job, day)) / seconds(day)

where ``charged`` is what the whole-run ETTR counts as not kept (sandbox/fleet/report.py), put on
the days as follows:

* downtime: each hit's interval ``at -> restarted_at`` (or the run's end), clipped to the day;
* lost work (the job's last checkpoint to the failure): all on the day of the hit;
* restart (the next copy's start to its first step): all on the day the next copy started;
* checkpoint cost: the job's whole-run total spread evenly over time, ``seconds(day) / run``.

So ``sum(ettr(job, day) * seconds(day)) / run`` is the job's whole-run ETTR (to rounding), unless
a day's charges exceed the day (clamped at 0, as the whole-run figure is: then it is not, and
``clamped_days`` counts such days). ``mean``, ``min`` and ``max`` are over the jobs, per day.

``concurrent_executions``: a step function of the executions running, ``steps`` = [[t seconds,
running from t on], ...] with one step per distinct start or end time, and its ``peak`` and the
first time it was reached (``peak_at``).
"""

from __future__ import annotations

import math
from typing import Any

DAY = 86_400.0


def day_windows(end: float) -> list[tuple[float, float]]:
    """The run's days as [start, end) windows; the last one ends at the run's end."""
    count = max(1, math.ceil(end / DAY - 1e-9))
    return [(k * DAY, min((k + 1) * DAY, end)) for k in range(count)]


def _overlap(a: float, b: float, window: tuple[float, float]) -> float:
    return max(0.0, min(b, window[1]) - max(a, window[0]))


def _day_of(t: float, days: list[tuple[float, float]]) -> int:
    return min(len(days) - 1, max(0, int(t // DAY)))


def downtime_series(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "job": h["job"],
            "fault": h["fault"],
            "remedy": h["remedy"],
            "at": h["at"],
            "day": round(h["at"] / DAY, 4),
            "downtime": h["downtime"],
            "restarted": h["restarted_at"] is not None,
        }
        for h in sorted(hits, key=lambda h: h["at"])
    ]


def ettr_per_day(hits: list[dict[str, Any]], jobs: list[dict[str, Any]], end: float) -> dict[str, Any]:
    days = day_windows(end)
    per_job: dict[str, list[float]] = {}
    clamped = 0
    for job in jobs:
        spread = job["seconds_lost"]["checkpoint_cost"] + job.get("shrunk_pace_seconds", 0.0)
        charged = [spread * (b - a) / end for a, b in days]
        for hit in (h for h in hits if h["job"] == job["job"]):
            back = hit["restarted_at"] if hit["restarted_at"] is not None else end
            for k, window in enumerate(days):
                charged[k] += _overlap(hit["at"], back, window)
            charged[_day_of(hit["at"], days)] += hit["lost_work"]
            if hit["restarted_at"] is not None:
                charged[_day_of(hit["restarted_at"], days)] += hit["restart"]
        shares = []
        for (a, b), lost in zip(days, charged, strict=True):
            clamped += lost > b - a
            shares.append(round(max(0.0, (b - a) - lost) / (b - a), 5))
        per_job[job["job"]] = shares
    columns = list(zip(*per_job.values(), strict=True)) if per_job else []
    return {
        "days": [{"day": k, "start": a, "seconds": b - a} for k, (a, b) in enumerate(days)],
        "jobs": per_job,
        "mean": [round(sum(c) / len(c), 5) for c in columns],
        "min": [min(c) for c in columns],
        "max": [max(c) for c in columns],
        "clamped_days": clamped,
    }


def concurrency_steps(spans: list[tuple[float, float]]) -> dict[str, Any]:
    """Running executions over time: +1 at each start, -1 at each end (an end before a start at the
    same moment: a hand-over is not counted as two running)."""
    changes: dict[float, int] = {}
    for start, finish in spans:
        changes[round(start, 3)] = changes.get(round(start, 3), 0) + 1
        changes[round(finish, 3)] = changes.get(round(finish, 3), 0) - 1
    steps: list[list[float]] = []
    running = peak = 0
    peak_at: float | None = None
    for t in sorted(changes):
        running += changes[t]
        steps.append([t, running])
        if running > peak:
            peak, peak_at = running, t
    return {"steps": steps, "peak": peak, "peak_at": peak_at}


def fleet_series(hits: list[dict[str, Any]], jobs: list[dict[str, Any]], end: float, spans: list[tuple[float, float]]) -> dict[str, Any]:
    return {
        "downtime": downtime_series(hits),
        "ettr_per_day": ettr_per_day(hits, jobs, end),
        "concurrent_executions": concurrency_steps(spans),
    }
