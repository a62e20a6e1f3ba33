"""A call AWS does not answer: the CLI says what it waits for, and gives up in a time an operator
accepts . The endpoint is a local socket that accepts connections and never
answers; the limits are shortened so that no test waits more than about a second of real time."""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from hyperpod_recovery.adapters.aws import CLIENT_CONFIG, INVOKE_WAIT_SECONDS
from hyperpod_recovery_cli import aws_calls
from hyperpod_recovery_cli.aws_calls import CallLimits
from hyperpod_recovery_cli.main import EXIT_AWS, AwsClients, main
from sandbox.template import load_template
from tests.conftest import ROOT

SHORT = CallLimits(connect_seconds=0.5, read_seconds=0.6, attempts=1, say_after_seconds=0.05)


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """http://127.0.0.1:PORT that accepts every connection and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    for connection in held:
        connection.close()
    server.close()


@pytest.fixture
def short_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_calls, "CLI_LIMITS", SHORT)
    monkeypatch.setattr(aws_calls, "INVOKE_LIMITS", SHORT)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"), ("AWS_REGION", "us-west-2")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("SLURM_JOB_NAME", raising=False)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, sleep=lambda seconds: None)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.usefixtures("short_limits")
def test_given_s3_that_never_answers_when_asking_for_the_latest_checkpoint_then_it_says_what_it_waits_for_then_gives_up(
    silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", silent_endpoint)
    code, out, err = run("checkpoint", "latest", "s3://llm-train-checkpoints/llama-70b", "--job", "llama-70b")
    waiting, failure = err.splitlines()
    assert waiting == (
        "hyperpod-recovery: waiting for S3 GetObject on s3://llm-train-checkpoints/llama-70b/latest: no answer after 0.05 s "
        "(gives up after 0.6 s)"
    )
    assert failure.startswith("hyperpod-recovery: S3 error: ") and "Read timeout" in failure
    assert (code, out) == (EXIT_AWS, "")


@pytest.mark.usefixtures("short_limits")
def test_given_cloudformation_that_never_answers_when_running_the_preflight_then_it_says_which_stack_it_waits_for(
    silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", silent_endpoint)
    code, _, err = run("preflight", "--stack", "hpr-llm-train")
    assert err.splitlines()[0].startswith("hyperpod-recovery: waiting for CloudFormation DescribeStacks on hpr-llm-train: no answer after")
    assert code == EXIT_AWS


@pytest.mark.usefixtures("short_limits")
def test_given_the_check_deployment_function_that_never_answers_when_invoked_then_the_wait_names_the_function(
    silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", silent_endpoint)
    err = io.StringIO()
    functions = AwsClients("us-west-2", err=err)("lambda")
    with pytest.raises(Exception, match="Read timeout"):
        functions.invoke(FunctionName="hpr-llm-train-CheckDeployment", Payload=b"{}")
    assert err.getvalue() == (
        "hyperpod-recovery: waiting for Lambda Invoke on hpr-llm-train-CheckDeployment: no answer after 0.05 s (gives up after 0.6 s)\n"
    )


@pytest.mark.usefixtures("short_limits")
def test_given_a_call_answered_at_once_when_it_returns_then_nothing_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    # A closed port refuses at once: an error answered sooner than the notice is not a wait
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(aws_calls, "CLI_LIMITS", CallLimits(connect_seconds=0.5, read_seconds=0.5, attempts=1, say_after_seconds=0.5))
    err = io.StringIO()
    code = main(["checkpoint", "latest", "s3://llm-train-checkpoints/llama-70b", "--job", "llama-70b"], stdout=io.StringIO(), stderr=err)
    assert code == EXIT_AWS and "waiting for" not in err.getvalue()
    time.sleep(0.6)  # past the notice's time: a timer left running would print now
    assert "waiting for" not in err.getvalue()


def test_the_clis_own_limits_say_a_wait_within_seconds_and_give_up_within_half_a_minute() -> None:
    # What an operator accepts at a terminal: told within 3 s, the command over within about 21 s
    # (two attempts of 10 s and standard mode's backoff of at most 1 s between them).
    limits = aws_calls.CLI_LIMITS
    config = AwsClients("us-west-2")("s3").meta.config
    assert (config.connect_timeout, config.read_timeout, config.retries["total_max_attempts"]) == (3, 10, 2)
    assert limits.say_after_seconds <= 3
    assert limits.attempts * max(limits.connect_seconds, limits.read_seconds) + (limits.attempts - 1) <= 30


def test_the_lambdas_client_settings_are_not_the_clis() -> None:
    # adapters/aws.py CLIENT_CONFIG is sized to the functions' timeouts (tests/contract/test_time_budgets.py)
    assert (CLIENT_CONFIG.connect_timeout, CLIENT_CONFIG.read_timeout, CLIENT_CONFIG.retries) == (
        2,
        5,
        {"total_max_attempts": 3, "mode": "standard"},
    )


def test_the_invoke_waits_as_long_as_check_deployment_may_run_and_says_so() -> None:
    template = load_template(ROOT / "template.yaml")
    timeout = template["Resources"]["CheckDeploymentFunction"]["Properties"]["Timeout"]
    assert aws_calls.INVOKE_LIMITS.read_seconds == INVOKE_WAIT_SECONDS > timeout
    assert aws_calls.INVOKE_LIMITS.gives_up() == f"gives up after {INVOKE_WAIT_SECONDS} s"
