"""Shared fixtures. Dummy AWS credentials and region are set before anything imports boto3, so no
test can reach a real account; every AWS call is moto, the sandbox, or a fake."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_REGION": "us-west-2",
        "POWERTOOLS_SERVICE_NAME": "hyperpod-recovery",
        "POWERTOOLS_METRICS_NAMESPACE": "HyperPodRecovery",
    }
)

import pytest

import sandbox  # noqa: F401  (puts the layer's package on sys.path)
from hyperpod_recovery.clock import install_clock
from hyperpod_recovery.config import get_settings
from hyperpod_recovery.observability import metrics
from hyperpod_recovery.runtime import default_dependencies

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"


def load_event(relative: str) -> dict[str, Any]:
    return json.loads((EVENTS / relative).read_text())


@pytest.fixture(autouse=True)
def _cold_start() -> Any:
    """Every test starts like a fresh Lambda container: no cached settings, system clock, no metrics."""
    get_settings.cache_clear()
    default_dependencies.cache_clear()
    metrics.clear_metrics()
    install_clock(None)
    yield
    install_clock(None)


class FakeLambdaContext:
    function_name = "test-function"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-west-2:123456789012:function:test-function"
    memory_limit_in_mb = 256
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    log_group_name = "/aws/lambda/test-function"
    log_stream_name = "test"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


@pytest.fixture
def lambda_context() -> FakeLambdaContext:
    return FakeLambdaContext()
