"""Each of issue 47's CLI rules once as a user types it (a subprocess, no terminal): an id refused in
one line, a --json document of its schema, a tiny rate planned, a nan refused by the bench."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from hyperpod_recovery_cli.cli_json import validate

ROOT = Path(__file__).resolve().parents[2]


def typed(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_verdict_id_with_a_twelve_digit_epoch_is_one_line_and_exit_2() -> None:
    done = typed("-m", "hyperpod_recovery_cli", "verdicts", "confirm", "1001-hung-999999999999", "--stack", "s", "--reason", "r", "--yes")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


def test_the_planner_on_a_subnormal_rate_prints_a_finite_plan_of_its_schema() -> None:
    done = typed("-m", "hyperpod_recovery_cli", "goodput", "--nodes", "2048", "--failure-rate", "5e-324", "--json")
    assert done.returncode == 0, done.stderr
    plan = validate("goodput", done.stdout)
    assert (
        math.isfinite(plan.ettr.ettr) and math.isfinite(plan.ettr.mttf_hours) and "NaN" not in done.stdout and "Infinity" not in done.stdout
    )
    assert json.loads(done.stdout)


def test_the_fleet_bench_refuses_nan_days_in_one_line() -> None:
    done = typed("bench/fleet.py", "--nodes", "64", "--days", "nan")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--days" in done.stderr, done.stderr
