from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes
from tests.conftest import EVENTS

DrillReports = Callable[[str], dict[str, Any]]


@pytest.fixture(scope="session")
def drill_reports(tmp_path_factory: pytest.TempPathFactory) -> DrillReports:
    """drill_reports("default"): the report of events/drills/default.json as it is, run once for the
    whole session, across pytest-xdist's workers (a drill gives the same report every time,
    tests/statemachine/test_drill_repeatable.py). Each call gets a copy of its own to read."""
    base = tmp_path_factory.getbasetemp()
    # (each xdist worker has its own folder in the session's: the reports go where all can read them)
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "drill-reports"
    shared.mkdir(exist_ok=True)

    def report(name: str) -> dict[str, Any]:
        path = shared / f"{name}.pickle"
        with (shared / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one worker runs it; the others wait for its report
            if not path.exists():
                ran = DrillRunner(load_scenario(EVENTS / "drills" / f"{name}.json"), log_path=shared / f"{name}-lambda.log").run()
                path.with_suffix(".part").write_bytes(pickle.dumps(ran))
                path.with_suffix(".part").replace(path)
        loaded: dict[str, Any] = pickle.loads(path.read_bytes())  # noqa: S301 (written by this session)
        return loaded

    return report


@pytest.fixture
def drill(tmp_path: Path, drill_reports: DrillReports) -> Callable[..., dict[str, Any]]:
    """drill("default") runs events/drills/default.json (once a session: drill_reports); keyword
    arguments change the scenario first (a run of its own)."""

    def run(name: str, **changes: Any) -> dict[str, Any]:
        if not changes:
            return drill_reports(name)
        scenario = with_changes(load_scenario(EVENTS / "drills" / f"{name}.json"), changes)
        return DrillRunner(scenario, log_path=tmp_path / f"{name}-lambda.log").run()

    return run


def only_incident(report: dict[str, Any]) -> dict[str, Any]:
    assert len(report["incidents"]) == 1, [i["id"] for i in report["incidents"]]
    return report["incidents"][0]


def mutating_slurm_commands(report: dict[str, Any]) -> list[str]:
    mutating = ("drain_nodes", "cordon_nodes", "resume_nodes", "resubmit_job")
    return [c["type"] for c in report["slurm"]["commands"] if c["type"] in mutating and not c.get("dry_run")]
