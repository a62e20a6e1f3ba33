"""The agent's configuration: one TOML file (default /etc/hyperpod-recovery/agent.toml).

Every key is checked at start-up and a bad one stops the agent with a message naming it, so a
typo never turns into an agent that silently answers nothing. See agent/install/agent.toml.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hyperpod_recovery.models.commands import AGENT_HEARTBEAT_DEADLINE_SECONDS
from hyperpod_recovery.models.common import CLUSTER_NAME_PATTERN, format_validation_error
from hyperpod_recovery_agent.slurm import DEFAULT_CHECKPOINT_ENV

DEFAULT_CONFIG_PATH = Path("/etc/hyperpod-recovery/agent.toml")
CONFIG_PATH_ENV = "HYPERPOD_RECOVERY_AGENT_CONFIG"
_QUEUE_URL_REGION = re.compile(r"^https://sqs[.-]([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/")


class AgentConfigError(Exception):
    """The configuration file is missing or wrong; the message names the key."""


class RetryPolicy(BaseModel):
    """How long to keep trying an unreachable slurmctld before answering ControllerUnavailable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempts: int = Field(default=6, ge=1, le=20)
    first_delay_seconds: float = Field(default=2.0, ge=0, le=60)
    max_delay_seconds: float = Field(default=30.0, ge=0, le=300)

    def delays(self) -> list[float]:
        """The waits between attempts: 2, 4, 8, 16, 30 by default (about a minute in all)."""
        return [min(self.first_delay_seconds * 2**i, self.max_delay_seconds) for i in range(self.attempts - 1)]


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cluster_name: str = Field(pattern=CLUSTER_NAME_PATTERN)
    # The stack's CommandQueueUrl output. Optional for `job-ended`, which only sends events.
    command_queue_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    # The stack's LedgerTableName output: the agent writes its job nodes snapshot there (job_nodes.py),
    # the one ledger item its role may write. Unset: no snapshot, and hang detection cannot tell
    # which progress reports come from a job's own nodes (`check` says so).
    ledger_table: str | None = Field(default=None, pattern=r"^[a-zA-Z0-9_.-]{3,255}$")
    region: str | None = Field(default=None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    event_bus: str = Field(default="default", min_length=1, max_length=1600)
    state_dir: Path = Path("/var/lib/hyperpod-recovery-agent")
    slurm_bin_dir: str | None = None  # HyperPod: /opt/slurm/bin; None: PATH
    slurm_conf: str | None = None  # HyperPod: /opt/slurm/etc/slurm.conf; None: SLURM_CONF or Slurm's default
    slurm_timeout_seconds: float = Field(default=30, gt=0, le=600)
    checkpoint_env: tuple[str, ...] = DEFAULT_CHECKPOINT_ENV
    # A hang's stack dumper on the compute nodes (capture_hang_evidence): a name on their PATH, or a path.
    py_spy: str = Field(default="py-spy", min_length=1, max_length=256, pattern=r"^[A-Za-z0-9_./+-]+$")
    report_timeout: bool = False  # also send "job failed" for jobs that hit their time limit
    poll_wait_seconds: int = Field(default=20, ge=0, le=20)  # SQS long poll
    # A received command stays invisible this long, renewed while it runs; after a crash it comes
    # back within this time for the restarted agent (which answers it from its journal).
    visibility_seconds: int = Field(default=60, ge=10, le=900)
    heartbeat_seconds: float = Field(default=20, gt=0, le=300)
    unreachable_retry: RetryPolicy = RetryPolicy()
    journal_days: int = Field(default=7, ge=1, le=90)

    @model_validator(mode="after")
    def _heartbeat_inside_visibility(self) -> AgentConfig:
        if self.heartbeat_seconds >= self.visibility_seconds:
            raise ValueError("heartbeat_seconds must be below visibility_seconds, or a running command reappears on the queue")
        if self.heartbeat_seconds > AGENT_HEARTBEAT_DEADLINE_SECONDS / 2:
            raise ValueError(
                f"heartbeat_seconds must be at most {AGENT_HEARTBEAT_DEADLINE_SECONDS / 2:g}: the workflow gives up on a command "
                f"without a heartbeat for {AGENT_HEARTBEAT_DEADLINE_SECONDS} s (a slow beat would fail live commands)"
            )
        return self

    @property
    def aws_region(self) -> str | None:
        if self.region:
            return self.region
        match = _QUEUE_URL_REGION.match(self.command_queue_url or "")
        return match.group(1) if match else None

    def slurm_env(self) -> dict[str, str] | None:
        """The environment Slurm commands run with (EpilogSlurmctld gets none: SLURM_CONF is set here)."""
        if not self.slurm_conf:
            return None
        return {**os.environ, "SLURM_CONF": self.slurm_conf}


def load_config(path: Path | None = None, overrides: dict[str, Any] | None = None) -> AgentConfig:
    path = path or Path(os.environ.get(CONFIG_PATH_ENV, DEFAULT_CONFIG_PATH))
    try:
        values = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise AgentConfigError(f"{path}: no such configuration file (see agent/install/agent.toml)") from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise AgentConfigError(f"{path}: {exc}") from exc
    values.update(overrides or {})
    try:
        return AgentConfig.model_validate(values)
    except ValidationError as exc:
        raise AgentConfigError(f"{path}: {format_validation_error(exc)}") from exc
