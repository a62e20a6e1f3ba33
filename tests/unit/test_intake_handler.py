"""The intake Lambda: partial batch failures, DLQ for what can never parse, grouping, dedupe."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

from hyperpod_recovery.errors import StartExecutionFailed
from sandbox.aws import load_handler
from tests.conftest import load_event
from tests.fakes import CLUSTER_ARN, fake_dependencies

handler = load_handler("functions/intake/")


def _record(message_id: str, body: Any) -> dict[str, Any]:
    record = copy.deepcopy(load_event("sqs/intake_batch.json")["Records"][0])
    record["messageId"] = message_id
    record["body"] = body if isinstance(body, str) else json.dumps(body)
    return record


def _health(instance: str, event_id: str) -> dict[str, Any]:
    event = load_event("hyperpod/node_health_unhealthy.json")
    event["id"] = event_id
    event["resources"] = [CLUSTER_ARN]
    event["detail"].update(InstanceId=instance, ClusterArn=CLUSTER_ARN)
    return event


def test_sample_batch_starts_one_recovery_for_its_node(lambda_context) -> None:  # type: ignore[no-untyped-def]
    # Given the sample batch (a health event and an alarm for the same node, for a stack guarding that cluster)
    deps = fake_dependencies(CLUSTER_ARN="arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6")
    # When intake processes it
    response = handler(load_event("sqs/intake_batch.json"), lambda_context, deps=deps)
    # Then one execution covers both signals and nothing failed
    assert response == {"batchItemFailures": []}
    ((name, payload),) = deps.workflows.started.items()  # type: ignore[attr-defined]
    request = json.loads(payload)
    assert name == "hpr-i-0391f86fa0fe0d465-20260314T0920"
    assert sorted(t["source"] for t in request["triggers"]) == ["cloudwatch_alarm", "hyperpod_node_health"]


def test_unparseable_record_goes_to_the_dlq_and_the_rest_proceed(lambda_context) -> None:  # type: ignore[no-untyped-def]
    deps = fake_dependencies()
    event = {"Records": [_record("bad", "{not json"), _record("good", _health("i-0391f86fa0fe0d465", "e1"))]}
    response = handler(event, lambda_context, deps=deps)
    # The bad record is not reported as a failure (it would be retried): it is in the DLQ with its reason
    assert response == {"batchItemFailures": []}
    body, reason, message_id = deps.dead_letters.sent[0]  # type: ignore[attr-defined]
    assert (body, message_id) == ("{not json", "bad") and reason.startswith("body: not JSON")
    assert len(deps.workflows.started) == 1  # type: ignore[attr-defined]


def test_foreign_and_healthy_events_start_nothing(lambda_context) -> None:  # type: ignore[no-untyped-def]
    deps = fake_dependencies()
    healthy = _health("i-0391f86fa0fe0d465", "e1")
    healthy["detail"]["HealthSummary"]["HealthStatus"] = "Healthy"
    foreign = load_event("hyperpod/node_health_foreign_cluster.json")
    response = handler({"Records": [_record("a", healthy), _record("b", foreign)]}, lambda_context, deps=deps)
    assert response == {"batchItemFailures": []}
    assert deps.workflows.started == {} and deps.dead_letters.sent == []  # type: ignore[attr-defined]


def test_rack_failure_in_one_batch_becomes_one_execution(lambda_context) -> None:  # type: ignore[no-untyped-def]
    deps = fake_dependencies()
    records = [_record(f"m{n}", _health(f"i-{n:017x}", f"e{n}")) for n in range(40)]
    handler({"Records": records}, lambda_context, deps=deps)
    (payload,) = deps.workflows.started.values()  # type: ignore[attr-defined]
    assert len(json.loads(payload)["node_ids"]) == 40


def test_duplicate_events_for_a_started_incident_start_nothing_new(lambda_context) -> None:  # type: ignore[no-untyped-def]
    deps = fake_dependencies()
    handler({"Records": [_record("m1", _health("i-0391f86fa0fe0d465", "e1"))]}, lambda_context, deps=deps)
    handler({"Records": [_record("m2", _health("i-0391f86fa0fe0d465", "e2"))]}, lambda_context, deps=deps)
    assert len(deps.workflows.started) == 1  # type: ignore[attr-defined]


def test_failed_start_reports_only_its_records_for_retry(lambda_context) -> None:  # type: ignore[no-untyped-def]
    deps = fake_dependencies()
    deps.workflows.fail_with = StartExecutionFailed("throttled")  # type: ignore[attr-defined]
    records = [_record("m1", _health("i-0391f86fa0fe0d465", "e1")), _record("bad", "[]")]
    response = handler({"Records": records}, lambda_context, deps=deps)
    assert response == {"batchItemFailures": [{"itemIdentifier": "m1"}]}


def _job_failed(cluster: str = "llm-train") -> dict[str, Any]:
    event = load_event("agent/job-failed.json")
    event["detail"]["cluster_name"] = cluster
    return event


def test_a_job_failed_event_starts_a_job_recovery_named_by_the_job_end(lambda_context) -> None:  # type: ignore[no-untyped-def]
    # Given the agent's job-failed event and a health event in the same batch
    deps = fake_dependencies()
    event = {"Records": [_record("job", _job_failed()), _record("node", _health("i-0391f86fa0fe0d465", "e1"))]}
    response = handler(event, lambda_context, deps=deps)
    # Then a JobRecovery starts for the job, after the NodeRecovery for the node (which takes the locks first)
    assert response == {"batchItemFailures": []}
    started = deps.workflows.workflow_of  # type: ignore[attr-defined]
    detail = _job_failed()["detail"]
    name = f"hpj-{detail['job_id']}-{int(datetime.fromisoformat(detail['ended_at']).timestamp())}"
    assert list(started.items()) == [(next(iter(started)), "node"), (name, "job")]
    request = json.loads(deps.workflows.started[name])  # type: ignore[attr-defined]
    assert request["source"] == "job_failed" and request["failure"]["state"] == detail["state"]


def test_a_redelivered_job_failed_event_is_a_duplicate(lambda_context) -> None:  # type: ignore[no-untyped-def]
    deps = fake_dependencies()
    handler({"Records": [_record("a", _job_failed())]}, lambda_context, deps=deps)
    handler({"Records": [_record("b", _job_failed())]}, lambda_context, deps=deps)
    assert len(deps.workflows.started) == 1  # type: ignore[attr-defined]


def test_a_job_failed_event_of_another_cluster_starts_nothing(lambda_context) -> None:  # type: ignore[no-untyped-def]
    deps = fake_dependencies()
    assert handler({"Records": [_record("a", _job_failed("other-cluster"))]}, lambda_context, deps=deps) == {"batchItemFailures": []}
    assert deps.workflows.started == {} and deps.dead_letters.sent == []  # type: ignore[attr-defined]
