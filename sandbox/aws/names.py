"""Names every part of the sandboxed AWS shares: the repository it deploys from, the region, the stack,
the fake credentials, the clock's name for retry waits."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-west-2"
STACK = "sandbox"
SERVICE_NAMES = {"sfn": "stepfunctions", "eventbridge": "events"}  # botocore service ids -> client names
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}
RETRY_BACKOFF = "retry backoff"  # the clock's name for Retry and SDK retry waits (the report's wait category)
