"""Input models reject bad input with a message that names the field."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from hyperpod_recovery.config import Settings
from hyperpod_recovery.errors import ConfigurationError
from hyperpod_recovery.models.commands import CommandEnvelope, JobSpec, ResubmitJob
from hyperpod_recovery.models.common import format_validation_error, slurm_node_name
from hyperpod_recovery.models.manifest import CheckpointManifest, step_dir
from hyperpod_recovery.models.requests import ManualRecoveryRequest
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
    job = JobSpec(job_id="1001", name="llama", num_nodes=16, state="RUNNING", checkpoint_uri="s3://ckpt/llama")
    envelope = CommandEnvelope(
        command_id="e:resubmit:1001",
        incident_id="e",
        execution_name="e",
        task_token="tok",
        requested_at="2026-03-14T09:00:00Z",
        command=ResubmitJob(job=job, checkpoint={"uri": "s3://ckpt/llama/step-000003000/", "step": 3000}),
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
        ({"REJOIN_POLL_SECONDS": "120", "REJOIN_MAX_POLL_SECONDS": "60"}, "REJOIN_MAX_POLL_SECONDS"),
    ],
)
def test_bad_environment_fails_loudly_naming_the_variable(overrides: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        Settings.from_environ(settings_env(**overrides))


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
