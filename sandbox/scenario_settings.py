"""A scenario's stack settings (sandbox/scenario.py ``settings``): template.yaml's parameters a drill sets."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool

from sandbox.scenario_base import Strict


class CapsSpec(Strict):
    max_percent: float | None = Field(default=None, gt=0, le=100)
    max_nodes: int | None = Field(default=None, ge=1)


class BreakerSpec(Strict):
    max_recoveries: int | None = Field(default=None, ge=1)
    window_seconds: int | None = Field(default=None, ge=60)
    max_failures: int | None = Field(default=None, ge=1)


class RepeatOffenderSpec(Strict):
    max_recoveries: int | None = Field(default=None, ge=1)
    window_seconds: int | None = Field(default=None, ge=60)


class JobRestartSpec(Strict):
    """template.yaml's JobRestart*, CrashLoopRepeats and JobFailuresPer1000NodeDays parameters."""

    budget: int = Field(default=3, ge=0, le=100)
    window_seconds: int = Field(default=86_400, ge=60)
    backoff_seconds: int = Field(default=60, ge=0)
    max_backoff_seconds: int = Field(default=900, ge=0)
    crash_loop_repeats: int = Field(default=2, ge=2, le=100)
    job_failures_per_1000_node_days: float = Field(default=0.57, ge=0, le=100)


class HangSettingsSpec(Strict):
    """template.yaml's Hang* parameters (unset: the template's defaults)."""

    stall_mode: Literal["enforce", "observe", "off"] | None = None
    stall_factor: float | None = Field(default=None, ge=1.5, le=100)
    stall_floor_seconds: int | None = Field(default=None, ge=15)
    read_every_seconds: int | None = Field(default=None, ge=2, le=60)
    startup_seconds: int | None = Field(default=None, ge=60)
    slow_mode: Literal["enforce", "observe", "off"] | None = None
    slow_ratio: float | None = Field(default=None, ge=0.05, le=10)

    def parameters(self) -> dict[str, str]:
        named = {
            "HangStallMode": self.stall_mode,
            "HangStallFactor": self.stall_factor,
            "HangStallFloorSeconds": self.stall_floor_seconds,
            "HangReadEverySeconds": self.read_every_seconds,
            "HangStartupSeconds": self.startup_seconds,
            "HangSlowMode": self.slow_mode,
            "HangSlowRatio": self.slow_ratio,
        }
        return {name: value if isinstance(value, str) else f"{value:g}" for name, value in named.items() if value is not None}


class ElasticSettingsSpec(Strict):
    """template.yaml's shrink-and-continue parameters (None: its defaults)."""

    grow_back_seconds: int | None = Field(default=None, ge=0, le=86_400)  # ElasticGrowBackSeconds
    grow_back_grace_seconds: int | None = Field(default=None, ge=0, le=86_400)  # ElasticGrowBackGraceSeconds

    def parameters(self) -> dict[str, str]:
        named = {"ElasticGrowBackSeconds": self.grow_back_seconds, "ElasticGrowBackGraceSeconds": self.grow_back_grace_seconds}
        return {name: str(value) for name, value in named.items() if value is not None}


class SettingsSpec(Strict):
    dry_run: StrictBool = False
    resume_policy: Literal["immediate", "after_rejoin"] = "immediate"  # template.yaml: ResumePolicy
    replacement_health_check: str | None = None  # template.yaml: ReplacementHealthCheck (None: its default)
    caps: CapsSpec = Field(default_factory=CapsSpec)
    breaker: BreakerSpec = Field(default_factory=BreakerSpec)
    repeat_offender: RepeatOffenderSpec = Field(default_factory=RepeatOffenderSpec)  # unset fields: the template's defaults
    hangs: HangSettingsSpec = Field(default_factory=HangSettingsSpec)
    elastic: ElasticSettingsSpec = Field(default_factory=ElasticSettingsSpec)
    # template.yaml: AtRiskSignals (None: its default, every signal observed), e.g. "row_remap_pending=enforce:0.6:7d".
    at_risk_signals: str | None = Field(default=None, max_length=800, pattern=r"^[a-z0-9_*=:., -]*$")
    # template.yaml: ExpectedReplacementSeconds (None: its default): what shrink-or-wait expects of a
    # replacement until the cluster has measured ones.
    expected_replacement_seconds: int | None = Field(default=None, ge=60, le=86_400)
    poll_seconds: int = Field(default=30, ge=5)
    max_poll_seconds: int = Field(default=60, ge=5)
    rejoin_deadline_seconds: int = Field(default=2700, ge=60)
    reboot_deadline_seconds: int = Field(default=900, ge=60)
    episode_window_seconds: int = Field(default=600, ge=60)
    max_event_age_seconds: int | None = Field(default=None, ge=60)  # None: template.yaml's default
    max_clock_skew_seconds: int | None = Field(default=None, ge=0)
    intake_batch_window_seconds: int = Field(default=5, ge=1, le=300)  # template.yaml: IntakeBatchWindowSeconds
    controller_groups: list[str] = Field(default_factory=list)
    login_groups: list[str] = Field(default_factory=list)
    job_restarts: JobRestartSpec = Field(default_factory=JobRestartSpec)
    # template.yaml: EksClusterName (None: the EKS cluster HyperPod names). Another name is another EKS
    # cluster of the account, whose API answers too (what a stack pointed at the wrong cluster would reach).
    eks_cluster_name: str | None = Field(default=None, pattern=r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
