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
stopped copy is judged on all of its reports. A copy that ended keeps its last rows (its reporters
stopped writing then): their heartbeats read as alive for ``heartbeat_stale_seconds``, so a stalled
copy's can still give a stall verdict then, as a real table's would; after that they give none
(every reporter silent), and they are removed (a silent row and an absent one then read alike: the
table stays one run's size; the scan's read units reported are a lower bound of a live table's,
which keeps them to TTL). Rows are written only for a tick run, straight into the table (they are
the training nodes' writes, not the pipeline's calls).
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
    stops: dict[str, Stop] = field(default_factory=dict)  # by copy (a Slurm job id, an EKS job object's uid)
    _live: dict[str, CopyTraining] = field(default_factory=dict)
    _seen: int = 0

    def stopped(self, copy: CopyTraining, stop: Stop) -> None:
        self.stops.setdefault(copy.copy, stop)

    def reporting_copies(self, moment: float) -> list[tuple[CopyTraining, float | None]]:
        """Each copy whose rows can matter at ``moment``, with when its reporters stopped writing (None:
        they write still). A copy its orchestrator runs writes; one that ended left its last rows, whose
        heartbeats read as alive for ``heartbeat_stale_seconds`` more: a stalled copy's can still give a
        stall verdict then, and after that none (every reporter silent: not a hang of ours)."""
        copies = self.training.orchestrator.jobs
        found: list[tuple[CopyTraining, float | None]] = []
        for copy in self._recent(moment):
            job = copies[copy.copy]
            if job.state == "RUNNING":
                found.append((copy, None))
                continue
            ended = job.ended_at or job.completing_until
            if ended is None:
                continue  # (its processes never end: its reporters' threads with them; silent from its cancel)
            end = (ended - self.epoch).total_seconds()
            if end <= moment <= end + self._silent_rows_matter:
                found.append((copy, end))
        return found

    @property
    def _silent_rows_matter(self) -> float:
        return float(self.rules.heartbeat_stale_seconds + HEARTBEAT_SECONDS)

    def _recent(self, moment: float) -> list[CopyTraining]:
        """Copies running, or ended recently enough to matter (those ended an hour before ``moment`` are dropped for good)."""
        if len(self.training.copies) > self._seen:
            copies = list(self.training.copies.values())
            for copy in copies[self._seen :]:
                self._live[copy.copy] = copy
            self._seen = len(copies)
        copies = self.training.orchestrator.jobs
        for key in list(self._live):
            job = copies[key]
            ended = job.ended_at or job.completing_until
            if job.state != "RUNNING" and ended is not None and (ended - self.epoch).total_seconds() + 3600 < moment:
                del self._live[key]
        return list(self._live.values())

    def _started_at(self, copy: CopyTraining) -> float:
        job = self.training.orchestrator.jobs[copy.copy]
        if job.started_at is None or copy.original:
            return -STARTED_BEFORE_SECONDS
        return (job.started_at - self.epoch).total_seconds()

    def reports(
        self, copy: CopyTraining, moment: float, nodes: list[str] | None = None, ended: float | None = None
    ) -> list[ProgressReport]:
        """Each node's report as of ``moment`` (its last heartbeat's write; before ``ended``, when its
        reporters stopped writing), for ``nodes`` (default: all the copy's)."""
        job = self.training.orchestrator.jobs[copy.copy]
        key = self.training.orchestrator.report_key(copy.copy)
        written = moment - moment % HEARTBEAT_SECONDS
        if ended is not None:
            written = min(written, ended - ended % HEARTBEAT_SECONDS)
        stop = self.stops.get(copy.copy)
        if stop is not None and stop.at > written:
            stop = None  # (not yet, as of that write)
        end = written if stop is None else min(written, stop.at)
        pace = self.step_seconds
        steps = max(0, math.floor((end - copy.start) / pace)) if end > copy.start else 0
        started_at = self._started_at(copy)
        # (the first copy had run before the drill: its baseline is long established)
        seen = steps + (int(STARTED_BEFORE_SECONDS / pace) if copy.original else 0)
        # (before its first step, a restarted copy's reporter has only its start to say)
        step_at = copy.start + steps * pace if steps else (copy.start if copy.original else started_at)
        reports = []
        for node in nodes if nodes is not None else job.nodes:
            node_steps, node_step_at, beat = steps, step_at, written
            if stop is not None and node == stop.behind and node_steps > 0:
                node_steps, node_step_at = node_steps - 1, node_step_at - pace
            if stop is not None and node in stop.dead:
                beat = min(written, stop.at - stop.at % HEARTBEAT_SECONDS)
            reports.append(
                ProgressReport(
                    job=key,
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
        for copy, ended in self.reporting_copies(moment):
            undisturbed = copy.copy not in self.stops and ended is None
            nodes = self.training.orchestrator.jobs[copy.copy].nodes[:1] if undisturbed else None
            key = self.training.orchestrator.report_key(copy.copy)
            found += job_verdicts(self.cluster, key, self.reports(copy, moment, nodes, ended), self.rules, now)
        return found

    def items(self, moment: float, item_of: Callable[[ProgressReport], dict]) -> dict[str, list[dict]]:
        """The items of every copy whose rows can matter at ``moment``, by copy (a Slurm job id, an EKS job's uid)."""
        return {copy.copy: [item_of(r) for r in self.reports(copy, moment, ended=ended)] for copy, ended in self.reporting_copies(moment)}
