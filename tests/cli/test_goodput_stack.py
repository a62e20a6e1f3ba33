"""``hyperpod-recovery goodput --stack`` against the sandbox's deployed stack: the real template's
ledger table in moto, filled by the real state machines and handlers recovering a node; the
HyperPod double for the cluster's size; the job's checkpoint manifests in moto's S3."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery_cli.main import main
from hyperpod_recovery_cli.planner.measure import phase_seconds
from hyperpod_recovery_cli.planner.model import GoodputPlan
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from tests.conftest import EVENTS

pytestmark = pytest.mark.sandbox
CHECKPOINTS = "s3://llm-train-checkpoints/llama-70b-pretrain"  # events/drills/default.json's job: a commit every 30 min


@contextmanager
def deployed(tmp_path: Path) -> Iterator[DrillRunner]:
    runner = DrillRunner(load_scenario(EVENTS / "drills" / "default.json"), log_path=tmp_path / "lambda.log")
    with runner.deployed():
        yield runner


def goodput(runner: DrillRunner, *argv: str) -> tuple[int, str, str]:
    aws, out, err = runner.aws, io.StringIO(), io.StringIO()
    clients = {"sagemaker": aws.client("sagemaker"), "cloudformation": aws.client("cloudformation")}
    now = runner.virtual_now()
    with contextlib.redirect_stderr(err):
        code = main(
            ["goodput", *argv],
            stdout=out,
            stderr=err,
            drill_clients=clients,
            dynamodb=aws.client("dynamodb"),
            s3=aws.client("s3"),
            now=lambda: now,
        )
    return code, out.getvalue(), err.getvalue()


def test_given_a_recovered_node_in_the_ledger_then_size_failures_and_phases_are_measured(tmp_path: Path) -> None:
    with deployed(tmp_path) as runner:
        # Given the stack recovered one failed node of its 16 workers
        runner.play()
        (record,) = DynamoLedger(runner.aws.ledger_table, dynamodb=runner.aws.client("dynamodb")).incidents("llm-train")
        # When the planner reads the stack over the last day
        code, printed, err = goodput(runner, "--stack", "sandbox", "--since", "1d", "--json")
    plan = GoodputPlan.model_validate_json(printed)
    assert code == 0, err
    # Then the cluster's size is its compute nodes (not the controller and login), measured
    assert (plan.inputs.nodes.value, plan.inputs.nodes.provenance) == (16, "measured")
    # And the failure rate is that one failure over 16 node-days
    rate = plan.inputs.failure_rate
    assert (rate.failures, rate.provenance) == (1, "measured")
    assert rate.node_days == pytest.approx(16.0, rel=0.02)
    # And each phase the recovery went through is the record's, measured; the others stay defaults
    went_through = phase_seconds(record)
    assert {"detect", "cordon", "replace", "rejoin", "health_gate", "restart"} <= set(went_through)
    for cost in plan.phases:
        assert (cost.provenance, cost.seconds) == ("measured", pytest.approx(went_through[cost.phase])), cost.phase
    # And the replacement the recovery log measured is the spares' repair window
    assert plan.spares.repair_provenance == "measured" and plan.spares.repair_seconds > 0


def test_given_a_checkpoint_prefix_then_the_interval_is_measured_from_the_manifests_commit_times(tmp_path: Path) -> None:
    with deployed(tmp_path) as runner:
        # When the planner reads the job's checkpoints (committed 30 min apart) with a 60 s checkpoint
        code, printed, err = goodput(runner, "--stack", "sandbox", "--checkpoint-prefix", CHECKPOINTS, "--checkpoint-cost", "60", "--json")
    plan = GoodputPlan.model_validate_json(printed)
    assert code == 0, err
    # Then the interval is the commits' period less the checkpoint's cost, measured
    interval = plan.inputs.checkpoint_interval_seconds
    assert (interval.value, interval.provenance) == (1800 - 60, "measured")
    assert CHECKPOINTS in interval.source


def test_given_a_stack_with_no_recovery_yet_then_defaults_stand_in_and_are_said(tmp_path: Path) -> None:
    with deployed(tmp_path) as runner:
        # Given a stack deployed and nothing recovered
        code, printed, err = goodput(runner, "--stack", "sandbox")
    # Then the plan runs on the measured size and the stated defaults, and says which are assumed
    assert code == 0, err
    assert "cluster of 16 nodes [measured: DescribeCluster llm-train: compute groups now]" in printed
    assert "warning: failure rate assumed: Llama 3" in printed
    assert "warning: neither measured nor given, assumed: detect, cordon, replace, rejoin, health_gate, restart" in printed
    # And the phases the stack's parameters assume are taken from the stack, said as such
    assert re.search(r"^rejoin .* default: stack sandbox parameter ExpectedReplacementSeconds$", printed, re.MULTILINE)
    # And the phases it has no parameter for are the drills' own timings, naming the drill
    assert re.search(r"^detect .* default: measured in drill job-hang: ", printed, re.MULTILINE)


def test_given_a_prefix_without_two_commits_then_it_is_refused_saying_what_to_give(tmp_path: Path) -> None:
    with deployed(tmp_path) as runner:
        code, printed, err = goodput(runner, "--nodes", "16", "--checkpoint-prefix", "s3://llm-train-checkpoints/nothing-here")
    assert code == 2 and printed == ""
    assert "0 committed manifest(s)" in err and "give --checkpoint-interval instead" in err and err.count("\n") == 1


def test_given_a_stack_that_does_not_exist_then_it_is_an_aws_error_on_one_line(tmp_path: Path) -> None:
    with deployed(tmp_path) as runner:
        code, _, err = goodput(runner, "--stack", "no-such-stack")
    assert code == 3 and err.startswith("hyperpod-recovery: no stack no-such-stack in us-west-2") and err.count("\n") == 1
