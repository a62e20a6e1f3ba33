"""``hyperpod-recovery drill`` against a deployed stack: here the sandbox's stack in moto (the real
ASL, handlers and HyperPod double), with the poller's sleep moving virtual time."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.domain.record.phases import PHASE_OF_STATE
from hyperpod_recovery_cli.drill import (
    DrillUsageError,
    Targets,
    _history,
    cluster_nodes_by_group,
    phases_from_history,
    resolve_node_refs,
    resolve_stack,
)
from hyperpod_recovery_cli.main import main
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from tests.conftest import EVENTS, ROOT

pytestmark = pytest.mark.sandbox
DEFAULT = EVENTS / "drills" / "default.json"


def _drill(runner: DrillRunner, *args: str, ledger_table: str | None = "") -> tuple[int, str, str]:
    """The drill command on the sandbox's stack; ``ledger_table``: the stack's (default), another
    name, or None for none (the timeline is then the execution history's)."""
    aws = runner.aws
    out, err = io.StringIO(), io.StringIO()
    clients = {"sfn": aws.client("stepfunctions"), "sagemaker": aws.client("sagemaker"), "cloudformation": None, "sleep": runner.advance}
    machines = ["--state-machine-arn", aws.state_machines["NodeRecoveryStateMachine"]]
    machines += ["--job-state-machine-arn", aws.state_machines["JobRecoveryStateMachine"], "--cluster", "llm-train"]
    if ledger_table is not None:
        machines += ["--ledger-table", ledger_table or aws.ledger_table]
    argv = ["drill", *machines, "--poll-seconds", "30", "--name", "drill-test", *args]
    code = main(argv, stdout=out, stderr=err, drill_clients=clients, dynamodb=aws.client("dynamodb"))
    return code, out.getvalue(), err.getvalue()


def _phase_rows(printed: str, source: str = "the incident record") -> dict[str, float]:
    """{phase: seconds} from the printed timeline."""
    rows = {}
    for line in printed.split(f"timeline (from {source}):", 1)[1].splitlines():
        match = re.match(r"^\s+(\S+)\s+T\+\S+\s+(?:(\d+)m )?([\d.]+)s\s+\|", line)
        if match:
            rows[match[1]] = float(match[2] or 0) * 60 + float(match[3])
    return rows


def test_given_a_scenario_then_the_drill_is_a_dry_run_that_prints_progress_outcome_and_timeline(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        # When the operator drills the default scenario without --live
        code, printed, _ = _drill(runner, "--scenario", str(DEFAULT))
        # Then the scenario's node ref was resolved on the cluster and the request was a dry run
        request = json.loads(printed.split("input: ", 1)[1].splitlines()[0])
        assert request["dry_run"] is True and request["cluster"] == "llm-train" and len(request["node_ids"]) == 1
        assert "dry run: nothing on the cluster changes" in printed
        # And progress named each state as the execution entered it, in workflow order
        states = [line.split(maxsplit=1)[1] for line in printed.splitlines() if line.strip().startswith("T+") and "!" not in line]
        assert states[:5] == ["Receive Request", "Validate Request", "Lock Nodes", "Check Lock", "Assess Nodes"]
        assert "Cordon Nodes" in states and "Record Outcome" in states
        # And it ended with the outcome, then the timeline from the execution history
        assert code == 0 and "status: SUCCEEDED" in printed and "outcome: dry_run" in printed
        assert {"assess", "cordon", "replace", "record"} <= set(_phase_rows(printed))
        # And nothing on the cluster changed
        assert aws.api_calls.counts.get("sagemaker.BatchReplaceClusterNodes", 0) == 0
        mutating = ("drain_nodes", "cordon_nodes", "resume_nodes", "resubmit_job")
        assert not [c for c in runner.slurm.commands if c["type"] in mutating and not c.get("dry_run")]


def test_given_live_then_the_timeline_is_the_incident_records_and_the_history_agrees(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        node = runner.double.current("workers:3", t=0).node_id
        code, printed, _ = _drill(runner, "--node", node, "--live", "--yes")
        assert code == 0 and "outcome: recovered" in printed and "LIVE" in printed
        assert aws.api_calls.counts["sagemaker.BatchReplaceClusterNodes"] == 1
        # The printed phases are the ones the ledger's incident record holds, to the tenth of a second
        from hyperpod_recovery.adapters.ledger import DynamoLedger

        record = DynamoLedger(aws.ledger_table, dynamodb=aws.client("dynamodb")).get_incident("drill-test")
        assert record is not None and record.outcome == "recovered"
        recorded = {p.name: (p.end - p.start).total_seconds() for p in record.phases}
        printed_phases = _phase_rows(printed)
        assert printed_phases == {name: pytest.approx(seconds, abs=0.1) for name, seconds in recorded.items()}
        assert printed_phases["wait_for_rejoin"] > 600  # ten virtual minutes of replacement, seconds of wall time
        # And the phases read back from GetExecutionHistory (what an execution that never recorded shows) agree
        # (the drill names the incident by its id, the execution's name, as every other command does)
        assert "incident: drill-test\n" in printed and "arn:aws:states" not in printed
        machine = aws.state_machines["NodeRecoveryStateMachine"]
        execution_arn = machine.replace(":stateMachine:", ":execution:") + ":drill-test"
        history = phases_from_history(_history(aws.client("stepfunctions"), execution_arn))
        by_name = {p.name: p.end - p.start for p in history}
        assert by_name["wait_for_rejoin"] == pytest.approx(recorded["wait_for_rejoin"], abs=5)
        # And the figures the dashboard gets are printed too
        assert "TimeToRecoverSeconds" in printed


def test_given_no_readable_ledger_then_the_timeline_is_the_execution_historys(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed():
        # Given a ledger table name that does not exist (a wrong --ledger-table, or no access to it)
        code, printed, err = _drill(runner, "--scenario", str(DEFAULT), ledger_table="no-such-table")
    # Then the drill still ends with its outcome, says why, and draws the execution history's phases
    assert code == 0 and "outcome: dry_run" in printed
    assert "note: the incident record could not be read" in err and "ResourceNotFoundException" in err
    assert {"assess", "cordon", "replace", "record"} <= set(_phase_rows(printed, "the execution history"))


def test_given_a_job_then_job_recovery_runs_as_a_dry_run(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(EVENTS / "drills" / "job-application-failure.json"), log_path=tmp_path / "lambda.log")
    with runner.deployed():
        code, printed, _ = _drill(runner, "--job", runner.scenario.jobs[0].id, "--reason", "quarterly")
    assert "Validate Job Request" in printed and "Classify Failure" in printed
    assert "outcome: dry_run" in printed and code == 0
    assert {"inspect", "record"} <= set(_phase_rows(printed))


def test_given_a_start_input_for_a_job_slurm_forgot_then_it_escalates_and_exits_1(tmp_path: Path) -> None:
    # The sample input names job 1001, which this scenario's Slurm never ran
    runner = DrillRunner(load_scenario(EVENTS / "drills" / "job-application-failure.json"), log_path=tmp_path / "lambda.log")
    with runner.deployed():
        code, printed, _ = _drill(runner, "--input", str(EVENTS / "manual-job" / "job_drill_dry_run.json"))
    assert code == 1 and "status: FAILED" in printed and "outcome: escalated (JobSpecUnavailable)" in printed
    assert "! LambdaFunctionFailed: JobSpecUnavailable" in printed


def test_given_live_without_yes_then_nothing_is_started(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        code, printed, err = _drill(runner, "--scenario", str(DEFAULT), "--live")
        assert code == 2 and "add --yes" in err and printed == ""
        assert aws.api_calls.counts.get("stepfunctions.StartExecution", 0) == 0


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ("job-crash-loop.json", "name the real one with --job"),
    ],
)
def test_given_a_scenario_that_cannot_map_to_the_cluster_then_usage_error(tmp_path: Path, scenario: str, message: str) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed():
        code, _, err = _drill(runner, "--scenario", str(EVENTS / "drills" / scenario))
    assert code == 2 and message in err


def test_node_refs_resolve_in_launch_order_and_bad_refs_say_why() -> None:
    groups = {"workers": ["i-a", "i-b", "i-c"]}
    assert resolve_node_refs(["workers:2", "workers:0", "workers:2"], groups) == ["i-c", "i-a"]
    with pytest.raises(DrillUsageError, match="has 3 node"):
        resolve_node_refs(["workers:3"], groups)
    with pytest.raises(DrillUsageError, match="no instance group 'gpu'"):
        resolve_node_refs(["gpu:0"], groups)
    with pytest.raises(DrillUsageError, match="must look like"):
        resolve_node_refs(["workers"], groups)


class _CloudFormation:
    def __init__(self, stack: dict[str, Any]) -> None:
        self.stack = stack

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        return {"Stacks": [self.stack]}


def test_a_stack_is_read_from_its_outputs_and_cluster_parameter() -> None:
    stack = {
        "Outputs": [{"OutputKey": "StateMachineArn", "OutputValue": "arn:n"}, {"OutputKey": "JobStateMachineArn", "OutputValue": "arn:j"}],
        "Parameters": [{"ParameterKey": "ClusterName", "ParameterValue": "llm-train"}],
    }
    assert resolve_stack(_CloudFormation(stack), "hpr") == Targets("llm-train", "arn:n", "arn:j")
    stack["Outputs"].append({"OutputKey": "LedgerTableName", "OutputValue": "hpr-ledger"})
    assert resolve_stack(_CloudFormation(stack), "hpr").ledger_table == "hpr-ledger"
    with pytest.raises(DrillUsageError, match="not a hyperpod-recovery stack"):
        resolve_stack(_CloudFormation({"Outputs": [], "Parameters": []}), "other")


def test_every_state_of_both_workflows_has_a_phase() -> None:
    # The recovery workflows (agent_check.asl.json is the preflight's, not an incident's)
    for path in (ROOT / "statemachines").glob("*_recovery.asl.json"):
        definition = json.loads(path.read_text())
        names = set(definition["States"])
        for state in definition["States"].values():
            names |= set(state.get("ItemProcessor", {}).get("States", {}))
        assert names <= set(PHASE_OF_STATE), (path.name, sorted(names - set(PHASE_OF_STATE)))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the drill"),  # no such file
        ("{not json", "cannot read the drill"),
        ('["cluster"]', "a start input is a JSON object"),
    ],
)
def test_given_an_unreadable_start_input_then_exit_2_and_nothing_started(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "input.json"
    if content is not None:
        path.write_text(content)
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        code, printed, err = _drill(runner, "--input", str(path))
        assert code == 2 and message in err and printed == ""
        assert aws.api_calls.counts.get("stepfunctions.StartExecution", 0) == 0


class _MissingStack:
    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "ValidationError", "Message": f"Stack with id {StackName} does not exist"}}, "DescribeStacks")


def test_given_a_stack_that_does_not_exist_then_exit_3_naming_the_stack_and_where_it_was_looked_for() -> None:
    out, err = io.StringIO(), io.StringIO()
    clients = {"sfn": None, "sagemaker": None, "cloudformation": _MissingStack()}
    code = main(["drill", "--stack", "nope", "--node", "i-0123456789abcdef0"], stdout=out, stderr=err, drill_clients=clients)
    assert code == 3 and err.getvalue().startswith("hyperpod-recovery: no stack nope in ") and out.getvalue() == ""
    assert "--region REGION and --profile NAME" in err.getvalue()


def test_given_the_sandbox_stack_then_cloudformation_describes_it_as_a_deployed_one(tmp_path: Path) -> None:
    # Given the sandbox deployed from template.yaml
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        # When the operator tools resolve it by stack name, as they do a real deployment
        targets = resolve_stack(aws.client("cloudformation"), "sandbox")
        # Then its parameters and outputs are the ones the sandbox built
        assert targets.cluster == "llm-train"
        assert targets.node_state_machine == aws.state_machines["NodeRecoveryStateMachine"]
        assert targets.job_state_machine == aws.state_machines["JobRecoveryStateMachine"]


def test_given_a_node_as_group_and_index_then_it_is_resolved_on_the_cluster(tmp_path: Path) -> None:
    # Given `make deploy`'s suggestion, a node named as <compute-group>:<index>, beside an instance id
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        other = runner.double.current("workers:5", t=0).node_id
        code, printed, _ = _drill(runner, "--node", "workers:3", "--node", other, "--node", "workers:3")
        # (the 4th of group workers in launch order, as ListClusterNodes reports them)
        expected = cluster_nodes_by_group(aws.client("sagemaker"), "llm-train")["workers"][3]
    # Then the request names the instances, each once, and says what the reference was
    request = json.loads(printed.split("input: ", 1)[1].splitlines()[0])
    assert request["node_ids"] == [expected, other] and f"nodes workers:3 are {expected}" in printed
    assert code == 0 and "outcome: dry_run" in printed


def test_given_a_group_the_cluster_does_not_have_then_exit_2(tmp_path: Path) -> None:
    runner = DrillRunner(load_scenario(DEFAULT), log_path=tmp_path / "lambda.log")
    with runner.deployed():
        code, _, err = _drill(runner, "--node", "gpu:0")
    assert code == 2 and "no instance group 'gpu'" in err
