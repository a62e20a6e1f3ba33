"""What the drill report reads of a drill once it ran: the stack, the doubles and what the runner saw.

The drill runner (sandbox/runner/) is one; the fleet runner another. The report names what it reads
here instead of importing the runner, which imports the report to write it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # (annotations only: reading the report needs none of the doubles loaded)
    from sandbox.aws import SandboxAWS
    from sandbox.clock import VirtualClock
    from sandbox.eks import SimulatedEks
    from sandbox.hyperpod import HyperPodDouble
    from sandbox.progress import ProgressSimulator
    from sandbox.real_slurm import RealController
    from sandbox.scenario import Scenario
    from sandbox.slurm import SimulatedController


class DrillSource(Protocol):
    scenario: Scenario
    log_path: Path
    epoch: datetime  # virtual second 0
    clock: VirtualClock
    aws: SandboxAWS
    double: HyperPodDouble
    slurm: SimulatedController | RealController
    eks: SimulatedEks | None
    progress: ProgressSimulator | None
    intake_responses: list[dict[str, Any]]
    events_put: int
    drill_count: int
    ends_published: set[str]
    reconcile_responses: list[Any]
    aborted: dict[str, tuple[str, str]]
    hang_ticks: list[tuple[float, Any]]
    hang_imports: list[tuple[float, Any]]
    at_risk_answers: list[tuple[float, Any]]
