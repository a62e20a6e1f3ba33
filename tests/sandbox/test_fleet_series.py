"""The fleet report's time series and monthly cost, on small constructed figures: the per-day ETTR
adds back up to the whole run's, the concurrency steps count what runs, the cost is count x price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox.fleet.cost import DAYS_A_MONTH, IDLE_POLLERS, LAMBDA_MEAN_SECONDS, LONG_POLL_SECONDS, lambda_memory_mb, monthly_cost
from sandbox.fleet.prices import PRICES, TAKEN
from sandbox.fleet.report import TEMPLATE
from sandbox.fleet.series import concurrency_steps, ettr_per_day, fleet_series
from tests.conftest import ROOT

DAY = 86_400.0


def _hit(job: str, at: float, restarted_at: float | None, lost_work: float, restart: float = 300.0) -> dict[str, Any]:
    return {
        "job": job,
        "fault": "faulty_gpu",
        "remedy": "replace",
        "at": at,
        "restarted_at": restarted_at,
        "downtime": (restarted_at if restarted_at is not None else 2.5 * DAY) - at,
        "lost_work": lost_work,
        "restart": restart if restarted_at is not None else 0.0,
    }


def _job(job: str, hits: list[dict[str, Any]], checkpoint_cost: float, end: float) -> dict[str, Any]:
    """A job as report.py accounts it: ETTR = (run - every part lost) / run."""
    lost = sum(h["downtime"] + h["lost_work"] + h["restart"] for h in hits if h["job"] == job) + checkpoint_cost
    return {"job": job, "ettr": round((end - lost) / end, 5), "seconds_lost": {"checkpoint_cost": checkpoint_cost}}


def test_given_hits_across_midnights_when_spread_over_days_then_the_days_add_up_to_the_whole_run_ettr() -> None:
    # Given a 2.5-day run: job A down across the first midnight (restart on day 1), down again at the
    # end of day 1, job B never running again from the middle of the last half day, job C untouched
    end = 2.5 * DAY
    hits = [
        _hit("A", DAY - 600, DAY + 900, lost_work=1200),
        _hit("A", 2 * DAY - 100, 2 * DAY + 400, lost_work=50),
        _hit("B", 2.25 * DAY, None, lost_work=1700),
    ]
    jobs = [_job("A", hits, 1500, end), _job("B", hits, 1200, end), _job("C", hits, 1800, end)]
    # When the run is spread over its days
    series = ettr_per_day(hits, jobs, end)
    # Then there are 3 days, the last one half a day long
    assert [d["seconds"] for d in series["days"]] == [DAY, DAY, DAY / 2]
    # and each job's days, weighted by their length, are its whole-run ETTR
    for job in jobs:
        days = series["jobs"][job["job"]]
        weighted = sum(share * d["seconds"] for share, d in zip(days, series["days"], strict=True)) / end
        assert weighted == pytest.approx(job["ettr"], abs=2e-5)
    # and the first midnight's downtime is split: 600 s (+ lost work) on day 0, 900 s (+ restart) on day 1
    share_a = series["jobs"]["A"]
    checkpoint_a = 1500 * DAY / end
    assert share_a[0] == pytest.approx((DAY - 600 - 1200 - checkpoint_a) / DAY, abs=1e-5)
    assert share_a[1] == pytest.approx((DAY - 900 - 300 - 100 - 50 - checkpoint_a) / DAY, abs=1e-5)
    # and the mean, min and max are over the jobs
    assert series["min"][2] == series["jobs"]["B"][2] and series["max"][0] == series["jobs"]["B"][0]
    assert series["mean"][1] == pytest.approx(sum(series["jobs"][j][1] for j in "ABC") / 3, abs=1e-5)
    assert series["clamped_days"] == 0


def test_given_executions_overlapping_when_stepped_then_each_start_and_end_is_one_step_and_the_peak_is_found() -> None:
    # Given three executions, the third starting when the first ends
    spans = [(0.0, 10.0), (5.0, 15.0), (10.0, 20.0)]
    # When they are stepped
    steps = concurrency_steps(spans)
    # Then a hand-over at 10 s is not two running at once; the peak is 2, first at 5 s
    assert steps["steps"] == [[0.0, 1], [5.0, 2], [10.0, 2], [15.0, 1], [20.0, 0]]
    assert steps["peak"] == 2 and steps["peak_at"] == 5.0


def test_given_hits_when_the_series_is_built_then_the_downtime_points_are_in_time_order_with_their_day() -> None:
    hits = [_hit("A", 2 * DAY, 2 * DAY + 60, 10), _hit("B", 0.5 * DAY, None, 10)]
    series = fleet_series(hits, [_job("A", hits, 0, 2.5 * DAY), _job("B", hits, 0, 2.5 * DAY)], 2.5 * DAY, [])
    assert [(p["job"], p["day"], p["restarted"]) for p in series["downtime"]] == [("B", 0.5, False), ("A", 2.0, True)]
    assert series["concurrent_executions"] == {"steps": [], "peak": 0, "peak_at": None}


def test_given_a_days_calls_when_priced_then_each_line_is_30_days_count_times_its_price() -> None:
    # Given a report's per-day figures: 1,000 transitions, 2,000 invocations, a few calls of each kind
    report = {
        "cost_per_day": {
            "state_transitions": 1000.0,
            "lambda_invocations": 2000.0,
            "aws_calls_by_call": {
                "dynamodb.PutItem": 100.0,
                "dynamodb.UpdateItem": 50.0,
                "dynamodb.TransactWriteItems": 10.0,
                "dynamodb.GetItem": 300.0,
                "dynamodb.DescribeTable": 1.0,
                "sqs.SendMessage": 20.0,
                "sns.Publish": 2.0,
                "s3.GetObject": 40.0,
                "s3.ListObjectsV2": 8.0,
                "sagemaker.ListClusterNodes": 500.0,
                "stepfunctions.StartExecution": 5.0,
                "lambda.Invoke": 2000.0,
            },
        },
        "limits": {"largest_dynamodb_item_bytes": 2500},
    }
    # When it is priced with 256 MB functions
    cost = monthly_cost(report, memory_mb=256)
    lines = {line["what"]: line for line in cost["lines"]}

    def usd(key: str, per_30_days: float) -> float:
        return round(per_30_days * PRICES[key].usd_each, 4)

    # Then each line is 30 days of its count times its price
    assert lines[PRICES["stepfunctions_transition"].what]["usd"] == usd("stepfunctions_transition", 30_000)
    assert lines[PRICES["lambda_request"].what]["usd"] == usd("lambda_request", 60_000)
    gb_seconds = 60_000 * LAMBDA_MEAN_SECONDS * 0.25
    assert lines[PRICES["lambda_arm_gb_second"].what]["per_30_days"] == gb_seconds
    # and a 2,500 B item is 3 write units a write (a transactional write twice that), 1 read unit a read
    assert lines[PRICES["dynamodb_write_unit"].what]["per_30_days"] == (100 + 50 + 2 * 10) * 3 * 30
    assert lines[PRICES["dynamodb_read_unit"].what]["per_30_days"] == 300 * 30
    assert lines[PRICES["s3_get"].what]["per_30_days"] == 40 * 30 and lines[PRICES["s3_list"].what]["per_30_days"] == 8 * 30
    # and the idle long polls are a line of their own, marked as assumed
    idle = [line for line in cost["lines"] if line["assumed"]]
    assert len(idle) == 1 and idle[0]["per_30_days"] == IDLE_POLLERS * DAY / LONG_POLL_SECONDS * DAYS_A_MONTH
    assert cost["assumed_usd"] == idle[0]["usd"]
    # and the total is the lines' sum; control-plane calls are free, a call no price covers is listed
    assert cost["total_usd"] == pytest.approx(sum(line["usd"] for line in cost["lines"]), abs=1e-3)
    assert cost["total_usd"] == pytest.approx(sum(cost["by_service"].values()), abs=1e-3)
    assert {"sagemaker", "stepfunctions", "lambda"} <= set(cost["free"])
    assert cost["unpriced"] == {"dynamodb.DescribeTable": 30.0}
    assert cost["prices_taken"] == TAKEN and any("ASSUMPTION" in a for a in cost["assumptions"])


def test_given_the_detectors_scans_measured_then_they_are_priced_by_the_tables_size_not_as_one_item_each() -> None:
    # Given a day of 1,440 scans of a progress table measured at 90 read units each
    report = {
        "cost_per_day": {
            "state_transitions": 0,
            "lambda_invocations": 0,
            "aws_calls_by_call": {"dynamodb.Scan": 1440.0, "dynamodb.GetItem": 10.0},
            "progress_scan_read_units": 1440 * 90.0,
        },
        "limits": {"largest_dynamodb_item_bytes": 2500},
    }
    # When it is priced
    lines = [line for line in monthly_cost(report, memory_mb=256)["lines"] if line["unit"] == PRICES["dynamodb_read_unit"].unit]
    # Then the scans are their measured read units, and the item reads the others alone
    assert [line["per_30_days"] for line in lines] == [10 * 30, 1440 * 90 * 30]
    assert "progress table" in lines[1]["what"]


def test_given_the_template_then_the_lambda_memory_is_read_from_its_globals(tmp_path: Path) -> None:
    assert TEMPLATE == ROOT / "template.yaml"
    assert lambda_memory_mb(TEMPLATE) == 256
    bare = tmp_path / "template.yaml"
    bare.write_text("Resources:\n  F:\n    Properties:\n      MemorySize: 1024\n")
    assert lambda_memory_mb(bare) is None


def test_given_the_prices_then_each_has_a_source_and_a_quote_where_aws_did_not_show_it() -> None:
    for price in PRICES.values():
        assert price.source.startswith("https://aws.amazon.com/")
        assert price.confirmed or price.quoted_by.startswith("https://")
