"""Every command's --json output validates against its one schema (cli_json.py, docs/cli-json.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery_cli.app import _parser
from hyperpod_recovery_cli.changes import commands
from hyperpod_recovery_cli.cli_json import SCHEMAS, validate
from tests.integration.test_checkpoint_cli import URI, s3, write_shards
from tests.integration.test_checkpoint_cli import run as checkpoint_run
from tests.integration.test_cli_rule import run, world
from tests.integration.test_oncall_cli import start_live
from tests.integration.test_preflight import _preflight
from tests.integration.test_verdicts_cli import hung

pytestmark = pytest.mark.sandbox
__all__ = ["s3"]  # (the checkpoint tests' fixture: S3 in moto with the bucket)
WITH_JSON = sorted(path for path, parser in commands(_parser()) if any("--json" in a.option_strings for a in parser._actions))


def test_every_command_with_json_output_has_one_schema() -> None:
    assert sorted(SCHEMAS) == WITH_JSON


def test_given_running_then_recorded_incidents_then_incidents_json_lists_each_under_one_key_with_its_state(tmp_path: Path) -> None:
    with world(tmp_path) as (runner, _):
        start_live(runner, "json-running")
        code, running, err = run(runner, ["incidents", "--stack", "sandbox", "--json"])
        assert code == 0, err
        runner.play()
        code, recorded, err = run(runner, ["incidents", "--stack", "sandbox", "--json"])
        assert code == 0, err
        rows = validate("incidents", running).root + validate("incidents", recorded).root
        assert {row.state for row in rows} == {"recorded", "running"}
        assert all("incident_id" in row and "incident" not in row for row in json.loads(running) + json.loads(recorded))
        for row in validate("incidents", recorded).root:
            code, shown, _ = run(runner, ["incidents", "show", row.incident_id, "--stack", "sandbox", "--json"])
            assert code == 0 and validate("incidents show", shown).root.state == "recorded"


def test_locks_verdicts_and_breaker_json_match_their_schemas(tmp_path: Path) -> None:
    with world(tmp_path) as (runner, _):
        start_live(runner, "json-locks")
        hung(runner)
        for command in (["locks"], ["verdicts", "list"], ["breaker", "status"]):
            code, printed, err = run(runner, [*command, "--stack", "sandbox", "--json"])
            assert code == 0, err
            validate(" ".join(command), printed)


def test_goodput_json_matches_its_schema(tmp_path: Path) -> None:
    with world(tmp_path) as (runner, _):
        code, printed, err = run(runner, ["goodput", "--nodes", "64", "--failure-rate", "llama3", "--json"], aws=False)
    assert code == 0, err
    validate("goodput", printed)


def test_checkpoint_latest_and_verify_json_match_their_schemas_found_or_not(s3: Any) -> None:
    code, printed, _ = checkpoint_run("checkpoint", "latest", URI, "--json")
    assert code == 1 and validate("checkpoint latest", printed).checkpoint is None
    write_shards(s3, 1000)
    checkpoint_run("checkpoint", "commit", URI, "--step", "1000", "--job", "llama-70b", "--tensor-parallel", "2", "--data-parallel", "2")
    code, printed, _ = checkpoint_run("checkpoint", "latest", URI, "--json")
    assert code == 0 and validate("checkpoint latest", printed).checkpoint.step == 1000
    code, printed, _ = checkpoint_run("checkpoint", "verify", URI, "--step", "1000", "--json")
    assert code == 0 and validate("checkpoint verify", printed).layout is not None
    code, printed, _ = checkpoint_run("checkpoint", "verify", URI, "--step", "2000", "--json")
    assert code == 1 and validate("checkpoint verify", printed).verified is False


def test_preflight_json_matches_its_schema(tmp_path: Path) -> None:
    run = _preflight(tmp_path, args=("--json",))
    assert validate("preflight", run.out).ready is True
