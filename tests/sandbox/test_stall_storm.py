"""The stall storm of issue 47 on the sandbox's progress model and the real adapters (moto): a shared
file system goes away and 299 jobs stall at once, and ten seconds later an 8-node job (9001, the last
by id: the youngest stall) hangs for real. Every tick of Detect Hung Jobs reads the progress table
(one Scan), recalls and writes its memory in the ledger table, and starts recoveries.

The recoveries themselves do not run here: a full drill runs each JobRecovery's states through
moto's Step Functions, about 1.3 s of wall time each on 2 cores (measured: 30 of them, 54 s), so
300 would take minutes. What the storm is about is the detector's ticks: bounded, oldest first,
remembered, every stall started within 10 ticks, the real hang among them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.progress import ProgressTable
from hyperpod_recovery.adapters.progress_memory import ProgressMemoryTable
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.detect_hung_jobs import MAX_STARTS_PER_TICK, detect_hung_jobs
from sandbox.progress import ProgressSimulator
from sandbox.scenario import Scenario
from tests.fakes import CLUSTER, T0, FakeJobNodes, FakeWorkflows
from tests.unit.test_detect_hung_jobs import KEYS

pytestmark = pytest.mark.sandbox

STORM = 299
STALL_AT, REAL_HANG_AT = 300.0, 310.0


def scenario() -> Scenario:
    groups = [
        {"name": "controller", "type": "Controller", "count": 1, "instance_type": "ml.m5.2xlarge"},
        {"name": "workers", "type": "Compute", "count": 9 + STORM, "instance_type": "ml.p5.48xlarge"},
    ]
    real = {"id": "9001", "name": "llama-70b-pretrain", "nodes": "workers:0-7", "progress": {"step_seconds": 10.0, "step": 2050}}
    sweeps = [
        {"id": str(3001 + k), "name": f"sweep-{k:03d}", "nodes": f"workers:{9 + k}", "progress": {"step_seconds": 2.0, "step": 500}}
        for k in range(STORM)
    ]
    faults = [{"at": STALL_AT, "kind": "hang", "job": str(3001 + k)} for k in range(STORM)]
    faults.append({"at": REAL_HANG_AT, "kind": "hang", "job": "9001", "node": "workers:3"})
    return Scenario.model_validate(
        {
            "name": "job-stall-storm",
            "description": "a file system goes away: 299 jobs stall, and a real hang among them",
            "cluster": {"name": CLUSTER, "orchestrator": "slurm", "node_recovery": "None", "instance_groups": groups},
            "jobs": [real, *sweeps],
            "faults": faults,
        }
    )


@pytest.fixture
def tables() -> Iterator[Any]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        for table in ("progress", "ledger"):
            dynamodb.create_table(TableName=table, **KEYS)
        yield dynamodb


def test_given_a_storm_of_300_stalls_then_every_one_is_started_once_within_10_ticks_oldest_first_the_real_hang_among_them(tables) -> None:
    # Given the storm's jobs reporting as the sandbox's training scripts do
    plan = scenario()
    simulator = ProgressSimulator(
        plan, nodes_of=lambda job: [f"{job.nodes.replace(':', '-')}"], name_of=lambda ref: ref.replace(":", "-"), epoch=T0
    )
    nodes = {job.id: [f"{job.nodes.replace(':', '-')}"] for job in plan.jobs}
    workflows = FakeWorkflows()
    progress, ledger = ProgressTable("progress", dynamodb=tables), DynamoLedger("ledger", dynamodb=tables)
    memory = ProgressMemoryTable("ledger", dynamodb=tables)
    # When Detect Hung Jobs ticks every minute for 17 minutes
    started_at: dict[str, int] = {}
    for minute in range(1, 18):
        t = minute * 60.0
        for item in simulator.items(t, lambda job_id: True):
            tables.put_item(TableName="progress", Item=item)
        now = T0 + timedelta(seconds=t)
        before = set(workflows.started)
        counts = detect_hung_jobs(
            progress=progress,
            ledger=ledger,
            workflows=workflows,
            job_nodes=FakeJobNodes(JobNodes(source="slurm", taken_at=now, jobs=nodes)),
            memory=memory,
            cluster=CLUSTER,
            rules=HangRules(),
            now=now,
            remaining_ms=lambda: 40_000,
        )
        # Then no tick tries more than its bound, and what it leaves is counted
        assert counts.get("recoveries_started", 0) <= MAX_STARTS_PER_TICK
        assert counts.get("starts_deferred", 0) == max(
            0, counts.get("stall_verdicts", 0) - counts.get("already_started", 0) - MAX_STARTS_PER_TICK
        )
        started_at |= dict.fromkeys(set(workflows.started) - before, minute)
    # And every stalled job was started once, the real hang among them
    jobs = {JobRecoveryRequest.model_validate_json(workflows.started[name]).job_id for name in started_at}
    assert len(started_at) == STORM + 1 and jobs == {job.id for job in plan.jobs}
    # And all within 10 ticks of the first start, the real hang (the youngest stall) last
    first = min(started_at.values())
    assert max(started_at.values()) - first < 10
    real = next(name for name in started_at if name.startswith("hpj-9001-"))
    assert started_at[real] == max(started_at.values())
