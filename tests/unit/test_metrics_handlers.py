"""Metrics the handlers publish, captured from Powertools' EMF output (stdout) as CloudWatch would
read it: Report Safety State's gauges, and the per-outcome counts and durations of Record Outcome."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hyperpod_recovery.models.records import BreakerState
from sandbox.aws import load_handler
from sandbox.report import parse_emf
from tests.fakes import CLUSTER, T0, fake_dependencies

report_safety_state = load_handler("functions/report_safety_state/")


def _emf(printed: str) -> dict[str, Any]:
    """{metric name: values} of what the handler printed, as CloudWatch would read it."""
    metrics = parse_emf(printed)
    assert {m["namespace"] for m in metrics.values()} == {"HyperPodRecovery"}
    assert all(m["dimensions"] == {"cluster": CLUSTER, "service": "hyperpod-recovery"} for m in metrics.values())
    return {name: m["values"] for name, m in metrics.items()}


def test_given_an_open_breaker_then_the_gauge_reads_1_with_the_nodes_in_recovery(
    lambda_context, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    # Given a cluster whose breaker a recovery opened, with 3 nodes still counted against the cap
    deps = fake_dependencies()
    deps.ledger.save_breaker(CLUSTER, BreakerState().changed_to("open", reason="3 failed recoveries in 1 h", by="hpr-x", at=T0))
    deps.ledger.reserve_capacity(CLUSTER, "hpr-1", ["i-1", "i-2", "i-3"], 10, deps.now(), timedelta(hours=6))
    # When the scheduled Report Safety State runs
    state = report_safety_state({"source": "aws.events", "detail-type": "Scheduled Event"}, lambda_context, deps=deps)
    # Then it publishes BreakerOpen=1 and NodesInRecovery=3 for this cluster
    metrics = _emf(capsys.readouterr().out)
    assert (metrics["BreakerOpen"], metrics["NodesInRecovery"]) == ([1.0], [3.0])
    assert state["breaker_open"] is True and state["breaker_reason"] == "3 failed recoveries in 1 h"


def test_given_a_closed_breaker_then_the_gauge_reads_0(lambda_context, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    report_safety_state({}, lambda_context, deps=fake_dependencies())
    metrics = _emf(capsys.readouterr().out)
    assert (metrics["BreakerOpen"], metrics["NodesInRecovery"]) == ([0.0], [0.0])


def test_given_a_breaker_reset_by_a_human_then_the_gauge_reads_0_again(lambda_context, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    deps = fake_dependencies()
    opened = BreakerState().changed_to("open", reason="storm", by="hpr-x", at=T0)
    deps.ledger.save_breaker(CLUSTER, opened.changed_to("closed", reason="rack fixed", by="alice", at=T0))
    report_safety_state({}, lambda_context, deps=deps)
    assert _emf(capsys.readouterr().out)["BreakerOpen"] == [0.0]
