"""boto3 client construction and ClientError translation shared by the adapters."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

# Standard retry mode already retries throttling and 5xx a few times with backoff; the state
# machine retries our named transient errors on top, with its own bounded backoff.
CLIENT_CONFIG = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=5, read_timeout=30)

THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "SlowDown",
        "RequestThrottled",
    }
)


def client(service: str) -> Any:
    return boto3.client(service, config=CLIENT_CONFIG)


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def is_transient(exc: Exception) -> bool:
    if isinstance(exc, BotoCoreError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(exc) in THROTTLING_CODES or status >= 500
    return False
