"""Every outside effect happens once however often its step runs. Each row of the fault suite
that loses answers (ONCE_SUITE and the older rows, sandbox/fault_suite.py) loses the first answer
of the steps that make an effect (they ran; Lambda's response, or an SQS batch's, did not arrive),
so Step Functions or SQS runs them again; the effects the drill made are counted against the same
drill without the loss: pages per incident, BatchReplace and BatchReboot calls, jobs submitted per
lineage (sbatch; and scancel, inside the same agent command), agent commands carried out (not
answered from the journal), Kubernetes objects created per lineage and node patches."""

from __future__ import annotations

import copy
import json
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sandbox.fault_suite import ONCE_SUITE, SUITE, Fault, pages_per_incident, scenario_of
from sandbox.runner import DrillRunner

pytestmark = pytest.mark.sandbox


def effects(report: dict[str, Any]) -> dict[str, Any]:
    pages = pages_per_incident(report)
    kube_jobs = report.get("kubernetes_jobs", [])
    return {
        "pages per incident": dict(pages),
        "replace calls": report["api_calls"].get("sagemaker.BatchReplaceClusterNodes", 0),
        "reboot calls": report["api_calls"].get("sagemaker.BatchRebootClusterNodes", 0),
        "jobs submitted per lineage": dict(Counter(s["old_job_id"] for s in report["slurm"]["submissions"])),
        "agent commands carried out": dict(
            Counter(f"{c['type']} {c['incident']}" for c in report["slurm"]["commands"] if c["status"] in ("succeeded", "failed"))
        ),
        "kubernetes jobs created per lineage": dict(Counter(j["resubmitted_from"] for j in kube_jobs if "resubmitted_from" in j)),
        "kubernetes node patches": report.get("kubernetes_calls", {}).get("patch nodes", 0),
    }


def _losses(fault: Fault) -> list[dict[str, Any]]:
    return list(fault.changes.get("behaviour", {}).get("lost_responses", []))


def _ended_by_its_loss(fault: Fault) -> bool:
    """A row whose lost answer is deliberately not run again: it escalates with that very error (Replace
    Nodes stopped at its Timeout: a rerun could replace twice). Its effects differ from the drill
    without the loss by design; its row in test_fault_injection holds its outcome."""
    return any(f"escalated:{loss['error']}" in fault.expect for loss in _losses(fault) if "error" in loss)


# Every row of the suite that loses answers and runs the step again: ONCE_SUITE, and the rows before
# it that lose some (Lock, Cordon, Replace and Resubmit at once; Replace Unhealthy Nodes; Record
# Outcome every time).
LOSING = [f for f in SUITE if _losses(f) and not _ended_by_its_loss(f)]


def without_the_loss(fault: Fault) -> Fault:
    changes = copy.deepcopy(fault.changes)
    del changes["behaviour"]["lost_responses"]
    return Fault(f"{fault.name} without the loss", fault.scenario, changes)


@cache
def _baseline(changes: str, scenario: str, tmp: Path) -> dict[str, Any]:
    fault = Fault("baseline", scenario, json.loads(changes))
    report = DrillRunner(scenario_of(fault), log_path=tmp / f"{abs(hash(changes))}.log").run()
    return {"effects": effects(report), "invokes": report["api_calls"].get("lambda.Invoke", 0)}


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("baselines")
    return lambda fault: _baseline(json.dumps(without_the_loss(fault).changes, sort_keys=True), fault.scenario, tmp)


def test_every_step_with_an_outside_effect_has_a_row_that_loses_its_answer() -> None:
    lost = {spec["function"] for f in LOSING for spec in f.changes["behaviour"]["lost_responses"]}
    assert {f.name for f in ONCE_SUITE} <= {f.name for f in LOSING}
    assert lost >= {
        "CordonNodesFunction",  # drain (Slurm), cordon patch (EKS)
        "ReplaceNodesFunction",  # BatchReplace, BatchReboot
        "ReplaceUnhealthyNodesFunction",  # BatchReplace again
        "ResubmitJobFunction",  # sbatch and scancel (Slurm), the job's re-creation (EKS)
        "ResumeNodesFunction",  # resume (Slurm), the cordon given back (EKS)
        "RecordOutcomeFunction",  # the page
        "RecordJobOutcomeFunction",  # the page, the lineage's restart
        "ReconcileExecutionFunction",  # the page of an end that never recorded itself
    }


@pytest.mark.parametrize("fault", LOSING, ids=[f.name for f in LOSING])
def test_given_a_step_whose_first_answer_is_lost_when_it_runs_again_then_each_effect_happens_once(
    fault: Fault, baselines: Any, tmp_path: Path
) -> None:
    # Given the same drill without the loss: what its effects are
    baseline = baselines(fault)
    # When the steps' first answers are lost and they run again
    report = DrillRunner(scenario_of(fault), log_path=tmp_path / "lambda.log").run()
    # Then they did run again (the loss happened), each incident paged once, and every other effect
    # happened exactly as often as without the loss
    assert report["api_calls"].get("lambda.Invoke", 0) > baseline["invokes"]
    made = effects(report)
    assert set(made["pages per incident"].values()) == {1} and "?" not in made["pages per incident"]
    assert made == baseline["effects"]


ENDED_BY_THEIR_LOSS = [f for f in SUITE if _losses(f) and _ended_by_its_loss(f)]


@pytest.mark.parametrize("fault", ENDED_BY_THEIR_LOSS, ids=[f.name for f in ENDED_BY_THEIR_LOSS])
def test_given_a_step_not_run_again_after_its_loss_then_no_effect_happens_more_often_than_without_it(
    fault: Fault, baselines: Any, tmp_path: Path
) -> None:
    # Given the same drill without the loss
    baseline = baselines(fault)["effects"]
    # When the step's answer is lost and the incident escalates instead of running it again
    made = effects(DrillRunner(scenario_of(fault), log_path=tmp_path / "lambda.log").run())
    # Then one page per incident, and no effect happened more often than without the loss (a human
    # finishes what was not done)
    assert set(made["pages per incident"].values()) == {1} and "?" not in made["pages per incident"]
    for effect in ("replace calls", "reboot calls", "kubernetes node patches"):
        assert made[effect] <= baseline[effect], effect
    for effect in ("jobs submitted per lineage", "kubernetes jobs created per lineage", "agent commands carried out"):
        assert all(count <= baseline[effect].get(key, 0) for key, count in made[effect].items()), effect
