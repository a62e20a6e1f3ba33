"""`make preflight-sandbox [ORCHESTRATOR=eks]`: the preflight against the sandbox's deployed stack,
offline, and what it must see there: on EKS, the running PyTorchJob and its checkpoints (the EKS
orchestrator's check lists the jobs a recovery would read)."""

from __future__ import annotations

import subprocess

import pytest

from hyperpod_recovery_cli.preflight_checks import Finding, check_dry_run
from tests.conftest import ROOT
from tools.preflight_sandbox import SCENARIOS, preflight_in_sandbox

pytestmark = pytest.mark.sandbox


def _row(printed: str, check: str) -> tuple[str, str]:
    for line in printed.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3 and parts[1] == check:
            return parts[0], parts[2]
    raise AssertionError(f"no row for {check} in:\n{printed}")


def test_given_the_eks_sandbox_with_a_running_pytorchjob_when_preflight_runs_then_it_reads_that_jobs_checkpoints() -> None:
    # Given the EKS drill's cluster, where PyTorchJob llama-70b-pretrain runs with a verified checkpoint
    run = preflight_in_sandbox(SCENARIOS["eks"])
    # Then the checkpoints check names the job by its name and the step it would resume from
    status, detail = _row(run.printed, "checkpoints")
    assert (status, run.code) == ("PASS", 0), run.printed + run.errors
    assert detail.startswith("llama-70b-pretrain (uid ") and "step 3000 verified" in detail
    assert "no running jobs" not in run.printed


def test_given_the_slurm_sandbox_when_preflight_runs_then_it_is_ready() -> None:
    run = preflight_in_sandbox(SCENARIOS["slurm"])
    assert run.code == 0 and _row(run.printed, "checkpoints")[0] == "PASS", run.printed


def test_given_a_dry_run_stack_that_passes_then_the_next_step_is_make_arm_and_a_failing_armed_one_is_told_how_to_disarm() -> None:
    assert check_dry_run(True, [], stack="hpr-llm").fix == "after a dry-run period, arm it: `make arm STACK=hpr-llm` (DryRun=false)"
    failing = [Finding("agent", "fail", "no answer")]
    assert "`make deploy CLUSTER=<cluster ARN> STACK=hpr-llm DISARM=1`" in check_dry_run(False, failing, stack="hpr-llm").fix


def test_make_preflight_sandbox_runs_the_tool_for_the_orchestrator_asked() -> None:
    recipe = subprocess.run(
        ["make", "-s", "-n", "-o", ".venv/.installed", "preflight-sandbox", "ORCHESTRATOR=eks"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert recipe.returncode == 0 and "-m tools.preflight_sandbox --orchestrator eks" in recipe.stdout, recipe.stderr
