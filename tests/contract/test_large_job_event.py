"""A job-failed event of a job on up to 10,000 nodes (JobFailedDetail.nodes' bound) must reach the
JobRecovery it starts: EventBridge refuses a PutEvents entry over 256 KB (its documented limit: "the
total entry size must be less than 256 KB"; the agent would spool it for ever), and the JobRecovery
carries the failure in every state, which Step Functions bounds at 256 KiB (States.DataLimitExceeded,
which no Catch catches). A node list that would not fit is left out, never refused: the recovery then
asks a human, saying why (JobNodesNotCarried). The rest of a state is measured on a 1,100-node job by
tests/sandbox/test_fleet_drill.py against STATE_REST_BUDGET."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_recovery.domain.intake.normalize import GuardedCluster, translate_job_failed
from hyperpod_recovery.domain.intake.reason_budget import within_reason_budget
from hyperpod_recovery.domain.jobs.eks_jobs import failure_event
from hyperpod_recovery.models.commands import MAX_UNHEALTHY_ANSWERED, UNHEALTHY_REASON_KEPT, NodeStatesResult, NodeStatus
from hyperpod_recovery.models.events import JobFailedEvent
from hyperpod_recovery.models.job_events import (
    FAILURE_DETAIL_BUDGET,
    JOB_EVENT_SOURCE,
    JOB_FAILED_DETAIL_TYPE,
    STATE_REST_BUDGET,
    JobFailedDetail,
    fitted,
)
from hyperpod_recovery.models.job_recovery import FailureClassification, FaultyNode
from hyperpod_recovery.models.requests import TRIGGER_REASON_LIMIT, RecoveryRequest, Trigger
from hyperpod_recovery_agent.job_ended import failed_job_detail
from tests.unit.test_agent_job_events import EPILOG_ENV, SlurmDouble, record

# The rest of a state besides the failure, the unhealthy nodes' answer and the classification: the
# 1,100-node fleet run measured its whole largest state less its failure's names at under 5 KB.
OTHER_FIELDS = 16 * 1024
EVENTBRIDGE_ENTRY_LIMIT = 256 * 1024  # PutEvents: an entry's Source, DetailType, Detail and Resources
STATE_LIMIT = 256 * 1024  # Step Functions: a state's input or output, and an execution's input
# HyperPod names a Slurm node by its private IP: the longest in a 192.168/16 VPC.
LONGEST_HYPERPOD_NAME = "ip-192-168-255-255"


def names(count: int, width: int = len(LONGEST_HYPERPOD_NAME)) -> list[str]:
    return [f"ip-{n:0{width - 3}d}"[:width] for n in range(count)]


class ManyNodes(SlurmDouble):
    def __init__(self, nodes: list[str]) -> None:
        super().__init__(record())
        self.nodes = nodes

    def hostnames(self, nodelist: str) -> list[str]:
        return self.nodes


def entry_bytes(detail: JobFailedDetail) -> int:
    """The PutEvents entry as the agent's sender makes it (job_ended.JobEventSender._put: json.dumps of the spooled detail)."""
    spooled = json.loads(detail.model_dump_json())
    return len(JOB_EVENT_SOURCE.encode()) + len(JOB_FAILED_DETAIL_TYPE.encode()) + len(json.dumps(spooled).encode())


def recovery_input(detail: JobFailedDetail) -> str:
    """What intake starts the JobRecovery with, from the event EventBridge delivers."""
    event = JobFailedEvent.model_validate(
        {
            "version": "0",
            "id": "7bf73129-1428-4cd3-a780-95db273d1602",
            "detail-type": JOB_FAILED_DETAIL_TYPE,
            "source": JOB_EVENT_SOURCE,
            "account": "123456789012",
            "time": "2026-11-27T10:00:00Z",
            "region": "us-west-2",
            "resources": [],
            "detail": json.loads(detail.model_dump_json()),
        }
    )
    return translate_job_failed(
        event, GuardedCluster(name="llm-train", arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/abcd1234efgh")
    ).model_dump_json(exclude_none=True)


def largest_carried(width: int) -> int:
    """The most node names of ``width`` characters a failure carries."""
    count = 1
    while len(fitted(detail_of(names(count * 2, width))).nodes) == count * 2 and count < 10_000:
        count *= 2
    low, high = count, min(count * 2, 10_000)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fitted(detail_of(names(mid, width))).nodes else (low, mid - 1)
    return low


def detail_of(nodes: list[str]) -> JobFailedDetail:
    detail = failed_job_detail(EPILOG_ENV, ManyNodes(nodes[:1]), cluster_name="llm-train", report_timeout=False)  # type: ignore[arg-type]
    assert detail is not None
    return detail.model_copy(update={"nodes": nodes})


def test_a_failure_carries_its_nodes_names_while_they_fit_and_its_recovery_then_fits_a_state() -> None:
    # Given the most node names, as HyperPod names Slurm nodes at their longest, that a failure carries
    count = largest_carried(len(LONGEST_HYPERPOD_NAME))
    assert count >= 5_000, count  # (docs/decisions.md: about 5,700)
    detail = failed_job_detail(EPILOG_ENV, ManyNodes(names(count)), cluster_name="llm-train", report_timeout=False)  # type: ignore[arg-type]
    # Then the agent's event names every one, EventBridge takes it, and the JobRecovery it starts
    # leaves the rest of its state at least STATE_REST_BUDGET
    assert detail is not None and len(detail.nodes) == count
    assert entry_bytes(detail) < EVENTBRIDGE_ENTRY_LIMIT
    assert len(recovery_input(detail).encode()) + STATE_REST_BUDGET <= STATE_LIMIT
    # And a job on 10,000 (the bound of a failure's list) is reported without them
    assert failed_job_detail(EPILOG_ENV, ManyNodes(names(10_000)), cluster_name="llm-train", report_timeout=False).nodes == []  # type: ignore[arg-type,union-attr]


def test_the_rest_of_a_job_recoverys_state_at_its_largest_fits_what_the_failure_leaves() -> None:
    """What a JobRecovery's state holds beside its failure, at the models' bounds: a large job's Check
    Job Nodes answer (every not plainly healthy node of the cluster, up to MAX_UNHEALTHY_ANSWERED, each
    reason cut to UNHEALTHY_REASON_KEPT) and a classification naming each of them faulty, with its node
    request (node ids and triggers at their bounds). The other fields are measured on a real run
    (tests/sandbox/test_fleet_drill.py: the 1,100-node job's largest state less its failure's names)."""
    at = datetime(2026, 11, 27, 10, tzinfo=UTC)
    count = MAX_UNHEALTHY_ANSWERED
    hosts = [f"hyperpod-i-{n:017x}" for n in range(count)]  # (EKS's names: longer than Slurm's)
    ids = [f"i-{n:017x}" for n in range(count)]
    reason = "Kill task failed; node not responding since the switch reset at 09:58, " * 4
    answer = NodeStatesResult(
        nodes=[NodeStatus(name=h, state="down", flags=["DRAIN", "NOT_RESPONDING"], reason=reason[:UNHEALTHY_REASON_KEPT]) for h in hosts]
    )
    why = "Slurm state down+DRAIN+NOT_RESPONDING; HyperPod status Failure"
    triggers = within_reason_budget(
        [
            Trigger(
                source="job_failed",
                node_ids=[i],
                reason=f"job 1001 (pretrain) ended NODE_FAIL (NodeFail, exit 1) on {h}: {why}"[:TRIGGER_REASON_LIMIT],
                event_id="e",
                detected_at=at,
            )
            for h, i in zip(hosts, ids, strict=True)
        ]
    )
    node_request = RecoveryRequest(cluster="llm-train", node_ids=sorted(ids)[:100], triggers=triggers[:100], detected_at=at)
    classification = FailureClassification(
        at=at,
        kind="node_caused",
        reason="r" * 2048,
        faulty_nodes=[FaultyNode(slurm_node=h, node_id=i, why=why) for h, i in zip(hosts, ids, strict=True)],
        recover_nodes=True,
        node_request=node_request,
        node_execution_name="hpj-1001-1773666562-nodes",
    )
    largest = len(answer.model_dump_json().encode()) + len(classification.model_dump_json().encode())
    # (the other fields: what the fleet's 1,100-node job measured, with room to spare)
    assert largest + OTHER_FIELDS <= STATE_REST_BUDGET, (largest, STATE_REST_BUDGET)


@pytest.mark.parametrize("count,width", [(2_000, 128), (10_000, 18), (6_000, 64)])
def test_a_job_whose_names_would_not_fit_is_reported_without_them_and_says_so(
    count: int, width: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a job whose node names (as long as Slurm's pattern allows) would pass the budget
    with caplog.at_level(logging.WARNING):
        detail = failed_job_detail(EPILOG_ENV, ManyNodes(names(count, width)), cluster_name="llm-train", report_timeout=False)  # type: ignore[arg-type]
    # Then it is still reported, without its names (never an event EventBridge refuses for ever), and the log says why
    assert detail is not None and detail.nodes == [] and detail.job_id == "42"
    assert entry_bytes(detail) < EVENTBRIDGE_ENTRY_LIMIT
    assert f"its {count} node names make the job-failed event more than {FAILURE_DETAIL_BUDGET} bytes" in caplog.text


@pytest.mark.parametrize("pods,kept", [(1_000, True), (5_000, False)])
def test_on_eks_a_failed_jobs_pod_nodes_are_carried_while_they_fit(pods: int, kept: bool) -> None:
    # Given a failed job object whose pods ran on ``pods`` HyperPod nodes (hyperpod-i-<17 hex>: 28 characters)
    nodes = [f"hyperpod-i-{n:017x}" for n in range(pods)]
    job: dict[str, Any] = {
        "metadata": {"uid": "0f5d5c1e-8a55-4f1b-9f1e-2f1d5b6c7a8b", "namespace": "team-a", "name": "llama"},
        "status": {
            "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": "2026-11-27T10:00:00Z"}
            ]
        },
    }
    detail = failure_event(job, "PyTorchJob", "llm-train", nodes, exit_code=1)
    assert detail is not None
    # Then its names travel while they fit, and never make a state the recovery cannot carry
    assert (detail.nodes == nodes) is kept and (detail.nodes == []) is not kept
    assert len(recovery_input(detail).encode()) + STATE_REST_BUDGET <= STATE_LIMIT
    assert detail.ended_at == datetime(2026, 11, 27, 10, tzinfo=UTC)
