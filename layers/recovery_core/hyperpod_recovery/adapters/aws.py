"""boto3 client construction and ClientError translation shared by the adapters."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_recovery.sdk_contract import check_client

# Standard retry mode retries throttling, 5xx and a call without an answer twice, with backoff; the
# state machine (or the SQS redelivery) retries our named transient errors on top, with its own bounded
# backoff. One call at its worst (three attempts timing out, the longest backoffs: 34 s) must leave the
# functions' 45 s time to fail with our named error before Lambda stops them (tests/contract/test_time_budgets.py).
CLIENT_CONFIG = Config(retries={"total_max_attempts": 3, "mode": "standard"}, connect_timeout=2, read_timeout=5)
# The preflight invokes the stack's Check Deployment function (Timeout 120 s in template.yaml) and
# waits for its answer: a read timeout must outlast the function, and a retry would only run the
# whole check again (tests/contract/test_template.py holds the two together).
INVOKE_WAIT_SECONDS = 150
INVOKE_CONFIG = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=INVOKE_WAIT_SECONDS)
# The notifier's channels are sent one after another in one function: one attempt each, on short
# timeouts, and the notifier itself retries a failed channel while its time budget allows
# (adapters/notifier.py), so three slow channels cannot run the function out of time together.
NOTIFY_CONFIG = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=2, read_timeout=5)

THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "SlowDown",
        "RequestThrottled",
        "Throttled",  # SNS's (ThrottledException)
    }
)


def client(service: str, config: Config = CLIENT_CONFIG) -> Any:
    """A boto3 client, checked against what the code needs from its SDK (sdk_contract.py)."""
    made = boto3.client(service, config=config)
    check_client(service, made)
    return made


class LazyClient:
    """An adapter attribute holding a boto3 client, created on first use unless one was injected.

    ``sqs = LazyClient("sqs")`` on the class; ``self._sqs = injected_or_None`` in ``__init__``.
    Creating clients lazily keeps cold starts short for handlers that never call a service.
    """

    def __init__(self, service: str, config: Config = CLIENT_CONFIG) -> None:
        self.service = service
        self.config = config

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, adapter: object, owner: type | None = None) -> Any:
        value = getattr(adapter, self.slot, None)
        if value is None:
            value = client(self.service, self.config)
            setattr(adapter, self.slot, value)
        return value


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def is_transient(exc: Exception) -> bool:
    if isinstance(exc, BotoCoreError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(exc) in THROTTLING_CODES or status >= 500
    return False
