"""How the agent reads a job's checkpoint location and auto-resume flag (pure parts of agent/slurm.py;
the Slurm calls themselves are tested against a real slurmctld in tests/slurm)."""

from __future__ import annotations

import pytest

from hyperpod_recovery_agent.slurm import SlurmCli

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
