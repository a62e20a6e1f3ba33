"""The Slurm side of the agent: one method per thing the pipeline needs from slurmctld.

Every call is an argument list run without a shell, node names and job ids are validated against
the protocol's patterns before they reach a command line, and outputs are read from Slurm's JSON
(squeue/sinfo --json, OpenAPI v0.0.38 in Slurm 22.05) rather than scraped from text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hyperpod_recovery.errors import ControllerUnavailable, InvalidCommand, NodeNotFound
from hyperpod_recovery.models.commands import OWNER_TAG_PREFIX, JobSpec
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN, SLURM_NODE_PATTERN

_NODE = re.compile(SLURM_NODE_PATTERN)
_JOB_ID = re.compile(SLURM_JOB_ID_PATTERN)
_S3_URI = re.compile(r"s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](?:/[^\s'\"]*)?")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What slurmctld prints when it cannot be reached: retried, then ControllerUnavailable.
_UNREACHABLE = ("Unable to contact slurm controller", "Connection refused", "Socket timed out", "Zero Bytes were transmitted")
# The job comment that links a resubmission to its original: also the idempotency key Slurm keeps for us.
RESUBMISSION_MARK = f"{OWNER_TAG_PREFIX}:resubmission-of="
DEFAULT_CHECKPOINT_ENV = ("HYPERPOD_RECOVERY_CHECKPOINT_URI", "CHECKPOINT_URI")
# Jobs that hold (or held, until a node failed under them) an allocation on a node.
AFFECTED_JOB_STATES = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "RESIZING", "NODE_FAIL")


class SlurmUnreachable(Exception):
    """slurmctld did not answer (down, restarting, network); the caller retries with backoff."""


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # idle, allocated, mixed, down, ...
    flags: tuple[str, ...] = ()  # DRAIN, NOT_RESPONDING, ...
    reason: str = ""

    @property
    def drained_or_draining(self) -> bool:
        return "DRAIN" in self.flags or self.state in ("drained", "draining")

    @property
    def drained_by_us(self) -> bool:
        return self.drained_or_draining and self.reason.startswith(OWNER_TAG_PREFIX + ":")


@dataclass(frozen=True)
class Submission:
    """What resubmission needs: sbatch options from the old job, plus what to add."""

    script: str
    name: str
    num_nodes: int
    comment: str
    environment: dict[str, str] = field(default_factory=dict)
    partition: str | None = None
    time_limit_minutes: int | None = None
    work_dir: str | None = None
    exclude_nodes: tuple[str, ...] = ()
    nodelist: tuple[str, ...] = ()  # run on exactly these nodes (drills pin their jobs)
    output: str | None = None  # --output; Slurm's default slurm-<id>.out in the work dir otherwise


def validate_nodes(nodes: Iterable[str]) -> list[str]:
    names = list(nodes)
    bad = [n for n in names if not _NODE.match(n)]
    if bad or not names:
        raise InvalidCommand(f"nodes: not Slurm node names: {bad[:5] or 'none given'}")
    return names


def validate_job_id(job_id: str) -> str:
    if not _JOB_ID.match(job_id):
        raise InvalidCommand(f"job_id: {job_id!r} is not a Slurm job id")
    return job_id


class SlurmCli:
    """Slurm through its own commands (scontrol, squeue, sinfo, sbatch) as the controller's root."""

    def __init__(
        self,
        *,
        bin_dir: str | None = None,
        timeout_seconds: float = 30,
        checkpoint_env: Sequence[str] = DEFAULT_CHECKPOINT_ENV,
        env: dict[str, str] | None = None,
    ) -> None:
        self.bin_dir = bin_dir
        self.timeout_seconds = timeout_seconds
        self.checkpoint_env = tuple(checkpoint_env)
        self.env = env  # None: inherit (SLURM_CONF included)

    # --- plumbing ---------------------------------------------------------------------------
    def _run(self, argv: list[str], *, stdin: str | None = None, ok_codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        program = os.path.join(self.bin_dir, argv[0]) if self.bin_dir else argv[0]
        try:
            done = subprocess.run(  # noqa: S603 - an argument list, never a shell; inputs validated above
                [program, *argv[1:]],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.timeout_seconds,
                check=False,
                env=self.env,
            )
        except subprocess.TimeoutExpired as exc:
            raise SlurmUnreachable(f"{argv[0]} timed out after {self.timeout_seconds} s") from exc
        except FileNotFoundError as exc:
            raise ControllerUnavailable(f"{argv[0]} is not installed on this host") from exc
        if done.returncode not in ok_codes:
            text = (done.stderr or done.stdout).strip()
            if any(marker in text for marker in _UNREACHABLE):
                raise SlurmUnreachable(f"{' '.join(argv[:2])}: {text}")
            raise SlurmCommandFailed(argv, done.returncode, text)
        return done

    def _json(self, argv: list[str]) -> dict[str, Any]:
        done = self._run(argv)
        data: dict[str, Any] = json.loads(done.stdout)
        errors = data.get("errors") or []
        # squeue/sinfo --json exit 0 when slurmctld cannot be reached, with an "Unspecified error" (-1).
        unreachable = any(e.get("errno", e.get("error_number")) == -1 for e in errors)
        if unreachable or any(marker in done.stderr for marker in _UNREACHABLE):
            raise SlurmUnreachable(f"{argv[0]}: {json.dumps(errors)[:300]} {done.stderr.strip()[:300]}")
        if errors:
            raise SlurmCommandFailed(argv, 0, json.dumps(errors)[:500])
        return data

    def nodes(self) -> list[dict[str, Any]]:
        """Every node as ``sinfo --json`` shows it."""
        return list(self._json(["sinfo", "--json"]).get("nodes", []))

    def queue(self) -> list[dict[str, Any]]:
        """Every job slurmctld remembers, as ``squeue --json`` shows it (22.05 ignores its filters)."""
        return list(self._json(["squeue", "--json"]).get("jobs", []))

    # --- nodes ------------------------------------------------------------------------------
    def node_states(self, nodes: Iterable[str]) -> dict[str, NodeState]:
        """State of each node; NodeNotFound names the ones slurmctld does not know."""
        wanted = validate_nodes(nodes)
        known = {
            n["name"]: NodeState(n["name"], n.get("state", ""), tuple(n.get("state_flags") or ()), n.get("reason") or "")
            for n in self.nodes()
        }
        missing = [n for n in wanted if n not in known]
        if missing:
            raise NodeNotFound(f"unknown to slurmctld: {', '.join(missing)}")
        return {n: known[n] for n in wanted}

    def drain(self, nodes: Sequence[str], reason: str) -> None:
        one_line = " ".join(reason.split())  # a health event's reason may span lines; Slurm's may not
        if not one_line:
            raise InvalidCommand("reason: must not be empty")
        self._run(["scontrol", "update", f"NodeName={','.join(validate_nodes(nodes))}", "State=DRAIN", f"Reason={one_line}"])

    def resume(self, nodes: Sequence[str]) -> None:
        self._run(["scontrol", "update", f"NodeName={','.join(validate_nodes(nodes))}", "State=RESUME"])

    # --- jobs -------------------------------------------------------------------------------
    def jobs_on(self, nodes: Iterable[str]) -> list[JobSpec]:
        """Active jobs with an allocation on any of ``nodes``, with their captured batch script."""
        wanted = set(validate_nodes(nodes))
        # squeue --json in Slurm 22.05 ignores --nodelist/--jobs/--states: filter here.
        jobs = [job for job in self.queue() if job.get("job_state") in AFFECTED_JOB_STATES]
        return [self._job_spec(job) for job in jobs if wanted & set(self.hostnames(job.get("nodes") or ""))]

    def job(self, job_id: str) -> JobSpec | None:
        """The job if slurmctld still knows it (active or recently finished), else None."""
        record = self.job_record(job_id)
        return self._job_spec(record) if record else None

    def job_record(self, job_id: str) -> dict[str, Any] | None:
        """squeue's JSON for one job (state, reason, comment, restart count...), or None."""
        try:
            data = self._json(["squeue", "--json", "--jobs", validate_job_id(job_id)])
        except SlurmCommandFailed as exc:
            if "Invalid job id" in exc.output:
                return None
            raise
        jobs = [j for j in data.get("jobs", []) if str(j.get("job_id")) == job_id]
        return jobs[0] if jobs else None

    def job_spec_of(self, record: dict[str, Any]) -> JobSpec:
        """The spec of a job from its squeue record (batch script and checkpoint location included)."""
        return self._job_spec(record)

    def resubmission_of(self, job_id: str, incident_id: str) -> str | None:
        """The id of the job we already submitted for (job_id, incident), found by its comment."""
        mark = f"{RESUBMISSION_MARK}{validate_job_id(job_id)} incident={incident_id}"
        for job in self.queue():
            if job.get("comment") == mark:
                return str(job["job_id"])
        return None

    def batch_script(self, job_id: str) -> str | None:
        try:
            return self._run(["scontrol", "write", "batch_script", validate_job_id(job_id), "-"]).stdout
        except SlurmCommandFailed as exc:
            if "No batch script" in exc.output or "Invalid job id" in exc.output or "not batch" in exc.output:
                return None
            raise

    def submit(self, submission: Submission) -> str:
        """sbatch the script with the given options; the new job id."""
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={submission.name}",
            f"--nodes={submission.num_nodes}",
            f"--comment={submission.comment}",
        ]
        if submission.partition:
            argv.append(f"--partition={submission.partition}")
        if submission.time_limit_minutes:
            argv.append(f"--time={submission.time_limit_minutes}")
        if submission.work_dir:
            argv.append(f"--chdir={submission.work_dir}")
        if submission.exclude_nodes:
            argv.append(f"--exclude={','.join(validate_nodes(submission.exclude_nodes))}")
        if submission.nodelist:
            argv.append(f"--nodelist={','.join(validate_nodes(submission.nodelist))}")
        if submission.output:
            argv.append(f"--output={submission.output}")
        for key, value in submission.environment.items():
            if not _ENV_NAME.match(key) or "," in value or "\n" in value:
                raise InvalidCommand(f"environment: {key!r} cannot be exported safely")
        exports = ",".join(f"{k}={v}" for k, v in submission.environment.items())
        argv.append(f"--export=ALL{',' + exports if exports else ''}")
        new_id = self._run(argv, stdin=submission.script).stdout.strip().split(";", 1)[0]
        return validate_job_id(new_id)

    def cancel(self, job_id: str) -> None:
        """scancel; a job that already ended is left as is (scancel says so and exits non-zero)."""
        try:
            self._run(["scancel", validate_job_id(job_id)])
        except SlurmCommandFailed as exc:
            if "already completing or completed" not in exc.output and "Invalid job id" not in exc.output:
                raise

    def requeue(self, job_id: str) -> bool:
        """Requeue a running job; False when it is already pending (Slurm: "Job is pending execution")."""
        try:
            self._run(["scontrol", "requeue", validate_job_id(job_id)])
            return True
        except SlurmCommandFailed as exc:
            if "pending execution" in exc.output:
                return False
            raise

    def _job_spec(self, job: dict[str, Any]) -> JobSpec:
        job_id = str(job["job_id"])
        script = self.batch_script(job_id) if job.get("batch_flag") else None
        environment = self.submission_environment(job_id)
        time_limit = job.get("time_limit")
        return JobSpec(
            job_id=job_id,
            name=job.get("name") or f"job-{job_id}",
            user=job.get("user_name") or None,
            partition=job.get("partition") or None,
            num_nodes=max(1, int(job.get("node_count") or 1)),
            nodes=self.hostnames(job.get("nodes") or ""),
            state=job.get("job_state") or "UNKNOWN",
            time_limit=str(time_limit) if isinstance(time_limit, int) and time_limit > 0 else None,
            work_dir=job.get("current_working_directory") or None,
            checkpoint_uri=self._checkpoint_uri(job.get("comment") or "", environment, script or ""),
            auto_resume="--auto-resume=1" in (script or ""),
            batch_script=script,
        )

    def hostnames(self, nodelist: str) -> list[str]:
        """``ip-10-1-0-[1-2]`` -> ``["ip-10-1-0-1", "ip-10-1-0-2"]`` (scontrol show hostnames)."""
        if not nodelist or nodelist == "(null)":
            return []
        if not re.fullmatch(r"[A-Za-z0-9._,\[\]-]+", nodelist):
            raise InvalidCommand(f"nodelist {nodelist!r} from slurmctld is not a node list")
        return self._run(["scontrol", "show", "hostnames", nodelist]).stdout.split()

    def submission_environment(self, job_id: str) -> dict[str, str]:
        """The job's submission environment (the ``checkpoint_env`` variables only), from
        slurmctld's state directory (root on the controller)."""
        state_dir = self._config_value("StateSaveLocation")
        if not state_dir:
            return {}
        number = int(job_id.split("_", 1)[0])
        path = Path(state_dir) / f"hash.{number % 10}" / f"job.{number}" / "environment"
        try:
            raw = path.read_bytes()
        except OSError:
            return {}
        pairs = (item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\0") if "=" in item)
        return {k: v for k, v in pairs if k in self.checkpoint_env}

    def _config_value(self, key: str) -> str | None:
        return self._config.get(key)

    @cached_property
    def _config(self) -> dict[str, str]:
        """``scontrol show config``, read once per agent process."""
        lines = self._run(["scontrol", "show", "config"]).stdout.splitlines()
        return {k.strip(): v.strip() for k, sep, v in (line.partition("=") for line in lines) if sep}

    def _checkpoint_uri(self, comment: str, environment: dict[str, str], script: str) -> str | None:
        """Checkpoint location: ``checkpoint=s3://…`` in the comment, else the first configured env var
        (submission environment, or an ``export NAME=s3://…`` line of the batch script)."""
        for token in comment.split():
            if token.startswith("checkpoint=") and _S3_URI.fullmatch(token.removeprefix("checkpoint=")):
                return token.removeprefix("checkpoint=")
        for name in self.checkpoint_env:
            value = environment.get(name, "")
            if _S3_URI.fullmatch(value):
                return value
            match = re.search(rf"^\s*(?:export\s+)?{name}=[\"']?({_S3_URI.pattern})", script, re.MULTILINE)
            if match:
                return match.group(1)
        return None


class SlurmCommandFailed(Exception):
    def __init__(self, argv: list[str], returncode: int, output: str) -> None:
        super().__init__(f"{' '.join(argv[:3])} exited {returncode}: {output}")
        self.argv, self.returncode, self.output = argv, returncode, output
