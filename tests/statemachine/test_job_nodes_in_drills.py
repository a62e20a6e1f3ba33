"""Drills see real job nodes snapshots: on Slurm the controller agent's, written into the sandbox's
ledger on the virtual timeline before each Detect Hung Jobs tick; on EKS the live pods' owners,
which the Kubernetes fake's operators set as real ones do. Read at each tick through the adapters
the function's runtime builds (runtime.build_job_nodes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.runtime import build_job_nodes
from sandbox.runner import DrillRunner
from sandbox.scenario import expand_range, load_scenario
from tests.conftest import ROOT
from tests.fakes import make_settings

pytestmark = pytest.mark.sandbox


def _snapshots_at_ticks(
    drill: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[DrillRunner, list[tuple[Any, JobNodes | None]]]:
    seen: list[tuple[Any, JobNodes | None]] = []
    original = DrillRunner._detect_hung_jobs

    def detect_and_read(runner: DrillRunner, moment: float) -> None:
        original(runner, moment)
        eks = runner.eks is not None
        settings = make_settings(
            LEDGER_TABLE=runner.aws.ledger_table,
            CLUSTER_NAME=runner.scenario.cluster.name,
            PROGRESS_TABLE=runner.aws.progress_table,
            **({"ORCHESTRATOR": "eks", "EKS_CLUSTER_NAME": "llm-eks"} if eks else {"ORCHESTRATOR": "slurm"}),
        )
        source = build_job_nodes(settings, runner.eks.kube if runner.eks is not None else None)
        assert source is not None
        if not eks:
            source._dynamodb = runner.aws.client("dynamodb")  # type: ignore[attr-defined]
        seen.append((runner.epoch.timestamp() + moment, source.running_job_nodes()))

    monkeypatch.setattr(DrillRunner, "_detect_hung_jobs", detect_and_read)
    runner = DrillRunner(load_scenario(ROOT / "events" / "drills" / f"{drill}.json"), log_path=tmp_path / "lambda.log")
    runner.run()
    return runner, seen


def test_a_slurm_hang_drill_reads_the_agents_snapshot_at_every_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, seen = _snapshots_at_ticks("job-hang", tmp_path, monkeypatch)
    assert seen
    job = runner.scenario.jobs[0]
    for at, snapshot in seen:
        # Then each tick finds the agent's snapshot, taken on the drill's own clock, fresh
        assert snapshot is not None and snapshot.source == "slurm"
        assert abs(snapshot.taken_at.timestamp() - at) <= 30
    # And the first tick's names the hung job on the nodes slurmctld gave it
    first = seen[0][1]
    assert first is not None and first.nodes_of(job.id) == frozenset(runner.slurm.slurm.jobs[job.id].nodes)


def test_an_eks_hang_drill_reads_the_jobs_pods_by_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, seen = _snapshots_at_ticks("eks-job-hang", tmp_path, monkeypatch)
    assert seen
    first = seen[0][1]
    job = runner.scenario.jobs[0]
    assert first is not None and first.source == "eks" and first.ambiguous == []
    # Then the first tick's names the job (namespace/name) on the nodes its pods were placed on
    assert runner.eks is not None
    placed = sorted(runner.eks.node_of(f"{group}:{index}") for group, index in expand_range(job.nodes))
    assert first.jobs[f"{job.kubernetes.namespace}/{job.name}"] == placed
