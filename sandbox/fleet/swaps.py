"""What the pipeline's own stops of a job cost (issue 50): a planned swap moves a job off a node at risk
(it ends the copy right after a checkpoint's commit and starts the next elsewhere); a swap on a false
alarm costs the same for nothing; a shrunk copy trains at its nodes' share of the job's pace until it
grows back (another stop and start). A failure's cost is the report's ``hits`` (report.py); these are
the copies that ended with no failure on them.

Per stop, as for a hit: the work since its last checkpoint (thrown away), the time until the next copy
started, and the next copy's restart (modelled); per shrunk copy, the throughput it did not have.
"""

from __future__ import annotations

from typing import Any, Protocol

from sandbox.fleet.plan import FleetPlan
from sandbox.fleet.trace import Precursor
from sandbox.fleet.training import CopyTraining, FleetTraining

# The parts of a job's loss that are the pipeline's own stops, as the report names them.
PLANNED_PARTS = ("swaps", "false_alarms", "shrunk")


class StopSource(Protocol):
    plan: FleetPlan
    fleet_training: FleetTraining | None
    watched_copies: dict[str, Precursor]
    signals_sent: list[Precursor]


def planned_stops(runner: StopSource, end: float) -> list[dict[str, Any]]:
    """Each copy the pipeline ended with no failure on it: what kind of stop, and what it cost."""
    training = runner.fleet_training
    assert training is not None
    jobs = training.orchestrator.jobs
    stops = []
    for copy in training.copies.values():
        if copy.stop is None or copy.hit or copy.stop >= end:
            continue
        later = [
            (jobs[c.copy].started_at - training.epoch).total_seconds()
            for c in training.copies.values()
            if c.root == copy.root and c.copy != copy.copy and jobs[c.copy].started_at is not None
        ]
        restarted_at = min((s for s in later if s >= copy.stop - 1e-6), default=None)
        back = restarted_at if restarted_at is not None else end
        signal = runner.watched_copies.get(copy.copy)
        kind = "swap" if signal is not None and signal.failure is not None else "false_alarm" if signal is not None else "restart"
        stops.append(
            {
                "job": copy.root,
                "copy": copy.copy,
                "kind": kind,
                "fault": f"planned {kind}",
                "remedy": "planned",
                "signal": None if signal is None else signal.signal,
                "signal_at": None if signal is None else round(signal.at, 3),
                "at": round(copy.stop, 3),
                "restarted_at": None if restarted_at is None else round(restarted_at, 3),
                "downtime": round(back - copy.stop, 3),
                "lost_work": round(copy.stop - training.last_checkpoint_before(copy, copy.stop), 3),
                "restart": runner.plan.restart_seconds if restarted_at is not None else 0.0,
            }
        )
    return sorted(stops, key=lambda s: s["at"])


def stop_seconds(stop: dict[str, Any]) -> float:
    return float(stop["lost_work"] + stop["downtime"] + stop["restart"])


def shrunk_seconds(copy: CopyTraining, end: float) -> float:
    """The training time a copy on fewer nodes than its job's did not have: its run x (1 - pace)."""
    if copy.pace >= 1.0:
        return 0.0
    stop = end if copy.stop is None else min(copy.stop, end)
    return max(0.0, stop - copy.start) * (1.0 - copy.pace)


def precursors_summary(runner: Any) -> dict[str, Any]:
    """The trace's precursors and what they did: announced, false, sent, the failures they averted."""
    trace = runner.trace
    spec = trace.spec
    announceable = trace.announceable()
    true = [p for p in trace.precursors if p.failure is not None]
    false = [p for p in trace.precursors if p.failure is None]
    leads = sorted(p.lead_seconds for p in true if p.lead_seconds is not None)
    return {
        "recall": spec.recall,
        "lead_median_seconds": spec.lead_median_seconds,
        "lead_sigma": spec.lead_sigma,
        "false_alarm_rate_per_1000_node_days": spec.false_alarm_rate_per_1000_node_days,
        "announceable_failures": len(announceable),
        "announced": len(true),
        "false_alarms": len(false),
        "precision": round(len(true) / len(trace.precursors), 4) if trace.precursors else None,
        "lead_seconds_p50": leads[len(leads) // 2] if leads else None,
        "signals_sent": len(runner.signals_sent),
        "failures_averted": len(runner.averted),
    }
