"""A stall storm: a shared file system goes away and hundreds of jobs stall at once, and ten seconds
later an 8-node job (9001, the youngest stall) hangs for real. Detect Hung Jobs ticks every minute on
the sandbox's progress model and the real adapters on moto (the progress table's Scan, the memory in
the ledger table); its recoveries are recorded as started, not run.

A drill would run each JobRecovery's states through moto's Step Functions, about 1.3 s of wall time
each on 2 cores: 300 take minutes. What the storm is about is the detector's ticks (bounded, oldest
first, remembered, every stall started in turn), which this measures (bench/stall_storm.py) and
tests/sandbox/test_stall_storm.py holds.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import boto3
from moto import mock_aws

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.progress import ProgressTable
from hyperpod_recovery.adapters.progress_memory import ProgressMemoryTable
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.ports import StartOutcome, Workflow
from hyperpod_recovery.steps.detect_hung_jobs import detect_hung_jobs
from sandbox.progress import ProgressSimulator
from sandbox.scenario import Scenario

CLUSTER = "llm-train"
EPOCH = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
STALL_AT, REAL_HANG_AT = 300.0, 310.0
REAL_JOB = "9001"
_KEYS = {
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
    "BillingMode": "PAY_PER_REQUEST",
}


def storm_scenario(stalled: int) -> Scenario:
    """``stalled`` one-node jobs of 2 s steps stalling together, and the real 8-node hang of 10 s steps."""
    groups = [
        {"name": "controller", "type": "Controller", "count": 1, "instance_type": "ml.m5.2xlarge"},
        {"name": "workers", "type": "Compute", "count": 9 + stalled, "instance_type": "ml.p5.48xlarge"},
    ]
    real = {"id": REAL_JOB, "name": "llama-70b-pretrain", "nodes": "workers:0-7", "progress": {"step_seconds": 10.0, "step": 2050}}
    sweeps = [
        {"id": str(3001 + k), "name": f"sweep-{k:03d}", "nodes": f"workers:{9 + k}", "progress": {"step_seconds": 2.0, "step": 500}}
        for k in range(stalled)
    ]
    faults = [{"at": STALL_AT, "kind": "hang", "job": str(3001 + k)} for k in range(stalled)]
    faults.append({"at": REAL_HANG_AT, "kind": "hang", "job": REAL_JOB, "node": "workers:3"})
    return Scenario.model_validate(
        {
            "name": "job-stall-storm",
            "description": f"a file system goes away: {stalled} jobs stall, and a real hang among them",
            "cluster": {"name": CLUSTER, "orchestrator": "slurm", "node_recovery": "None", "instance_groups": groups},
            "jobs": [real, *sweeps],
            "faults": faults,
        }
    )


@dataclass
class RecordedStarts:
    """Workflows that record what is started (ports.Workflows): the storm measures the starts, not the recoveries."""

    started: dict[str, str] = field(default_factory=dict)

    def start(self, name: str, payload: str, workflow: Workflow = "node") -> StartOutcome:
        if name in self.started:
            return "running"
        self.started[name] = payload
        return "started"

    def running(self, workflow: Workflow) -> list[str]:
        return list(self.started)

    def wake(self, task_token: str, output: str) -> bool:
        return False


@dataclass(frozen=True)
class _Snapshot:
    snapshot: JobNodes

    def running_job_nodes(self) -> JobNodes:
        return self.snapshot


@dataclass
class StormRun:
    ticks: list[dict[str, int]]  # each tick's answer
    started_at: dict[str, int]  # execution name -> the minute it was started
    jobs_started: Counter[str]  # job id -> how many recoveries were started for it

    def real_hang_minute(self) -> int | None:
        return next((m for name, m in self.started_at.items() if name.startswith(f"hpj-{REAL_JOB}-")), None)


def run_storm(stalled: int, minutes: int) -> StormRun:
    """Detect Hung Jobs every minute from minute 1 to ``minutes``, the storm's rows written before each tick."""
    plan = storm_scenario(stalled)
    simulator = ProgressSimulator(
        plan, nodes_of=lambda job: [job.nodes.replace(":", "-")], name_of=lambda ref: ref.replace(":", "-"), epoch=EPOCH
    )
    nodes = {job.id: [job.nodes.replace(":", "-")] for job in plan.jobs}
    workflows = RecordedStarts()
    run = StormRun(ticks=[], started_at={}, jobs_started=Counter())
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-west-2")
        for table in ("progress", "ledger"):
            dynamodb.create_table(TableName=table, **_KEYS)
        progress, ledger = ProgressTable("progress", dynamodb=dynamodb), DynamoLedger("ledger", dynamodb=dynamodb)
        memory = ProgressMemoryTable("ledger", dynamodb=dynamodb)
        for minute in range(1, minutes + 1):
            t = minute * 60.0
            for item in simulator.items(t, lambda job_id: True):
                dynamodb.put_item(TableName="progress", Item=item)
            now = EPOCH + timedelta(seconds=t)
            before = set(workflows.started)
            answer = detect_hung_jobs(
                progress=progress,
                ledger=ledger,
                workflows=workflows,
                job_nodes=_Snapshot(JobNodes(source="slurm", taken_at=now, jobs=nodes)),
                memory=memory,
                cluster=CLUSTER,
                rules=HangRules(),
                now=now,
                remaining_ms=lambda: 40_000,
                kube=None,  # (a Slurm stack has no Kubernetes API)
            )
            run.ticks.append(answer)
            run.started_at |= dict.fromkeys(set(workflows.started) - before, minute)
    for name in run.started_at:
        run.jobs_started[JobRecoveryRequest.model_validate_json(workflows.started[name]).job_id] += 1
    return run
