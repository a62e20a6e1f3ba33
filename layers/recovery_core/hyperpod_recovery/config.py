"""One settings model for every function, validated once per cold start.

template.yaml sets every variable in Globals, so each function sees the same configuration and a
missing or malformed variable fails loudly (ConfigurationError) instead of defaulting silently.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from hyperpod_recovery.domain.policy.limits import node_recovery_time_bound_seconds, rejoin_wait_bounds, rejoin_window_seconds
from hyperpod_recovery.errors import ConfigurationError
from hyperpod_recovery.models.commands import HealthCheck, ResumePolicy
from hyperpod_recovery.models.common import CLUSTER_ARN_PATTERN, CLUSTER_NAME_MAX_LENGTH, CLUSTER_NAME_PATTERN
from hyperpod_recovery.models.hangs import RuleMode

if TYPE_CHECKING:
    from hyperpod_recovery.domain.at_risk.settings import SignalSettings


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _bool_from_env(value: object) -> object:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in {"true", "1", "yes"}:
            return True
        if lowered in {"false", "0", "no"}:
            return False
    return value


CsvList = Annotated[list[str], BeforeValidator(_split_csv)]
EnvBool = Annotated[bool, BeforeValidator(_bool_from_env)]


class Settings(BaseModel):
    """Environment of every function. Field names are the environment variable names, lower-cased."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    cluster_name: str = Field(pattern=CLUSTER_NAME_PATTERN, max_length=CLUSTER_NAME_MAX_LENGTH)
    cluster_arn: str = Field(pattern=CLUSTER_ARN_PATTERN)
    ledger_table: str = Field(min_length=3)
    command_queue_url: str = Field(min_length=1)
    notification_topic_arn: str = Field(min_length=1)
    # The optional notification channels (template.yaml, the functions that notify; empty: off).
    chat_topic_arn: str = ""
    pager_event_bus: str = ""
    state_machine_arn: str = Field(min_length=1)
    job_state_machine_arn: str = Field(min_length=1)
    intake_dlq_url: str = Field(min_length=1)
    dry_run: EnvBool
    resume_policy: ResumePolicy  # when a job on a failed node is resubmitted, unless it chose itself
    rejoin_poll_seconds: int = Field(ge=5, le=3600)
    rejoin_max_poll_seconds: int = Field(ge=5, le=3600)
    rejoin_deadline_seconds: int = Field(ge=60, le=86_400)
    expected_replacement_seconds: int = Field(ge=60, le=86_400)  # a replacement's typical duration
    # Shrink-and-continue (domain/elastic): what growing a shrunk job back costs (one restart) until it
    # is measured, and how long a grow-back waits for the shrunk job's next checkpoint before it grows
    # back from its newest one anyway (losing the steps since).
    elastic_grow_back_seconds: int = Field(default=300, ge=0, le=86_400)
    elastic_grow_back_grace_seconds: int = Field(default=1800, ge=0, le=86_400)
    # Run on a replaced node before it takes jobs (shell-like words; empty: no gate), and its deadline:
    # Resume Nodes' alone (template.yaml sets them on that function only; the others see no gate).
    replacement_health_check: str = Field(default="", max_length=512)
    replacement_health_check_seconds: int = Field(default=120, ge=10, le=300)
    reboot_deadline_seconds: int = Field(ge=60, le=86_400)
    episode_window_seconds: int = Field(ge=60, le=86_400)
    max_event_age_seconds: int = Field(ge=60, le=30 * 86_400)
    max_clock_skew_seconds: int = Field(ge=0, le=3600)
    lock_ttl_seconds: int = Field(ge=300, le=7 * 86_400)
    escalation_hold_seconds: int = Field(ge=0, le=30 * 86_400)
    job_restart_budget: int = Field(ge=0, le=100)
    job_restart_window_seconds: int = Field(ge=60, le=30 * 86_400)
    job_restart_backoff_seconds: int = Field(ge=0, le=86_400)
    job_restart_max_backoff_seconds: int = Field(ge=0, le=86_400)
    crash_loop_repeats: int = Field(ge=2, le=100)
    job_failures_per_1000_node_days: float = Field(ge=0, le=100)
    max_nodes_in_recovery_percent: float = Field(gt=0, le=100)
    max_nodes_in_recovery: int = Field(ge=1, le=2000)  # template.yaml: the cap's places fit one ledger item
    breaker_max_recoveries: int = Field(ge=1, le=10_000)
    breaker_max_failures: int = Field(ge=1, le=1000)
    breaker_window_seconds: int = Field(ge=60, le=30 * 86_400)
    repeat_offender_max_recoveries: int = Field(ge=1, le=100)
    repeat_offender_window_seconds: int = Field(ge=60, le=90 * 86_400)
    controller_groups: CsvList = Field(default_factory=list)
    login_groups: CsvList = Field(default_factory=list)
    # The cluster's orchestrator (the stack's Orchestrator parameter): which Orchestrator carries the
    # workflow's commands out. EKS needs the EKS cluster's name (the token is bound to it).
    orchestrator: Literal["slurm", "eks"] = "slurm"
    eks_cluster_name: str = Field(default="", max_length=100, pattern=r"^$|^[0-9A-Za-z][A-Za-z0-9\-_]*$")
    # The stack's own name (AWS::StackName): the commands a message gives a human name it.
    stack_name: str = Field(default="", max_length=128)
    # Hangs and slowdowns (domain/hangs): the progress table the training scripts write, and the
    # detectors' rules. Set only on the functions that read them (Detect Hung Jobs, Classify Failure).
    progress_table: str = Field(default="", max_length=255)
    hang_stall_mode: RuleMode = "enforce"
    hang_stall_factor: float = Field(default=5.0, ge=1.5, le=100)
    hang_stall_floor_seconds: int = Field(default=20, ge=15, le=86_400)
    # Detect Hung Jobs reads this often within its one-minute schedule (60: once a minute).
    hang_read_every_seconds: int = Field(default=5, ge=2, le=60)
    hang_startup_seconds: int = Field(default=600, ge=60, le=86_400)
    hang_slow_mode: RuleMode = "observe"
    hang_slow_ratio: float = Field(default=0.2, ge=0.05, le=10)
    # HyperPod's own Slurm hang detection, imported (steps/import_hyperpod_hangs.py): observe or off
    # (no enforce: its event's fields are undocumented; docs/decisions.md 2026-11-27).
    hyperpod_hang_mode: Literal["observe", "off"] = "observe"
    # At-risk signals (domain/at_risk/settings.py): each signal's mode, prior and horizon; how far back
    # a node's failures make it at risk (node_history); the planned swap an enforced verdict starts.
    # Set on the at-risk function only.
    at_risk_signals: str = Field(default="", max_length=800)
    at_risk_history_days: int = Field(default=30, ge=1, le=365)
    planned_swap_state_machine_arn: str = Field(default="", max_length=2048)

    @model_validator(mode="after")
    def _at_risk_signals_parse(self) -> Settings:
        from hyperpod_recovery.domain.at_risk.settings import parse_signal_settings

        parse_signal_settings(self.at_risk_signals)  # (ValueError names the entry: the cold start fails)
        return self

    @property
    def signal_settings(self) -> SignalSettings:
        from hyperpod_recovery.domain.at_risk.settings import parse_signal_settings

        return parse_signal_settings(self.at_risk_signals)

    @model_validator(mode="after")
    def _eks_has_a_cluster(self) -> Settings:
        if self.orchestrator == "eks" and not self.eks_cluster_name:
            raise ValueError("EKS_CLUSTER_NAME: required when ORCHESTRATOR is eks (the Kubernetes token is bound to it)")
        return self

    # Every combination the template's parameters accept must work: where two parameters depend on
    # each other, the effective value is derived here rather than refused at every cold start
    # (tests/contract/test_workflow_limits.py walks the parameter space).
    @model_validator(mode="after")
    def _health_check_parses(self) -> Settings:
        try:
            self.health_check  # noqa: B018 - a check that does not parse must fail the cold start, not a recovery
        except (ValueError, ValidationError) as exc:
            raise ValueError(f"REPLACEMENT_HEALTH_CHECK: {exc}") from exc
        return self

    @property
    def health_check(self) -> HealthCheck | None:
        """ReplacementHealthCheck as the agent runs it (an argument list), or None: no gate."""
        if not self.replacement_health_check.strip():
            return None
        return HealthCheck(argv=shlex.split(self.replacement_health_check), timeout_seconds=self.replacement_health_check_seconds)

    @property
    def lock_ttl_seconds_in_effect(self) -> int:
        """LockTtlSeconds, raised to the longest a NodeRecovery can run: a lock (or a cap place, a
        resubmission claim) must never lapse under a recovery still in progress, or a second
        incident could act on the same node. Only a crashed execution that was never reconciled
        holds it that long."""
        longest = node_recovery_time_bound_seconds(
            self.reboot_deadline_seconds, self.rejoin_deadline_seconds, self.elastic_grow_back_grace_seconds
        )
        return max(self.lock_ttl_seconds, longest)

    @property
    def rejoin_waits(self) -> tuple[int, int]:
        """(first wait, longest wait) between rejoin checks: the parameters, raised where needed so
        that the longest possible wait for rejoin stays within the execution-history budget."""
        window = rejoin_window_seconds(self.reboot_deadline_seconds, self.rejoin_deadline_seconds)
        return rejoin_wait_bounds(self.rejoin_poll_seconds, self.rejoin_max_poll_seconds, window)

    @property
    def job_restart_backoffs(self) -> tuple[int, int]:
        """(first backoff, longest backoff): a maximum below the first backoff is the first backoff."""
        return self.job_restart_backoff_seconds, max(self.job_restart_backoff_seconds, self.job_restart_max_backoff_seconds)

    @property
    def cluster_arn_forms(self) -> frozenset[str]:
        """The guarded cluster's ARN as configured and in its name form (cluster/<name>): HyperPod's
        events and AWS's samples show either."""
        return frozenset({self.cluster_arn, self.cluster_arn.split("cluster/", 1)[0] + "cluster/" + self.cluster_name})

    @property
    def region(self) -> str:
        return self.cluster_arn.split(":")[3]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        values = {name: environ[name.upper()] for name in cls.model_fields if name.upper() in environ}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']).upper() or 'environment'}: {err['msg']}" for err in exc.errors())
            raise ConfigurationError(f"invalid function environment: {problems}") from exc


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_environ(os.environ)
