"""Running Slurm's own commands for the agent: an argument list without a shell, as root or as a job's
owner, with the names that reach a command line validated first; slurmctld away is SlurmUnreachable
(retried), any other refusal SlurmCommandFailed."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

from hyperpod_recovery.errors import ControllerUnavailable, InvalidCommand
from hyperpod_recovery.models.common import SLURM_JOB_ID_PATTERN, SLURM_NODE_PATTERN
from hyperpod_recovery_agent.capture import JobCapture
from hyperpod_recovery_agent.slurm_json import SlurmOutputUnreadable, answer_errors, parse_answer, release_of

NODE_NAME = re.compile(SLURM_NODE_PATTERN)
# Where a job's checkpoint location may be in its submission environment (the agent's config may name others).
DEFAULT_CHECKPOINT_ENV = ("HYPERPOD_RECOVERY_CHECKPOINT_URI", "CHECKPOINT_URI")
_JOB_ID = re.compile(SLURM_JOB_ID_PATTERN)
# Where the agent finds prlimit (util-linux) and, without slurm_bin_dir, sbatch: never the job owner's PATH.
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What slurmctld prints when it cannot be reached: retried, then ControllerUnavailable.
_UNREACHABLE = ("Unable to contact slurm controller", "Connection refused", "Socket timed out", "Zero Bytes were transmitted")

_Read = TypeVar("_Read")


class SlurmUnreachable(Exception):
    """slurmctld did not answer (down, restarting, network); the caller retries with backoff."""


class SlurmCommandFailed(Exception):
    def __init__(self, argv: list[str], returncode: int, output: str) -> None:
        super().__init__(f"{' '.join(argv[:3])} exited {returncode}: {output}")
        self.argv, self.returncode, self.output = argv, returncode, output


@dataclass(frozen=True)
class Owner:
    """Who a resubmission's sbatch runs as, and with what."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    umask: int
    cwd: str
    environment: dict[str, str]

    @classmethod
    def of(cls, capture: JobCapture, environment: dict[str, str]) -> Owner:
        entry = pwd.getpwuid(capture.uid)
        # initgroups' groups (the passwd group and /etc/group memberships) plus the job's own group.
        groups = tuple(sorted({*os.getgrouplist(entry.pw_name, entry.pw_gid), capture.gid}))
        # sbatch records its working directory as SLURM_SUBMIT_DIR: the original one when it still exists.
        cwd = next((d for d in (capture.submit_dir, capture.work_dir) if d and os.path.isdir(d)), "/")
        return cls(capture.uid, capture.gid, groups, -1 if capture.umask is None else capture.umask, cwd, environment)

    def popen_arguments(self) -> dict[str, Any]:
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups), "umask": self.umask, "cwd": self.cwd}


def validate_nodes(nodes: Iterable[str]) -> list[str]:
    names = list(nodes)
    bad = [n for n in names if not NODE_NAME.fullmatch(n)]  # re.match would let a trailing newline through
    if bad or not names:
        raise InvalidCommand(f"nodes: not Slurm node names: {bad[:5] or 'none given'}")
    return names


def validate_job_id(job_id: str) -> str:
    if not _JOB_ID.fullmatch(job_id):
        raise InvalidCommand(f"job_id: {job_id!r} is not a Slurm job id")
    return job_id


class SlurmRunner:
    """The commands' plumbing: where they are, how long they may take, what environment they run in."""

    def __init__(
        self,
        *,
        bin_dir: str | None = None,
        timeout_seconds: float = 30,
        checkpoint_env: Sequence[str] = DEFAULT_CHECKPOINT_ENV,
        env: dict[str, str] | None = None,
        py_spy: str = "py-spy",
    ) -> None:
        self.bin_dir = bin_dir
        # The stack dumper on the compute nodes: a name looked up on the node's PATH, or a path there.
        self.py_spy = py_spy
        self.timeout_seconds = timeout_seconds
        self.checkpoint_env = tuple(checkpoint_env)
        self.env = env  # None: inherit (SLURM_CONF included)

    def _run(
        self,
        argv: list[str],
        *,
        stdin: str | None = None,
        ok_codes: tuple[int, ...] = (0,),
        owner: Owner | None = None,
        env_overrides: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[str]:
        program = argv[0] if os.path.isabs(argv[0]) else os.path.join(self.bin_dir, argv[0]) if self.bin_dir else argv[0]
        try:
            done = subprocess.run(  # noqa: S603 - an argument list, never a shell; inputs validated above
                [program, *argv[1:]],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout or self.timeout_seconds,
                check=False,
                env=owner.environment if owner is not None else self._environment(env_overrides),
                # The owner's identity is taken in the child before exec: no process of the owner's
                # environment (LD_PRELOAD, PATH...) ever runs as root.
                **(owner.popen_arguments() if owner else {}),
            )
        except subprocess.TimeoutExpired as exc:
            raise SlurmUnreachable(f"{argv[0]} timed out after {timeout or self.timeout_seconds} s") from exc
        except FileNotFoundError as exc:
            raise ControllerUnavailable(f"{argv[0]} is not installed on this host") from exc
        if done.returncode not in ok_codes:
            text = (done.stderr or done.stdout).strip()
            if any(marker in text for marker in _UNREACHABLE):
                raise SlurmUnreachable(f"{' '.join(argv[:2])}: {text}")
            raise SlurmCommandFailed(argv, done.returncode, text)
        return done

    def _environment(self, overrides: Mapping[str, str] | None) -> dict[str, str] | None:
        if not overrides:
            return self.env  # None: inherit (SLURM_CONF included)
        return {**(self.env if self.env is not None else os.environ), **overrides}

    def _read(self, reader: Callable[[dict[str, Any]], _Read], argv: list[str]) -> _Read:
        """A command's JSON through slurm_json.py; SlurmCommandFailed when it has no shape the reader knows."""
        try:
            return reader(self._json(argv))
        except SlurmOutputUnreadable as exc:
            raise SlurmCommandFailed(argv, 0, f"its JSON cannot be read: {exc}") from exc

    def _json(self, argv: list[str]) -> dict[str, Any]:
        done = self._run(argv)
        try:
            data = parse_answer(done.stdout)
            unreachable, errors = answer_errors(data)
        except SlurmOutputUnreadable as exc:
            raise SlurmCommandFailed(argv, 0, f"its output cannot be read: {exc}") from exc
        # squeue/sinfo --json exit 0 when slurmctld cannot be reached, with an "Unspecified error" (-1).
        if unreachable or any(marker in f"{errors} {done.stderr}" for marker in _UNREACHABLE):
            raise SlurmUnreachable(f"{argv[0]}: {errors[:300]} {done.stderr.strip()[:300]}")
        if errors:
            raise SlurmCommandFailed(argv, 0, errors[:500])
        return data

    def version(self) -> str:
        """Slurm's release as ``scontrol --version`` says it ("24.11.5"); "" when it names none."""
        if self._release is None:
            return ""
        major, minor, micro = self._release
        return f"{major}.{minor:02d}.{micro}"

    @cached_property
    def _release(self) -> tuple[int, int, int] | None:
        """Read once per agent process (the node dump's command depends on it)."""
        return release_of(self._run(["scontrol", "--version"]).stdout)

    def _program(self, name: str) -> str:
        """An absolute path, so that the owner's PATH never chooses what runs."""
        if self.bin_dir and name != "prlimit":
            return os.path.join(self.bin_dir, name)
        path = shutil.which(name, path=_SYSTEM_PATH if name == "prlimit" else (self.env or os.environ).get("PATH", _SYSTEM_PATH))
        if not path:
            raise ControllerUnavailable(f"{name} is not installed on this host")
        return os.path.abspath(path)

    def _config_value(self, key: str) -> str | None:
        return self._config.get(key)

    @cached_property
    def _config(self) -> dict[str, str]:
        """``scontrol show config``, read once per agent process."""
        lines = self._run(["scontrol", "show", "config"]).stdout.splitlines()
        return {k.strip(): v.strip() for k, sep, v in (line.partition("=") for line in lines) if sep}
