"""Every input edge of the operator's tools, fuzzed: arbitrary JSON and real scenarios mangled at any
field, fed to the scenario loader (`make drill`), to `hyperpod-recovery drill --scenario/--input`,
to `breaker reset`, and arbitrary command lines to `hyperpod-recovery`. Whatever comes in, the
answer is an exit code the command documents and at most one printable line on stderr: never a
traceback, never an escape code reaching the terminal, and what is accepted is well-formed."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from pydantic import ValidationError

import hyperpod_recovery_cli.drill as drill
import hyperpod_recovery_cli.main as cli
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.models.records import BreakerState
from hyperpod_recovery.models.requests import ManualJobRecoveryRequest, ManualRecoveryRequest
from hyperpod_recovery_cli.inputs import control_character
from sandbox.__main__ import main as sandbox_main
from sandbox.scenario import Scenario, ScenarioError, load_scenario
from tests.conftest import EVENTS

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CLI_EXITS = {cli.EXIT_OK, cli.EXIT_NO, cli.EXIT_USAGE, cli.EXIT_AWS}  # 130 needs a Ctrl-C
SCENARIOS = [json.loads(path.read_text()) for path in sorted((EVENTS / "drills").glob("*.json"))]

# Text as a careless or hostile hand writes it: any code point (escape codes, bidi overrides, NUL,
# line breaks), and the few that have bitten before.
any_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x1b[2J\x1b[H", "a\nb", "\u202eevil", "workers:7", "workers:99", "i-0123456789abcdef0", "7", "x" * 2000]),
    # a pattern anchored with $ lets a trailing newline through re.match
    st.sampled_from(["workers:7\n", "i-0123456789abcdef0\n", "4711\n", "llm-train\n", "drill-1\n"]),
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), any_text)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4), max_leaves=12
)


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    children = document.items() if isinstance(document, dict) else enumerate(document) if isinstance(document, list) else ()
    for key, child in children:
        yield from _paths(child, (*prefix, key))


@st.composite
def mangled_scenarios(draw: st.DrawFn) -> Any:
    """A real drill scenario with one field replaced by arbitrary JSON, removed, or one added."""
    document = copy.deepcopy(draw(st.sampled_from(SCENARIOS)))
    path = draw(st.sampled_from(list(_paths(document))))
    value = draw(json_values)
    if not path:
        return value
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    action = draw(st.sampled_from(["replace", "remove", "add"]))
    if action == "replace":
        parent[path[-1]] = value
    elif action == "remove":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(any_text)] = value
    else:
        parent.append(value)
    return document


drill_files = st.one_of(json_values, mangled_scenarios())


def _write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "input.json"
    path.write_text(json.dumps(document))  # NaN and Infinity included: Python's json writes them
    return path


def _one_printable_line(err: str) -> None:
    assert "Traceback" not in err, err
    assert err == "" or (err.count("\n") == 1 and err.endswith("\n") and err[:-1].isprintable()), repr(err)


# --- the scenario loader (make drill) --------------------------------------------------------------
@FUZZ
@given(document=drill_files)
def test_any_scenario_file_is_loaded_or_refused_in_one_printable_line(tmp_path: Path, document: Any) -> None:
    try:
        scenario = load_scenario(_write(tmp_path, document))
    except ScenarioError as exc:
        _one_printable_line(f"{exc}\n")
    else:
        assert isinstance(scenario, Scenario)


@FUZZ
@given(content=st.binary(max_size=200))
def test_any_bytes_as_a_scenario_file_are_refused_in_one_printable_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(content)
    try:
        load_scenario(path)
    except ScenarioError as exc:
        _one_printable_line(f"{exc}\n")


@FUZZ
@given(document=drill_files)
def test_make_drill_checks_any_scenario_with_exit_0_or_2_and_one_line(
    tmp_path: Path, document: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = sandbox_main(["check", "--scenario", str(_write(tmp_path, document)), "--out", str(tmp_path / "out")])
    printed = capsys.readouterr()
    assert code in {0, 2} and printed.out == ""
    _one_printable_line(printed.err)
    assert (code == 2) == bool(printed.err)


# --- hyperpod-recovery drill -----------------------------------------------------------------------
class _Denied:
    """An AWS client that refuses every call (AccessDenied): what reaches AWS ends with exit code 3."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "get_paginator":
            return lambda operation: _Denied()
        if name == "can_paginate":
            return lambda operation: True

        def call(*args: Any, **kwargs: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "denied"}}, name)

        return call


class _Stack:
    """The deployed stack and its cluster as the drill reads them: 16 workers, 1 controller."""

    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        return {
            "Stacks": [
                {
                    "Outputs": [{"OutputKey": "StateMachineArn", "OutputValue": "arn:aws:states:us-west-2:123456789012:stateMachine:n"}],
                    "Parameters": [{"ParameterKey": "ClusterName", "ParameterValue": "llm-train"}],
                }
            ]
        }

    def get_paginator(self, operation: str) -> Any:
        nodes = [{"InstanceGroupName": "workers", "InstanceId": f"i-{n:017x}", "LaunchTime": "2026-11-26"} for n in range(16)]
        nodes.append({"InstanceGroupName": "controller", "InstanceId": "i-0c0c0c0c0c0c0c0c0", "LaunchTime": "2026-11-26"})
        return type("Pages", (), {"paginate": lambda self, **kwargs: iter([{"ClusterNodeSummaries": nodes}])})()

    def start_execution(self, stateMachineArn: str, name: str, input: str) -> Any:
        self.started.append(json.loads(input))
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "denied"}}, "StartExecution")


def _drill(*argv: str) -> tuple[int, str, str, list[dict[str, Any]]]:
    stack = _Stack()
    out, err = io.StringIO(), io.StringIO()
    clients = {"sfn": stack, "sagemaker": stack, "cloudformation": stack, "lambda": _Denied()}
    code = cli.main(
        ["drill", "--stack", "hyperpod-recovery", "--region", "us-west-2", *argv], stdout=out, stderr=err, drill_clients=clients
    )
    return code, out.getvalue(), err.getvalue(), stack.started


@FUZZ
@given(document=drill_files)
def test_any_scenario_drilled_is_refused_in_one_line_or_starts_a_well_formed_request(tmp_path: Path, document: Any) -> None:
    code, _, err, started = _drill(f"--scenario={_write(tmp_path, document)}")
    assert code in CLI_EXITS
    _one_printable_line(err)
    if started:  # it got as far as StartExecution: with a request the workflow can validate
        (request,) = started
        assert code == cli.EXIT_AWS
        ManualRecoveryRequest.model_validate(request)
    else:
        assert code == cli.EXIT_USAGE


@pytest.mark.parametrize("name", [{"x" * 2000: None}, ["a"], 7, "x" * 64, "\x1b[2Jdrill", "  ", "Hello World", "drill\n"], ids=repr)
def test_a_scenario_name_the_sandbox_would_refuse_is_refused_before_any_start(tmp_path: Path, name: Any) -> None:
    # Given a real scenario whose name the sandbox refuses (found by the fuzzing above: an object as
    # the name made a reason past the request's 1,024 characters)
    with pytest.raises(ValidationError):
        Scenario.model_validate(next(s for s in SCENARIOS if s["name"] == "default") | {"name": name})
    document = copy.deepcopy(next(s for s in SCENARIOS if s["name"] == "default")) | {"name": name}
    # When it is drilled
    code, _, err, started = _drill(f"--scenario={_write(tmp_path, document)}")
    # Then it is refused naming the field, in one line, and nothing is started
    assert (code, started) == (cli.EXIT_USAGE, [])
    _one_printable_line(err)
    assert "name" in err


def test_a_scenario_is_drilled_under_its_name_or_its_files(tmp_path: Path) -> None:
    default = next(s for s in SCENARIOS if s["name"] == "default")
    code, _, _, started = _drill(f"--scenario={_write(tmp_path, default)}")
    assert code == cli.EXIT_AWS and started[0]["reason"] == "drill default"
    unnamed = {k: v for k, v in default.items() if k != "name"}
    path = tmp_path / ("x" * 200 + ".json")
    path.write_text(json.dumps(unnamed))
    code, _, _, started = _drill(f"--scenario={path}")
    assert code == cli.EXIT_AWS and started[0]["reason"] == "drill " + "x" * 63
    # (a file's name is cut before it is made printable: an escape is never cut in half)
    path = tmp_path / ("y" * 62 + "\x1b.json")
    path.write_text(json.dumps(unnamed))
    code, _, _, started = _drill(f"--scenario={path}")
    assert code == cli.EXIT_AWS and started[0]["reason"] == "drill " + "y" * 62 + "\\x1b"


@given(name=any_text)
@FUZZ
def test_the_drill_takes_a_scenario_name_exactly_when_the_sandbox_does(name: str) -> None:
    default = next(s for s in SCENARIOS if s["name"] == "default")
    try:
        Scenario.model_validate(default | {"name": name})
        sandbox_takes = True
    except ValidationError:
        sandbox_takes = False
    assert bool(drill.SCENARIO_NAME.fullmatch(name)) == sandbox_takes


@FUZZ
@given(document=json_values)
def test_any_start_input_drilled_is_refused_in_one_line_or_sent_as_a_dry_run(tmp_path: Path, document: Any) -> None:
    code, _, err, started = _drill(f"--input={_write(tmp_path, document)}")
    assert code in CLI_EXITS
    _one_printable_line(err)
    assert all(request["dry_run"] is True for request in started)


@FUZZ
@given(node=any_text, job=any_text, reason=any_text, name=any_text)
def test_any_drill_argument_is_refused_in_one_line_or_sent_as_given(node: str, job: str, reason: str, name: str) -> None:
    # (--option=value: a value starting with '-' is the value, as the operator's shell passes it)
    for argv in ((f"--node={node}", f"--reason={reason}", f"--name={name}"), (f"--job={job}",)):
        code, _, err, started = _drill(*argv)
        assert code in CLI_EXITS
        _one_printable_line(err)
        for request in started:  # well formed: what Validate Request / Validate Job Request accept
            assert control_character(request["reason"]) is None
            (ManualJobRecoveryRequest if "job_id" in request else ManualRecoveryRequest).model_validate(request)


# --- hyperpod-recovery breaker reset ---------------------------------------------------------------
@pytest.fixture(scope="module")
def ledger() -> Iterator[Any]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        dynamodb.create_table(
            TableName="ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield dynamodb


@FUZZ
@given(cluster=st.one_of(any_text, st.just("llm-train")), reason=any_text, by=st.one_of(st.none(), any_text))
def test_any_breaker_reset_is_refused_in_one_line_or_stores_plain_text(ledger: Any, cluster: str, reason: str, by: str | None) -> None:
    # Given llm-train's breaker open
    store = DynamoLedger("ledger", dynamodb=ledger)
    opened = BreakerState().changed_to("open", reason="3 recoveries in 1h", by="incident-7", at=datetime(2026, 11, 26, tzinfo=UTC))
    # (written over whatever an earlier example left: the breaker is written over the version read)
    store.save_breaker("llm-train", opened.model_copy(update={"version": store.breaker("llm-train").version}))
    opened = store.breaker("llm-train")
    out, err = io.StringIO(), io.StringIO()
    argv = ["breaker", "reset", "--region", "us-west-2", "--table", "ledger", f"--cluster={cluster}", f"--reason={reason}"]
    code = cli.main([*argv, *([f"--by={by}"] if by is not None else [])], stdout=out, stderr=err, dynamodb=ledger)
    assert code in {cli.EXIT_OK, cli.EXIT_USAGE}, err.getvalue()
    _one_printable_line(err.getvalue())
    state = store.breaker("llm-train")
    if code == cli.EXIT_OK:  # only the cluster the ledger knows, with text that prints as written
        assert cluster == "llm-train" and state.state == "closed"
        assert control_character(state.reason) is None and control_character(state.changed_by) is None
        assert 0 < len(state.reason) <= cli.BREAKER_REASON_LIMIT
    else:
        assert state == opened


# --- any command line ------------------------------------------------------------------------------
WORDS = ["checkpoint", "commit", "latest", "verify", "breaker", "status", "reset", "drill", "preflight", "--region", "us-west-2"]
WORDS += ["--cluster", "llm-train", "--table", "ledger", "--reason", "--by", "--stack", "--node", "--job", "--scenario", "--input"]
WORDS += ["--step", "--json", "--live", "--yes", "--name", "s3://bucket/prefix", "s3://bucket/prefix/step-000000100/", "workers:0"]


@FUZZ
@given(argv=st.lists(st.one_of(st.sampled_from(WORDS), any_text), max_size=10))
def test_any_command_line_ends_with_a_documented_exit_code_and_one_line(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given AWS that refuses everything (no call leaves this machine)
    monkeypatch.setattr(cli.AwsClients, "__call__", lambda self, service: _Denied())
    out, err = io.StringIO(), io.StringIO()
    try:
        code = cli.main(argv, stdout=out, stderr=err, sleep=lambda seconds: None)
    except SystemExit as exited:  # argparse: --help and --version (0), bad usage (2)
        code = exited.code  # type: ignore[assignment]
        assert code in {0, 2}
        if code == 2:
            _one_printable_line(capsys.readouterr().err)
        return
    assert code in CLI_EXITS
    if not err.getvalue().startswith("usage:"):  # a command without its subcommand shows the help
        _one_printable_line(err.getvalue())
