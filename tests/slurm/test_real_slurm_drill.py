"""`make drill SLURM=real` in CI: the sandbox's AWS served over HTTP, the agent as its own process,
the session's real slurmctld (tests/slurm/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_recovery_agent.slurm import RESUBMISSION_MARK, SlurmCli
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from tests.conftest import ROOT
from tests.slurm.conftest import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.sandbox]


def test_a_real_slurm_drill_recovers_and_the_resubmitted_job_runs_from_the_checkpoint(
    slurm: SlurmCli, slurm_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the real-slurm drill and a running slurmctld
    monkeypatch.setenv("SLURM_CONF", slurm_env["SLURM_CONF"])
    monkeypatch.setenv("PATH", slurm_env["PATH"])  # (24.11's commands)
    tmp_path.chmod(0o777)
    scenario = load_scenario(ROOT / "events" / "drills" / "real-slurm.json")
    # When it runs with the agent as a separate process
    report = DrillRunner(scenario, log_path=tmp_path / "drill-lambda.log", real_slurm=True).run()
    # Then the incident is recovered and Slurm runs the resubmitted job, resumed from step 2000
    [incident] = report["incidents"]
    assert incident["outcome"] == "recovered", incident
    [resubmitted] = [job for job in report["slurm"]["queue"] if (job["comment"] or "").startswith(RESUBMISSION_MARK)]
    assert resubmitted["state"] in ("RUNNING", "PENDING")
    [submission] = report["slurm"]["submissions"]
    assert (submission["new_job_id"], submission["checkpoint_step"]) == (resubmitted["job_id"], 2000)
    # The agent process answered every command (its journal), and the drained node was resumed
    assert sorted(c["type"] for c in report["slurm"]["commands"]) == ["cordon_nodes", "resubmit_job", "resume_nodes"]
    assert report["slurm"]["drained_nodes"] == {}
    # And its job nodes snapshot reached the sandbox's ledger through the endpoint, every time
    agent_log = (tmp_path / f"drill-{scenario.name}-agent.log").read_text()
    assert "job nodes snapshot written: " in agent_log and "job nodes snapshot failed" not in agent_log
    # What the resubmitted job itself saw when Slurm started it
    output = tmp_path / f"job-{resubmitted['job_id']}.txt"
    wait_for(output.exists, "the resubmitted job to start")
    assert "resume_from=s3://llm-train-checkpoints/llama-8b-pretrain/step-000002000/ step=2000" in output.read_text()


def test_a_real_slurm_elastic_drill_shrinks_the_job_and_grows_it_back_one_copy_at_a_time(
    slurm: SlurmCli, slurm_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a 4-node job with a node range in its script (#SBATCH --nodes=2-4), on every node of a real slurmctld
    monkeypatch.setenv("SLURM_CONF", slurm_env["SLURM_CONF"])
    monkeypatch.setenv("PATH", slurm_env["PATH"])  # (24.11's commands)
    tmp_path.chmod(0o777)
    scenario = load_scenario(ROOT / "events" / "drills" / "real-slurm-elastic.json")
    # When one of its nodes fails, with the agent as its own process
    report = DrillRunner(scenario, log_path=tmp_path / "drill-lambda.log", real_slurm=True).run()
    # Then the incident is recovered: the real agent resubmitted it on 3 nodes at once, then on 4 (the grow-back)
    [incident] = report["incidents"]
    assert incident["outcome"] == "recovered", incident
    shrink, grow = report["slurm"]["submissions"]
    assert grow["old_job_id"] == shrink["new_job_id"] and (shrink["checkpoint_step"], grow["checkpoint_step"]) == (2000, 2000)
    sizes = {c["result"].get("old_job_id"): c["result"].get("nodes") for c in report["slurm"]["commands"] if c["type"] == "resubmit_job"}
    assert sizes == {shrink["old_job_id"]: 3, grow["old_job_id"]: 4}
    # And only the full-size copy runs at the end (the shrunk one was stopped before it was submitted)
    running = [job for job in report["slurm"]["queue"] if (job["comment"] or "").startswith(RESUBMISSION_MARK)]
    assert [job["job_id"] for job in running] == [grow["new_job_id"]]
    assert report["slurm"]["drained_nodes"] == {}
    # What each copy saw when Slurm started it: the shrunk one 3 nodes, the grown one all 4
    for copy, count in ((shrink, 3), (grow, 4)):
        output = tmp_path / f"job-{copy['new_job_id']}.txt"
        wait_for(output.exists, f"job {copy['new_job_id']} to start")
        assert len(slurm.hostnames(output.read_text().rsplit("nodes=", 1)[-1].strip())) == count
