"""JobRecovery's Recover Nodes starts NodeRecovery with the classification's node request field by
field, and the job it recovers (nested_for_job): every field of RecoveryRequest, none invented."""

from __future__ import annotations

import json
from pathlib import Path

from hyperpod_recovery.models.requests import RecoveryRequest

ASL = Path(__file__).resolve().parents[2] / "statemachines" / "job_recovery.asl.json"


def test_the_nested_start_passes_every_field_of_the_node_request_and_the_job_it_is_for() -> None:
    start = json.loads(ASL.read_text())["States"]["Recover Nodes"]["Parameters"]["Input"]
    assert sorted(key.removesuffix(".$") for key in start) == sorted(RecoveryRequest.model_fields)
    assert start.pop("nested_for_job.$") == "$.request.job_id"
    assert all(path == f"$.classification.node_request.{key.removesuffix('.$')}" for key, path in start.items())
