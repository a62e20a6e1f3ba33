"""Every number the planner and the fleet bench are given is finite and in its documented range
(inputs.bounded): any float, nan, inf, subnormals and huge ones included, ends in exit 0 or 2, never a
traceback, never NaN or Infinity in what is printed."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_recovery_cli.app import _parser
from hyperpod_recovery_cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import fleet

ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True) | st.sampled_from([5e-324, 1e308, -0.0, 2.0**53])
TEXT = ANY_FLOAT.map(repr) | ANY_FLOAT.map(str) | ANY_FLOAT.map(lambda x: f"{x:f}" if math.isfinite(x) else str(x))
PLANNER_OPTIONS = [
    ("--failure-rate",),
    ("--failures", "3", "--node-days"),
    ("--detect",),
    ("--checkpoint-interval",),
    ("--checkpoint-cost",),
    ("--repair",),
]
BENCH_OPTIONS = ["--days", "--nodes", "--seed", "--spares", "--rate", "--correlated-share", "--hang-share", "--checkpoint-interval"]
# Issue 50's: the trace's precursors, the jobs' shrink, the runs at once.
BENCH_OPTIONS += ["--recall", "--lead-time-median", "--lead-time-sigma", "--false-alarm-rate", "--shrink-nodes", "--workers"]


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def goodput(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):  # (argparse's refusals are printed there)
        try:
            code = main(["goodput", "--nodes", "64", *argv, "--json"], stdout=out, stderr=err)
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("option", PLANNER_OPTIONS, ids=lambda o: o[-1])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_any_float_given_to_the_planner_ends_in_a_finite_plan_or_a_one_line_refusal(option: tuple[str, ...], text: str) -> None:
    code, out, err = goodput(*option, text)
    assert code in (0, 2), err
    if code == 0:
        assert _finite(json.loads(out, parse_constant=lambda c: float(c))), out
    else:
        assert err.count("\n") == 1 and (option[-1] in err or "the planner's inputs" in err), err


@pytest.mark.parametrize("rate", ["5e-324", "1e-300", "1000000"])
def test_an_extreme_but_valid_failure_rate_computes_a_finite_plan(rate: str) -> None:
    code, out, err = goodput("--failure-rate", rate)
    assert code == 0 and "NaN" not in out and "Infinity" not in out, err
    assert _finite(json.loads(out))


def test_a_count_over_a_subnormal_exposure_computes_a_finite_plan() -> None:
    code, out, err = goodput("--failures", "1000000", "--node-days", "5e-324")
    assert code == 0 and _finite(json.loads(out)), err


@pytest.mark.parametrize("option", BENCH_OPTIONS)
@settings(max_examples=40, deadline=None)
@given(text=TEXT)
def test_any_float_given_to_the_fleet_bench_is_checked_to_its_range_before_it_runs(option: str, text: str) -> None:
    argv = {"--nodes": "64", "--days": "1"} | {option: text}
    err = io.StringIO()
    try:
        args = fleet.parse([word for pair in argv.items() for word in pair])
    except SystemExit as exc:
        assert exc.code == 2
        return
    # Accepted: every figure is finite, in range, and the run is bounded
    for name in ("days", "correlated_share", "hang_share", "checkpoint_interval", "recall", "lead_time_median", "lead_time_sigma"):
        assert math.isfinite(getattr(args, name))
    assert fleet.MIN_DAYS <= args.days <= fleet.MAX_DAYS and 1 <= args.nodes + args.spares <= fleet.MAX_NODES and err.getvalue() == ""
    assert 0 <= args.recall <= 1 and 60 <= args.lead_time_median <= fleet.MAX_LEAD_SECONDS and 0 <= args.lead_time_sigma <= fleet.MAX_SIGMA
    assert 0 <= args.false_alarm_rate <= fleet.MAX_RATE and 0 <= args.shrink_nodes < args.nodes and 1 <= args.workers <= fleet.MAX_WORKERS


@pytest.mark.parametrize(
    ("option", "text"),
    [
        ("--days", "nan"),
        ("--days", "inf"),
        ("--days", "1e308"),
        ("--days", "5e-324"),
        ("--rate", "nan"),
        ("--spares", "6758"),
        ("--recall", "1.5"),
        ("--recall", "-0.1"),
        ("--lead-time-median", "30"),
        ("--lead-time-sigma", "nan"),
        ("--false-alarm-rate", "-1"),
        ("--shrink-nodes", "64"),
        ("--workers", "5"),
        ("--recalls", "0.5,2"),
        ("--job-kind", "sync"),
    ],
)
def test_the_fleet_bench_refuses_a_number_out_of_range_in_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], option: str, text: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        fleet.main(["--nodes", "64", "--days", "1", option, text])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and option in err


@pytest.mark.parametrize("argv", [["--days", "0.01"], ["--days", "0.5", "--rate", "5e-324"]], ids=["shortest", "no-failure"])
def test_the_fleet_bench_at_the_edges_of_its_ranges_writes_a_finite_report(tmp_path: Path, argv: list[str]) -> None:
    assert fleet.main(["--nodes", "4", *argv, "--out", str(tmp_path)]) == 0
    (report,) = tmp_path.glob("*.json")
    assert _finite(json.loads(report.read_text()))


@pytest.mark.parametrize("option", ["--poll-seconds", "--timeout-seconds"])
@settings(max_examples=40, deadline=None)
@given(text=TEXT)
def test_any_float_given_to_the_drill_is_refused_or_taken_finite_and_in_range(option: str, text: str) -> None:
    argv = ["drill", "--stack", "s", "--node", "i-0123456789abcdef0", option, text]
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            args = _parser().parse_args(argv)
        except SystemExit as exc:
            assert exc.code == 2
            return
    value = getattr(args, option.lstrip("-").replace("-", "_"))
    assert math.isfinite(value) and 0 <= value <= 7 * 86_400 and (option != "--poll-seconds" or value >= 0.1)
