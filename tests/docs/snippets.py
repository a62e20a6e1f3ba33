"""Run the docs' runnable snippets as a reader would, and say what went wrong.

Python: executed as a training script, twice against the same S3 (moto), as a job and then its
resubmission: the second run must resume after the first's newest checkpoint. PyTorch and
s3torchconnector are the stand-ins of tests/docs/stand_ins.py; the buckets the snippet names exist;
the environment is a Slurm job's (its name, 32 nodes, 256 ranks).

Shell: ``bash`` in the checkout, with ``$PORT`` a free port, stdout and stderr as a terminal shows
them (unbuffered, interleaved); when the doc shows what it prints (the ``<!-- output -->`` block after
it), it must print exactly that."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import traceback
from pathlib import Path
from unittest import mock

import boto3
from moto import mock_aws

from tests.docs import stand_ins
from tests.docs.markdown import Snippet

JOB_NAME = "llama-70b"
REGION = "us-west-2"
# A Slurm job of 32 nodes of 8 GPUs, as torchrun over the allocation sees it.
JOB_ENVIRONMENT = {"SLURM_JOB_NAME": JOB_NAME, "SLURM_NNODES": "32", "WORLD_SIZE": "256"}
# What the runs must not inherit from the machine: a progress table, a resume point of the pipeline's.
NOT_INHERITED = ("HYPERPOD_RECOVERY_PROGRESS_TABLE", "HYPERPOD_RECOVERY_RESUME_FROM", "HYPERPOD_RECOVERY_RESUME_STEP", "AWS_ENDPOINT_URL")
SHELL_TIMEOUT_SECONDS = 60


def python_problem(code: str, name: str, runs: int = 2) -> str | None:
    """None when the snippet runs ``runs`` times in a row against one S3; else the run and its error."""
    buckets = sorted(set(re.findall(r"s3://([a-z0-9][a-z0-9.-]+[a-z0-9])/", code)))
    environ = {key: value for key, value in os.environ.items() if key not in NOT_INHERITED} | JOB_ENVIRONMENT
    compiled = compile(code, name, "exec")
    with mock_aws(), mock.patch.dict(sys.modules, stand_ins.modules()), mock.patch.dict(os.environ, environ, clear=True):
        s3 = boto3.client("s3", region_name=REGION)
        for bucket in buckets:
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        for run in range(1, runs + 1):
            try:
                exec(compiled, {"__name__": "__main__"})  # noqa: S102 (the docs' own snippet, run as a reader would)
            except Exception as exc:  # the snippet's own error is the finding
                where = traceback.extract_tb(exc.__traceback__)[-1]
                return f"{name}, run {run} of {runs}: {type(exc).__name__}: {exc} (line {where.lineno} of the snippet)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def shell_problem(snippet: Snippet, cwd: Path) -> str | None:
    """None when the snippet exits 0 and prints what its output block shows (if it has one)."""
    environ = {key: value for key, value in os.environ.items() if key not in NOT_INHERITED}
    environ |= {"PORT": str(_free_port()), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        ["bash", "-c", snippet.block.text],
        cwd=cwd,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=SHELL_TIMEOUT_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        return f"{snippet.name}: exit code {done.returncode}; it printed:\n{done.stdout}"
    if snippet.output is not None and done.stdout.rstrip() != snippet.output.text.rstrip():
        return f"{snippet.name}: prints what its output block (line {snippet.output.line}) does not show:\n{done.stdout}"
    return None
