from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes
from tests.conftest import EVENTS


@pytest.fixture
def drill(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """drill("default") runs events/drills/default.json; keyword arguments change the scenario first."""

    def run(name: str, **changes: Any) -> dict[str, Any]:
        scenario = load_scenario(EVENTS / "drills" / f"{name}.json")
        if changes:
            scenario = with_changes(scenario, changes)
        return DrillRunner(scenario, log_path=tmp_path / f"{name}-lambda.log").run()

    return run


def only_incident(report: dict[str, Any]) -> dict[str, Any]:
    assert len(report["incidents"]) == 1, [i["id"] for i in report["incidents"]]
    return report["incidents"][0]


def mutating_slurm_commands(report: dict[str, Any]) -> list[str]:
    mutating = ("drain_nodes", "cordon_nodes", "resume_nodes", "resubmit_job")
    return [c["type"] for c in report["slurm"]["commands"] if c["type"] in mutating and not c.get("dry_run")]
