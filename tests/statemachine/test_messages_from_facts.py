"""What a human reads is what happened (issue 30 §1), through the real pipeline: the escalations a
new user meets name the copy already running and tell nothing that would start another, in the
cluster's own orchestrator's commands; an error's own text reaches the cause."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes

pytestmark = pytest.mark.sandbox
DRILLS = Path(__file__).resolve().parents[2] / "events" / "drills"


def _run(name: str, tmp_path: Path, **changes: Any) -> dict[str, Any]:
    scenario = load_scenario(DRILLS / f"{name}.json")
    if changes:
        scenario = with_changes(scenario, changes)
    return DrillRunner(scenario, log_path=tmp_path / "lambda.log").run()


def _next_steps(message: str) -> str:
    return message.split("WHAT HAPPENS NEXT", 1)[1].split("\nError:", 1)[0]


def test_a_slurm_rejoin_deadline_names_the_resubmitted_copy_and_never_asks_for_another(tmp_path: Path) -> None:
    # Given a replacement that never comes back after job 1001 was resubmitted at once as 1002
    report = _run("rejoin-deadline", tmp_path)
    (note,) = report["notifications"]
    # When the human reads the escalation
    advice = _next_steps(note["message"])
    # Then it names the copy, its state when seen, and says not to start another
    assert "job 1001 (llama-70b-pretrain) was resubmitted as job 1002 from step 3000 (PENDING at" in advice
    assert "do not start another copy. See it: `squeue -j 1002`" in advice
    # And nothing in it would start a second copy: no "jobs were not resubmitted", no "resubmit the job"
    assert not re.search(r"resubmit the job|were not resubmitted|checkpoint latest", note["message"])
    # And the node's own step is Slurm's, with its real name
    assert "`scontrol update nodename=ip-10-3-0-11 state=resume`" in advice
    assert report["message_contradictions"] == [] and report["second_copies"] == []


def test_an_eks_rejoin_deadline_names_the_re_created_job_in_kubectl_and_no_slurm(tmp_path: Path) -> None:
    # Given the same fault on an EKS cluster: the PyTorchJob was re-created at once
    report = _run("eks-rejoin-deadline", tmp_path)
    (note,) = report["notifications"]
    advice = _next_steps(note["message"])
    # Then the escalation names the re-created PyTorchJob with the command to see it
    assert "PyTorchJob kubeflow/llama-70b-pretrain was re-created as PyTorchJob kubeflow/llama-70b-pretrain-r1" in advice
    assert "`kubectl -n kubeflow get pytorchjob llama-70b-pretrain-r1`" in advice
    # And no Slurm command is given for a Kubernetes node
    assert not re.search(r"`[^`]*\b(scontrol|squeue|sinfo|sbatch)\b", note["message"])
    assert "kubectl get node hyperpod-i-" in advice
    assert report["message_contradictions"] == [] and report["second_copies"] == []


def test_an_sbatch_refusal_keeps_sbatchs_words_and_the_summary_says_each_job_once(tmp_path: Path) -> None:
    # Given sbatch refuses to submit job 1001 again (its account was closed)
    refusal = "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"
    report = _run("default", tmp_path, behaviour={"sbatch_refuses": {"1001": refusal}})
    (incident,) = report["incidents"]
    # Then the escalation's cause carries sbatch's own message
    assert incident["error"] == "ResubmitFailed" and refusal in incident["cause"]
    # And the summary says what became of the job once, not "no job" beside "NOT resubmitted"
    assert "no job" not in incident["summary"] and "job 1001 (llama-70b-pretrain) NOT resubmitted" in incident["summary"]
    (note,) = report["notifications"]
    assert refusal in note["message"] and "Cause: -" not in note["message"]
    assert report["message_contradictions"] == []


def test_a_copy_left_pending_by_a_twice_failed_gate_is_said_pending_not_running(tmp_path: Path) -> None:
    # Given a 16-node job on a 16-node group (no spare), whose node's replacement fails its health gate twice
    base = load_scenario(DRILLS / "health-gate-fails.json")
    groups = [g.model_dump() | ({"count": 16} if g.type == "Compute" else {}) for g in base.cluster.instance_groups]
    report = _run("health-gate-fails", tmp_path, cluster=base.cluster.model_dump() | {"instance_groups": groups})
    (incident,) = report["incidents"]
    # Then the job was resubmitted at once and its copy waits for nodes: the record says so, as seen
    assert incident["outcome"] == "escalated" and incident["error"] == "ReplacementUnhealthy"
    assert "job 1001 (llama-70b-pretrain) resubmitted as job 1002 from step 3000 (PENDING at" in incident["summary"]
    # And no message says it runs again
    assert all("runs again" not in n["message"] for n in report["notifications"])
    assert report["message_contradictions"] == [] and report["second_copies"] == []
