"""Golden drill reports: every simulated drill's report, kept in tests/golden/drills/, so a change meant
to keep behaviour (a refactor, a speed-up) is checked to keep it: outcomes, timelines, resubmissions,
notifications, metrics and every API call count, to the millisecond of virtual time.

``python tools/golden_reports.py`` (``make golden``) rewrites them after a change meant to alter
behaviour; the diff in review then shows what changed. Reports are deterministic (one virtual clock,
seeded jitter, executions run one at a time: tests/statemachine/test_drill_repeatable.py), apart from
the fields below, which measure the machine rather than the pipeline.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
DRILLS = ROOT / "events" / "drills"
GOLDEN = ROOT / "tests" / "golden" / "drills"
# Real time spent on this machine: differs run to run. Fields that name modules would go here too.
NOT_COMPARED = frozenset({"wall_seconds"})
# The real-Slurm drill needs a slurmctld (tests/slurm/test_real_slurm_drill.py runs it).
SIMULATED_ONLY = frozenset({"real-slurm"})


def scenarios() -> list[str]:
    return sorted(path.stem for path in DRILLS.glob("*.json") if path.stem not in SIMULATED_ONLY)


def comparable_report(scenario: str) -> dict[str, Any]:
    """The drill's report as JSON would carry it (dates as text), without the machine's fields."""
    with tempfile.TemporaryDirectory() as tmp:
        return comparable(DrillRunner(load_scenario(DRILLS / f"{scenario}.json"), log_path=Path(tmp) / "lambda.log").run())


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A drill's report as JSON would carry it (dates as text), without the machine's fields."""
    kept = {field: value for field, value in report.items() if field not in NOT_COMPARED}
    loaded: dict[str, Any] = json.loads(json.dumps(kept, default=str))
    return loaded


def golden_text(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=1, sort_keys=True) + "\n"


def golden_report(scenario: str) -> dict[str, Any] | None:
    path = GOLDEN / f"{scenario}.json"
    return json.loads(path.read_text()) if path.exists() else None


def write_golden(scenario: str) -> Path:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    path = GOLDEN / f"{scenario}.json"
    path.write_text(golden_text(comparable_report(scenario)))
    return path
