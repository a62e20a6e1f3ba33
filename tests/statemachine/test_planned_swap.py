"""PlannedSwap end to end (statemachines/planned_swap.asl.json and the NodeRecovery it nests) on moto's
interpreter with the real handlers, the HyperPod double and the simulated Slurm answered by the real
agent: an enforced at-risk verdict's execution is started as the at-risk intake starts it (its
PlannedSwapRequest, named hps-<verdict id>), while the job keeps training and committing checkpoints."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sandbox.report.build import build_report
from sandbox.runner import DrillRunner
from sandbox.scenario import Scenario

pytestmark = pytest.mark.sandbox

INTERVAL = 600  # the job commits a checkpoint every 10 minutes (at 600, 1200, ... virtual seconds)
VERDICT_AT = 1100  # the signal comes 100 s before the next commit (at 1200)


def _scenario(*, workers: int = 18, job_nodes: str = "workers:0-15", extra: dict[str, Any] | None = None) -> Scenario:
    raw: dict[str, Any] = {
        "name": "planned-swap-test",
        "description": "a node at risk under a training job that commits every 10 minutes",
        "cluster": {
            "name": "llm-train",
            "orchestrator": "slurm",
            "node_recovery": "None",
            "instance_groups": [
                {"name": "controller", "type": "Controller", "count": 1, "instance_type": "ml.m5.2xlarge"},
                {"name": "workers", "type": "Compute", "count": workers, "instance_type": "ml.p5.48xlarge"},
            ],
        },
        "jobs": [
            {
                "id": "1001",
                "name": "llama-70b-pretrain",
                "nodes": job_nodes,
                "checkpoint_uri": "s3://llm-train-checkpoints/llama-70b-pretrain",
                "checkpoints": [{"step": 3000}],
                "training": {"checkpoint_every_seconds": INTERVAL, "steps_per_checkpoint": 100, "restart_seconds": 20},
                "progress": {"step_seconds": 3.0, "step": 3000},
            }
        ],
        # (a scenario has a fault; this one changes nothing but what the job reports)
        "faults": [{"at": 3000, "kind": "pause", "job": "1001", "seconds": 10, "pause_limit_seconds": 3600}],
        "behaviour": {"replacement_seconds": 600, "agent_seconds": 2},
        "settings": {"dry_run": False},
        "expect": {"outcomes": []},
    }
    for key, value in (extra or {}).items():
        raw[key] = value if not isinstance(value, dict) else {**raw.get(key, {}), **value}
    return Scenario.model_validate(raw)


_REPORTS: dict[str, dict[str, Any]] = {}


@pytest.fixture
def spare_swap(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The plain swap's report, run once for the tests that read it."""
    if "spare" not in _REPORTS:
        _REPORTS["spare"] = _swap(tmp_path_factory.mktemp("spare"), _scenario())
    return _REPORTS["spare"]


def _swap(
    tmp_path: Path,
    scenario: Scenario,
    *,
    signal: str = "row_remap_failure",
    failure_chance: float = 0.9,
    node: str = "workers:7",
    dry_run: bool | None = None,
) -> dict[str, Any]:
    """Run ``scenario`` with an enforced verdict on ``node`` at VERDICT_AT; the report."""
    runner = DrillRunner(scenario, log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        runner.advance(VERDICT_AT)
        verdict = {
            "verdict_id": "v-0001",
            "signal": signal,
            "source": "alertmanager",
            "mode": "enforce",
            "cluster": scenario.cluster.name,
            "instance_id": runner.double.current(node, t=VERDICT_AT).node_id,
            "observed_at": (runner.epoch + timedelta(seconds=VERDICT_AT)).isoformat(),
            "horizon_seconds": 86_400,
            "failure_chance": failure_chance,
            "failure_chance_from": "the signal's prior (no outcomes yet)",
            "summary": f"{signal} on GPU 3",
        }
        request: dict[str, Any] = {"verdict": verdict} | ({"dry_run": dry_run} if dry_run is not None else {})
        aws.client("stepfunctions").start_execution(
            stateMachineArn=aws.state_machines["PlannedSwapStateMachine"], name="hps-v-0001", input=json.dumps(request)
        )
        runner.play()
        runner.slurm.close()
        runner._log.flush()
        return build_report(runner, wall_seconds=0.0)


def _the_swap(report: dict[str, Any]) -> dict[str, Any]:
    (swap,) = report["planned_swaps"]
    return swap


def test_a_node_at_risk_is_left_right_after_the_next_commit_onto_a_spare_and_replaced(spare_swap: dict[str, Any]) -> None:
    # Given a 16-node job on an 18-node group (2 idle nodes) and a row-remap failure on one of its nodes
    report = spare_swap
    swap = _the_swap(report)
    # Then the swap waited for the next verified commit after the verdict (step 3200 at 1200 s) and moved
    assert swap["outcome"] == "moved" and swap["action"] == "spare"
    assert swap["checkpoint_step"] == 3200 and swap["committed_at"] == 1200
    # And the job was resubmitted once, from that step, and nothing else
    assert [(s["old_job_id"], s["checkpoint_step"]) for s in report["slurm"]["submissions"]] == [("1001", 3200)]
    assert report["second_copies"] == []
    # And the goals: ≤ 10 s of work lost past the checkpoint, running again ≤ 60 s after the commit
    assert swap["work_lost_past_checkpoint_seconds"] <= 10
    assert swap["running_again_after_commit_seconds"] <= 60
    # And the node is replaced (a row-remap failure is NVIDIA's RMA criterion), by the nested recovery
    assert [r["hostname"] for r in report["replacements"]] == [swap["node"]]
    (nested,) = report["incidents"]
    assert nested["id"] == "hps-v-0001-nodes" and nested["trigger"] == ["at_risk"] and nested["outcome"] == "recovered"


def test_the_record_says_both_expected_costs_and_where_each_figure_came_from(spare_swap: dict[str, Any]) -> None:
    swap = _the_swap(spare_swap)
    assert 0 < swap["swap_node_seconds"] < swap["keep_node_seconds"]
    figures = swap["figures"]
    assert figures["checkpoint_interval_seconds"] == [600.0, "measured: the job's two newest manifests"]
    assert figures["failure_chance"][1].startswith("the verdict")
    assert figures["spare_fits"] == [1.0, "2 idle node(s) in the node's instance group"]
    assert "node-h" in swap["summary"]


def test_a_verdict_whose_expected_costs_say_leave_moves_nothing_and_says_what_a_swap_would_cost(tmp_path: Path) -> None:
    # Given a verdict with a small chance of failure (the false alarm's prior)
    report = _swap(tmp_path, _scenario(), failure_chance=0.05)
    swap = _the_swap(report)
    # Then the job stays, nothing is touched, and the record gives both costs
    assert swap["outcome"] == "left" and swap["action"] == "leave"
    assert swap["swap_node_seconds"] > swap["keep_node_seconds"] > 0
    assert report["slurm"]["submissions"] == [] and report["replacements"] == [] and report["incidents"] == []


def test_a_row_remap_pending_node_is_rebooted_not_replaced(tmp_path: Path) -> None:
    report = _swap(tmp_path, _scenario(), signal="row_remap_pending")
    assert _the_swap(report)["outcome"] == "moved"
    assert report["replacements"] == [] and [r["hostname"] for r in report["reboots"]] == [_the_swap(report)["node"]]


def test_a_dry_run_swap_touches_nothing_and_says_what_it_would_do(tmp_path: Path) -> None:
    report = _swap(tmp_path, _scenario(), dry_run=True)
    swap = _the_swap(report)
    assert swap["outcome"] == "dry_run" and swap["dry_run"] is True
    assert report["slurm"]["submissions"] == [] and report["replacements"] == []
    assert [c for c in report["slurm"]["commands"] if c["type"] in ("cordon_nodes", "resubmit_job") and not c.get("dry_run")] == []


def test_a_node_that_fails_while_the_swap_waits_is_left_to_the_reactive_recovery_alone(tmp_path: Path) -> None:
    # Given the node's health event at 1150 s, before the job's next commit at 1200 s
    fault = {"at": 1150, "kind": "node_health", "node": "workers:7"}
    report = _swap(tmp_path, _scenario(extra={"faults": [fault]}))
    swap = _the_swap(report)
    # Then the swap yields: one recovery of the node (the reactive one), none nested in the swap
    assert swap["outcome"] == "yielded"
    assert [i["id"].startswith("hpr-") for i in report["incidents"]] == [True]
    assert len(report["replacements"]) == 1
