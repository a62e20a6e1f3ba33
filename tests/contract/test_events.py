"""Every file in events/ parses with the model of its source (a sample that stops parsing is a
contract change, and fails here first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_lambda_powertools.utilities.parser.models import CloudWatchLogsModel, SqsModel
from pydantic import ValidationError

from hyperpod_recovery.models.events import (
    CloudWatchAlarmEvent,
    ExecutionStatusChangeEvent,
    HyperPodClusterEvent,
    HyperPodNodeHealthEvent,
    JobFailedEvent,
)
from hyperpod_recovery.models.requests import ManualJobRecoveryRequest, ManualRecoveryRequest
from sandbox.scenario import Scenario
from tests.conftest import EVENTS

MODELS = {
    "hyperpod": HyperPodNodeHealthEvent,
    "hyperpod-cluster": HyperPodClusterEvent,
    "cloudwatch": CloudWatchAlarmEvent,
    "manual": ManualRecoveryRequest,
    "sqs": SqsModel,
    "drills": Scenario,
    "agent": JobFailedEvent,
    "manual-job": ManualJobRecoveryRequest,
    "stepfunctions": ExecutionStatusChangeEvent,
    # A CloudWatch Logs subscription's payload (Import HyperPod Hangs): Powertools' model decodes it.
    "cloudwatch-logs": CloudWatchLogsModel,
}
ALL_FILES = sorted(EVENTS.rglob("*.json"))


def _id(path: Path) -> str:
    return str(path.relative_to(EVENTS))


def test_every_event_folder_has_a_model() -> None:
    assert {p.parent.name for p in ALL_FILES} <= set(MODELS)


@pytest.mark.parametrize("path", [p for p in ALL_FILES if not p.name.startswith("invalid_")], ids=_id)
def test_sample_parses_with_its_model(path: Path) -> None:
    MODELS[path.parent.name].model_validate(json.loads(path.read_text()))


@pytest.mark.parametrize("path", [p for p in ALL_FILES if p.name.startswith("invalid_")], ids=_id)
def test_invalid_sample_is_rejected(path: Path) -> None:
    with pytest.raises(ValidationError):
        MODELS[path.parent.name].model_validate(json.loads(path.read_text()))


def test_sqs_sample_bodies_are_events_our_translators_know() -> None:
    batch = SqsModel.model_validate(json.loads((EVENTS / "sqs" / "intake_batch.json").read_text()))
    kinds = {json.loads(r.body)["detail-type"] for r in batch.Records}
    assert kinds == {"SageMaker HyperPod Cluster Node Health Event", "CloudWatch Alarm State Change"}
