"""How the agent reads a job's checkpoint location and auto-resume flag (pure parts of agent/hyperpod_recovery_agent/slurm.py;
the Slurm calls themselves are tested against a real slurmctld in tests/slurm)."""

from __future__ import annotations

import pytest

from hyperpod_recovery_agent.slurm import SlurmCli, SlurmCommandFailed
from hyperpod_recovery_agent.slurm_json import SlurmJob, read_jobs

CLI = SlurmCli()


@pytest.mark.parametrize(
    ("comment", "environment", "script", "expected"),
    [
        ("team=llm checkpoint=s3://ckpt/llama", {}, "", "s3://ckpt/llama"),
        ("", {"CHECKPOINT_URI": "s3://ckpt/env"}, "", "s3://ckpt/env"),
        ("", {}, "#!/bin/bash\nexport HYPERPOD_RECOVERY_CHECKPOINT_URI='s3://ckpt/script'\nsrun train.py\n", "s3://ckpt/script"),
        ("checkpoint=/fsx/not-s3", {"CHECKPOINT_URI": "file:///x"}, "CHECKPOINT_URI=$DIR\n", None),
        ("", {}, "", None),
    ],
)
def test_checkpoint_location_comes_from_comment_then_environment_then_script(
    comment: str, environment: dict[str, str], script: str, expected: str | None
) -> None:
    assert CLI._checkpoint_uri(comment, environment, script) == expected


def test_the_comment_wins_over_the_environment() -> None:
    assert CLI._checkpoint_uri("checkpoint=s3://ckpt/a", {"CHECKPOINT_URI": "s3://ckpt/b"}, "") == "s3://ckpt/a"


class _BusySlurmctld(SlurmCli):
    """squeue shows 130 running jobs (one with a 1200-node list); every other Slurm call is counted."""

    def __init__(self) -> None:
        super().__init__(env={})
        self.calls: list[str] = []

    def queue(self) -> list[SlurmJob]:
        return read_jobs(
            {
                "jobs": [
                    {
                        "job_id": n,
                        "name": f"train-{n}",
                        "job_state": "RUNNING",
                        "batch_flag": n % 2 == 0,
                        "nodes": "gpu-[1-1200]",
                        "node_count": 1200,
                        "comment": f"checkpoint=s3://ckpt/train-{n}",
                    }
                    for n in range(1, 131)
                ]
            }
        )

    def batch_script(self, job_id: str) -> str | None:
        self.calls.append(f"batch_script {job_id}")
        return "#!/bin/bash\nsrun train.py\n"

    def hostnames(self, nodelist: str) -> list[str]:
        self.calls.append("hostnames")
        raise AssertionError("a check does not expand node lists")

    def submission_environment(self, job_id: str) -> dict[str, str]:
        self.calls.append(f"environment {job_id}")
        return {}


def test_a_check_on_a_busy_cluster_reads_only_the_jobs_it_reports_and_only_their_checkpoint_location() -> None:
    # Given slurmctld running 130 jobs, each on 1200 nodes (more than a JobSpec may name)
    slurm = _BusySlurmctld()
    # When the check lists the running jobs, at most 50
    jobs, omitted = slurm.running_jobs(50)
    # Then the first 50 are named with their checkpoint location, 80 are counted as omitted
    assert [j.job_id for j in jobs] == [str(n) for n in range(1, 51)] and omitted == 80
    assert jobs[0].checkpoint_uri == "s3://ckpt/train-1"
    # And only those 50 were read: no node list expanded, no script of an omitted job
    assert "hostnames" not in slurm.calls
    assert len([c for c in slurm.calls if c.startswith("environment")]) == 50
    assert len([c for c in slurm.calls if c.startswith("batch_script")]) == 25


def test_a_job_that_ends_while_the_check_reads_it_is_left_out() -> None:
    class EndsMidway(_BusySlurmctld):
        def batch_script(self, job_id: str) -> str | None:
            if job_id == "2":
                raise SlurmCommandFailed(["scontrol", "write", "batch_script", job_id, "-"], 1, "Job 2 is no longer pending or running")
            return None

    jobs, omitted = EndsMidway().running_jobs(3)
    assert [j.job_id for j in jobs] == ["1", "3"] and omitted == 127


class _OneJob(_BusySlurmctld):
    def hostnames(self, nodelist: str) -> list[str]:
        return ["gpu-1", "gpu-2"]


@pytest.mark.parametrize(
    ("comment", "resume"),
    [("checkpoint=s3://ckpt/a resume=after_rejoin", "after_rejoin"), ("resume=immediate", "immediate"), ("resume=soon", None), ("", None)],
)
def test_a_jobs_own_resume_choice_is_read_from_its_comment(comment: str, resume: str | None) -> None:
    # Given a running job whose owner wrote a resume= word (or none, or a wrong one) in its comment
    job = {"job_id": 7, "name": "train", "job_state": "RUNNING", "batch_flag": False, "nodes": "gpu-[1-2]", "node_count": 2}
    job["comment"] = comment
    # When the agent describes it for the workflow
    spec = _OneJob()._job_spec(read_jobs({"jobs": [job]})[0])
    # Then the spec carries the owner's choice; an unknown word is no choice (the stack's policy applies)
    assert spec.resume == resume
