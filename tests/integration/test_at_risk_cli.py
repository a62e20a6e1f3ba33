"""``hyperpod-recovery verdicts at-risk`` against a drill's stack: at-risk-observe-only delivers an
Alertmanager alert and a CloudWatch alarm through At Risk (the real function, invoked as SNS would),
the node of the first fails later, and At Risk's tick settles its outcome; the command prints each
verdict with its evidence and each signal's precision and recall, from the ledger, as a human reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyperpod_recovery_cli.cli_json import validate
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes
from tests.conftest import EVENTS
from tests.integration.test_oncall_cli import cli

pytestmark = pytest.mark.sandbox
DRILL = EVENTS / "drills" / "at-risk-observe-only.json"


def played(tmp_path: Path, **changes: object) -> DrillRunner:
    scenario = load_scenario(DRILL)
    return DrillRunner(with_changes(scenario, changes) if changes else scenario, log_path=tmp_path / "lambda.log")


def test_given_the_drills_ledger_when_on_call_lists_at_risk_verdicts_then_it_prints_evidence_outcomes_precision_and_recall(
    tmp_path: Path,
) -> None:
    runner = played(tmp_path)
    with runner.deployed():
        runner.play()
        # When on-call lists the at-risk verdicts of the stack
        code, out, err = cli(runner, "verdicts", "at-risk", "--stack", "sandbox")
    # Then it prints both verdicts, newest first, with what each sender said
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("llm-train (stack sandbox): 2 at-risk verdict(s) (since ")
    table = lines[1 : lines.index("")]
    assert table[0].split() == ["VERDICT", "AGE", "SIGNAL", "MODE", "NODE", "SOURCE", "CHANCE", "OUTCOME", "ACTION"]
    assert table[1].split()[2:8] == ["thermal", "observe", "ip-10-2-0-7", "cloudwatch_alarm", "5%", "pending"]
    incident = f"({failed_incident(out)})"
    assert table[2].split()[2:9] == ["row_remap_pending", "observe", "ip-10-2-0-11", "alertmanager", "50%", "failed", incident]
    assert "hyperpod_recovery_signal=row_remap_pending; instance_id=" in out and "dimension.InstanceId=" in out
    # And per signal: the failed verdict is a hit (precision 1/1) that caught the window's only failure
    per_signal = lines[lines.index(next(line for line in lines if line.startswith("per signal"))) + 1 :]
    assert "node failures in the window: 1" in out
    assert [row.split() for row in per_signal] == [
        ["SIGNAL", "MODE", "VERDICTS", "FAILED", "NOT", "FAILED", "PENDING", "SWAPPED", "PRECISION", "RECALL"],
        ["row_remap_pending", "observe", "1", "1", "0", "0", "0", "100", "%", "(1/1)", "100", "%", "(1/1)"],
        ["thermal", "observe", "1", "0", "0", "1", "0", "n/a", "(0)", "0", "%", "(0/1)"],
    ]


def failed_incident(out: str) -> str:
    return out.split("failed (", 1)[1].split(")", 1)[0]


def test_given_the_drills_ledger_when_listed_as_json_then_each_signal_says_its_counts_and_measures(tmp_path: Path) -> None:
    runner = played(tmp_path)
    with runner.deployed():
        runner.play()
        code, out, _ = cli(runner, "verdicts", "at-risk", "--stack", "sandbox", "--json")
    document = json.loads(out)
    # (and the document is the one schema docs/cli-json.md names)
    assert code == 0 and document["node_failures"] == 1 and validate("verdicts at-risk", out).node_failures == 1
    remap = document["signals"]["row_remap_pending"]
    assert (remap["failed"], remap["precision"], remap["recall"], remap["mode"]) == (1, 1.0, 1.0, "observe")
    assert document["signals"]["thermal"]["pending"] == 1 and document["signals"]["thermal"]["precision"] is None
    assert {v["verdict"]["signal"] for v in document["verdicts"]} == {"row_remap_pending", "thermal"}


def test_given_no_failure_after_the_signal_then_recall_is_not_a_number_and_the_verdict_stays_pending(tmp_path: Path) -> None:
    runner = played(tmp_path, faults=json.loads(DRILL.read_text())["faults"][:2])
    with runner.deployed():
        runner.play()
        code, out, _ = cli(runner, "verdicts", "at-risk", "--stack", "sandbox", "--signal", "row_remap_pending")
    assert code == 0 and "node failures in the window: 0" in out
    assert out.splitlines()[-1].split() == ["row_remap_pending", "observe", "1", "0", "0", "1", "0", "n/a", "(0)", "n/a", "(0)"]
