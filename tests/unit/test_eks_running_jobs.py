"""The EKS orchestrator's check lists the jobs a recovery would read the checkpoints of, as the
Slurm agent's does: the preflight's checkpoints check must not say "no running jobs" while a
PyTorchJob runs (issue 31)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.domain.jobs.eks_jobs import CHECKPOINT_ANNOTATION
from hyperpod_recovery.errors import KubeAccessDenied
from hyperpod_recovery.models.kubernetes import OPT_IN_ANNOTATION
from sandbox.kube import FakeKube

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
A = "hyperpod-i-0123456789abcdef0"


class Tasks:
    def send_task_success(self, token: str, output: str) -> None:
        json.loads(output)


def _orchestrator(fake: FakeKube) -> EksOrchestrator:
    return EksOrchestrator(fake, Tasks(), lambda: AT)  # type: ignore[arg-type]


def _cluster() -> FakeKube:
    fake = FakeKube(now=lambda: AT)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    annotations = {OPT_IN_ANNOTATION: "true", CHECKPOINT_ANNOTATION: "s3://ml-checkpoints/llama/"}
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A], annotations=annotations)
    fake.add_job("HyperPodPyTorchJob", "team", "hp", nodes=[A])
    return fake


def test_given_running_jobs_when_the_orchestrator_is_checked_then_it_names_each_with_its_checkpoint_prefix() -> None:
    fake = _cluster()
    uids = {j["metadata"]["name"]: j["metadata"]["uid"] for kind in ("PyTorchJob", "HyperPodPyTorchJob") for j in fake.list_jobs(kind)}
    result = _orchestrator(fake).check()
    assert result.slurm_reachable and result.running_jobs_omitted == 0
    assert [(j.job_id, j.name, j.checkpoint_uri) for j in result.running_jobs] == [
        (uids["llama"], "llama", "s3://ml-checkpoints/llama/"),
        (uids["hp"], "hp", None),
    ]


def test_given_a_job_that_failed_when_checked_then_it_is_not_a_running_job() -> None:
    fake = _cluster()
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    assert [j.name for j in _orchestrator(fake).check().running_jobs] == ["hp"]


def test_given_more_jobs_than_a_check_names_then_the_rest_are_counted() -> None:
    fake = _cluster()
    running, omitted = _orchestrator(fake).running_jobs(limit=1)
    assert [j.name for j in running] == ["llama"] and omitted == 1


def test_given_jobs_that_cannot_be_listed_then_the_check_says_so_rather_than_no_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _cluster()

    def forbidden(kind: str) -> list[dict[str, Any]]:
        raise KubeAccessDenied(f"cannot list {kind}")

    monkeypatch.setattr(fake, "list_jobs", forbidden)
    result = _orchestrator(fake).check()
    # Then no list at all (the preflight skips its checkpoints check and says why), never an empty one read as "none run"
    assert not result.slurm_reachable and result.running_jobs == []
    assert "its jobs could not be listed" in result.slurm_detail and "1 node(s) listed" in result.slurm_detail
