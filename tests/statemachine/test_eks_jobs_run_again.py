"""Every recovered EKS drill shows what a real cluster would do with the job: the copy the pipeline
re-created runs again (kube-scheduler binds its pods to the nodes that take them, sandbox/kube/), and
the report gives its downtime, as the Slurm drills do. Where the cluster cannot run it (its scheduler
stuck, a node of the job cordoned by someone else and no spare), the report says it is not running,
its pods Pending: never running where a real cluster would not."""

from __future__ import annotations

import json

import pytest

from sandbox.golden import DRILLS, scenarios
from sandbox.report.text import job_line
from sandbox.scenario import Scenario, load_scenario
from tests.statemachine.conftest import DrillReports

pytestmark = pytest.mark.sandbox


def _recovered_eks() -> list[str]:
    """The EKS drills whose every incident is expected to end recovered."""
    found = []
    for name in scenarios():
        scenario = load_scenario(DRILLS / f"{name}.json")
        outcomes = scenario.expect.outcomes or []
        if scenario.cluster.orchestrator == "eks" and outcomes and set(outcomes) == {"recovered"}:
            found.append(name)
    return found


def _cannot_run(name: str, scenario: Scenario) -> str | None:
    """Why the cluster itself could not run a full-size copy, whatever the pipeline did (None: it can).
    A stuck scheduler only where the file says so: the schema's default is the one under test."""
    written = json.loads((DRILLS / f"{name}.json").read_text())
    if written["cluster"].get("kubernetes", {}).get("scheduler") == "stuck":
        return "its scheduler binds nothing"
    if scenario.behaviour.cordoned_before:
        return "a node of it stays cordoned by someone else"  # (not ours to undo, and no spare in these drills)
    return None


RECOVERED_EKS = _recovered_eks()


def test_the_class_is_the_recovered_eks_drills() -> None:
    # (the class is not empty, and holds the drills the issue names)
    assert {"eks-default", "eks-job-hang", "eks-kueue", "eks-scheduler-stuck"} <= set(RECOVERED_EKS)


@pytest.mark.parametrize("name", RECOVERED_EKS)
def test_a_job_the_pipeline_re_created_runs_again_with_its_downtime_unless_the_cluster_cannot_run_it(
    name: str, drill_reports: DrillReports
) -> None:
    # Given a recovered EKS drill, and each job a fault hit that the pipeline re-created
    scenario = load_scenario(DRILLS / f"{name}.json")
    report = drill_reports(name)
    copied = [job for job in report["jobs"] if job["fault_at"] is not None and job["fate"] == "resubmitted"]
    owned = [job for job in report["jobs"] if job["fault_at"] is not None and job["fate"] != "resubmitted"]
    # (a job its owner restarts, HyperPod's auto-resume or its training operator, is not ours to re-create)
    assert copied or all(job["fate"] == "restarted_by_owner" for job in owned), [job_line(j) for j in report["jobs"]]
    why = _cannot_run(name, scenario)
    for job in copied:
        line = job_line(job)
        if why is None:
            # Then its newest copy runs, after the fault, and the report counts the time it was down
            assert job["state"] == "Running" and job["running_again_at"] is not None, line
            assert job["running_again_at"] > job["fault_at"] and job["downtime_seconds"] is not None and job["downtime_seconds"] > 0, line
            assert job["pods"] is not None and "Pending" not in job["pods"], line
        else:
            # Then (the cluster cannot run it) the report says it is not running, its pods Pending, with no downtime
            assert job["downtime_seconds"] is None and job["running_again_at"] is None, f"{why}: {line}"
            assert "Pending" in (job["pods"] or "") and job["pending_since"] is not None, f"{why}: {line}"


def test_with_its_scheduler_stuck_the_copy_is_made_and_honestly_not_running(drill_reports: DrillReports) -> None:
    # Given eks-default's fault on a cluster whose kube-scheduler binds nothing
    report = drill_reports("eks-scheduler-stuck")
    # Then the pipeline did its part (the node recovered, the job re-created once)
    assert [i["outcome"] for i in report["incidents"]] == ["recovered"] and len(report["incidents"][0]["resubmissions"]) == 1
    # And the report says the copy does not run: every pod of it Pending, no downtime given
    (job,) = report["jobs"]
    assert (job["pods"], job["downtime_seconds"], job["running_again_at"]) == ("16 Pending", None, None)
    assert job["copy"] == "PyTorchJob kubeflow/llama-70b-pretrain-r1" and job["pending_since"] is not None
