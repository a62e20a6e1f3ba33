"""PlannedSwap end to end: the at-risk intake's enforced verdict (the scenario's at_risk fault, through
SNS) starts statemachines/planned_swap.asl.json, which waits for the job's next verified commit and moves
it with a nested NodeRecovery, on moto's interpreter with the real handlers, the HyperPod double and the
simulated Slurm (or the Kubernetes API server) while the job keeps training and committing checkpoints.
The drills events/drills/planned-swap-*.json and at-risk-during-checkpoint-save.json (and their eks-
twins); their variations here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.sandbox
Drill = Callable[..., dict[str, Any]]
ENFORCED = "row_remap_failure=enforce:0.9:1d"


def _the_swap(report: dict[str, Any]) -> dict[str, Any]:
    (swap,) = report["planned_swaps"]
    return swap


def test_a_node_at_risk_is_left_right_after_the_next_commit_onto_a_spare_and_replaced(drill: Drill) -> None:
    # Given a 16-node job on an 18-node group (2 idle nodes) and a row-remap failure on one of its nodes at
    # 1100 s, 100 s before the job's next commit
    report = drill("planned-swap-spare")
    swap = _the_swap(report)
    # Then the swap waited for that commit (step 3200 at 1200 s), and moved the job onto a spare
    assert swap["outcome"] == "moved" and swap["action"] == "spare"
    assert swap["checkpoint_step"] == 3200 and swap["committed_at"] == 1200 and swap["seen_at"] >= 1200
    # And the job was resubmitted once, from that step, and no two copies were ever live
    assert [(s["old_job_id"], s["checkpoint_step"]) for s in report["slurm"]["submissions"]] == [("1001", 3200)]
    assert report["second_copies"] == []
    # And the goals: ≤ 10 s of work lost past the checkpoint, running again ≤ 60 s after the commit
    assert swap["work_lost_past_checkpoint_seconds"] <= 10 and swap["running_again_after_commit_seconds"] <= 60
    # And the node is replaced (a row-remap failure is NVIDIA's RMA criterion) by the nested recovery
    assert [r["hostname"] for r in report["replacements"]] == [swap["node"]]
    (nested,) = report["incidents"]
    assert nested["id"] == f"{swap['id']}-nodes" and nested["trigger"] == ["at_risk"] and nested["outcome"] == "recovered"


def test_the_record_says_both_expected_costs_and_where_each_figure_came_from(drill: Drill) -> None:
    swap = _the_swap(drill("planned-swap-spare"))
    assert 0 < swap["swap_node_seconds"] < swap["keep_node_seconds"]
    figures = swap["figures"]
    assert figures["checkpoint_interval_seconds"] == [600.0, "measured: the job's two newest manifests"]
    assert figures["failure_chance"][1].startswith("the verdict")
    assert figures["spare_fits"] == [1.0, "2 idle node(s) in the node's instance group"]
    assert "node-h" in swap["summary"]


def test_a_signal_during_a_checkpoint_save_waits_for_that_save_s_commit(drill: Drill) -> None:
    # Given saves of 2 minutes: step 3200's shards from 1080 s, its manifest at 1200 s; the signal at 1100 s
    report = drill("at-risk-during-checkpoint-save")
    swap = _the_swap(report)
    # Then the swap moves the job only once that save committed, and from it
    assert swap["outcome"] == "moved" and swap["checkpoint_step"] == 3200 and swap["seen_at"] >= 1200
    assert [s["checkpoint_step"] for s in report["slurm"]["submissions"]] == [3200]


def test_an_elastic_job_without_a_spare_shrinks_off_the_node_at_its_commit(drill: Drill) -> None:
    report = drill("planned-swap-elastic")
    swap = _the_swap(report)
    assert swap["outcome"] == "moved" and swap["action"] == "shrink"
    assert swap["figures"]["spare_fits"][0] == 0.0 and swap["figures"]["may_shrink"][0] == 1.0
    (copies,) = [j["copies"] for j in report["jobs"]]
    assert [(c["nodes"], c["from_step"]) for c in copies] == [(15, 3200), (16, 3300)]


def test_eks_a_node_at_risk_is_left_right_after_the_next_commit_onto_a_spare(drill: Drill) -> None:
    report = drill("eks-planned-swap-spare")
    swap = _the_swap(report)
    assert swap["outcome"] == "moved" and swap["action"] == "spare" and swap["checkpoint_step"] == 3200
    (nested,) = report["incidents"]
    assert nested["trigger"] == ["at_risk"] and nested["outcome"] == "recovered"
    assert report["second_copies"] == []
    # (the old pods' grace period is inside the 60 s)
    assert swap["work_lost_past_checkpoint_seconds"] <= 10 and swap["running_again_after_commit_seconds"] <= 60


def test_a_verdict_whose_expected_costs_say_leave_moves_nothing_and_says_what_a_swap_would_cost(drill: Drill) -> None:
    # Given the same signal enforced at a 5 % prior
    report = drill("planned-swap-spare", settings={"at_risk_signals": "row_remap_failure=enforce:0.05:1d"})
    swap = _the_swap(report)
    # Then the job stays, nothing is touched, and the record gives both costs
    assert swap["outcome"] == "left" and swap["action"] == "leave"
    assert swap["swap_node_seconds"] > swap["keep_node_seconds"] > 0
    assert report["slurm"]["submissions"] == [] and report["replacements"] == [] and report["incidents"] == []


def test_a_row_remap_pending_node_is_rebooted_not_replaced(drill: Drill) -> None:
    fault = {"at": 1100, "kind": "at_risk", "node": "workers:7", "signal": "row_remap_pending", "via": "alertmanager"}
    report = drill("planned-swap-spare", faults=[fault], settings={"at_risk_signals": "row_remap_pending=enforce:0.9:1d"})
    swap = _the_swap(report)
    assert swap["outcome"] == "moved"
    assert report["replacements"] == [] and [r["hostname"] for r in report["reboots"]] == [swap["node"]]


def test_a_dry_run_swap_touches_nothing_and_says_what_it_would_do(drill: Drill) -> None:
    report = drill("planned-swap-spare", settings={"dry_run": True})
    swap = _the_swap(report)
    assert swap["outcome"] == "dry_run" and swap["dry_run"] is True
    assert report["slurm"]["submissions"] == [] and report["replacements"] == []
    assert [c for c in report["slurm"]["commands"] if c["type"] in ("cordon_nodes", "resubmit_job") and not c.get("dry_run")] == []


def test_a_node_that_fails_while_the_swap_waits_is_left_to_the_reactive_recovery_alone(drill: Drill) -> None:
    # Given the node's health event at 1150 s, before the job's next commit at 1200 s
    faults = [
        {"at": 1100, "kind": "at_risk", "node": "workers:7", "signal": "row_remap_failure", "via": "alertmanager"},
        {"at": 1150, "kind": "node_health", "node": "workers:7"},
    ]
    report = drill("planned-swap-spare", faults=faults)
    swap = _the_swap(report)
    # Then the swap yields: one recovery of the node (the reactive one), none nested in the swap
    assert swap["outcome"] == "yielded"
    assert [i["id"].startswith("hpr-") for i in report["incidents"]] == [True]
    assert len(report["replacements"]) == 1
