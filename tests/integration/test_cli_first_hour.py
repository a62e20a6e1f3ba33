"""`hyperpod-recovery` on an operator's first hour: a laptop with no region, no credentials, a typo.
Every command answers with one line and a documented exit code, never a traceback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery import __version__
from hyperpod_recovery_cli.main import EXIT_AWS, EXIT_OK, EXIT_USAGE, main
from tests.conftest import EVENTS, ROOT

CONSOLE_SCRIPT = Path(sys.executable).parent / "hyperpod-recovery"
REGION = "us-west-2"
# Every command that reaches AWS, with arguments that are otherwise fine.
AWS_COMMANDS = [
    ("drill", "--stack", "hyperpod-recovery", "--node", "i-0123456789abcdef0"),
    ("drill", "--stack", "hyperpod-recovery", "--scenario", str(EVENTS / "drills" / "default.json")),
    ("breaker", "status", "--cluster", "llm-train", "--table", "ledger"),
    ("breaker", "reset", "--cluster", "llm-train", "--table", "ledger", "--reason", "checked", "--yes"),
    ("preflight", "--stack", "hyperpod-recovery"),
]
CHECKPOINT_COMMANDS = [
    ("checkpoint", "latest", "s3://llm-train-checkpoints/llama-70b"),
    ("checkpoint", "verify", "s3://llm-train-checkpoints/llama-70b/step-000001000/"),
    ("checkpoint", "commit", "s3://llm-train-checkpoints/llama-70b", "--step", "1000", "--job", "llama-70b"),
]


@pytest.fixture
def no_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """A laptop where nothing names a region: no variables, an empty ~/.aws/config."""
    empty = tmp_path / "aws-config"
    empty.write_text("")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata lookups off EC2
    return dict(os.environ)


@pytest.fixture
def no_credentials(no_region: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """The same laptop, with no credentials anywhere either."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", no_region["AWS_CONFIG_FILE"])
    return dict(os.environ)


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _console(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    assert CONSOLE_SCRIPT.exists(), f"{CONSOLE_SCRIPT} is missing: `make setup` installs the console script"
    return subprocess.run([str(CONSOLE_SCRIPT), *argv], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("argv", AWS_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_given_no_region_when_a_command_reaches_aws_then_exit_2_says_how_to_set_one(no_region: dict[str, str], argv: tuple[str]) -> None:
    # When the operator runs the command with no region configured
    code, out, err = _run(*argv)
    # Then one line says every way to give one, and nothing was started
    assert code == EXIT_USAGE
    assert err.count("\n") == 1 and err.startswith("hyperpod-recovery: no AWS region configured")
    for way in ("--region", "AWS_REGION", "AWS_DEFAULT_REGION", "profile"):
        assert way in err
    assert "Traceback" not in err and out == ""


def test_given_no_region_when_the_console_script_drills_then_one_line_and_exit_2(no_region: dict[str, str]) -> None:
    # `make drill-aws STACK=...` runs exactly this
    done = _console(no_region, "drill", "--stack", "hyperpod-recovery", "--scenario", "events/drills/default.json")
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.startswith("hyperpod-recovery: no AWS region configured: give --region REGION")
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("argv", AWS_COMMANDS + CHECKPOINT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_given_no_credentials_when_a_command_reaches_aws_then_exit_3_says_how_to_get_them(
    no_credentials: dict[str, str], argv: tuple[str]
) -> None:
    # Given a region (the global option) but no credentials anywhere
    code, _, err = _run("--region", REGION, *argv)
    # Then one line, exit 3 like every other AWS failure
    assert code == EXIT_AWS
    assert err.startswith("hyperpod-recovery: no AWS credentials found:") and "aws configure" in err and "AWS_PROFILE" in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_given_no_credentials_when_the_console_script_reads_the_breaker_then_exit_3(no_credentials: dict[str, str]) -> None:
    done = _console(no_credentials, "breaker", "status", "--region", REGION, "--cluster", "llm-train", "--table", "ledger")
    assert done.returncode == EXIT_AWS and done.stderr.startswith("hyperpod-recovery: no AWS credentials found:")
    assert "Traceback" not in done.stderr


def test_given_an_unknown_profile_then_exit_2_names_it(no_region: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    code, _, err = _run("--region", REGION, "breaker", "status", "--cluster", "llm-train", "--table", "ledger")
    assert code == EXIT_USAGE and "no-such-profile" in err and "Traceback" not in err


@pytest.mark.parametrize("position", ["before", "after"])
def test_given_region_on_the_command_line_then_the_command_uses_it(no_region: dict[str, str], position: str) -> None:
    # Given a ledger table in us-west-2 and no region anywhere but the command line
    with mock_aws():
        boto3.client("dynamodb", region_name=REGION).create_table(
            TableName="ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        command = ["breaker", "status", "--cluster", "llm-train", "--table", "ledger"]
        argv = ["--region", REGION, *command] if position == "before" else [*command, "--region", REGION]
        # When the breaker is read, with --region before or after the command's name
        code, out, err = _run(*argv)
    # Then it read that region's table (where nothing has touched the cluster yet, which it notes)
    assert (code, out) == (EXIT_OK, "llm-train: breaker CLOSED\n") and "holds nothing for cluster 'llm-train'" in err


def test_given_bad_drill_arguments_and_no_region_then_the_arguments_are_what_is_reported(no_region: dict[str, str]) -> None:
    # --live without --yes is wrong whatever AWS says: no client is made before the arguments are checked
    code, out, err = _run("drill", "--stack", "hyperpod-recovery", "--node", "i-0123456789abcdef0", "--live")
    assert code == EXIT_USAGE and "add --yes" in err and "region" not in err and out == ""


def test_given_a_breaker_command_without_a_table_then_exit_2_before_aws(no_region: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_TABLE", raising=False)
    code, _, err = _run("breaker", "status", "--cluster", "llm-train")
    assert code == EXIT_USAGE and "--table (or $LEDGER_TABLE) is required" in err


@pytest.mark.parametrize("argv", [(), ("checkpoint",), ("breaker",)], ids=["bare", "checkpoint", "breaker"])
def test_given_no_command_then_the_help_lists_the_commands_and_exit_2(argv: tuple[str, ...]) -> None:
    code, out, err = _run(*argv)
    assert code == EXIT_USAGE and out == ""
    assert err.startswith(f"usage: hyperpod-recovery {' '.join(argv)}".rstrip() + " ")
    expected = {
        (): ("checkpoint", "breaker", "drill", "preflight"),
        ("checkpoint",): ("commit", "latest", "verify"),
        ("breaker",): ("status", "reset"),
    }
    indent = "  " if argv == () else "    "  # (the top level lists its commands in sections, as kubectl does)
    for command in expected[argv]:
        assert f"\n{indent}{command} " in err
    assert "the following arguments are required" not in err


def test_given_bare_console_script_then_help_and_exit_2(no_region: dict[str, str]) -> None:
    done = _console(no_region)
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr
    # the help itself: each command with what it is for, not just the usage line
    assert "checkpoint manifests" in done.stderr and "a recovery drill on the deployed stack" in done.stderr


def test_version_prints_the_package_version() -> None:
    done = _console(dict(os.environ), "--version")
    assert (done.returncode, done.stdout, done.stderr) == (EXIT_OK, f"hyperpod-recovery {__version__}\n", "")


@pytest.mark.parametrize(
    "argv",
    [
        ("drill", "--stack", "hyperpod-recovery"),  # nothing to recover
        ("breaker", "status"),  # no --cluster
        ("preflight",),  # no --stack
        ("checkpoint", "commit", "s3://llm-train-checkpoints/x", "--step", "-1"),
        ("no-such-command",),
        ("--no-such-option",),
    ],
)
def test_given_bad_arguments_when_the_console_script_runs_then_one_line_and_exit_2(
    no_region: dict[str, str], argv: tuple[str, ...]
) -> None:
    done = _console(no_region, *argv)
    # One line like every other failure: what is wrong, and where the usage is
    assert done.returncode == EXIT_USAGE and done.stderr.startswith("hyperpod-recovery") and "error:" in done.stderr
    assert done.stderr.count("\n") == 1 and "--help)" in done.stderr and "Traceback" not in done.stderr


def test_a_bug_in_a_command_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared handler explains what an operator can fix; it does not hide a bug behind an exit code."""
    import hyperpod_recovery_cli.breaker as breaker
    from hyperpod_recovery_cli.app import Invocation

    def broken(invocation: Invocation) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(breaker, "status", broken)
    with pytest.raises(KeyError):
        main(["breaker", "status", "--cluster", "c", "--table", "t"], stdout=io.StringIO(), stderr=io.StringIO())
