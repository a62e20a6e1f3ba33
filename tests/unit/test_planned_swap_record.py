"""A planned swap's end in words and numbers (domain/planned_swap/record.py): the outcome follows the
wait's ending and the nested recovery's, and the message says both expected costs and each figure's source."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hyperpod_recovery.domain.planned_swap.record import swap_message, swap_outcome, swap_record
from hyperpod_recovery.models.planned_swap import CostFigure, SwapCost, SwapState, SwapWatch
from tests.fakes import CLUSTER, T0
from tests.unit.test_planned_swap_watch import _target

COST = SwapCost(
    action="spare",
    keep_node_seconds=9000.0,
    swap_node_seconds=4960.0,
    sentence="swap onto a spare",
    figures=[CostFigure(name="restart_seconds", value=300, source="the stack's ElasticGrowBackSeconds")],
)


def _state(ending: str | None, nested: str | None = None, errors: dict[str, Any] | None = None, dry_run: bool = False) -> SwapState:
    target = _target()
    target = target.model_copy(update={"request": target.request.model_copy(update={"dry_run": dry_run})})
    watch = SwapWatch(
        at=T0, done=ending is not None, ending=ending, cost=COST, committed_step=3100, committed_at=T0, seen_at=T0 + timedelta(seconds=3)
    )  # type: ignore[arg-type]
    watch = watch.model_copy(update={"node_execution_name": "hps-v-1-nodes"})
    node_recovery = {"outcome": {"outcome": nested}, "lock": {}} if nested else None
    return SwapState(swap=target, watch=watch, node_recovery=node_recovery, errors=errors)


@pytest.mark.parametrize(
    ("ending", "nested", "outcome"),
    [
        ("move", "recovered", "moved"),
        ("move", "dry_run", "dry_run"),
        ("move", "duplicate", "yielded"),
        ("move", "escalated", "escalated"),
        ("leave", None, "left"),
        ("no_commit", None, "no_commit"),
        ("node_failed", None, "yielded"),
        ("job_gone", None, "job_gone"),
        ("job_unknown", None, "job_unknown"),
        ("cap_full", None, "cap_full"),
    ],
)
def test_the_outcome_follows_the_wait_and_the_nested_recovery(ending: str, nested: str | None, outcome: str) -> None:
    assert swap_outcome(_state(ending, nested)) == outcome


def test_a_failure_before_the_swap_knew_its_node_is_a_rejection_or_an_escalation() -> None:
    assert swap_outcome(SwapState(errors={"Error": "InvalidRecoveryRequest", "Cause": "verdict.mode"})) == "rejected"
    assert swap_outcome(SwapState(errors={"Error": "States.Timeout"})) == "escalated"


def test_the_message_says_both_costs_each_figure_s_source_and_the_commit() -> None:
    record = swap_record(_state("move", "recovered"), "hps-v-1", CLUSTER, T0)
    subject, body = swap_message(record)
    assert "planned swap moved" in subject
    assert "swap 1.38 node-h, leave 2.50 node-h" in body
    assert "restart_seconds = 300 (the stack's ElasticGrowBackSeconds)" in body
    assert "commit of step 3100" in body and "seen 3 s later" in body
    assert "hps-v-1-nodes" in body
