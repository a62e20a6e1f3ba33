"""``make drill SLURM=real``: the real agent, as its own process, against a real slurmctld.

The sandbox's AWS stays in-process (moto, virtual time, the HyperPod double); it is also served
over HTTP (moto's server mode, same state) so that the agent process reaches the command queue
and Step Functions exactly as it reaches AWS from a controller node: through boto3, with
AWS_ENDPOINT_URL pointing at the sandbox. Slurm is whatever SLURM_CONF names
(tools/slurm_up.sh starts one): the scenario's compute nodes are mapped onto its nodes in order,
its jobs are submitted with sbatch, and the report shows Slurm's real queue at the end.

What is not real: the replaced node. The double gives it a new instance id under the same name,
but the slurmd behind that name keeps running, so the old job is still RUNNING when the workflow
resubmits; the agent cancels it first, as it would a job hung on a replaced node.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from moto.stepfunctions.parser.models import StepFunctionsParserBackend

from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV
from hyperpod_recovery_agent.agent import ReplyJournal
from hyperpod_recovery_agent.slurm import RESUBMISSION_MARK, SlurmCli, SlurmCommandFailed, validate_job_id, validate_nodes
from sandbox.aws import FAKE_CREDENTIALS, REGION, SandboxAWS
from sandbox.clock import VirtualClock
from sandbox.scenario import Scenario, ScenarioError
from sandbox.slurm import SlurmJob, Submission

ROOT = Path(__file__).resolve().parent.parent
DRILL_MARK = "hyperpod-recovery-drill"  # in the comment of the jobs a drill submits, to clean them up next time
START_SECONDS = 60.0
ACTIVE_STATES = ("RUNNING", "PENDING", "CONFIGURING", "COMPLETING")  # real seconds for a seeded job to start, or for the agent to stop
# The seeded job: records what it was started with, then "trains".
JOB_SCRIPT = """#!/bin/bash
echo "job=$SLURM_JOB_ID resume_from=${HYPERPOD_RECOVERY_RESUME_FROM:-none}" \\
  "step=${HYPERPOD_RECOVERY_RESUME_STEP:-none} nodes=$SLURM_JOB_NODELIST" > "%(out)s/job-$SLURM_JOB_ID.txt"
sleep 100000
"""


def seed_script(job: SlurmJob, out_dir: Path) -> str:
    """The seeded job's script; a scenario job with a node range asks for it in the script, as the
    simulated one does (the agent reads a job's elastic opt-in there; its --nodes stays within it)."""
    script = JOB_SCRIPT % {"out": out_dir}
    if job.node_range is None:
        return script
    return script.replace("#!/bin/bash\n", f"#!/bin/bash\n#SBATCH --nodes={job.node_range}\n", 1)


def _step_number(text: str) -> int:
    return int(text) if text.isascii() and text.isdigit() else -1


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isascii() and part.isdigit() else part for part in re.split(r"(\d+)", name)]


class RealSlurmUnavailable(ScenarioError):
    """No reachable Slurm, or too few nodes for the scenario."""


class _Seeder:
    """What the runner calls to set the scenario's Slurm up: here, real nodes and sbatch."""

    def __init__(self, controller: RealController) -> None:
        self.controller = controller

    def add_node(self, name: str) -> None:
        if name not in self.controller.node_names:
            raise RealSlurmUnavailable(f"node {name} is not in the real Slurm")

    def add_job(self, job: SlurmJob) -> None:
        self.controller.submit_seed_job(job)


class RealController:
    def __init__(
        self, scenario: Scenario, out_dir: Path, clock: VirtualClock, epoch: datetime, environ: dict[str, str] | None = None
    ) -> None:
        self.clock, self.epoch = clock, epoch
        self.env = dict(os.environ if environ is None else environ)
        if not self.env.get("SLURM_CONF"):
            raise RealSlurmUnavailable("SLURM_CONF is not set: start one with tools/slurm_up.sh (make drill SLURM=real does)")
        self.out_dir = out_dir.resolve()
        self.cli = SlurmCli(env=self.env, checkpoint_env=(RESUME_FROM_ENV, RESUME_STEP_ENV))
        try:
            self.node_names = sorted((n.name for n in self.cli.nodes()), key=_natural)
            self.slurm_version = self.cli.version()
        except Exception as exc:
            raise RealSlurmUnavailable(f"Slurm at {self.env['SLURM_CONF']} does not answer: {exc}") from exc
        wanted = self.env.get("SLURM_VERSION", "")
        if wanted and not self.slurm_version.startswith(f"{wanted}."):
            raise RealSlurmUnavailable(
                f"SLURM_VERSION={wanted}, but the commands on PATH are Slurm {self.slurm_version or '(no version)'}: "
                "start it with SLURM_VERSION=... tools/slurm_up.sh and put the PATH it prints first"
            )
        compute = [f"{g.name}:{i}" for g in scenario.cluster.instance_groups if g.type == "Compute" for i in range(g.count)]
        if len(compute) > len(self.node_names):
            raise RealSlurmUnavailable(
                f"the scenario has {len(compute)} compute nodes, the real Slurm {len(self.node_names)}: start it with NODES={len(compute)}"
            )
        self.hostnames = dict(zip(compute, self.node_names, strict=False))
        self.slurm = _Seeder(self)
        self.seeded: dict[str, str] = {}  # scenario job id -> Slurm job id
        self.commands: list[dict[str, Any]] = []
        self.state_dir = self.out_dir / "agent-state"
        self.agent_log = self.out_dir / f"drill-{scenario.name}-agent.log"
        self.cluster_name = scenario.cluster.name
        shutil.rmtree(self.state_dir, ignore_errors=True)  # a new agent per drill: no replies from the last one
        self._agent: subprocess.Popen[bytes] | None = None
        self._clean_previous_drill()

    # --- setup ----------------------------------------------------------------------------
    def _clean_previous_drill(self) -> None:
        for job in self.cli.queue():
            if job.state in ACTIVE_STATES and (DRILL_MARK in job.comment or job.comment.startswith(RESUBMISSION_MARK)):
                self.cli.cancel(job.job_id)
        ours = [name for name, state in self.cli.node_states(self.node_names).items() if state.drained_by_us]
        if ours:
            self.cli.resume(ours)

    def submit_seed_job(self, job: SlurmJob) -> None:
        # The drill's own job, submitted by the drill (as the user running it): the agent never runs
        # sbatch as itself, only as a captured job's owner.
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={job.name}",
            f"--nodes={len(job.nodes)}",
            # Pinned to the scenario's nodes, so its faults hit it; an elastic one (a node range) is not,
            # as a job pinned to its nodes cannot run on fewer (its shrink would be refused).
            *([] if job.node_range is not None else [f"--nodelist={','.join(validate_nodes(job.nodes))}"]),
            f"--comment={DRILL_MARK}" + (f" checkpoint={job.checkpoint_uri}" if job.checkpoint_uri else ""),
            f"--chdir={self.out_dir}",
            "--output=/dev/null",
        ]
        try:
            slurm_id = validate_job_id(self.cli._run(argv, stdin=seed_script(job, self.out_dir)).stdout.strip().split(";", 1)[0])
        except SlurmCommandFailed as exc:
            raise RealSlurmUnavailable(f"sbatch refused the scenario's job {job.job_id}: {exc.output}") from exc
        self.seeded[job.job_id] = slurm_id
        deadline = time.monotonic() + START_SECONDS
        while (record := self.cli.job_record(slurm_id)) is None or record.state != "RUNNING":
            if time.monotonic() > deadline:
                raise RealSlurmUnavailable(f"job {slurm_id} did not start within {START_SECONDS:.0f} s (see squeue)")
            time.sleep(0.2)  # real time: a real scheduler starting a real job

    # --- the agent process -------------------------------------------------------------------
    def connect(self, aws: SandboxAWS) -> None:
        aws.enter(
            mock.patch.object(
                StepFunctionsParserBackend, "send_task_success", self._on_virtual_time(StepFunctionsParserBackend.send_task_success)
            )
        )
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per agent request otherwise
        endpoint = aws.serve_http()
        config = self.out_dir / "agent.toml"
        config.write_text(
            f'cluster_name = "{self.cluster_name}"\n'
            f'command_queue_url = "{aws.queue_urls["CommandQueue"]}"\n'
            f'ledger_table = "{aws.ledger_table}"\n'
            f'region = "{REGION}"\n'
            f'state_dir = "{self.state_dir}"\n'
            "poll_wait_seconds = 1\nheartbeat_seconds = 20\nvisibility_seconds = 60\n"
        )
        environ = {
            **self.env,
            **FAKE_CREDENTIALS,
            "AWS_ENDPOINT_URL": endpoint,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "layers" / "recovery_core"), str(ROOT / "agent")]),
        }
        with self.agent_log.open("wb") as log:
            self._agent = subprocess.Popen(  # noqa: S603 - our own program, an argument list
                [sys.executable, "-m", "hyperpod_recovery_agent", "--config", str(config), "run"],
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _on_virtual_time(self, send_task_success: Any) -> Any:
        """The agent stamps its replies with the wall clock; the drill's timeline is virtual. Move
        each reply onto its execution's timeline as it arrives (same durations, virtual end)."""
        clock, epoch = self.clock, self.epoch

        def on_virtual_time(backend: Any, task_token: str, outcome: str) -> Any:
            try:
                reply = json.loads(outcome)
                completed = datetime.fromisoformat(reply["completed_at"])
                started = datetime.fromisoformat(reply["started_at"])
                timeline = str(reply["command_id"]).split(":", 1)[0]
            except (ValueError, KeyError, TypeError):
                return send_task_success(backend, task_token, outcome)
            virtual_end = epoch + timedelta(seconds=clock.now(timeline))
            reply["completed_at"] = virtual_end.isoformat()
            reply["started_at"] = (virtual_end - (completed - started)).isoformat()
            return send_task_success(backend, task_token, json.dumps(reply))

        return on_virtual_time

    def pump(self, task_token: str | None = None) -> None:
        """Nothing to do in-process: the agent process answers on its own."""

    def close(self) -> None:
        if self._agent is None or self._agent.poll() is not None:
            return
        self._agent.send_signal(signal.SIGTERM)
        try:
            self._agent.wait(timeout=START_SECONDS)
        except subprocess.TimeoutExpired:
            self._agent.kill()
        self._collect_commands()

    def _collect_commands(self) -> None:
        journal = self.state_dir / "replies"
        if not journal.exists():
            return
        for reply in sorted(ReplyJournal(journal).replies(), key=lambda r: r["completed_at"]):
            entry = {"type": reply["type"], "status": "succeeded", "command_id": reply["command_id"], "result": reply["result"]}
            self.commands.append({**entry, "dry_run": True} if reply.get("dry_run") else entry)

    # --- the report's view of Slurm --------------------------------------------------------------
    @property
    def submissions(self) -> list[Submission]:
        found = []
        queue = self.cli.queue()
        marked = [job for job in queue if job.comment.startswith(RESUBMISSION_MARK)]
        copies = {job.job_id: job.comment.removeprefix(RESUBMISSION_MARK).split(" ", 1)[0] for job in marked}

        def ours(job_id: str) -> bool:
            """A copy of a seeded job, or a copy of such a copy (a grow-back's), a few steps back."""
            for _ in range(8):
                if job_id in self.seeded.values():
                    return True
                if job_id not in copies:
                    return False
                job_id = copies[job_id]
            return False

        for job in sorted(queue, key=lambda j: int(j.job_id)):
            comment = job.comment
            if not comment.startswith(RESUBMISSION_MARK):
                continue
            old_id = comment.removeprefix(RESUBMISSION_MARK).split(" ", 1)[0]
            if not ours(old_id):
                continue  # an earlier drill's, still in slurmctld's memory
            # Our mark, then the owner's own comment: "...resubmission-of=<old> incident=<id> <theirs>"
            incident = comment.split(" incident=", 1)[-1].split(" ", 1)[0]
            environment = self.cli.submission_environment(job.job_id)
            step = environment.get(RESUME_STEP_ENV, "")
            found.append(Submission(incident, old_id, job.job_id, environment.get(RESUME_FROM_ENV, ""), _step_number(step)))
        return found

    def drained_nodes(self) -> dict[str, str]:
        return {name: state.reason for name, state in self.cli.node_states(self.node_names).items() if state.drained_or_draining}

    def queue(self) -> list[dict[str, Any]]:
        """Slurm's queue as squeue shows it, for the report and the printed summary."""
        return [
            {"job_id": job.job_id, "name": job.name, "state": job.state, "nodes": job.nodes, "comment": job.comment}
            for job in self.cli.queue()
            if job.state in ACTIVE_STATES
        ]
