"""`hyperpod-recovery` given what it cannot take: a scenario whose faults are not objects, a node as a
number, a breaker reset with an empty reason, terminal escape codes or a cluster the ledger does not
know. Each is one line naming the field, exit code 2, before anything changes."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.models.records import BreakerState
from hyperpod_recovery_cli.main import EXIT_OK, EXIT_USAGE, main
from tests.conftest import EVENTS

REGION = "us-west-2"
DEFAULT = json.loads((EVENTS / "drills" / "default.json").read_text())


class _NoAws:
    """A client that must not be used: the input is refused before any AWS call."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"AWS was called ({name}) for an input that should have been refused")


def _run(*argv: str, dynamodb: Any = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    no_aws = _NoAws()
    clients = {"sfn": no_aws, "sagemaker": no_aws, "cloudformation": no_aws, "lambda": no_aws}
    code = main(list(argv), stdout=out, stderr=err, drill_clients=clients, dynamodb=dynamodb or no_aws, s3=no_aws)
    return code, out.getvalue(), err.getvalue()


def _one_line_usage_error(code: int, out: str, err: str, *names: str) -> None:
    assert code == EXIT_USAGE, err
    assert out == "" and err.count("\n") == 1 and err.endswith("\n") and "Traceback" not in err, err
    assert err.isprintable() or err[:-1].isprintable(), repr(err)
    for name in names:
        assert name in err, (name, err)


# --- drill --scenario ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("faults", "field"),
    [
        ([1], "faults.0"),
        (["workers:7"], "faults.0"),
        ([{"at": 1, "kind": "node_health", "node": 7}], "faults.0.node"),
        ([{"at": 1, "kind": "node_health", "nodes": "workers:7"}], "faults.0.nodes"),
        ([{"at": 1, "kind": "node_health", "nodes": ["workers:1", 2]}], "faults.0.nodes.1"),
        ([{"at": 1, "kind": "node_health", "node": "workers 7"}], "faults.0.node"),
        ({"at": 1}, "faults"),
    ],
    ids=["a number", "a string", "node a number", "nodes a string", "nodes holding a number", "node malformed", "faults an object"],
)
def test_given_a_scenario_whose_faults_are_malformed_when_drilled_then_one_line_names_the_field_and_aws_is_not_called(
    tmp_path: Path, faults: Any, field: str
) -> None:
    # Given a scenario file whose faults are not what a scenario's faults are
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({**DEFAULT, "faults": faults}))
    # When the operator drills it on the deployed stack
    code, out, err = _run("drill", "--stack", "hyperpod-recovery", "--region", REGION, "--scenario", str(path))
    # Then one line names the field, exit 2, and no AWS call was made
    _one_line_usage_error(code, out, err, field)


@pytest.mark.parametrize(
    ("content", "says"),
    [(b"\xff\xfe\x00binary", "not a UTF-8 text file"), (b"[" * 100_000, "nested too deeply"), (b"{not json", "not valid JSON")],
    ids=["binary", "deep", "broken"],
)
def test_given_an_unreadable_drill_file_then_one_line_and_exit_2(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "scenario.json"
    path.write_bytes(content)
    for option in ("--scenario", "--input"):
        code, out, err = _run("drill", "--stack", "s", "--region", REGION, option, str(path))
        _one_line_usage_error(code, out, err, says)


def test_given_a_folder_as_the_drill_file_then_one_line_and_exit_2(tmp_path: Path) -> None:
    code, out, err = _run("drill", "--stack", "s", "--region", REGION, "--scenario", str(tmp_path))
    _one_line_usage_error(code, out, err, "is a directory")


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (("--node", "i-0123; rm -rf /"), "--node"),
        (("--node", "workers"), "--node"),
        (("--job", "4711\x1b[2J"), "--job"),
        (("--job", ""), "--job"),
        (("--job", "4711\n"), "--job"),
        (("--node", "i-0123456789abcdef0\n"), "--node"),
        (("--node", "workers:0", "--reason", "drill\x1b]0;pwned\x07"), "--reason"),
        (("--node", "workers:0", "--reason", "x" * 1025), "--reason"),
        (("--node", "workers:0", "--name", "drill 1"), "--name"),
        (("--node", "workers:0", "--name", "d" * 81), "--name"),
    ],
    ids=[
        "node injection",
        "node without index",
        "job escape",
        "job empty",
        "job newline",
        "node newline",
        "reason escape",
        "reason long",
        "name space",
        "name long",
    ],
)
def test_given_a_malformed_drill_argument_then_one_line_names_it_before_aws(argv: tuple[str, ...], field: str) -> None:
    code, out, err = _run("drill", "--stack", "hyperpod-recovery", "--region", REGION, *argv)
    _one_line_usage_error(code, out, err, field)


# --- breaker reset ---------------------------------------------------------------------------------
@pytest.fixture
def ledger() -> Iterator[Any]:
    """A ledger table in moto whose cluster llm-train has an open breaker."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName="ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        opened = BreakerState().changed_to(
            "open", reason="3 recoveries in 1h", by="incident-7", at=datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
        )
        DynamoLedger("ledger", dynamodb=dynamodb).save_breaker("llm-train", opened)
        yield dynamodb


def _reset(dynamodb: Any, *args: str) -> tuple[int, str, str]:
    return _run("breaker", "reset", "--region", REGION, "--table", "ledger", "--yes", *args, dynamodb=dynamodb)


def _breaker_of(dynamodb: Any, cluster: str = "llm-train") -> str:
    return DynamoLedger("ledger", dynamodb=dynamodb).breaker(cluster).state


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--cluster", "llm-train", "--reason", ""), "--reason"),
        (("--cluster", "llm-train", "--reason", "   "), "--reason"),
        (("--cluster", "llm-train", "--reason", "\x1b[2J\x1b[Hall clear"), "--reason"),
        (("--cluster", "llm-train", "--reason", "fixed\nsecond line"), "--reason"),
        (("--cluster", "llm-train", "--reason", "fixed \u202etxet desrever"), "--reason"),
        (("--cluster", "llm-train", "--reason", "r" * 501), "--reason"),
        (("--cluster", "llm-train", "--reason", "fixed", "--by", "ops\x1b[31m"), "--by"),
        (("--cluster", "llm-train", "--reason", "fixed", "--by", ""), "--by"),
        (("--cluster", "llm train", "--reason", "fixed"), "--cluster"),
        (("--cluster", "llm-train\x1b[2J", "--reason", "fixed"), "--cluster"),
        (("--cluster", "llm-train\n", "--reason", "fixed"), "--cluster"),
    ],
    ids=[
        "empty",
        "blank",
        "escape codes",
        "newline",
        "bidi override",
        "too long",
        "by escape",
        "by empty",
        "name space",
        "name escape",
        "name newline",
    ],
)
def test_given_a_reset_the_breaker_cannot_keep_then_one_line_names_the_field_and_the_breaker_stays_open(
    ledger: Any, args: tuple[str, ...], field: str
) -> None:
    # When the operator resets the open breaker with a reason that cannot be stored and printed back
    code, out, err = _reset(ledger, *args)
    # Then one line names the field, exit 2, and the breaker is still open
    _one_line_usage_error(code, out, err, field)
    assert _breaker_of(ledger) == "open"


def test_given_a_cluster_the_ledger_does_not_know_when_reset_then_exit_2_and_nothing_is_written(ledger: Any) -> None:
    # Given a typo in the cluster's name (the real one's breaker is open)
    code, out, err = _reset(ledger, "--cluster", "llm-trian", "--reason", "checked the nodes")
    # Then it does not say "already closed" of a cluster it knows nothing of
    _one_line_usage_error(code, out, err, "--cluster", "llm-trian", "ClusterName")
    assert "already closed" not in err
    assert _breaker_of(ledger) == "open"
    assert "Item" not in ledger.get_item(TableName="ledger", Key={"pk": {"S": "CLUSTER#llm-trian"}, "sk": {"S": "BREAKER"}})


def test_given_a_good_reset_then_the_breaker_closes_with_the_reason_as_written(ledger: Any) -> None:
    code, out, err = _reset(ledger, "--cluster", "llm-train", "--reason", "  replaced the PSU; ran dcgmi diag  ", "--by", "maria")
    assert (code, err) == (EXIT_OK, "") and "breaker closed by maria" in out
    state = DynamoLedger("ledger", dynamodb=ledger).breaker("llm-train")
    assert state.state == "closed" and state.reason == "replaced the PSU; ran dcgmi diag" and state.changed_by == "maria"


def test_given_a_cluster_the_ledger_does_not_know_when_its_breaker_is_read_then_it_says_so(ledger: Any) -> None:
    code, out, err = _run("breaker", "status", "--region", REGION, "--table", "ledger", "--cluster", "llm-trian", dynamodb=ledger)
    # The status is true (nothing opened it) but the name may be wrong: said on stderr, exit 0
    assert code == EXIT_OK and out == "llm-trian: breaker CLOSED\n"
    assert err.count("\n") == 1 and "nothing for cluster 'llm-trian'" in err and "ClusterName" in err


def test_given_a_table_name_dynamodb_cannot_have_then_exit_2_before_aws() -> None:
    code, out, err = _run("breaker", "status", "--region", REGION, "--table", "x", "--cluster", "llm-train")
    _one_line_usage_error(code, out, err, "--table")


# --- argparse's own refusals -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [("breaker", "reset", "--cluster", "c"), ("no-such-command",), ("--no-such-option",), ("drill", "--stack", "s")],
    ids=["missing reason", "unknown command", "unknown option", "nothing to drill"],
)
def test_given_bad_usage_then_one_line_and_exit_2(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _run(*argv)
    err = capsys.readouterr().err
    assert exited.value.code == EXIT_USAGE and err.startswith("hyperpod-recovery") and err.count("\n") == 1 and "--help" in err, err
