"""Every outside effect happens once however often its step runs. Each row of ONCE_SUITE
(sandbox/fault_suite.py) loses the first answer of the steps that make an effect (they ran; Lambda's
response, or an SQS batch's, did not arrive), so Step Functions or SQS runs them again; the effects
the drill made are counted against the same drill without the loss: pages per incident,
BatchReplace and BatchReboot calls, jobs submitted per lineage (sbatch; and scancel, inside the same
agent command), agent commands carried out (not answered from the journal), Kubernetes objects
created per lineage and node patches."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sandbox.fault_suite import DRILLS, ONCE_SUITE, Fault, pages_per_incident, scenario_of
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario

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


@cache
def _baseline(scenario: str, tmp: Path) -> dict[str, Any]:
    report = DrillRunner(load_scenario(DRILLS / f"{scenario}.json"), log_path=tmp / f"{scenario}.log").run()
    return {"effects": effects(report), "invokes": report["api_calls"].get("lambda.Invoke", 0)}


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("baselines")
    return lambda scenario: _baseline(scenario, tmp)


@pytest.mark.parametrize("fault", ONCE_SUITE, ids=[f.name for f in ONCE_SUITE])
def test_given_a_step_whose_first_answer_is_lost_when_it_runs_again_then_each_effect_happens_once(
    fault: Fault, baselines: Any, tmp_path: Path
) -> None:
    # Given the drill without the loss: what its effects are
    baseline = baselines(fault.scenario)
    # When the steps' first answers are lost and they run again
    report = DrillRunner(scenario_of(fault), log_path=tmp_path / "lambda.log").run()
    # Then they did run again (the loss happened), each incident paged once, and every other effect
    # happened exactly as often as without the loss
    assert report["api_calls"].get("lambda.Invoke", 0) > baseline["invokes"]
    made = effects(report)
    assert set(made["pages per incident"].values()) == {1} and "?" not in made["pages per incident"]
    assert made == baseline["effects"]
