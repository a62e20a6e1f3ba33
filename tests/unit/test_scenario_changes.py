"""A drill changed by a fault row or a test (sandbox.scenario.with_changes) is checked as a file is:
only what the drill set and what the changes set are merged, so the defaults of the other
orchestrator's fields never read as "set" (H4's refusals of a field for the other orchestrator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.scenario import ScenarioError, load_scenario, with_changes
from tests.conftest import EVENTS

DRILLS = sorted((EVENTS / "drills").glob("*.json"))


@pytest.mark.parametrize("path", DRILLS, ids=[p.stem for p in DRILLS])
def test_given_any_drill_when_changed_by_nothing_then_it_is_the_same_drill(path: Path) -> None:
    scenario = load_scenario(path)
    assert with_changes(scenario, {}) == scenario


def test_given_a_slurm_drill_when_a_change_sets_a_kubernetes_job_spec_then_it_is_refused() -> None:
    scenario = load_scenario(EVENTS / "drills" / "default.json")
    jobs = [job.model_dump(exclude_unset=True) for job in scenario.jobs]
    jobs[0]["kubernetes"] = {"kind": "PyTorchJob", "namespace": "kubeflow"}
    with pytest.raises((ValueError, ScenarioError), match="EKS only"):
        with_changes(scenario, {"jobs": jobs})


def test_given_an_eks_drill_when_a_change_sets_a_slurm_batch_script_then_it_is_refused() -> None:
    scenario = load_scenario(EVENTS / "drills" / "eks-default.json")
    jobs = [job.model_dump(exclude_unset=True) for job in scenario.jobs]
    jobs[0]["comment"] = "checkpoint=s3://b/p"
    with pytest.raises((ValueError, ScenarioError), match="Slurm only"):
        with_changes(scenario, {"jobs": jobs})


def test_given_nested_changes_then_they_merge_into_what_the_drill_set() -> None:
    scenario = load_scenario(EVENTS / "drills" / "default.json")
    changed = with_changes(scenario, {"behaviour": {"agent_seconds": 7.0}})
    assert changed.behaviour.agent_seconds == 7.0
    assert changed.behaviour.replacement_seconds == scenario.behaviour.replacement_seconds
    assert changed.jobs == scenario.jobs and changed.cluster == scenario.cluster


def test_given_hyperpods_own_hang_verdict_then_it_is_the_operators_on_eks_and_a_hang_only_on_slurm() -> None:
    # Given the EKS drill whose HyperPodPyTorchJob the training operator finds hanging
    eks = load_scenario(EVENTS / "drills" / "eks-job-hang-training-operator.json")
    # When its job is made a PyTorchJob (Kubeflow's operator has no log monitoring), Then it is refused
    pytorch = {"jobs": [{**eks.jobs[0].model_dump(exclude_none=True), "kubernetes": {"kind": "PyTorchJob", "namespace": "kubeflow"}}]}
    with pytest.raises((ValueError, ScenarioError), match="is no HyperPodPyTorchJob"):
        with_changes(eks, pytorch)
    # And on Slurm HyperPod's hang agent says hang, never slow
    slurm = load_scenario(EVENTS / "drills" / "job-hang-hyperpod-event.json")
    with pytest.raises((ValueError, ScenarioError), match="reports hangs only"):
        with_changes(slurm, {"faults": [{"at": 300, "kind": "hyperpod_hang", "job": "1001", "operator_verdict": "slow"}]})
    # And the fault names its job
    with pytest.raises((ValueError, ScenarioError), match=r"a hyperpod_hang fault names 'job'"):
        with_changes(slurm, {"faults": [{"at": 300, "kind": "hyperpod_hang", "node": "workers:3"}]})
