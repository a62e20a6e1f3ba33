"""A job resubmitted by its owner's own sbatch, never by root's: the owner's identity, groups, umask,
limits and submission environment, the captured script and options (capture.py)."""

from __future__ import annotations

import os
import re
import resource
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery_agent.capture import SLURM_MAX_STRING_BYTES, JobCapture, SubmitAs, ensure_resubmittable, owner_problem
from hyperpod_recovery_agent.sbatch_options import Unresumable, has_control_character
from hyperpod_recovery_agent.slurm_run import Owner, SlurmRunner, validate_job_id, validate_nodes

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class OwnerSubmission(SlurmRunner):
    """sbatch as the job's owner: what SlurmCli resubmits with."""

    def submit_as_owner(self, capture: JobCapture, how: SubmitAs) -> str:
        """sbatch the captured job again, run by its owner (uid, gid, groups, umask, limits), with its
        submission environment plus ``how.extra_environment`` (and SLURM_CONF, so that sbatch finds this
        cluster), and its options (``how.nodes``: at that node count instead); the new job id. The job's comment
        is ``how.comment`` (our mark) followed by the owner's own. InvalidCommand when it would not be the job
        that was captured."""
        ensure_resubmittable(capture)
        problem = owner_problem(capture.user, capture.uid, capture.gid)
        if problem:
            raise InvalidCommand(f"job {capture.job_id} cannot be resubmitted as its owner: {problem}")
        full_comment = " ".join(part for part in (how.comment, capture.comment) if part)
        if has_control_character(full_comment) or len(full_comment.encode()) > SLURM_MAX_STRING_BYTES:
            raise InvalidCommand(f"comment: {full_comment[:80]!r}... is not one line within Slurm's {SLURM_MAX_STRING_BYTES} bytes")
        try:
            options = capture.options.arguments(
                exclude_nodes=tuple(validate_nodes(how.exclude_nodes)) if how.exclude_nodes else (),
                nodelist=tuple(validate_nodes(how.nodelist)) if how.nodelist else (),
                output=how.output,
                nodes=how.nodes,
                now=time.time(),
            )
        except Unresumable as exc:
            raise InvalidCommand(f"job {capture.job_id} cannot be resubmitted as it was: {exc}") from exc
        argv = [self._program("sbatch"), "--parsable", "--export=ALL", f"--job-name={capture.name}", f"--comment={full_comment}"]
        if capture.work_dir:
            argv.append(f"--chdir={capture.work_dir}")
        argv += options
        if capture.propagate:
            argv.append(f"--propagate={capture.propagate}")
        owner = Owner.of(capture, self._owner_environment(capture, how.extra_environment))
        script: str | None = capture.script
        script_file: str | None = None
        try:
            if capture.script_args:
                # sbatch takes script arguments only after a script file (a pipe's /dev/stdin is root's).
                script_file, script = self._script_file(capture), None
                argv += [script_file, *capture.script_args]
            if capture.rlimits:
                argv = [*self._limits_prefix(capture.rlimits), *argv]
            new_id = self._run(argv, stdin=script, owner=owner).stdout.strip().split(";", 1)[0]
        finally:
            if script_file:
                Path(script_file).unlink(missing_ok=True)
        return validate_job_id(new_id)

    def _owner_environment(self, capture: JobCapture, extra: Mapping[str, str]) -> dict[str, str]:
        for key, value in extra.items():
            if not _ENV_NAME.fullmatch(key) or "\0" in value:
                raise InvalidCommand(f"environment: {key!r} cannot be set for the job")
        environment = {**capture.environment, **extra}
        # The only thing taken from the agent: where this cluster's slurm.conf is.
        conf = (self.env if self.env is not None else os.environ).get("SLURM_CONF")
        if conf:
            environment["SLURM_CONF"] = conf
        return environment

    def _limits_prefix(self, limits: Mapping[str, str]) -> list[str]:
        """prlimit, run as the owner, sets the soft limits the job propagated (sbatch records its own
        process's, which would otherwise be the agent's); the agent's hard limits are raised first where
        an owner's soft limit is above them, since the owner cannot raise a hard limit."""
        for name, value in limits.items():
            which = getattr(resource, f"RLIMIT_{name}")
            wanted = resource.RLIM_INFINITY if value == "unlimited" else int(value)
            soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and (wanted == resource.RLIM_INFINITY or wanted > hard):
                try:
                    resource.setrlimit(which, (soft, wanted))
                except (OSError, ValueError) as exc:
                    raise InvalidCommand(
                        f"the job's {name} limit {value} is above the agent's hard limit {hard}, which it may not raise ({exc}): "
                        "raise the agent service's limit"
                    ) from exc
        return [self._program("prlimit"), *(f"--{name.lower()}={value}:" for name, value in limits.items()), "--"]

    @staticmethod
    def _script_file(capture: JobCapture) -> str:
        """The script in a file (0600) of the owner's, for sbatch to read as the owner; removed after."""
        fd, path = tempfile.mkstemp(prefix=f"hyperpod-recovery-{capture.job_id}-", suffix=".sbatch")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            os.fchown(file.fileno(), capture.uid, capture.gid)
            file.write(capture.script or "")
        return path
