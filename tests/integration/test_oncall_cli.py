"""The on-call commands (``incidents``, ``locks``, ``stop``, ``hold``/``unhold``, ``breaker --stack``)
against the sandbox's deployed stack: the real template's table (with its IncidentsByCluster index),
the real state machines and handlers in moto, the HyperPod double; virtual time moved by the runner.
One test per command and per refusal."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.adapters.ledger import INCIDENTS_INDEX, DynamoLedger
from hyperpod_recovery_cli.main import main
from sandbox.aws import SandboxAWS
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes
from tests.conftest import EVENTS

pytestmark = pytest.mark.sandbox
DEFAULT = EVENTS / "drills" / "default.json"
REJOIN_DEADLINE = EVENTS / "drills" / "rejoin-deadline.json"
# Each orchestrator gets every test: (scenario, its escalating twin)
ORCHESTRATORS = {
    "slurm": (DEFAULT, REJOIN_DEADLINE),
    "eks": (EVENTS / "drills" / "eks-default.json", EVENTS / "drills" / "eks-rejoin-deadline.json"),
}


class Terminal(io.StringIO):
    """A terminal that types ``answer`` when asked."""

    def isatty(self) -> bool:
        return True


@contextmanager
def stack(tmp_path: Path, scenario: Path = DEFAULT, **changes: Any) -> Iterator[tuple[DrillRunner, SandboxAWS]]:
    loaded = load_scenario(scenario)
    runner = DrillRunner(with_changes(loaded, changes) if changes else loaded, log_path=tmp_path / "lambda.log")
    with runner.deployed() as aws:
        yield runner, aws


def cli(runner: DrillRunner, *argv: str, stdin: io.StringIO | None = None) -> tuple[int, str, str]:
    aws = runner.aws
    clients = {
        "sfn": aws.client("stepfunctions"),
        "sagemaker": aws.client("sagemaker"),
        "cloudformation": aws.client("cloudformation"),
        "sts": aws.client("sts"),
    }
    out, err = io.StringIO(), io.StringIO()
    now = runner.virtual_now()
    code = main(
        list(argv),
        stdout=out,
        stderr=err,
        drill_clients=clients,
        dynamodb=aws.client("dynamodb"),
        stdin=stdin or io.StringIO(),
        now=lambda: now,
    )
    return code, out.getvalue(), err.getvalue()


def ledger(aws: SandboxAWS) -> DynamoLedger:
    return DynamoLedger(aws.ledger_table, dynamodb=aws.client("dynamodb"))


def start_live(runner: DrillRunner, name: str, ref: str = "workers:3") -> str:
    """A live recovery of one node started by hand, left running ``seconds`` in (in Wait For Rejoin)."""
    node = runner.double.current(ref, t=0).node_id
    request = {"cluster": "llm-train", "node_ids": [node], "reason": "on-call test", "dry_run": False}
    sfn = runner.aws.client("stepfunctions")
    sfn.start_execution(stateMachineArn=runner.aws.state_machines["NodeRecoveryStateMachine"], name=name, input=json.dumps(request))
    runner.advance(120)  # cordoned and replacing: HyperPod takes ten minutes to bring the replacement
    return node


# --- incidents ------------------------------------------------------------------------------------
@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_given_a_recovered_incident_then_incidents_lists_it_with_its_job_copy_and_show_prints_record_next_steps_and_phases(
    tmp_path: Path, orchestrator: str
) -> None:
    with stack(tmp_path, ORCHESTRATORS[orchestrator][0]) as (runner, aws):
        runner.play()
        (record,) = ledger(aws).incidents("llm-train")
        # When on-call lists the incidents
        code, printed, _ = cli(runner, "incidents", "--stack", "sandbox")
        # Then the incident is there with its outcome, trigger, node and its job's copy
        assert code == 0 and "0 running, 1 recorded" in printed
        row = next(line for line in printed.splitlines() if line.startswith(record.incident_id))
        fate = record.job_fates[0]
        # (a job as its orchestrator shows it: a Slurm id, or an EKS object's namespace/name, never a uid)
        shown = f"{fate.namespace}/{fate.name}->{fate.copy_name}" if orchestrator == "eks" else f"{fate.job}->{fate.copy_id}"
        assert "recovered" in row and (record.hostnames or record.nodes)[0] in row and shown in row
        # And --json is the records, for scripts
        code, printed, _ = cli(runner, "incidents", "--stack", "sandbox", "--json")
        assert code == 0 and [r["incident_id"] for r in json.loads(printed)] == [record.incident_id]
        # And --escalated leaves out a recovery that needed nobody
        code, printed, _ = cli(runner, "incidents", "--stack", "sandbox", "--escalated")
        assert code == 0 and "0 running, 0 recorded (escalated)" in printed
        # When on-call shows it
        code, printed, _ = cli(runner, "incidents", "show", record.incident_id, "--stack", "sandbox")
        # Then the record's summary, what happens next, the timeline and the phases are printed
        assert code == 0 and record.summary in printed
        see = (
            f"kubectl -n {fate.namespace} get {(fate.kind or '').lower()} {fate.copy_name}"
            if orchestrator == "eks"
            else f"squeue -j {fate.copy_id}"
        )
        assert "what happens next:" in printed and see in printed
        assert "timeline (UTC):" in printed and "phases:" in printed and "wait_for_rejoin" in printed


def test_given_no_such_incident_then_show_refuses_with_the_command_that_lists_them(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, _):
        code, _, err = cli(runner, "incidents", "show", "nope-1", "--stack", "sandbox")
    assert code == 1 and "no incident nope-1" in err and "hyperpod-recovery incidents --stack sandbox" in err
    assert "Traceback" not in err


def test_given_a_running_incident_then_incidents_open_lists_it_and_show_says_it_has_no_record_yet(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, _):
        node = start_live(runner, "oncall-open")
        code, printed, _ = cli(runner, "incidents", "--stack", "sandbox", "--open")
        assert code == 0 and "1 running, 0 recorded (open)" in printed
        assert any(line.startswith("oncall-open") and "running" in line and node in line for line in printed.splitlines())
        code, printed, _ = cli(runner, "incidents", "show", "oncall-open", "--stack", "sandbox")
        assert code == 0 and "running since" in printed and "no record yet" in printed


@pytest.mark.parametrize("since", ["yesterday", "6x", "99999999h"])
def test_given_a_since_that_is_not_a_time_then_incidents_refuses_it_before_aws(tmp_path: Path, since: str) -> None:
    with stack(tmp_path) as (runner, _):
        code, _, err = cli(runner, "incidents", "--stack", "sandbox", "--since", since)
    assert code == 2 and "--since" in err


def test_the_incidents_index_holds_records_only(tmp_path: Path) -> None:
    """The sparse index's contract: only RECORD items carry both of its keys."""
    with stack(tmp_path, REJOIN_DEADLINE) as (runner, aws):
        runner.play()
        items = aws.client("dynamodb").scan(TableName=aws.ledger_table, IndexName=INCIDENTS_INDEX)["Items"]
    assert items and {item["sk"]["S"] for item in items} == {"RECORD"}


# --- stop ---------------------------------------------------------------------------------------
def test_given_a_running_incident_when_stopped_then_reconcile_records_it_aborted_with_who_and_why(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        start_live(runner, "oncall-stop")
        # When on-call stops it, confirming at the terminal
        code, printed, _ = cli(
            runner, "stop", "oncall-stop", "--stack", "sandbox", "--reason", "bad rack", "--by", "alice", stdin=Terminal("yes\n")
        )
        assert code == 0 and "stopped (OperatorStopped: stopped by alice (arn:aws:sts::" in printed
        runner.advance(60)  # the status-change event reaches Reconcile Execution
        # Then the incident is recorded aborted, naming who stopped it and why, and what it held is settled
        record = ledger(aws).get_incident("oncall-stop")
        assert record is not None and record.outcome == "aborted"
        assert (
            record.cause is not None
            and "OperatorStopped" in record.cause
            and "stopped by alice" in record.cause
            and "bad rack" in record.cause
        )
        holdings = ledger(aws).holdings("oncall-stop")
        assert holdings is None or not (holdings.claims or holdings.reserved)
        # And the change is in the ledger's audit log
        (entry,) = ledger(aws).audit_log("llm-train")
        assert (entry.action, entry.target, entry.reason) == ("stop", "oncall-stop", "bad rack") and entry.by.startswith(
            "alice (arn:aws:sts"
        )
        # And stopping it again changes nothing
        code, printed, _ = cli(runner, "stop", "oncall-stop", "--stack", "sandbox", "--reason", "again", "--yes")
        assert code == 0 and "already ended (ABORTED); nothing changed" in printed


def test_given_no_terminal_and_no_yes_then_stop_refuses_and_the_incident_runs_on(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        start_live(runner, "oncall-noyes")
        code, _, err = cli(runner, "stop", "oncall-noyes", "--stack", "sandbox", "--reason", "r")
        assert code == 2 and "add --yes to confirm" in err
        code, printed, _ = cli(runner, "stop", "oncall-noyes", "--stack", "sandbox", "--reason", "r", stdin=Terminal("no\n"))
        assert code == 1 and "nothing changed" in printed
        assert "oncall-noyes" in aws.running_executions()


@pytest.mark.parametrize(("argv", "said"), [(["--reason", "  "], "--reason is empty"), (["--reason", "x\x1b[2J"], "control character")])
def test_given_a_blank_or_terminal_driving_reason_then_stop_refuses_before_aws(tmp_path: Path, argv: list[str], said: str) -> None:
    with stack(tmp_path) as (runner, _):
        code, _, err = cli(runner, "stop", "any-1", "--stack", "sandbox", "--yes", *argv)
    assert code == 2 and said in err


def test_given_no_such_execution_then_stop_refuses(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, _):
        code, _, err = cli(runner, "stop", "nope-1", "--stack", "sandbox", "--reason", "r", "--yes")
    assert code == 1 and "no execution nope-1" in err


# --- locks --------------------------------------------------------------------------------------
@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_given_an_escalation_that_keeps_its_nodes_locked_then_locks_lists_them_and_release_frees_them_with_an_audit(
    tmp_path: Path, orchestrator: str
) -> None:
    with stack(tmp_path, ORCHESTRATORS[orchestrator][1]) as (runner, aws):
        runner.play()
        (record,) = ledger(aws).incidents("llm-train")
        assert record.outcome == "escalated"
        instance, hostname = record.nodes[0], record.hostnames[0]
        # When on-call lists the locks
        code, printed, _ = cli(runner, "locks", "--stack", "sandbox")
        # Then the node lock and the hostname lock are there, held by the escalated incident, with until when
        assert code == 0
        rows = [line for line in printed.splitlines() if record.incident_id in line]
        assert any(line.startswith(instance) and "node lock" in line for line in rows)
        assert any(line.startswith(hostname) and "hostname lock" in line for line in rows)
        # When on-call releases the node by its instance id
        code, printed, _ = cli(
            runner, "locks", "release", instance, "--stack", "sandbox", "--reason", "replaced by hand", "--yes", "--by", "bob"
        )
        # Then its hostname lock goes with it (the holder's record pairs the two)
        assert code == 0
        assert f"released {instance}, host:{hostname}" in printed or f"released host:{hostname}, {instance}" in printed
        # Then no lock is left and each release is in the audit log
        now = runner.virtual_now()
        assert ledger(aws).node_locks("llm-train", now) == []
        assert [(e.action, e.target) for e in ledger(aws).audit_log("llm-train")] == [("locks release", instance)]
        # And a release of a node nobody holds changes nothing
        code, printed, _ = cli(runner, "locks", "release", instance, "--stack", "sandbox", "--reason", "again", "--yes")
        assert code == 0 and "nothing changed" in printed


def test_given_a_lock_of_a_running_incident_then_release_refuses_and_names_the_stop_command(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        node = start_live(runner, "oncall-locked")
        code, _, err = cli(runner, "locks", "release", node, "--stack", "sandbox", "--reason", "r", "--yes")
        assert code == 1 and "still running" in err and "hyperpod-recovery stop oncall-locked --stack sandbox" in err
        now = runner.virtual_now()
        assert ledger(aws).lock_holders("llm-train", [node], now) == {node: "oncall-locked"}


# --- hold / unhold ------------------------------------------------------------------------------
@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_given_a_held_hostname_then_a_fault_on_it_changes_nothing_and_the_incident_says_who_holds_it(
    tmp_path: Path, orchestrator: str
) -> None:
    with stack(tmp_path, ORCHESTRATORS[orchestrator][0]) as (runner, aws):
        # the scenario's fault is on workers:7, held by the name its orchestrator gives it
        node = runner.double.current("workers:7", t=0).node_id
        hostname = f"hyperpod-{node}" if orchestrator == "eks" else runner.double.slurm_name("workers:7")
        # Given on-call holds the node by its hostname
        code, printed, _ = cli(runner, "hold", hostname, "--stack", "sandbox", "--reason", "vendor RMA 42", "--yes", "--by", "carol")
        assert code == 0 and "held by carol" in printed
        # When the fault arrives
        runner.play()
        (record,) = ledger(aws).incidents("llm-train")
        # Then the pipeline left it alone (nothing replaced) and the record says who holds it and why
        assert aws.api_calls.counts.get("sagemaker.BatchReplaceClusterNodes", 0) == 0
        assert record.outcome == "rejected"
        assert record.cause is not None and f"{hostname} is held by carol" in record.cause and "vendor RMA 42" in record.cause
        skipped = [n for n in record.node_fates if n.fate == "skipped"]
        assert skipped and "held" in skipped[0].detail
        # And locks shows the hold; unhold removes it, with the audit entries of both
        code, printed, _ = cli(runner, "locks", "--stack", "sandbox")
        assert f"{hostname}: held by carol" in printed
        code, printed, _ = cli(runner, "unhold", hostname, "--stack", "sandbox", "--reason", "RMA done", "--yes", "--by", "carol")
        assert code == 0 and "hold removed" in printed
        assert ledger(aws).node_holds("llm-train", [hostname]) == {}
        assert [e.action for e in ledger(aws).audit_log("llm-train")] == ["hold", "unhold"]


def test_given_a_node_the_cluster_does_not_have_then_hold_refuses_and_holds_nothing(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        code, _, err = cli(runner, "hold", "ip-10-99-99-99", "--stack", "sandbox", "--reason", "r", "--yes")
        assert code == 1 and "has no such node" in err
        assert ledger(aws).all_node_holds("llm-train") == []


def test_given_a_held_node_then_a_second_hold_keeps_the_first_and_unhold_of_an_unheld_node_changes_nothing(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        node = runner.double.current("workers:1", t=0).node_id
        assert cli(runner, "hold", node, "--stack", "sandbox", "--reason", "first", "--yes", "--by", "dan")[0] == 0
        code, printed, _ = cli(runner, "hold", node, "--stack", "sandbox", "--reason", "second", "--yes", "--by", "eve")
        assert code == 0 and "already held by dan" in printed and ledger(aws).node_holds("llm-train", [node])[node].reason == "first"
        code, printed, _ = cli(runner, "unhold", "ip-10-0-0-1", "--stack", "sandbox", "--reason", "r", "--yes")
        assert code == 0 and "not held" in printed


# --- breaker --stack ----------------------------------------------------------------------------
def test_given_the_stack_then_breaker_status_and_reset_find_the_cluster_and_ledger_and_reset_is_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with stack(tmp_path) as (runner, aws):
        code, printed, _ = cli(runner, "breaker", "status", "--stack", "sandbox")
        assert code == 0 and "llm-train: breaker CLOSED" in printed
        opened = (
            ledger(aws)
            .breaker("llm-train")
            .changed_to("open", reason="5 recoveries in 1 h", by="incident-1", at=datetime(2026, 11, 26, tzinfo=UTC))
        )
        ledger(aws).save_breaker("llm-train", opened)
        code, _, err = cli(runner, "breaker", "reset", "--stack", "sandbox", "--reason", " ", "--yes")
        assert code == 2 and "--reason is empty" in err
        with pytest.raises(SystemExit) as refused:  # argparse: one line on stderr, exit 2
            cli(runner, "breaker", "reset", "--stack", "sandbox", "--cluster", "llm-train", "--reason", "r")
        assert refused.value.code == 2 and "not allowed with argument --stack" in capsys.readouterr().err
        code, printed, _ = cli(runner, "breaker", "reset", "--stack", "sandbox", "--reason", "rack fixed", "--by", "frank", "--yes")
        assert code == 0 and "breaker closed by frank" in printed
        assert [(e.action, e.reason) for e in ledger(aws).audit_log("llm-train")] == [("breaker reset", "rack fixed")]


# --- the offline try-out (python -m sandbox.oncall; make oncall) ---------------------------------
def test_given_a_scenario_and_commands_then_the_try_out_plays_it_and_runs_each_command_with_the_names_filled_in(tmp_path: Path) -> None:
    from sandbox.oncall import run

    printed = io.StringIO()
    code = run(
        REJOIN_DEADLINE,
        ["incidents --stack sandbox --escalated", "locks release {node} --stack sandbox --reason 'handled' --yes", "locks --stack sandbox"],
        tmp_path / "lambda.log",
        printed,
    )
    text = printed.getvalue()
    assert code == 0 and "RejoinDeadlineExceeded" in text and "{node}" not in text
    assert "$ hyperpod-recovery locks release i-" in text and "released" in text
    assert "0 node lock(s)" in text.split("$ hyperpod-recovery locks --stack sandbox", 1)[1]


def test_given_a_refused_command_then_the_try_out_returns_its_exit_code(tmp_path: Path) -> None:
    from sandbox.oncall import main as oncall_main

    assert oncall_main(["--scenario", str(DEFAULT), "--out", str(tmp_path), "--run", "stop nope-1 --stack sandbox --reason r --yes"]) == 1
    with pytest.raises(SystemExit) as usage:
        oncall_main(["--scenario", str(DEFAULT)])
    assert usage.value.code == 2


def test_given_a_hold_by_hostname_then_unhold_by_the_instance_id_removes_it(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        node = runner.double.current("workers:2", t=0).node_id
        hostname = runner.double.slurm_name("workers:2")
        assert cli(runner, "hold", hostname, "--stack", "sandbox", "--reason", "r", "--yes")[0] == 0
        code, printed, _ = cli(runner, "unhold", node, "--stack", "sandbox", "--reason", "done", "--yes")
        assert code == 0 and f"{hostname}: hold removed" in printed
        assert ledger(aws).all_node_holds("llm-train") == []


def test_given_a_running_incident_then_show_json_is_json_and_open_with_escalated_is_refused(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, _):
        start_live(runner, "oncall-json")
        code, printed, _ = cli(runner, "incidents", "show", "oncall-json", "--stack", "sandbox", "--json")
        assert code == 0 and json.loads(printed)["state"] == "running"
        code, _, err = cli(runner, "incidents", "--stack", "sandbox", "--open", "--escalated")
        assert code == 2 and "--open and --escalated" in err


def test_a_since_with_an_offset_is_the_same_moment_in_utc() -> None:
    from hyperpod_recovery_cli.oncall import _since

    now = datetime(2026, 11, 26, 12, tzinfo=UTC)
    assert _since("2026-11-26T02:00+05:00", now) == datetime(2026, 11, 25, 21, tzinfo=UTC)
    assert _since("2026-11-26T02:00+05:00", now).isoformat() < datetime(2026, 11, 25, 22, tzinfo=UTC).isoformat()  # as the index compares
    assert _since("6h", now) == datetime(2026, 11, 26, 6, tzinfo=UTC)


def test_given_a_drill_in_the_try_out_then_it_follows_its_execution_on_virtual_time_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make oncall RUN='drill --stack sandbox …'` once slept on real time while the sandbox's execution
    waited for virtual time nobody advanced: silent for hours. A sleep on real time fails here."""
    import time

    from sandbox.oncall import run

    def no_real_sleep(seconds: float) -> None:
        raise AssertionError(f"a poller slept {seconds}s of real time: the sandbox's executions move on virtual time")

    monkeypatch.setattr(time, "sleep", no_real_sleep)
    printed = io.StringIO()
    code = run(DEFAULT, ["drill --stack sandbox --node workers:3 --live --yes"], tmp_path / "lambda.log", printed)
    assert code == 0 and "status: SUCCEEDED" in printed.getvalue() and "outcome: recovered" in printed.getvalue()


def test_given_an_eks_escalation_then_release_by_the_replacements_name_or_a_lock_key_frees_the_replaced_nodes_locks(
    tmp_path: Path,
) -> None:
    with stack(tmp_path, ORCHESTRATORS["eks"][1]) as (runner, aws):
        runner.play()
        (record,) = ledger(aws).incidents("llm-train")
        (fate,) = [f for f in record.node_fates if f.replacement_node]
        # When on-call names the node by what stands in its place now
        code, printed, err = cli(runner, "locks", "release", fate.replacement_node or "", "--stack", "sandbox", "--reason", "r", "--yes")
        # Then the replaced node's lock and its hostname lock are released
        assert code == 0, err
        assert f"host:{fate.node}" in printed and str(fate.instance) in printed
        assert ledger(aws).node_locks("llm-train", runner.virtual_now()) == []
        # And a lock's key as `locks --json` shows it is taken as the node it names
        code, printed, err = cli(runner, "locks", "release", f"host:{fate.node}", "--stack", "sandbox", "--reason", "r", "--yes")
        assert code == 0 and "nothing changed" in printed, err
