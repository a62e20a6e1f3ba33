"""The agent's job nodes duty against a real slurmctld (tests/slurm/conftest.py): what squeue --json
says of running jobs, as 22.05 or 24.11 prints it, read into the snapshot the ledger gets."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hyperpod_recovery.models.job_nodes_item import read_item
from hyperpod_recovery_agent.job_nodes import JobNodesReporter
from hyperpod_recovery_agent.slurm import SlurmCli
from tests.slurm.conftest import sbatch
from tests.slurm.test_agent_on_real_slurm import TRAIN, nodes_of, start_training

pytestmark = pytest.mark.slurm


class Table:
    def __init__(self) -> None:
        self.items: list[dict[str, object]] = []

    def put_item(self, **kwargs: object) -> None:
        self.items.append(kwargs)


def test_a_running_jobs_nodes_are_those_slurm_gave_it_and_a_pending_job_has_none(
    slurm: SlurmCli, slurm_env: dict[str, str], job_dir: Path
) -> None:
    # Given a 2-node job running, and one that cannot start (more nodes than the cluster has)
    running = start_training(slurm_env, job_dir)
    pending = sbatch(slurm_env, "-J", "too-big", "-N", "4", "-t", "30", "-D", str(job_dir), "--hold", script=TRAIN)
    # When the agent's duty writes its snapshot
    table = Table()
    JobNodesReporter(slurm=slurm, dynamodb=table, table_name="ledger", cluster="llm-train").tick()
    [put] = table.items
    snapshot = read_item(put["Item"], "llm-train")  # type: ignore[arg-type]
    # Then the running job is there on the nodes Slurm gave it (scontrol's view), the held one is not
    assert snapshot.jobs[running] == sorted(nodes_of(slurm, running))
    assert pending not in snapshot.jobs
    subprocess.run(["scancel", pending], env=slurm_env, check=False)
