"""Detect Hung Jobs' dependencies carry the orchestrator's job nodes (runtime.build_job_nodes): the
controller agent's snapshot in the stack's ledger on Slurm, the live pods' owners on EKS."""

from __future__ import annotations

from typing import Any

from hyperpod_recovery.adapters.job_nodes import EksJobNodes, SlurmJobNodes
from hyperpod_recovery.runtime import build_dependencies, build_job_nodes
from tests.fakes import CLUSTER, make_settings


def test_a_slurm_stack_reads_the_agents_snapshot_in_its_own_ledger() -> None:
    deps = build_dependencies(make_settings(PROGRESS_TABLE="progress", LEDGER_TABLE="stack-LedgerTable-1"))
    assert isinstance(deps.job_nodes, SlurmJobNodes)
    assert (deps.job_nodes.table_name, deps.job_nodes.cluster) == ("stack-LedgerTable-1", CLUSTER)


def test_an_eks_stack_reads_the_pods_through_its_kubernetes_api() -> None:
    kube: Any = object()
    source = build_job_nodes(make_settings(PROGRESS_TABLE="progress", ORCHESTRATOR="eks", EKS_CLUSTER_NAME="llm-eks"), kube)
    assert isinstance(source, EksJobNodes) and source.kube is kube


def test_a_stack_that_reads_no_progress_needs_no_job_nodes() -> None:
    assert build_job_nodes(make_settings(), None) is None
