"""One rule for every command (changes.py), over the whole argparse tree, not a hand list: each
subcommand is declared read-only or a change; a change is refused without --yes and a terminal
(one line, exit 2, before any AWS call), runs with --yes, and leaves an AUDIT item in the ledger.
Each change has a scene here: the sandbox's stack in the state where the command changes something."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.models.records import BreakerState, NodeHold
from hyperpod_recovery_cli import deploy as deploy_module
from hyperpod_recovery_cli.app import _parser
from hyperpod_recovery_cli.changes import COMMANDS, Change, ReadOnly, commands
from hyperpod_recovery_cli.main import main
from hyperpod_recovery_cli.verdicts import verdict_id
from sandbox.aws import SandboxAWS
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from tests.conftest import EVENTS
from tests.integration.test_oncall_cli import Terminal, ledger, start_live
from tests.integration.test_verdicts_cli import hung

pytestmark = pytest.mark.sandbox
ROOT = Path(__file__).resolve().parents[2]
TREE = dict(commands(_parser()))
CHANGES = sorted(path for path, kind in COMMANDS.items() if isinstance(kind, Change))
# What each audit item's action is, per change (AuditEntry.action).
ACTIONS = {"verdicts confirm": "verdict confirm", "verdicts reject": "verdict reject", "drill": "drill live"}
REASON = ["--reason", "checked by hand"]
OVERRIDES = {"arm": {"DryRun": "true"}}  # (a stack to arm)


class ReachedAws(Exception):
    """A command called AWS where the rule says it must not have."""


class NoAws:
    def __getattr__(self, name: str) -> Any:
        raise ReachedAws(name)


@contextmanager
def world(tmp_path: Path, path: str = "") -> Iterator[tuple[DrillRunner, SandboxAWS]]:
    # (stall verdicts observed, not enforced: a verdict to review without a recovery under it)
    runner = DrillRunner(load_scenario(EVENTS / "drills" / "default.json"), log_path=tmp_path / "lambda.log")
    with runner.deployed(overrides={"HangStallMode": "observe"} | OVERRIDES.get(path, {})) as aws:
        yield runner, aws


def run(runner: DrillRunner, argv: list[str], *, stdin: io.StringIO | None = None, aws: bool = True) -> tuple[int, str, str]:
    sandbox = runner.aws
    names = ("stepfunctions", "sagemaker", "cloudformation", "sts", "lambda")
    clients = {("sfn" if n == "stepfunctions" else n): (sandbox.client(n) if aws else NoAws()) for n in names}
    out, err = io.StringIO(), io.StringIO()
    now = runner.virtual_now()
    code = main(
        argv,
        stdout=out,
        stderr=err,
        drill_clients=clients | {"sleep": runner.advance},
        dynamodb=sandbox.client("dynamodb") if aws else NoAws(),
        s3=sandbox.client("s3") if aws else NoAws(),
        stdin=stdin or io.StringIO(),
        now=lambda: now,
    )
    return code, out.getvalue(), err.getvalue()


# --- the scenes: argv (without --yes) that changes something in this state ---------------------------
def _breaker(runner: DrillRunner, _: pytest.MonkeyPatch) -> list[str]:
    opened = BreakerState().changed_to("open", reason="3 failed recoveries in 1 h", by="pipeline", at=runner.virtual_now())
    ledger(runner.aws).save_breaker("llm-train", opened)
    return ["breaker", "reset", "--stack", "sandbox", *REASON]


def _release(runner: DrillRunner, _: pytest.MonkeyPatch) -> list[str]:
    now = runner.virtual_now()
    record = ledger(runner.aws).incidents("llm-train")
    node = runner.double.current("workers:3", t=0).node_id
    assert record == []
    acquired = ledger(runner.aws).acquire_locks("ended-1", "llm-train", [node], now, timedelta(hours=1))
    assert acquired.acquired  # (an incident no state machine runs: ended, its lock left)
    return ["locks", "release", node, "--stack", "sandbox", *REASON]


def _stop(runner: DrillRunner, _: pytest.MonkeyPatch) -> list[str]:
    start_live(runner, "rule-stop")
    return ["stop", "rule-stop", "--stack", "sandbox", *REASON]


def _hold(runner: DrillRunner, _: pytest.MonkeyPatch) -> list[str]:
    return ["hold", runner.double.current("workers:3", t=0).node_id, "--stack", "sandbox", *REASON]


def _unhold(runner: DrillRunner, _: pytest.MonkeyPatch) -> list[str]:
    node = runner.double.current("workers:3", t=0).node_id
    ledger(runner.aws).hold_node("llm-train", NodeHold(node=node, by="alice", reason="bad NIC", at=runner.virtual_now()))
    return ["unhold", node, "--stack", "sandbox", *REASON]


def _review(word: str) -> Callable[[DrillRunner, pytest.MonkeyPatch], list[str]]:
    def scene(runner: DrillRunner, _: pytest.MonkeyPatch) -> list[str]:
        return ["verdicts", word, verdict_id(hung(runner).verdict), "--stack", "sandbox", *REASON]

    return scene


def _arm(runner: DrillRunner, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    # ASSUMPTION: the preflight passes (its own tests drive it); the rule is what is tested here.
    monkeypatch.setattr(deploy_module, "run_preflight", lambda args, **_: 0)
    return ["arm", "--stack", "sandbox", *REASON]


def _deploy(runner: DrillRunner, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    cloudformation = runner.aws.client("cloudformation")

    def sam(command: list[str]) -> int:
        """Stands in for `sam deploy` (what sam is given is test_deploy_cli's): the stack is updated."""
        given = dict(pair.split("=", 1) for pair in command[command.index("--parameter-overrides") + 1 :])
        (stack,) = cloudformation.describe_stacks(StackName="sandbox")["Stacks"]
        parameters = [
            {"ParameterKey": key, "ParameterValue": given[key].strip('"')}
            if key in given
            else {"ParameterKey": key, "UsePreviousValue": True}
            for key in (p["ParameterKey"] for p in stack["Parameters"])
        ]
        cloudformation.update_stack(StackName="sandbox", UsePreviousTemplate=True, Parameters=parameters)
        return 0

    monkeypatch.setattr(deploy_module.subprocess, "call", sam)
    return ["deploy", "--cluster", "llm-train", "--stack", "sandbox", "--param", "BreakerMaxFailures=4", *REASON]


def _drill(runner: DrillRunner, _: pytest.MonkeyPatch) -> list[str]:
    return ["drill", "--stack", "sandbox", "--node", "workers:0", "--live", "--poll-seconds", "30", *REASON]


SCENES: dict[str, Callable[[DrillRunner, pytest.MonkeyPatch], list[str]]] = {
    "breaker reset": _breaker,
    "locks release": _release,
    "stop": _stop,
    "hold": _hold,
    "unhold": _unhold,
    "verdicts confirm": _review("confirm"),
    "verdicts reject": _review("reject"),
    "arm": _arm,
    "deploy": _deploy,
    "drill": _drill,
}


# --- the registry ----------------------------------------------------------------------------------
def test_every_subcommand_of_the_tree_is_declared_read_only_or_a_change_and_nothing_else_is() -> None:
    assert set(TREE) == set(COMMANDS)
    assert all(isinstance(kind, Change | ReadOnly) for kind in COMMANDS.values())


def test_a_subcommand_added_without_a_declaration_stops_the_cli_from_starting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(COMMANDS, "hold")
    with pytest.raises(KeyError, match="hold"):
        _parser()


def test_every_change_has_a_scene_here_and_a_yes_option() -> None:
    assert set(SCENES) == set(CHANGES)
    for path in CHANGES:
        assert any("--yes" in action.option_strings for action in TREE[path]._actions), path


# --- the rule, for every change --------------------------------------------------------------------
@pytest.mark.parametrize("path", CHANGES)
def test_given_no_terminal_and_no_yes_then_a_change_is_refused_in_one_line_before_any_aws_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    with world(tmp_path, path) as (runner, _):
        argv = SCENES[path](runner, monkeypatch)
        # When it is run from a script (stdin no terminal), without --yes, with an AWS that fails any call
        code, out, err = run(runner, argv, aws=False)
    # Then it is refused in one line naming the command and --yes
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"hyperpod-recovery: {path} ") and "add --yes" in err


@pytest.mark.parametrize("path", CHANGES)
def test_given_yes_then_a_change_is_made_and_kept_in_the_audit_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    with world(tmp_path, path) as (runner, aws):
        argv = SCENES[path](runner, monkeypatch)
        before = ledger(aws).audit_log("llm-train")
        code, out, err = run(runner, [*argv, "--yes"])
        audited = ledger(aws).audit_log("llm-train")
    assert code in (0, 1) and "Traceback" not in err, err  # (a live drill's outcome may be 1: it ran)
    assert [entry.action for entry in audited[len(before) :]] == [ACTIONS.get(path, path)], out + err
    assert audited[-1].reason == "checked by hand"


# Where the question is not ours: deploy's is sam's change set (the declined one is tested below); a
# live drill needs --yes even at a terminal (typed, never pasted by accident).
NOT_ASKED = {"deploy", "drill"}


@pytest.mark.parametrize("path", sorted(set(CHANGES) - NOT_ASKED))
def test_given_a_terminal_then_a_change_asks_naming_it_and_a_no_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    with world(tmp_path, path) as (runner, aws):
        argv = SCENES[path](runner, monkeypatch)
        before = ledger(aws).audit_log("llm-train")
        code, out, err = run(runner, argv, stdin=Terminal("no\n"))
        assert code == 1 and "Type yes to go on:" in out and ("nothing changed" in out or "not armed" in out), out + err
        assert ledger(aws).audit_log("llm-train") == before


def test_given_a_terminal_then_breaker_reset_asks_naming_the_cluster_and_a_no_changes_nothing(tmp_path: Path) -> None:
    with world(tmp_path) as (runner, aws):
        argv = _breaker(runner, pytest.MonkeyPatch())
        code, out, _ = run(runner, argv, stdin=Terminal("no\n"))
        assert code == 1 and "Close the breaker of llm-train" in out and "nothing changed" in out
        assert ledger(aws).breaker("llm-train").state == "open" and ledger(aws).audit_log("llm-train") == []
        code, out, _ = run(runner, argv, stdin=Terminal("yes\n"))
        assert code == 0 and ledger(aws).breaker("llm-train").state == "closed"


def test_the_installed_command_refuses_a_breaker_reset_from_a_script_in_one_line() -> None:
    # As the runbook's form is typed into a script: no terminal, no --yes
    done = subprocess.run(
        [sys.executable, "-m", "hyperpod_recovery_cli", "breaker", "reset", "--cluster", "llm-train", "--table", "ledger", *REASON],
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "add --yes" in done.stderr, done.stderr


def test_given_a_change_set_declined_at_sams_prompt_then_deploy_audits_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with world(tmp_path) as (runner, aws):
        argv = _deploy(runner, monkeypatch)
        monkeypatch.setattr(deploy_module.subprocess, "call", lambda command: 0)  # sam asked, was told no, exits 0
        code, out, err = run(runner, argv, stdin=Terminal(""))
        assert code == 0 and "unchanged (an empty or declined change set)" in out, err
        assert ledger(aws).audit_log("llm-train") == []
