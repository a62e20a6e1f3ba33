"""The command line's manners: ``--help`` imports no command's module (bench/cli_help.py measures the
time; this holds what it imports), the commands are listed in sections, ``--version`` works after any
command, ``$HYPERPOD_RECOVERY_STACK`` is every ``--stack``'s default, a missing stack names where it was
looked for, messages under make name make's variables, and one incident id is taken in either form."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from hyperpod_recovery_cli import app, commands
from hyperpod_recovery_cli.changes import commands as tree
from hyperpod_recovery_cli.inputs import for_make, incident_id
from hyperpod_recovery_cli.main import EXIT_AWS, EXIT_OK, EXIT_USAGE, main

HEAVY = ("boto3", "botocore", "pydantic", "moto", "sandbox", "hyperpod_recovery.adapters")
COMMAND_MODULES = ("oncall", "verdicts", "drill", "drill_suite", "preflight", "deploy", "goodput", "checkpoint", "breaker")
PROBE = """
import json, sys
from hyperpod_recovery_cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _imported(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds after running the command line ``argv``."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=list(argv))], capture_output=True, text=True, check=True)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


# --- lazy imports ---------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [("--help",), (), ("--version",)], ids=["help", "bare", "version"])
def test_the_top_level_imports_no_sdk_no_pydantic_no_sandbox_and_no_commands_module(argv: tuple[str, ...]) -> None:
    imported = _imported(*argv)
    assert _heavy(imported) == []
    assert [m for m in COMMAND_MODULES if f"hyperpod_recovery_cli.{m}" in imported] == []


def test_a_commands_help_imports_its_module_and_no_other_commands() -> None:
    imported = _imported("checkpoint", "--help")
    assert "hyperpod_recovery_cli.checkpoint" in imported
    assert [m for m in COMMAND_MODULES if m != "checkpoint" and f"hyperpod_recovery_cli.{m}" in imported] == []


# --- the listing ----------------------------------------------------------------------------------
def test_the_table_names_exactly_the_commands_the_full_tree_has() -> None:
    top = {path.split()[0] for path, _ in tree(app._parser())}
    assert top == set(commands.COMMANDS)


def test_the_help_lists_every_command_once_under_its_section_with_a_one_line_summary(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    printed = capsys.readouterr().out
    for heading, listed in commands.SECTIONS:
        section = printed.split(f"\n{heading}:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in section.splitlines() if not line.startswith("    ")] == [c.name for c in listed]
    assert all("\n" not in c.summary for c in commands.COMMANDS.values())
    assert "Operate the recovery pipeline of a SageMaker HyperPod cluster" in printed


@pytest.mark.parametrize("argv", [("--version",), ("preflight", "--version"), ("incidents", "show", "--version")])
def test_version_prints_the_installed_version_before_or_after_a_command(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == EXIT_OK and capsys.readouterr().out == f"hyperpod-recovery {app.version()}\n"


# --- $HYPERPOD_RECOVERY_STACK ---------------------------------------------------------------------
def test_every_stack_option_says_its_default_is_the_environment_variable() -> None:
    options = [a for _, parser in tree(app._parser()) for a in parser._actions if "--stack" in a.option_strings]
    assert len(options) >= 14 and all("$HYPERPOD_RECOVERY_STACK" in (a.help or "") for a in options)


@pytest.mark.parametrize(
    "argv",
    [
        ["preflight"],
        ["incidents"],
        ["stop", "hpr-1", "--reason", "r"],
        ["breaker", "status"],
        ["verdicts", "list"],
        ["arm"],
        ["drill", "--node", "x"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_given_the_environment_variable_then_a_command_without_stack_takes_it(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERPOD_RECOVERY_STACK", "prod-recovery")
    assert app.parse(argv).stack == "prod-recovery"


@pytest.mark.parametrize(
    "argv",
    [
        ["preflight"],
        ["hold", "i-0123", "--reason", "r"],
        ["locks", "release", "i-0123", "--reason", "r"],
        ["breaker", "reset", "--reason", "r"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_given_no_environment_variable_then_a_required_stack_is_refused_naming_the_variable_too(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given neither --stack nor the variable (a lone --stack, or breaker's --stack-or---cluster choice)
    monkeypatch.delenv("HYPERPOD_RECOVERY_STACK", raising=False)
    # When the command is parsed, Then it is refused on one line that names both ways to give the stack
    with pytest.raises(SystemExit) as exited:
        app.parse(argv)
    said = capsys.readouterr().err
    assert exited.value.code == EXIT_USAGE and "--stack" in said and "(or set $HYPERPOD_RECOVERY_STACK)" in said, said
    assert len(said.splitlines()) == 1


def test_given_the_environment_variable_and_a_cluster_then_the_breaker_reads_the_cluster_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERPOD_RECOVERY_STACK", "prod-recovery")
    err = io.StringIO()
    # (--table names no table: the refusal shows the --cluster path was taken, not the stack's)
    code = main(["breaker", "status", "--cluster", "llm-train", "--table", "x"], stdout=io.StringIO(), stderr=err)
    assert code == EXIT_USAGE and "--table" in err.getvalue() and "stack" not in err.getvalue()


@pytest.mark.parametrize(
    ("argv", "instead"),
    [
        (
            ["drill", "--state-machine-arn", "arn:aws:states:us-west-2:1:stateMachine:n", "--cluster", "c", "--node", "x"],
            "state_machine_arn",
        ),
        (["goodput", "--from", "inputs.json"], "source_file"),
        (["breaker", "status", "--cluster", "llm-train"], "cluster"),
    ],
    ids=["drill", "goodput", "breaker"],
)
def test_given_the_environment_variable_then_what_the_command_line_names_instead_of_a_stack_wins(
    argv: list[str], instead: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYPERPOD_RECOVERY_STACK", "prod-recovery")
    args = app.parse(argv)
    assert args.stack is None and getattr(args, instead)


def test_given_the_environment_variable_then_deploy_takes_it_beside_its_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPERPOD_RECOVERY_STACK", "prod-recovery")
    args = app.parse(["deploy", "--cluster", "llm-train"])
    assert (args.stack, args.cluster) == ("prod-recovery", "llm-train")


# --- a missing stack ------------------------------------------------------------------------------
@pytest.fixture
def cloudformation(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_DEFAULT_REGION", "HYPERPOD_RECOVERY_VIA_MAKE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    with mock_aws():
        yield boto3.client("cloudformation", region_name="eu-west-1", aws_access_key_id="testing", aws_secret_access_key="testing")


def _missing(cloudformation: Any, *argv: str) -> tuple[int, str]:
    err = io.StringIO()
    code = main(list(argv), stdout=io.StringIO(), stderr=err, drill_clients={"cloudformation": cloudformation})
    return code, err.getvalue()


@pytest.mark.parametrize("command", [["incidents"], ["locks"], ["preflight"], ["breaker", "status"]], ids=" ".join)
def test_given_no_such_stack_then_one_line_names_the_stack_region_and_credentials_and_how_to_change_them(
    cloudformation: Any, command: list[str]
) -> None:
    code, err = _missing(cloudformation, *command, "--stack", "prod-recovery")
    assert code == EXIT_AWS and err.count("\n") == 1 and "AWS error" not in err and "ValidationError" not in err
    where = "in eu-west-1 (from $AWS_REGION) with the default credentials chain (no --profile, no $AWS_PROFILE)"
    assert err.startswith(f"hyperpod-recovery: no stack prod-recovery {where}")
    assert "--region REGION and --profile NAME (or AWS_REGION and AWS_PROFILE)" in err


def test_given_no_such_stack_then_the_profile_and_region_named_are_the_ones_given(cloudformation: Any) -> None:
    code, err = _missing(cloudformation, "locks", "--stack", "prod-recovery", "--region", "eu-west-1", "--profile", "ops")
    assert code == EXIT_AWS and "in eu-west-1 (from --region) with profile ops (from --profile)" in err


def test_given_no_such_stack_from_the_environment_then_the_profile_named_is_aws_profiles(
    cloudformation: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "ml-ops")
    monkeypatch.setenv("HYPERPOD_RECOVERY_STACK", "prod-recovery")
    code, err = _missing(cloudformation, "incidents")
    assert code == EXIT_AWS and "no stack prod-recovery in eu-west-1 (from $AWS_REGION) with profile ml-ops (from $AWS_PROFILE)" in err


def test_given_no_such_stack_through_a_real_session_then_the_region_is_the_profiles_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a profile with its own region and credentials, and no region in the environment
    (tmp_path / "config").write_text("[profile ops]\nregion = ap-south-1\n")
    (tmp_path / "credentials").write_text("[ops]\naws_access_key_id = testing\naws_secret_access_key = testing\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    err = io.StringIO()
    with mock_aws():
        # When a command looks for a stack that is not there, through the boto3 session it makes itself
        code = main(["locks", "--stack", "prod-recovery", "--profile", "ops"], stdout=io.StringIO(), stderr=err)
    # Then the line names the region the session used, where it came from, and the profile
    assert (
        code == EXIT_AWS
        and "no stack prod-recovery in ap-south-1 (from the profile's region) with profile ops (from --profile)" in err.getvalue()
    )


# --- under make -----------------------------------------------------------------------------------
MAKE = {"HYPERPOD_RECOVERY_VIA_MAKE": "1"}


@pytest.mark.parametrize(
    ("said", "under_make"),
    [
        ("the following arguments are required: --stack", "the following arguments are required: STACK=..."),
        ("a deploy needs --checkpoint-buckets (no terminal to ask on)", "a deploy needs BUCKETS=... (no terminal to ask on)"),
        ("--checkpoint-buckets 'Bad_Name' is not an S3 bucket name", "BUCKETS='Bad_Name' is not an S3 bucket name"),
        (
            "deploy deploys the stack: add --yes to confirm (no terminal to ask)",
            "deploy deploys the stack: add YES=1 to confirm (no terminal to ask)",
        ),
        ("look with --region REGION and --profile NAME", "look with REGION=REGION and --profile NAME"),
        ("--reason is empty: say why", "--reason is empty: say why"),  # (no make variable passes it)
    ],
)
def test_under_make_a_message_names_the_make_variable_for_each_option_make_passes(said: str, under_make: str) -> None:
    assert for_make(said, MAKE) == under_make


@given(st.text())
def test_outside_make_a_message_is_left_as_it_is(message: str) -> None:
    assert for_make(message, {}) == message


def test_under_make_an_argparse_error_names_the_make_variable(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HYPERPOD_RECOVERY_VIA_MAKE", "1")
    monkeypatch.delenv("HYPERPOD_RECOVERY_STACK", raising=False)
    with pytest.raises(SystemExit):
        main(["arm"])
    assert "the following arguments are required: STACK=..." in capsys.readouterr().err


def test_the_makefile_runs_the_cli_under_make_on_every_target_that_calls_it() -> None:
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    calling, target = set(), ""
    for line in makefile.splitlines():
        if (found := re.match(r"^([a-z][a-z-]*):(?!=)", line)) is not None:
            target = found[1]
        elif line.startswith("\t") and ("/bin/hyperpod-recovery " in line or "$(HPR) " in line):
            calling.add(target)
    exported = next(line for line in makefile.splitlines() if line.endswith("export HYPERPOD_RECOVERY_VIA_MAKE = 1"))
    assert calling == {"preflight", "drill-aws", "deploy", "arm"}
    assert calling <= set(exported.split(":", 1)[0].split())


# --- one incident id ------------------------------------------------------------------------------
ARN = "arn:aws:states:us-west-2:111122223333:execution:NodeRecovery-abc:hpr-i-0123456789abcdef0-20261129T0700"


def test_an_execution_arn_is_taken_as_its_incident_id_and_an_id_as_itself() -> None:
    assert incident_id(ARN) == "hpr-i-0123456789abcdef0-20261129T0700"
    assert incident_id("hpj-1001-hung-1773479100") == "hpj-1001-hung-1773479100"
    assert incident_id("arn:aws:states:us-west-2:111122223333:stateMachine:NodeRecovery-abc") == (
        "arn:aws:states:us-west-2:111122223333:stateMachine:NodeRecovery-abc"  # not an execution: refused later as it is
    )


@pytest.mark.parametrize("argv", [["incidents", "show", ARN], ["stop", ARN, "--reason", "r"]], ids=["show", "stop"])
def test_the_commands_that_take_an_incident_take_its_execution_arn_as_its_id(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def parsed(original: Any) -> Any:
        def parse(given: Any) -> Any:
            args = original(given)
            args.run = lambda invocation: seen.append(invocation.args.incident) or 0
            return args

        return parse

    monkeypatch.setattr(app, "parse", parsed(app.parse))
    code = main(
        [*argv, "--stack", "s", "--yes"] if argv[0] == "stop" else [*argv, "--stack", "s"], stdout=io.StringIO(), stderr=io.StringIO()
    )
    assert code == EXIT_OK and seen == ["hpr-i-0123456789abcdef0-20261129T0700"]
