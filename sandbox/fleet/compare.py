"""Fleet runs side by side (issue 50): the same trace without planned swaps and with them at several
recalls, and the issue's goal set (the default job and the async job, planner-recommended, without and
with planned swaps at 50 % recall). Each run is a whole fleet drill (sandbox/fleet/runner.py) through
the real pipeline; ``workers`` of them run at once, each in its own process (a run holds moto's
mocks for its whole length)."""

from __future__ import annotations

import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from sandbox.fleet.plan import FleetPlan, JobMix
from sandbox.fleet.settings import JOB_KINDS, recommended
from sandbox.fleet.trace import DEFAULT_SIGNAL, FALSE_ALARM_SIGNALS, LLAMA3_TABLE5, PRECURSOR_SIGNAL, RATES, TraceSpec, generate

# The goals: 2,048 nodes over 54 days at the Llama 3 rate, planner-recommended settings and
# planned swaps at 50 % recall, each beside the same run without planned swaps.
GOAL_NODES, GOAL_DAYS, GOAL_RECALL = 2048, 54.0, 0.5
GOAL_ETTR = {"default": 0.92, "async": 0.95}
# Every signal a trace sends (sandbox/fleet/trace.py), in a fixed order.
TRACE_SIGNALS = sorted({*PRECURSOR_SIGNAL.values(), DEFAULT_SIGNAL, *FALSE_ALARM_SIGNALS})
# ASSUMPTION: a job that may shrink gives up at most a rack's nodes (the trace's correlated failures take 16).
SHRINK_NODES = 16


@dataclass(frozen=True)
class RunSpec:
    """One fleet run, as bench/fleet.py's arguments describe it."""

    nodes: int
    days: float
    seed: int = 0
    jobs: str = "1"
    spares: int = 0
    rate: float = RATES["llama3"]
    correlated_share: float = 0.02
    hang_share: float = 0.02
    checkpoint_interval_seconds: float = 1800.0
    orchestrator: str = "slurm"
    job_kind: str = "default"
    recall: float = 0.0
    lead_median_seconds: float = 3600.0
    lead_sigma: float = 1.0
    false_alarm_rate: float = 0.0
    planned_swaps: bool | None = None  # None: as the planner recommends with ``recommended``, else none
    shrink_nodes: int = 0
    recommended: bool = False

    def precursor_figures(self) -> dict[str, float]:
        """The trace's precursor figures as the planner's inputs name them (its planned-swap model)."""
        return {
            "recall": self.recall,
            "lead_seconds": self.lead_median_seconds,
            "lead_shape": self.lead_sigma,
            "false_positive": 1 - expected_precision(self),
        }

    @property
    def label(self) -> str:
        swaps = f"planned swaps at {100 * self.recall:g} % recall" if self.planned_swaps else "no planned swaps"
        return f"{self.job_kind} job, {'planner-recommended, ' if self.recommended else ''}{swaps}"

    def trace_spec(self) -> TraceSpec:
        return TraceSpec(
            nodes=self.nodes,
            days=self.days,
            seed=self.seed,
            rate_per_1000_node_days=self.rate,
            correlated_share=self.correlated_share,
            hang_share=self.hang_share,
            recall=self.recall,
            lead_median_seconds=self.lead_median_seconds,
            lead_sigma=self.lead_sigma,
            false_alarm_rate_per_1000_node_days=self.false_alarm_rate,
        )

    def plan(self) -> tuple[FleetPlan, dict[str, Any] | None]:
        """The fleet plan, with the planner's settings when ``recommended`` (and what the planner said)."""
        kind = JOB_KINDS[self.job_kind]
        interval, spares, shrink, advice = self.checkpoint_interval_seconds, self.spares, self.shrink_nodes, None
        swaps = bool(self.planned_swaps)
        if self.recommended:
            # A run without planned swaps is planned as one: no failure is taken first, so the best interval
            # is over all of them (the swaps' longer one would understate the run it is compared with).
            precursors = None if self.planned_swaps is False else self.precursor_figures()
            rec = recommended(self.nodes, self.rate, kind, self.checkpoint_interval_seconds, precursors)
            interval, spares, shrink = rec.checkpoint_interval_seconds, rec.spares, SHRINK_NODES if rec.shrink else 0
            swaps = rec.planned_swaps if self.planned_swaps is None else self.planned_swaps
            advice = {"line": rec.line(), "plan": rec.plan.model_dump(mode="json")}
        plan = FleetPlan(
            nodes=self.nodes,
            days=self.days,
            mix=JobMix.parse(self.jobs, self.nodes),
            spares=spares,
            checkpoint_interval_seconds=interval,
            checkpoint_cost_seconds=kind.checkpoint_cost_seconds,
            restart_seconds=kind.restart_seconds,
            orchestrator=self.orchestrator,  # type: ignore[arg-type]  # (bench/fleet.py's choices)
            job_kind=kind.name,
            planned_swaps=swaps,
            shrink_nodes=min(shrink, self.nodes - 1),
            at_risk_signals=at_risk_signals(self) if swaps else "",
        )
        return plan, advice

    def run(self) -> dict[str, Any]:
        """The run's fleet report, with what it was (``run``) and the planner's advice when recommended."""
        from sandbox.fleet.runner import FleetRunner  # (heavy: moto; a worker process imports it itself)

        plan, advice = self.plan()
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            report = FleetRunner(plan, generate(self.trace_spec()), Path(tmp) / "fleet-lambda.log").run_fleet()
        report["run"] = {"label": self.label, "spec": asdict(self), "wall_seconds": round(time.perf_counter() - started, 1)}
        if advice is not None:
            report["planner_recommended"] = advice
        return report


def expected_precision(spec: RunSpec) -> float:
    """The share of at-risk signals that announce a failure, as the trace's figures make it (the enforced
    signal's prior chance of failure): announced failures over announced and false, per node-day."""
    mix = LLAMA3_TABLE5
    node_share = sum(t.weight for t in mix if t.remedy in ("reboot", "replace")) / sum(t.weight for t in mix)
    announced = spec.recall * node_share * (1 - spec.correlated_share) * spec.rate
    total = announced + spec.false_alarm_rate
    return announced / total if total > 0 else 0.0


def at_risk_signals(spec: RunSpec) -> str:
    """template.yaml AtRiskSignals for a run with planned swaps: every signal the trace sends enforced (named:
    ``*`` covers only the signals the defaults do not list), its prior chance the trace's precision (at
    least 0.01), its horizon twice the lead's median (in whole hours, at least one)."""
    hours = max(1, round(2 * spec.lead_median_seconds / 3600))
    setting = f"enforce:{max(0.01, round(expected_precision(spec), 2)):g}:{hours}h"
    return ",".join(f"{signal}={setting}" for signal in [*TRACE_SIGNALS, "*"])


def compare_specs(spec: RunSpec, recalls: tuple[float, ...]) -> list[RunSpec]:
    """The run without planned swaps, then with them at each recall (the same trace: the recall only
    chooses which failures are announced, and a failure announced at one is at every higher one)."""
    return [replace(spec, planned_swaps=False), *(replace(spec, planned_swaps=True, recall=r) for r in recalls)]


def goal_specs(spec: RunSpec) -> list[RunSpec]:
    """The issue's goal runs for each job kind: planner-recommended, without and with planned swaps at 50 %."""
    runs = []
    for kind in ("default", "async"):
        base = replace(spec, job_kind=kind, recommended=True, recall=GOAL_RECALL)
        runs += [replace(base, planned_swaps=False), replace(base, planned_swaps=True)]
    return runs


def _run_one(spec: RunSpec, out: str) -> dict[str, Any]:
    report = spec.run()
    name = f"fleet-{spec.nodes}n-{spec.days:g}d-seed{spec.seed}-{spec.job_kind}-{'swaps' if spec.planned_swaps else 'none'}"
    name += f"-r{round(100 * spec.recall)}" if spec.planned_swaps else ""
    path = Path(out) / f"{name}.json"
    path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    report["run"]["path"] = str(path)
    return report


def run_specs(specs: list[RunSpec], out: Path, *, workers: int = 1) -> list[dict[str, Any]]:
    """Every run's report (``workers`` at once), in the order given; each also written to ``out``."""
    if workers <= 1:
        return [_run_one(spec, str(out)) for spec in specs]
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return list(pool.map(_run_one, specs, [str(out)] * len(specs)))
