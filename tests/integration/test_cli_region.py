"""The region and profile of every command, found as the AWS CLI v2 finds them: --region, then
$AWS_REGION, then $AWS_DEFAULT_REGION, then the profile's (--profile, else $AWS_PROFILE, else default).

Each way is tried alone, then against the next in line, on a ledger table that exists in one region
only: the command reads it exactly when it went to that region."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from hyperpod_recovery_cli.aws_session import REGION_VARIABLES, region_from
from hyperpod_recovery_cli.deploy import DeployPlan
from hyperpod_recovery_cli.main import EXIT_AWS, EXIT_OK, main

TABLE_REGION = "eu-central-1"
ELSEWHERE = "ap-southeast-2"
BREAKER = ("breaker", "status", "--cluster", "llm-train", "--table", "ledger")
CLOSED = "llm-train: breaker CLOSED\n"


@pytest.fixture
def laptop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No region anywhere yet; a config file with a named profile and a default one; the table in TABLE_REGION."""
    for name in (*REGION_VARIABLES, "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    config.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(config))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with mock_aws():
        boto3.client("dynamodb", region_name=TABLE_REGION).create_table(
            TableName="ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield config


def _profiles(config: Path, *, ops: str | None = None, default: str | None = None) -> None:
    """Profiles with keys of their own (a profile named explicitly takes its credentials from itself)."""
    keys = "aws_access_key_id = testing\naws_secret_access_key = testing\n"
    text = ""
    if ops is not None:
        text += f"[profile ops]\nregion = {ops}\n{keys}"
    if default is not None:
        text += f"[default]\nregion = {default}\n{keys}"
    config.write_text(text)


def _breaker(*before: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([*before, *BREAKER], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _read_the_table(result: tuple[int, str, str]) -> bool:
    code, out, err = result
    assert code in (EXIT_OK, EXIT_AWS), err
    return (code, out) == (EXIT_OK, CLOSED)


def test_given_only_the_command_line_region_then_it_is_used(laptop: Path) -> None:
    assert _read_the_table(_breaker("--region", TABLE_REGION))


@pytest.mark.parametrize("variable", ["AWS_REGION", "AWS_DEFAULT_REGION"])
def test_given_only_one_region_variable_then_it_is_used(laptop: Path, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    # Given AWS_REGION alone (what the AWS CLI v2, CloudShell and most CI set), or AWS_DEFAULT_REGION alone
    monkeypatch.setenv(variable, TABLE_REGION)
    # Then the command reads that region's table
    assert _read_the_table(_breaker())


def test_given_only_aws_profile_then_its_region_is_used(laptop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _profiles(laptop, ops=TABLE_REGION, default=ELSEWHERE)
    monkeypatch.setenv("AWS_PROFILE", "ops")
    assert _read_the_table(_breaker())


def test_given_only_the_profile_option_then_its_region_is_used(laptop: Path) -> None:
    _profiles(laptop, ops=TABLE_REGION, default=ELSEWHERE)
    assert _read_the_table(_breaker("--profile", "ops"))


def test_given_only_the_default_profile_then_its_region_is_used(laptop: Path) -> None:
    _profiles(laptop, default=TABLE_REGION)
    assert _read_the_table(_breaker())


def test_aws_region_is_preferred_to_aws_default_region(laptop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", TABLE_REGION)
    monkeypatch.setenv("AWS_DEFAULT_REGION", ELSEWHERE)
    assert _read_the_table(_breaker())


def test_a_region_variable_is_preferred_to_the_profile(laptop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _profiles(laptop, ops=ELSEWHERE)
    monkeypatch.setenv("AWS_DEFAULT_REGION", TABLE_REGION)
    assert _read_the_table(_breaker("--profile", "ops"))


def test_the_command_line_region_is_preferred_to_everything(laptop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _profiles(laptop, ops=ELSEWHERE)
    monkeypatch.setenv("AWS_REGION", ELSEWHERE)
    monkeypatch.setenv("AWS_DEFAULT_REGION", ELSEWHERE)
    assert _read_the_table(_breaker("--region", TABLE_REGION, "--profile", "ops"))


def test_a_region_elsewhere_does_not_read_the_table(laptop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The check above can fail: the same command in another region finds no table (exit 3)
    monkeypatch.setenv("AWS_REGION", ELSEWHERE)
    assert not _read_the_table(_breaker())


_REGION = st.sampled_from(["us-east-1", "eu-west-1", "ap-south-1"])
_UNSET = st.sampled_from([None, "", "  "])


@given(option=_REGION | _UNSET, aws_region=_REGION | _UNSET, aws_default_region=_REGION | _UNSET)
def test_region_from_takes_the_first_that_is_set_in_the_aws_cli_order(
    option: str | None, aws_region: str | None, aws_default_region: str | None
) -> None:
    environ = {name: value for name, value in (("AWS_REGION", aws_region), ("AWS_DEFAULT_REGION", aws_default_region)) if value is not None}
    expected = next((value for value in (option, aws_region, aws_default_region) if value and value.strip()), None)
    assert region_from(option, environ) == expected


def test_sam_deploys_with_the_profile_the_command_was_given() -> None:
    plan = DeployPlan("hpr", TABLE_REGION, {"ClusterName": "llm-train"}, stack_exists=False)
    command = plan.sam_command("sam", confirm=False, profile="ops")
    assert command[command.index("--profile") + 1] == "ops"
    assert "--profile" not in plan.sam_command("sam", confirm=False)
