"""How long the CLI waits for AWS, and the line it prints while it waits.

A person at a terminal is not a Lambda function: the functions' client settings (adapters/aws.py
CLIENT_CONFIG) are sized to their own timeouts and stay as they are. The CLI's: a call that gets no
answer is said on stderr after SAY_AFTER_SECONDS ("waiting for S3 GetObject on s3://..."), and given
up after CLI_LIMITS (two attempts of 10 s: about 21 s; 7 s when nothing even connects), then the
command's usual one-line error. The preflight's Invoke of Check Deployment waits as long as that
function may run (INVOKE_WAIT_SECONDS), once, and says so.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from botocore.config import Config

from hyperpod_recovery.adapters.aws import INVOKE_WAIT_SECONDS

SAY_AFTER_SECONDS = 3.0
# The request parameters that name what a call is about, most telling first (S3's are built apart).
_NAMED_BY = ("FunctionName", "StackName", "ClusterName", "TableName", "stateMachineArn", "executionArn", "TopicArn", "KeyId", "Name")


@dataclass(frozen=True)
class CallLimits:
    """botocore's timeouts and attempts for one client, and when a call still unanswered is said."""

    connect_seconds: float
    read_seconds: float
    attempts: int
    say_after_seconds: float = SAY_AFTER_SECONDS

    def config(self) -> Config:
        # Standard retry mode: throttling, 5xx and a call without an answer are tried again, with backoff.
        return Config(
            connect_timeout=self.connect_seconds,
            read_timeout=self.read_seconds,
            retries={"total_max_attempts": self.attempts, "mode": "standard"},
        )

    def gives_up(self) -> str:
        if self.attempts == 1:
            return f"gives up after {self.read_seconds:g} s"
        return f"gives up after {self.attempts} attempts of {self.read_seconds:g} s"


CLI_LIMITS = CallLimits(connect_seconds=3, read_seconds=10, attempts=2)
# Check Deployment runs up to its Timeout (template.yaml); running it again would only repeat it.
INVOKE_LIMITS = CallLimits(connect_seconds=3, read_seconds=INVOKE_WAIT_SECONDS, attempts=1)


def limits_for(service: str) -> CallLimits:
    """The CLI's limits for a client of ``service`` (looked up when the client is made, so a test can
    shorten them)."""
    return INVOKE_LIMITS if service == "lambda" else CLI_LIMITS


def what_is_waited_for(service_id: str, operation: str, params: Mapping[str, Any]) -> str:
    """``S3 GetObject on s3://bucket/key``: the call and what it is about, from its own parameters."""
    call = f"{service_id} {operation}"
    bucket = params.get("Bucket")
    if isinstance(bucket, str):
        key = params.get("Key", params.get("Prefix", ""))
        return f"{call} on s3://{bucket}/{key if isinstance(key, str) else ''}"
    for name in _NAMED_BY:
        value = params.get(name)
        if isinstance(value, str) and value:
            return f"{call} on {value}"
    return call


class SlowCallNotice:
    """Prints one line on ``err`` for each call of a client that AWS has not answered after the limits'
    ``say_after_seconds``; nothing for a call answered sooner (or for an error answered sooner)."""

    def __init__(self, err: TextIO, prog: str, limits: CallLimits) -> None:
        self.err, self.prog, self.limits = err, prog, limits
        self._lock = threading.Lock()

    def watch(self, client: Any) -> Any:
        events = client.meta.events
        events.register("before-parameter-build", self._describe)
        events.register("before-call", self._start)
        events.register("after-call", self._stop)
        events.register("after-call-error", self._stop)
        return client

    # before-parameter-build sees the caller's parameters (Bucket, Key); before-call, once per call
    # whatever the retries, only the serialized request: the description is carried in the context.
    def _describe(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        context["hyperpod_recovery_waiting_for"] = what_is_waited_for(model.service_model.service_id, model.name, params)

    def _start(self, context: dict[str, Any], model: Any, **_: Any) -> None:
        what = context.get("hyperpod_recovery_waiting_for") or f"{model.service_model.service_id} {model.name}"
        line = f"{self.prog}: waiting for {what}: no answer after {self.limits.say_after_seconds:g} s ({self.limits.gives_up()})"
        timer = threading.Timer(self.limits.say_after_seconds, lambda: self._say(line))
        timer.daemon = True  # an interrupted command exits without waiting for it
        context["hyperpod_recovery_timer"] = timer
        timer.start()

    def _stop(self, context: dict[str, Any], **_: Any) -> None:
        timer = context.pop("hyperpod_recovery_timer", None)
        if timer is not None:
            timer.cancel()

    def _say(self, line: str) -> None:
        with self._lock:
            print(line, file=self.err, flush=True)
