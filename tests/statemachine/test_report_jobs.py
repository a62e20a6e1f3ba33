"""The drill report's jobs (issue 31 section 6): each job's downtime is the sum of the gaps its
lineage was down, measured against what the simulated Slurm ran; EKS jobs are listed by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hyperpod_recovery.domain.record.durations import format_duration
from sandbox.report import job_line

Drill = Callable[..., dict[str, Any]]


def test_given_a_job_that_crashes_twice_then_its_downtime_is_the_two_gaps_not_the_run_between(drill: Drill) -> None:
    # Given a job that crashes at 60 s, is resubmitted, runs, and crashes again at 1800 s
    report = drill("job-application-failure")
    (job,) = report["jobs"]
    # Then it was down twice: until its first copy started, and from the second crash until the second copy started
    copies = {s["old_job_id"]: s["new_job_id"] for s in report["slurm"]["submissions"]}
    assert list(copies) == ["3001", copies["3001"]] and job["running_as"] == copies[copies["3001"]]
    (first, second) = job["down"]
    assert first[0] == 60.0 and second[0] == 1800.0 and second[1] == job["running_again_at"]
    # And the downtime is their sum: the half hour the first copy trained is not in it
    assert job["downtime_seconds"] == pytest.approx((first[1] - first[0]) + (second[1] - second[0]))
    assert job["downtime_seconds"] < 1800.0 - 60.0
    line = job_line(job)
    assert line is not None and line.startswith("job 3001 (mixtral-pretrain): down ")
    assert f"in 2 interruptions, each from its stop to a copy running: T+1m 00.0s to T+{format_duration(first[1])}, T+30m 00.0s" in line
    assert line.endswith(f"; running again as job {job['running_as']} on its own nodes, from step 3000")


def test_given_an_eks_drill_then_its_job_is_listed_by_kind_namespace_and_name(drill: Drill) -> None:
    report = drill("eks-default")
    (job,) = report["jobs"]
    # Listed as kubectl shows it, its copy too; the uid is kept beside, never as the name
    assert job["label"] == "PyTorchJob kubeflow/llama-70b-pretrain"
    assert job["copy"] == "PyTorchJob kubeflow/llama-70b-pretrain-r1"
    assert job["uid"] == next(j["uid"] for j in report["kubernetes_jobs"] if j["name"] == "llama-70b-pretrain")
    assert job["running_as"] == next(j["uid"] for j in report["kubernetes_jobs"] if j["name"] == "llama-70b-pretrain-r1")
    # And the copy runs again once the scheduler could bind its last pod: on the replacement, Ready at 725 s,
    # started 5 s later; down from the fault at 120 s until then
    assert (job["pods"], job["running_again_at"], job["downtime_seconds"]) == ("16 Running", 730.0, 610.0)
    assert "running again as PyTorchJob kubeflow/llama-70b-pretrain-r1" in (job_line(job) or "")


def test_given_a_second_fault_on_the_node_the_copy_runs_on_and_no_recovery_then_the_job_is_not_counted_as_running(drill: Drill) -> None:
    # Given the repeat offender: the node fails again at 7200 s under the copy, and the pipeline does not act again
    report = drill("repeat-offender")
    (job,) = report["jobs"]
    # Then the copy is RUNNING in Slurm, but the report counts the job down from the second fault to the end
    assert job["state"] == "RUNNING" and job["down"][-1][0] == 7200.0 and job["down"][-1][1] == report["virtual_seconds"]
    assert job["downtime_seconds"] is None
    assert "not running again" in (job_line(job) or "")
