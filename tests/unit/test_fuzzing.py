"""Fuzzing: hypothesis-generated events, requests and commands. Anything malformed, foreign,
oversized or injection-looking must end in a clear rejection (our named errors), never an
unhandled exception, and never an action (no execution started, no command accepted)."""

from __future__ import annotations

import json
import string
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_recovery.domain.intake.normalize import GuardedCluster, Ignored, parse_intake_event
from hyperpod_recovery.errors import ForeignClusterEvent, InvalidRecoveryRequest, StaleEvent
from hyperpod_recovery.models.commands import CommandEnvelope
from hyperpod_recovery.models.job_recovery import ValidateJobRequestInput
from hyperpod_recovery.models.node_recovery import ValidateRequestInput
from hyperpod_recovery.models.requests import JobRecoveryRequest, RecoveryRequest, Trigger
from hyperpod_recovery.steps.intake import Intake
from hyperpod_recovery.steps.validate_job_request import validate_job_request
from hyperpod_recovery.steps.validate_request import validate_request
from tests.conftest import load_event
from tests.fakes import CLUSTER, CLUSTER_ARN, LIMITS, T0, FakeDeadLetters, FakeWorkflows

GUARDED = GuardedCluster(name=CLUSTER, arn=CLUSTER_ARN)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# What an attacker, a buggy tool or a confused human might put where an id or a name belongs.
hostile_text = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "i-0391f86fa0fe0d465; rm -rf /",
            "$(reboot)",
            "`id`",
            "ip-10-1-0-1 && scancel -u root",
            "../../etc/passwd",
            "ip-10-1-0-[1-999999]",
            "x" * 5000,
            "\x00",
            "ip-10-1-0-1\nip-10-1-0-2",
            "other-cluster",
            "arn:aws:sagemaker:us-west-2:111122223333:cluster/zzzzzzzzzzzz",
            "1e9",
            "-1",
        ]
    ),
    st.text(alphabet=string.printable, max_size=80),
)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63), st.floats(allow_nan=False), hostile_text
)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(hostile_text, inner, max_size=5), max_leaves=20
)


def _mutate(event: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    target = event
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(target.get(key), dict) else target
    target[path[-1]] = value
    return event


EVENT_FIELDS = {
    "hyperpod/node_health_unhealthy.json": [
        ["detail", "ClusterName"],
        ["detail", "ClusterArn"],
        ["detail", "InstanceId"],
        ["detail", "HealthSummary"],
        ["detail", "HealthSummary", "HealthStatus"],
        ["detail"],
        ["source"],
        ["time"],
    ],
    "cloudwatch/alarm_state_change_alarm.json": [
        ["detail", "alarmName"],
        ["detail", "state"],
        ["detail", "state", "value"],
        ["detail", "configuration"],
        ["detail-type"],
    ],
    "agent/job-failed.json": [
        ["detail", "cluster_name"],
        ["detail", "job_id"],
        ["detail", "nodes"],
        ["detail", "state"],
        ["detail", "exit_code"],
        ["detail", "checkpoint_uri"],
        ["detail", "ended_at"],
        ["detail", "event_key"],
        ["detail"],
    ],
}


@st.composite
def mutated_events(draw: st.DrawFn) -> str:
    sample = draw(st.sampled_from(sorted(EVENT_FIELDS)))
    event = load_event(sample)
    for path in draw(st.lists(st.sampled_from(EVENT_FIELDS[sample]), min_size=1, max_size=3)):
        event = _mutate(event, path, draw(json_values))
    return json.dumps(event)


@FUZZ
@given(body=st.one_of(mutated_events(), json_values.map(json.dumps), hostile_text))
def test_any_intake_body_is_translated_or_rejected_by_name(body: str) -> None:
    try:
        result = parse_intake_event(body, GUARDED)
    except (InvalidRecoveryRequest, ForeignClusterEvent):
        return
    # What is accepted is well-formed and for our cluster only
    assert isinstance(result, Trigger | JobRecoveryRequest | Ignored)
    if isinstance(result, JobRecoveryRequest):
        assert result.cluster == CLUSTER


@FUZZ
@given(bodies=st.lists(st.one_of(mutated_events(), hostile_text), min_size=1, max_size=20))
def test_a_batch_of_garbage_never_crashes_intake_and_starts_only_valid_recoveries(bodies: list[str]) -> None:
    # Given a batch of mostly malformed events
    workflows, dead = FakeWorkflows(), FakeDeadLetters()
    intake = Intake(guarded=GUARDED, dead_letters=dead)
    for n, body in enumerate(bodies):
        intake.accept(f"m{n}", body)
    # When intake starts what it accepted
    assert intake.start_recoveries(workflows, 600) == []
    # Then every started execution carries a valid request for our cluster, and every record is accounted for
    for name, payload in workflows.started.items():
        model = JobRecoveryRequest if workflows.workflow_of[name] == "job" else RecoveryRequest
        assert model.model_validate_json(payload).cluster == CLUSTER
    counted = intake.counts["dead_lettered"] + intake.counts["foreign"] + intake.counts["ignored"]
    assert counted + len(intake.accepted) + len(intake.accepted_jobs) == len(bodies) == intake.counts["received"]


manual_requests = st.fixed_dictionaries(
    {},
    optional={
        "cluster": st.one_of(st.just(CLUSTER), json_values),
        "node_ids": st.one_of(st.lists(st.one_of(st.just("i-0391f86fa0fe0d465"), hostile_text), max_size=300), json_values),
        "job_id": st.one_of(st.just("1234"), json_values),
        "reason": json_values,
        "dry_run": json_values,
        "triggers": json_values,
        "source": json_values,
    },
)


@FUZZ
@given(payload=manual_requests)
def test_any_start_input_is_validated_or_rejected_naming_a_field(payload: dict[str, Any]) -> None:
    for validate, step in (
        (validate_request, ValidateRequestInput(execution_name="fuzz", request=payload)),
        (validate_job_request, ValidateJobRequestInput(execution_name="fuzz", request=payload)),
    ):
        try:
            request = validate(step, guarded=GUARDED, stack_dry_run=False, limits=LIMITS, now=T0)  # type: ignore[operator]
        except (InvalidRecoveryRequest, StaleEvent) as exc:
            assert str(exc), "a rejection must say what is wrong"
            continue
        assert request.cluster == CLUSTER and request.incident_id == "fuzz"


@FUZZ
@given(nodes=st.lists(hostile_text, min_size=1, max_size=5), job_id=hostile_text)
def test_commands_with_injection_looking_names_never_validate(nodes: list[str], job_id: str) -> None:
    # A command the agent would run must never carry a shell-looking node name or job id
    safe = all(n and n.isascii() and all(c.isalnum() or c in "._-" for c in n) and len(n) <= 128 and n[0].isalnum() for n in nodes)
    envelope = {
        "command_id": "c",
        "incident_id": "i",
        "execution_name": "e",
        "task_token": "t",
        "requested_at": T0.isoformat(),
        "command": {"type": "drain_nodes", "nodes": nodes, "reason": "hyperpod-recovery:i fuzz"},
    }
    try:
        CommandEnvelope.model_validate(envelope)
        accepted = True
    except ValidationError:
        accepted = False
    assert accepted == safe
    envelope["command"] = {"type": "capture_job_spec", "job_id": job_id}
    try:
        CommandEnvelope.model_validate(envelope)
        assert job_id.isdigit() or ("_" in job_id and all(p.isdigit() for p in job_id.split("_")))
    except ValidationError:
        pass
