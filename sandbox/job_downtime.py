"""How long a training job was down, as its users measure it: the union of the moments when no copy of
it ran, from the first fault that hit it.

A job's lineage is the job and each copy made of it (a resubmission, a re-created object). Each copy
ran from when it started until it ended or until the first fault that hit it (a fault on one of the
nodes it ran on then, or the job's own failure): from that moment it was not training, even if Slurm
still called it RUNNING. Time after the first fault counts as down unless some copy was running, so a
second fault counts only the gap it caused, never the run between the two faults.

Pure: virtual milliseconds in, intervals out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

Interval = tuple[int, int]  # [start, end) in virtual milliseconds


@dataclass(frozen=True)
class CopyRun:
    """One copy's run: from ``start`` to ``end`` (its end, or the drill's), and the faults that hit it."""

    start: int
    end: int
    hits: Sequence[int] = field(default_factory=tuple)

    def training(self) -> Interval:
        """The part of the run before the first fault that hit it."""
        cut = min((hit for hit in self.hits if self.start <= hit < self.end), default=self.end)
        return (self.start, cut)


def union(intervals: Sequence[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def down_intervals(runs: Sequence[CopyRun], faults: Sequence[int], end: int) -> list[Interval]:
    """The intervals of [first fault, end) during which no copy of the job was training."""
    if not faults:
        return []
    down: list[Interval] = []
    cursor = min(faults)
    for start, stop in union([run.training() for run in runs]):
        if stop <= cursor:
            continue
        if start > cursor:
            down.append((cursor, min(start, end)))
        cursor = max(cursor, stop)
        if cursor >= end:
            break
    if cursor < end:
        down.append((cursor, end))
    return [(s, e) for s, e in down if e > s]


def total(intervals: Sequence[Interval]) -> int:
    return sum(end - start for start, end in intervals)


def node_time_lost(runs: Sequence[tuple[CopyRun, int]], faults: Sequence[int], end: int, full: int) -> int:
    """Node-milliseconds the job lost from its first fault to ``end``: each moment counts ``full`` less
    the nodes of the copy training then (all of them while none is; the difference while a copy runs
    shrunk). ``runs`` pairs each copy's run with its node count."""
    if not faults:
        return 0
    start = min(faults)
    moments = sorted({start, end, *(t for run, _ in runs for t in run.training() if start < t < end)})
    lost = 0
    for left, right in pairwise(moments):
        training = [nodes for run, nodes in runs if run.training()[0] <= left and right <= run.training()[1]]
        lost += (right - left) * (full - min(full, max(training, default=0)))
    return lost
