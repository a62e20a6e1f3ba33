"""Every ledger item stays under DynamoDB's 400 KB at the largest parameters the template accepts.

DynamoDB refuses every write of an item past 400 KB ("The maximum item size in DynamoDB is 400 KB,
which includes both attribute name binary length (UTF-8 length) and attribute value lengths (again
binary length)", DynamoDB developer guide, Service quotas: Items). An item that grows with a
window, a storm or MaxNodesInRecovery would, once there, make every later write of it fail: the
breaker would stop counting, the cap stop reserving. So each kind of item the pipeline writes is
written here, through DynamoLedger on moto, at the largest the models and template.yaml's MaxValue
allow (ids, hostnames and names at their pattern's longest, 8192-character task tokens, every
list at its bound, every text at its cut), read back as stored, and measured the way DynamoDB
measures it. What accumulated in one item before (the recovery log, a lineage's restarts, a
cluster's rejoin waits) is an item per entry now, so no parameter makes those grow.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.domain.record.incident import conclude
from hyperpod_recovery.domain.record.node_incident import NODE_INCIDENT
from hyperpod_recovery.models.commands import CommandReply, CordonResult, JobSpec
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT, MAX_NODES_PER_REQUEST
from hyperpod_recovery.models.job_recovery import RestartEntry
from hyperpod_recovery.models.kubernetes import KubeJobRef
from hyperpod_recovery.models.node_recovery import OutcomeResult, RecordOutcomeInput, StepError
from hyperpod_recovery.models.records import BREAKER_HISTORY, BreakerState, RecoveryLogEntry, RejoinWait
from sandbox.template import load_template
from tests.conftest import ROOT
from tests.contract.adapter_support import REGION, ledger_table_from_template
from tests.contract.test_state_bounds import largest_realistic_state
from tests.fakes import T0

ITEM_LIMIT = 400 * 1024
PARAMETERS = load_template(ROOT / "template.yaml")["Parameters"]
CLUSTER = "c" * 63  # ClusterName: at most 63 characters
INCIDENT = "x" * 80  # an execution name: at most 80 characters
HOSTNAME = "h" * 128  # SLURM_NODE_PATTERN: at most 128 characters
LOGICAL_ID = "l" * 128  # SageMaker ClusterNodeLogicalId: at most 128 (botocore's model)
GROUP = "g" * 63  # ClusterInstanceGroupName: at most 63
TOKEN = "t" * 8192  # a Step Functions task token: at most 8192 (SendTaskSuccess taskToken)


def instance(n: int) -> str:
    """An instance id at its longest (ClusterNodeId: i- and 17 hex digits)."""
    return f"i-{n:017x}"


def item_size(value: Any) -> int:
    """An attribute value's size as DynamoDB counts it (developer guide, Item sizes and formats):
    strings and binary by their UTF-8 length, numbers about 1 byte per two significant digits plus
    1, a list or map 3 bytes plus its elements and 1 byte each (a map's names count too), a set its
    elements, booleans and nulls 1 byte."""
    ((kind, body),) = value.items()
    if kind == "S":
        return len(body.encode())
    if kind == "B":
        return len(body)
    if kind == "N":
        digits = Decimal(body).normalize().as_tuple().digits
        return math.ceil(len(digits) / 2) + 1
    if kind in ("SS", "BS"):
        return sum(len(e.encode()) if isinstance(e, str) else len(e) for e in body)
    if kind == "NS":
        return sum(item_size({"N": e}) for e in body)
    if kind == "L":
        return 3 + sum(item_size(e) + 1 for e in body)
    if kind == "M":
        return 3 + sum(len(k.encode()) + item_size(v) + 1 for k, v in body.items())
    return 1  # BOOL, NULL


def size_of(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + item_size(value) for name, value in item.items())


def largest_job(n: int) -> JobSpec:
    """A job as a cordon answer describes it, every field at its longest (a cordon answer carries
    no node list; an EKS job its object's reference)."""
    return JobSpec(
        job_id=f"{n:08x}-0000-4000-8000-000000000000",
        name="n" * 256,
        user="u" * 64,
        partition="p" * 128,
        num_nodes=10_000,
        state="s" * 32,
        checkpoint_uri="s3://" + "b" * 63 + "/" + "p" * 187,
        restarted_by="hyperpod_training_operator",
        kube=KubeJobRef(kind="PyTorchJob", namespace="k" * 63, name="j" * 63),
        resume="after_rejoin",
        unresumable="r" * 300,
    )


@pytest.fixture(scope="module")
def stored() -> Iterator[dict[str, dict[str, Any]]]:
    """Each kind of ledger item, written at its largest and read back as stored: sort key -> item."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        ledger = DynamoLedger(ledger_table_from_template(), dynamodb=dynamodb)
        nodes = [instance(n) for n in range(MAX_NODES_PER_REQUEST)]
        hostnames = [f"{HOSTNAME[:-3]}{n:03d}" for n in range(MAX_NODES_PER_REQUEST)]
        jobs = [largest_job(n) for n in range(MAX_JOBS_PER_INCIDENT)]
        ttl = timedelta(hours=6)
        # Locks of every node and hostname, claims of every job, the replacements and reboots it
        # initiated: the incident's holdings and REPLACEMENTS at their largest.
        ledger.acquire_locks(INCIDENT, CLUSTER, [*nodes, *(f"host:{h}" for h in hostnames)], T0, ttl)
        ledger.mark_replacements_initiated(INCIDENT, [*nodes, *(f"reboot:{n}" for n in nodes)], T0)
        for job in jobs:
            ledger.claim_resubmission(CLUSTER, job.job_id, INCIDENT, T0, ttl)
        ledger.complete_resubmission(CLUSTER, jobs[0].job_id, INCIDENT, jobs[-1].job_id)
        # The cap's places: MaxNodesInRecovery of them, each its own incident (the longest entries),
        # plus this incident's, with the hostnames it acts on in its holdings.
        most = int(PARAMETERS["MaxNodesInRecovery"]["MaxValue"])
        expires = int((T0 + ttl).timestamp())
        places = {instance(10_000 + n): (f"{INCIDENT[:-6]}{n:06d}", expires) for n in range(most - MAX_NODES_PER_REQUEST)}
        ledger._write_reservations(CLUSTER, places, 0)
        assert ledger.reserve_capacity(CLUSTER, INCIDENT, nodes, most, T0, ttl, hostnames)
        assert len(ledger.nodes_in_recovery(CLUSTER, T0)) == most
        ledger.save_jobs(INCIDENT, jobs, T0)
        # The record of the largest realistic incident, with those jobs restored from the ledger
        state = largest_realistic_state()
        cordon = CommandReply[CordonResult](requested_at=T0, completed_at=T0, result=CordonResult(jobs=jobs, drained=hostnames))
        state = state.model_copy(update={"cordon": cordon})
        step = RecordOutcomeInput(
            execution_name=INCIDENT, disposition="escalated", state=state, error=StepError(Error="E" * 64, Cause="c" * 32_768)
        )
        _, record, _ = conclude(NODE_INCIDENT, step, cluster=CLUSTER, now=T0 + timedelta(hours=3))
        ledger.save_incident(record)
        # Its page, done, with the answer kept for a rerun
        ledger.begin_effect(INCIDENT, "notification", T0)
        largest_answer = OutcomeResult(
            at=T0,
            incident_id=INCIDENT,
            outcome="escalated",
            error="E" * 256,
            cause="c" * 4000,
            summary="s" * 8000,
            durations={f"{'d' * 62}{n:02d}": 1e9 for n in range(20)},
        )
        ledger.finish_effect(INCIDENT, "notification", T0, result=largest_answer.model_dump_json())
        # The breaker after BREAKER_HISTORY changes, each with the longest who and why
        breaker = BreakerState()
        for n in range(BREAKER_HISTORY + 5):
            breaker = breaker.changed_to("open" if n % 2 else "closed", reason="r" * 5000, by="w" * 500, at=T0 + timedelta(minutes=n))
        ledger.save_breaker(CLUSTER, breaker)
        # One recovery in the log: every target and its replacement under a new name
        ledger.log_recovery(
            CLUSTER,
            RecoveryLogEntry(incident=INCIDENT, at=T0, hostnames=[*hostnames, *(h[::-1] for h in hostnames)], outcome="escalated"),
            int(PARAMETERS["RepeatOffenderWindowSeconds"]["MaxValue"]),
        )
        # One restart of a lineage, and the longest wait for a rejoin
        restart = RestartEntry(
            failed_job_id=jobs[0].job_id,
            new_job_id=jobs[1].job_id,
            kind="node_caused",
            checkpoint_step=10**9 - 1,
            restarted_at=T0,
            incident=INCIDENT,
        )
        ledger.record_restart(CLUSTER, jobs[0].job_id, restart)
        wait = RejoinWait(
            execution=INCIDENT,
            task_token=TOKEN,
            until=T0,
            logical_ids=[f"{LOGICAL_ID[:-3]}{n:03d}" for n in range(MAX_NODES_PER_REQUEST)],
            instance_ids=nodes,
            instance_groups=[f"{GROUP[:-3]}{n:03d}" for n in range(MAX_NODES_PER_REQUEST)],
        )
        ledger.await_rejoin(CLUSTER, wait, T0)
        # The largest item of each kind (its sort key up to the first #)
        largest: dict[str, dict[str, Any]] = {}
        for page in dynamodb.get_paginator("scan").paginate(TableName="ledger"):
            for item in page["Items"]:
                kind = item["sk"]["S"].split("#")[0]
                if kind not in largest or size_of(item) > size_of(largest[kind]):
                    largest[kind] = item
        yield largest


KINDS = [
    "LOCK",
    "RECORD",
    "REPLACEMENTS",
    "HOLDINGS",
    "JOBS",
    "RESUBMISSION",
    "LINEAGE",
    "IN_RECOVERY",
    "BREAKER",
    "RECOVERY",
    "RESTART",
    "WAIT",
    "EFFECT",
]


def test_every_kind_of_ledger_item_is_written_here(stored: dict[str, dict[str, Any]]) -> None:
    assert sorted(stored) == sorted(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_each_ledger_item_at_the_largest_accepted_parameters_stays_under_400_kb(kind: str, stored: dict[str, dict[str, Any]]) -> None:
    size = size_of(stored[kind])
    print(f"{kind}: {size / 1024:.1f} KiB")
    assert size < ITEM_LIMIT, f"{kind}: {size} bytes"


def test_the_size_is_counted_as_dynamodb_counts_it() -> None:
    # The developer guide's own examples: names count, numbers by their digits, lists 3 + 1 per element
    assert size_of({"pk": {"S": "é"}}) == 2 + 2
    assert size_of({"n": {"N": "12345"}}) == 1 + 4 and size_of({"n": {"N": "1000"}}) == 1 + 2
    assert size_of({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}) == 1 + 3 + (2 + 1) + (2 + 1)
