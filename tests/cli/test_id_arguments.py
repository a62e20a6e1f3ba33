"""Every id argument (incident id, execution name, verdict id, node or instance id, hostname, job id,
cluster, stack) is checked to its documented shape before any AWS call: any string ends in a one-line
refusal (exit 2) or reaches AWS; never a traceback."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery_cli.inputs import InputRefused
from hyperpod_recovery_cli.main import main
from hyperpod_recovery_cli.verdicts import parse_verdict_id

YES = ["--reason", "r", "--yes"]
# Each id argument, in a command that takes it: "{}" is where the id goes.
ID_ARGUMENTS = {
    "incident id (show)": ["incidents", "show", "{}", "--stack", "s"],
    "incident id (stop)": ["stop", "{}", "--stack", "s", *YES],
    "node (locks release)": ["locks", "release", "{}", "--stack", "s", *YES],
    "node (hold)": ["hold", "{}", "--stack", "s", *YES],
    "node (unhold)": ["unhold", "{}", "--stack", "s", *YES],
    "verdict id (confirm)": ["verdicts", "confirm", "{}", "--stack", "s", *YES],
    "verdict id (reject)": ["verdicts", "reject", "{}", "--stack", "s", *YES],
    "drill --node": ["drill", "--stack", "s", "--node", "{}"],
    "drill --job": ["drill", "--stack", "s", "--job", "{}"],
    "drill --name": ["drill", "--stack", "s", "--node", "i-0123456789abcdef0", "--name", "{}"],
    "breaker --cluster": ["breaker", "status", "--cluster", "{}", "--table", "ledger"],
    "--stack": ["locks", "--stack", "{}"],
    "checkpoint --job": ["checkpoint", "latest", "s3://bucket/prefix", "--job", "{}"],
    "goodput --stack": ["goodput", "--stack", "{}"],
    "preflight --stack": ["preflight", "--stack", "{}"],
}
# Any text, and texts near the shapes: a verdict id with any epoch up to 14 digits, an instance id.
VERDICT_IDS = st.builds("{}-{}-{}".format, st.from_regex(r"\A[0-9]{1,6}\Z"), st.sampled_from(["hung", "slow"]), st.integers(0, 10**14))
IDS = st.text() | VERDICT_IDS | st.from_regex(r"\Ai-[0-9a-f]{1,20}\Z")


class ReachedAws(Exception):
    """The id was accepted: the command went on to AWS."""


class NoAws:
    def __getattr__(self, name: str) -> Any:
        raise ReachedAws(name)


def run(argv: list[str]) -> tuple[int | None, str]:
    err = io.StringIO()
    clients = {name: NoAws() for name in ("sfn", "sagemaker", "cloudformation", "lambda", "sts")}
    with contextlib.redirect_stderr(err):
        try:
            code: int | None = main(argv, stdout=io.StringIO(), stderr=err, s3=NoAws(), dynamodb=NoAws(), drill_clients=clients)
        except SystemExit as exc:  # argparse's refusal (an id that looks like an option)
            code = int(exc.code or 0)
        except ReachedAws:
            code = None
    return code, err.getvalue()


@pytest.mark.parametrize("where", ID_ARGUMENTS)
@settings(max_examples=60, deadline=None)
@given(text=IDS)
def test_any_string_as_an_id_is_refused_in_one_line_or_reaches_aws_never_a_traceback(where: str, text: str) -> None:
    argv = [text if word == "{}" else word for word in ID_ARGUMENTS[where]]
    code, err = run(argv)
    assert code in (None, 0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and "Traceback" not in err, err


def test_a_verdict_id_with_a_twelve_digit_epoch_is_refused_in_one_line() -> None:
    code, err = run(["verdicts", "confirm", "1001-hung-999999999999", "--stack", "s", *YES])
    assert code == 2 and "past the year 9999" in err and err.count("\n") == 1


@settings(max_examples=300, deadline=None)
@given(text=IDS)
def test_any_string_is_either_refused_as_a_verdict_id_or_names_an_episode_a_datetime_holds(text: str) -> None:
    try:
        ref = parse_verdict_id(text)
    except InputRefused as refused:
        assert "\n" not in str(refused)
        return
    assert ref.episode_at.year <= 9999 and str(ref)
