"""What the fleet's jobs report to the progress table, and which of the hang detector's ticks can
find anything (issue 34: hangs in the fleet drill).

Every running copy reports one item per node (hyperpod_recovery.checkpointing.Progress), as
sandbox/progress.py does for a drill, but from the fleet's training (sandbox/fleet/training.py):
a copy steps every ``step_seconds`` from its training start (its start plus the restart time),
from the step it resumed at, until a fault stops it. What a stopped copy's reporters say is the
fault's:

* a hang (a rank stuck where no watchdog ends it): every reporter goes on heartbeating (its thread
  runs while the ranks wait in a collective), no node steps, and the hang's node is one step behind
  (it stopped first): the detector's suspect;
* a node's hardware fault, or a job-only fault: the faulty node's process died, so its reporter is
  silent from then on; the other nodes' ranks wait in a collective, heartbeating, until the
  orchestrator ends the job (ASSUMPTION: a dead rank leaves the others in NCCL until its watchdog or
  a cancel ends them, which is what the NCCL watchdog's 10 minutes are; a job-only crash that Slurm
  ends at once leaves no time to see it).

A tick of Detect Hung Jobs reads the whole table and acts on a verdict only. Over 54 days it ticks
77,760 times; the runner runs a tick for real only when some copy's reports give a verdict
(``verdicts_at``, the detector's own pure rule, domain/hangs/detect.py), and counts the others at
the calls a quiet tick was measured to make. A copy that trains undisturbed has every node alike, so
one node's report decides it (the detector's medians over identical nodes are that node's); a
stopped copy is judged on all of its reports. Rows are written only for a real tick, straight into
the table (they are the training nodes' writes, not the pipeline's calls); a copy that no longer
runs has its rows removed (its reporters are silent: rows whose every heartbeat is stale give no
verdict, so a removed row and a silent one read alike, and the table stays one run's size).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hyperpod_recovery.domain.hangs.detect import job_verdicts
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.models.hangs import HangVerdict
from hyperpod_recovery.models.progress import HEARTBEAT_SECONDS, RECENT_INTERVALS, ProgressReport
from sandbox.fleet.training import CopyTraining, FleetTraining

# How long the drill's first jobs had run before it started (their pace long established).
STARTED_BEFORE_SECONDS = 3600.0


def rules_of(template: dict) -> HangRules:
    """The detector's rules as the stack is deployed with template.yaml's defaults (the fleet sets no Hang* parameter)."""
    default = {name: spec.get("Default") for name, spec in template["Parameters"].items()}
    return HangRules(
        stall_mode=default["HangStallMode"],
        stall_factor=float(default["HangStallFactor"]),
        stall_floor_seconds=int(default["HangStallFloorSeconds"]),
        startup_seconds=int(default["HangStartupSeconds"]),
        slow_mode=default["HangSlowMode"],
        slow_ratio=float(default["HangSlowRatio"]),
    )


@dataclass(frozen=True)
class Stop:
    """How a fault stopped a copy: when, whose reporters died with it, which node stopped first."""

    at: float
    dead: frozenset[str] = frozenset()
    behind: str | None = None


@dataclass
class FleetProgress:
    training: FleetTraining
    epoch: datetime
    step_seconds: float
    rules: HangRules
    cluster: str
    stops: dict[str, Stop] = field(default_factory=dict)  # by copy (its Slurm job id)

    def stopped(self, copy: CopyTraining, stop: Stop) -> None:
        self.stops.setdefault(copy.copy, stop)

    def running_copies(self) -> list[CopyTraining]:
        """Copies Slurm runs now: their reporters write (a stopped copy's heartbeat on until its job ends)."""
        slurm = self.training.slurm
        return [c for c in self.training.copies.values() if slurm.jobs[c.copy].state == "RUNNING"]

    def _started_at(self, copy: CopyTraining) -> float:
        job = self.training.slurm.jobs[copy.copy]
        if job.started_at is None or copy.copy == copy.root:
            return -STARTED_BEFORE_SECONDS
        return (job.started_at - self.epoch).total_seconds()

    def reports(self, copy: CopyTraining, moment: float, nodes: list[str] | None = None) -> list[ProgressReport]:
        """Each node's report as of ``moment`` (its last heartbeat's write), for ``nodes`` (default: all the copy's)."""
        job = self.training.slurm.jobs[copy.copy]
        written = moment - moment % HEARTBEAT_SECONDS
        stop = self.stops.get(copy.copy)
        end = written if stop is None else min(written, stop.at)
        pace = self.step_seconds
        steps = max(0, math.floor((end - copy.start) / pace)) if end > copy.start else 0
        started_at = self._started_at(copy)
        # (the first copy had run before the drill: its baseline is long established)
        seen = steps + (int(STARTED_BEFORE_SECONDS / pace) if copy.copy == copy.root else 0)
        # (before its first step, a restarted copy's reporter has only its start to say)
        step_at = copy.start + steps * pace if steps else (copy.start if copy.copy == copy.root else started_at)
        reports = []
        for node in nodes if nodes is not None else job.nodes:
            node_steps, node_step_at, beat = steps, step_at, written
            if stop is not None and node == stop.behind and node_steps > 0:
                node_steps, node_step_at = node_steps - 1, node_step_at - pace
            if stop is not None and node in stop.dead:
                beat = min(written, stop.at - stop.at % HEARTBEAT_SECONDS)
            reports.append(
                ProgressReport(
                    job=copy.copy,
                    node=node,
                    ranks=8,
                    step=copy.from_step + node_steps,
                    step_at=self.epoch + timedelta(seconds=node_step_at),
                    heartbeat_at=self.epoch + timedelta(seconds=beat),
                    started_at=self.epoch + timedelta(seconds=started_at),
                    intervals_seen=seen,
                    step_seconds=pace if seen >= 1 else None,
                    baseline_step_seconds=pace if seen >= 2 * RECENT_INTERVALS else None,
                    wait_seconds=0.05 * pace if seen >= 1 else None,
                )
            )
        return reports

    def verdicts_at(self, moment: float) -> list[HangVerdict]:
        """The verdicts a tick at ``moment`` would reach, job by job: the detector's own rule
        (job_verdicts) on what the table would hold. An undisturbed copy is judged on one node's
        report (its nodes are alike: the same medians, the same last progress)."""
        now = self.epoch + timedelta(seconds=moment)
        found: list[HangVerdict] = []
        for copy in self.running_copies():
            nodes = None if copy.copy in self.stops else self.training.slurm.jobs[copy.copy].nodes[:1]
            found += job_verdicts(self.cluster, copy.copy, self.reports(copy, moment, nodes), self.rules, now)
        return found

    def items(self, moment: float, item_of: Callable[[ProgressReport], dict]) -> tuple[list[dict], set[str]]:
        """Every running copy's items as of ``moment``, and the copies (their Slurm job ids) they are of."""
        items: list[dict] = []
        copies: set[str] = set()
        for copy in self.running_copies():
            items += [item_of(r) for r in self.reports(copy, moment)]
            copies.add(copy.copy)
        return items, copies
