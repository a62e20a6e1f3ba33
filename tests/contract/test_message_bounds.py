"""A storm's page still goes out, and its record still saves: the notification of the largest
incident fits SNS's 256 KiB message (a Publish that fails loses the page), and its record fits
DynamoDB's 400 KB item with room for the rest of the ledger's attributes."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.domain.messages.notification import notification
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT, MAX_NODES_PER_REQUEST
from hyperpod_recovery.models.records import IncidentRecord, JobFate, NodeFate, TimelineEntry
from tests.fakes import T0

SNS_MESSAGE_LIMIT = 256 * 1024
RECORD_ITEM_BUDGET = 350_000  # DynamoDB's 400 KB, less the item's other attributes and keys
LONG = "x" * 2000  # longer than any bound: the models cut it


def _largest(orchestrator: str) -> IncidentRecord:
    eks = orchestrator == "eks"
    jobs = [
        JobFate(
            job=f"{j:08x}-aaaa-4bbb-8ccc-{j:012x}" if eks else str(1000 + j),
            name=f"{j}-" + "n" * 250,
            kind="PyTorchJob" if eks else None,
            namespace="n" * 63 if eks else None,
            fate=("not_resubmitted", "resubmitted", "copy_unknown")[j % 3],
            copy_id=f"{j:08x}-dddd-4eee-8fff-{j:012x}" if eks else str(5000 + j),
            copy_name=f"{j}-" + "n" * 240 + "-r1" if eks else None,
            copy_state="PENDING",
            checkpoint_step=10**9,
            checkpoint_uri="s3://" + "p" * 250 + "/step-001000000000/",
            checkpoint_prefix="s3://" + "p" * 250,
            reason=LONG,
        )
        for j in range(MAX_JOBS_PER_INCIDENT)
    ]
    nodes = [
        NodeFate(
            node=f"hyperpod-i-{n:017x}" if eks else f"ip-10-{n // 250}-{n % 250}-1",
            instance=f"i-{n:017x}",
            fate=("out_of_service", "replacing", "unknown")[n % 3],
            replacement=f"i-{n + 1000:017x}",
            replacement_node=f"hyperpod-i-{n + 1000:017x}" if eks else None,
            replacement_status="Pending",
            detail=str(n) + LONG,  # every detail its own: no two nodes told together
            held=True,
        )
        for n in range(MAX_NODES_PER_REQUEST)
    ]
    return IncidentRecord(
        incident_id="hpr-100n-0123456789-20260314T0900",
        cluster="c" * 63,
        orchestrator=orchestrator,  # type: ignore[arg-type]
        outcome="escalated",
        dry_run=False,
        trigger=["hyperpod_node_health"],
        nodes=[n.instance or "" for n in nodes],
        hostnames=[n.node for n in nodes],
        error="ResubmitFailed",
        cause=LONG * 2,
        summary=LONG * 4,
        recorded_at=T0 + timedelta(hours=1),
        timeline=[TimelineEntry(at=T0 + timedelta(seconds=i), event="job resubmitted", detail=LONG) for i in range(400)],
        job_fates=jobs,
        node_fates=nodes,
    )


@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
def test_the_largest_incidents_page_fits_sns(orchestrator: str) -> None:
    # Given the largest incident: 100 nodes and 100 jobs, each with the longest reason, a long timeline
    record = _largest(orchestrator)
    # When its page is rendered
    subject, body = notification(record, "https://console/" + "e" * 300, deployment=Deployment(stack="s" * 128, ledger_table="t" * 255))
    # Then it fits SNS's message limit, and says where the rest is
    assert len(body.encode()) < SNS_MESSAGE_LIMIT
    assert f"hyperpod-recovery incidents show {record.incident_id} --stack {'s' * 128}" in body and len(subject) <= 100


@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
def test_the_largest_incidents_record_fits_a_ledger_item(orchestrator: str) -> None:
    record = _largest(orchestrator).model_copy(update={"summary": LONG[:8000], "cause": LONG[:4000], "timeline": []})
    # (the ledger stores the record as one JSON attribute)
    size = len(json.dumps(record.model_dump(mode="json")).encode())
    print(f"{orchestrator}: the largest record's facts, summary and cause: {size} bytes")
    assert size < RECORD_ITEM_BUDGET
