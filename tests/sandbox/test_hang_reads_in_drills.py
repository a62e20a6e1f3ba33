"""The sandbox models Detect Hung Jobs' sub-minute reads and the reporters' write rule truthfully in
virtual time (sandbox/runner/jobs.py, sandbox/progress.py): what bench/hang_detection.py measures."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hyperpod_recovery.models.progress import PROGRESS_IDLE_WRITE_SECONDS, PROGRESS_WRITE_SECONDS
from sandbox.progress import ProgressSimulator
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes

ROOT = Path(__file__).resolve().parents[2]
EPOCH = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def _scenario(step_seconds: float, hang_at: float, write_seconds: float = PROGRESS_WRITE_SECONDS, phase: float = 0.0):
    base = load_scenario(ROOT / "events" / "drills" / "job-hang.json")
    job = {**base.jobs[0].model_dump(exclude_unset=True)}
    job["progress"] = {"step_seconds": step_seconds, "step": 2050, "write_seconds": write_seconds, "step_phase_seconds": phase}
    hang = {**next(f for f in base.faults if f.kind == "hang").model_dump(exclude_unset=True), "at": hang_at}
    return with_changes(base, {"expect": None, "jobs": [job], "faults": [hang]})


def _rows(scenario, t: float):
    nodes = ["ip-10-2-0-1", "ip-10-2-0-7"]  # (the second: the hang's node, workers:3)
    simulator = ProgressSimulator(scenario, nodes_of=lambda job: nodes, name_of=lambda ref: nodes[1], epoch=EPOCH)
    return {r.node: r for r in simulator.reports(t, lambda job: True)}


def test_given_2s_steps_then_the_table_shows_a_step_written_within_a_write_interval_of_it() -> None:
    scenario = _scenario(2.0, 300.0, phase=0.7)
    for t in (100.0, 101.3, 137.9, 222.2):
        row = _rows(scenario, t)["ip-10-2-0-1"]
        age = t - (row.step_at - EPOCH).total_seconds()
        assert age <= PROGRESS_WRITE_SECONDS + 2.0, (t, age)


def test_given_a_hang_then_the_same_step_is_written_again_every_10s_and_the_hung_node_never_shows_the_others_step() -> None:
    scenario = _scenario(2.0, 300.0)
    before = _rows(scenario, 299.0)
    later = [_rows(scenario, 300.0 + s) for s in (12.0, 23.0, 34.0)]
    heartbeats = [(r["ip-10-2-0-1"].heartbeat_at - EPOCH).total_seconds() for r in later]
    # Then its rows keep the old step, their heartbeats 10 s apart (a write that shows the job still)
    assert {r["ip-10-2-0-1"].step for r in later} == {later[0]["ip-10-2-0-1"].step}
    assert [b - a for a, b in itertools.pairwise(heartbeats)] == [PROGRESS_IDLE_WRITE_SECONDS] * 2
    # And the node that stopped first is a step behind, never having shown a step it then took back
    assert later[0]["ip-10-2-0-7"].step == later[0]["ip-10-2-0-1"].step - 1
    assert before["ip-10-2-0-7"].step <= later[0]["ip-10-2-0-7"].step


@pytest.mark.parametrize(("step_seconds", "hang_at", "phase"), [(2.0, 337.1, 0.76), (5.0, 314.2, 3.8)])
def test_given_a_hang_of_a_fast_job_then_the_detector_reads_every_5s_and_one_verdict_comes_within_30s(
    step_seconds: float, hang_at: float, phase: float, tmp_path: Path
) -> None:
    # (a log of its own: the report reads the drill's log, and two workers may run these at once)
    report = DrillRunner(_scenario(step_seconds, hang_at, phase=phase), log_path=tmp_path / "lambda.log").run()
    ticks = report["hangs"]["ticks"]
    # Then each minute's invocation read twelve times (every 5 s for 55 s)
    assert {t["answer"]["reads"] for t in ticks} == {12}
    # And one stall verdict, one recovery, within 30 s of the job's true last step
    (verdict,) = report["hangs"]["verdicts"]
    last = math.floor((hang_at + phase) / step_seconds) * step_seconds - phase
    assert verdict["rule"] == "stall" and verdict["decided_at"] - last <= 30.0
    hung = [i["id"] for i in report["incidents"] if "-hung-" in i["id"] and not i["id"].endswith("-nodes")]
    assert hung == [verdict["action"].removeprefix("started job recovery ")]
