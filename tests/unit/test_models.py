"""Input models reject bad input with a message that names the field."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from hyperpod_recovery.config import Settings
from hyperpod_recovery.errors import ConfigurationError
from hyperpod_recovery.models.commands import CommandEnvelope, CommandReply, JobSpec, ResubmitJob, ResubmitResult
from hyperpod_recovery.models.common import format_validation_error, slurm_node_name
from hyperpod_recovery.models.job_events import JobFailedDetail
from hyperpod_recovery.models.manifest import CheckpointManifest, step_dir
from hyperpod_recovery.models.requests import JobRecoveryRequest, ManualJobRecoveryRequest, ManualRecoveryRequest, RecoveryRequest
from sandbox.scenario import Scenario
from tests.conftest import load_event
from tests.fakes import settings_env


def test_sample_drill_request_parses() -> None:
    request = ManualRecoveryRequest.model_validate(load_event("manual/drill_request_dry_run.json"))
    assert request.dry_run is True and request.node_ids == ["i-0391f86fa0fe0d465"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"cluster": "llm-train", "node_ids": []}, "node_ids"),
        ({"cluster": "llm-train", "node_ids": ["ip-10-1-0-7"]}, "node_ids.0"),
        ({"cluster": "llm-train", "node_ids": ["i-0391f86fa0fe0d465"], "dryrun": True}, "dryrun"),
        ({"node_ids": ["i-0391f86fa0fe0d465"]}, "cluster"),
        ({"cluster": "llm-train", "node_ids": ["i-0391f86fa0fe0d465"] * 101}, "node_ids"),
        ({"cluster": "llm-train", "node_ids": ["i-0391f86fa0fe0d465"], "dry_run": "maybe"}, "dry_run"),
    ],
)
def test_bad_manual_request_names_the_field(payload: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ManualRecoveryRequest.model_validate(payload)
    assert format_validation_error(caught.value).startswith(f"{field}:")


@pytest.mark.parametrize("name", ["ip-10-1-0-7; rm -rf /", "$(reboot)", "-rf", "node\nname", ""])
def test_commands_refuse_node_names_a_shell_would_interpret(name: str) -> None:
    with pytest.raises(ValidationError):
        CommandEnvelope.model_validate(
            {
                "command_id": "c",
                "incident_id": "i",
                "execution_name": "e",
                "task_token": "t",
                "requested_at": "2026-03-14T09:00:00Z",
                "command": {"type": "drain_nodes", "nodes": [name], "reason": "r"},
            }
        )


def test_job_ids_are_numeric_slurm_ids() -> None:
    with pytest.raises(ValidationError):
        JobSpec(job_id="123;scancel", name="x", num_nodes=1, state="RUNNING")
    assert JobSpec(job_id="123_4", name="x", num_nodes=1, state="RUNNING").job_id == "123_4"


def test_resubmit_command_round_trips_through_the_envelope() -> None:
    envelope = CommandEnvelope(
        command_id="e:resubmit:1001",
        incident_id="e",
        execution_name="e",
        task_token="tok",
        requested_at="2026-03-14T09:00:00Z",
        command=ResubmitJob(job_id="1001", checkpoint={"uri": "s3://ckpt/llama/step-000003000/", "step": 3000}),
    )
    again = CommandEnvelope.model_validate_json(envelope.model_dump_json())
    assert isinstance(again.command, ResubmitJob) and again.command.checkpoint.step == 3000


@pytest.mark.parametrize("key", ["../other-job/shard.pt", "/etc/passwd", "s3://other-bucket/x", "a/../../b"])
def test_manifest_shards_must_stay_inside_their_step_folder(key: str) -> None:
    with pytest.raises(ValidationError, match=r"shard key (climbs out|is an absolute key|names another location)"):
        CheckpointManifest.model_validate(
            {
                "schema": "hyperpod-recovery/checkpoint-manifest/v1",
                "job": "j",
                "step": 1,
                "created_at": "2026-03-14T09:00:00Z",
                "shards": [{"key": key, "size": 1}],
            }
        )


def test_slurm_node_name_is_the_short_private_hostname() -> None:
    assert slurm_node_name("ip-10-1-123-45.us-west-2.compute.internal") == "ip-10-1-123-45"


def test_settings_read_from_the_environment() -> None:
    settings = Settings.from_environ(settings_env(CONTROLLER_GROUPS="controller-a, controller-b", DRY_RUN="true"))
    assert settings.controller_groups == ["controller-a", "controller-b"]
    assert settings.dry_run is True and settings.region == "us-west-2"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"CLUSTER_ARN": "not-an-arn"}, "CLUSTER_ARN"),
        ({"DRY_RUN": "perhaps"}, "DRY_RUN"),
        ({"REJOIN_POLL_SECONDS": "1"}, "REJOIN_POLL_SECONDS"),
    ],
)
def test_bad_environment_fails_loudly_naming_the_variable(overrides: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        Settings.from_environ(settings_env(**overrides))


def test_given_dependent_parameters_out_of_order_then_the_effective_values_are_derived_not_refused() -> None:
    # Given a maximum below its first value (CloudFormation cannot compare two parameters)
    settings = Settings.from_environ(
        settings_env(
            REJOIN_POLL_SECONDS="120", REJOIN_MAX_POLL_SECONDS="60", JOB_RESTART_BACKOFF_SECONDS="300", JOB_RESTART_MAX_BACKOFF_SECONDS="0"
        )
    )
    # Then every function still starts, and the maximum is the first value
    assert settings.rejoin_waits == (120, 120)
    assert settings.job_restart_backoffs == (300, 300)


def test_missing_variable_is_named() -> None:
    env = settings_env()
    del env["LEDGER_TABLE"]
    with pytest.raises(ConfigurationError, match="LEDGER_TABLE"):
        Settings.from_environ(env)


@pytest.mark.parametrize(
    ("shards", "why"),
    [
        ([{"key": "", "size": 1}], "at least 1 character"),
        ([{"key": "a\x00b", "size": 1}], "control character"),
        ([{"key": "model/", "size": 0}], "names a folder"),
        ([{"key": "manifest.json", "size": 1}], "cannot list itself"),
        ([{"key": "a", "size": 1}, {"key": "a", "size": 1}], "more than once: a"),
        ([{"key": "a", "size": 1, "checksum": "md5:00"}], "String should match pattern"),
    ],
)
def test_manifest_shards_are_checked_one_by_one(shards: list[dict[str, object]], why: str) -> None:
    manifest = {"schema": "hyperpod-recovery/checkpoint-manifest/v1", "job": "j", "step": 1, "created_at": "2026-03-14T09:00:00Z"}
    with pytest.raises(ValidationError, match=re.escape(why)):
        CheckpointManifest.model_validate(manifest | {"shards": shards})


@pytest.mark.parametrize("step", [-1, 10**9])
def test_step_folders_exist_only_for_nine_digit_steps(step: int) -> None:
    with pytest.raises(ValueError, match=re.escape("outside 0..999999999")):
        step_dir(step)


# --- safety flags are strict booleans, in every model that comes from outside ------------------
def _bool_schemas(node: Any, path: str = "") -> list[tuple[str, bool]]:
    """(where, strict?) for every boolean in a pydantic core schema, nested models included."""
    found: list[tuple[str, bool]] = []
    if isinstance(node, dict):
        if node.get("type") == "bool":
            found.append((path, bool(node.get("strict"))))
        for key, value in node.items():
            found += _bool_schemas(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _bool_schemas(value, f"{path}/{index}")
    return found


# Requests and events from outside, the agent's answers (job specs, resubmission results), drills.
INBOUND_MODELS = [
    ManualRecoveryRequest,
    RecoveryRequest,
    ManualJobRecoveryRequest,
    JobRecoveryRequest,
    JobFailedDetail,
    JobSpec,
    CommandReply[ResubmitResult],
    Scenario,
]


@pytest.mark.parametrize("model", INBOUND_MODELS, ids=lambda m: m.__name__)
def test_every_flag_that_comes_from_outside_is_a_strict_boolean(model: type[BaseModel]) -> None:
    # "dry_run": "false" (a string) must be refused, never read as false: it would arm a recovery
    model.model_rebuild(force=True)  # the models' validators are built on first use
    flags = _bool_schemas(model.__pydantic_core_schema__)
    assert flags, f"{model.__name__} has no boolean at all: the test would prove nothing"
    assert [where for where, strict in flags if not strict] == []


@pytest.mark.parametrize("value", ["false", "False", "0", 0, "no", "", None])
def test_a_drill_asking_for_a_live_run_with_a_string_is_refused(value: Any) -> None:
    request = {"cluster": "llm-train", "node_ids": ["i-0391f86fa0fe0d465"], "dry_run": value}
    if value is None:  # null is "the stack's default", which is allowed
        assert ManualRecoveryRequest.model_validate(request).dry_run is None
        return
    with pytest.raises(ValidationError, match="dry_run"):
        ManualRecoveryRequest.model_validate(request)
