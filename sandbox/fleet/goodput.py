"""The fleet run in the goodput planner's terms: the planner's inputs as the run measured them, the
planner's plan from them (``plan_goodput``, the code ``hyperpod-recovery goodput --from`` runs, so the
two print the same ETTR), the run's measured ETTR split the planner's way beside it, and what to change,
in the planner's sentences (cli/hyperpod_recovery_cli/planner/sentences.py).

The phases are what one failure cost the job, on average over the failures that hit a job (a failure
whose recovery had no such phase, a job fault's rejoin, counts 0): the planner charges every failure
with every phase, and ETTR loses the expected recovery per failure. They split each hit's measured
downtime (report.py): detect is its detection, rejoin its provisioning wait, cordon, replace and
health gate the incidents' own recorded phases, and restart the job's modelled start-up plus the rest
of the pipeline's time (its other steps, its polls' lag). So the planner's R is the run's mean
downtime plus the start-up, and the measured and modelled ETTR differ only by what is drawn (the
failures that hit, the work each lost against τ/2) and by Daly's exact expectation against a sum.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any

from hyperpod_recovery.models.records import IncidentRecord
from hyperpod_recovery_cli.goodput_inputs import combine, defaults_layer
from hyperpod_recovery_cli.planner import plan_goodput
from hyperpod_recovery_cli.planner.measure import phase_seconds
from hyperpod_recovery_cli.planner.model import GoodputPlan, PlannerInputs
from hyperpod_recovery_cli.planner.sentences import ceiling_lines, change_lines, ettr_line, minutes, pct, swaps_lines
from sandbox.fleet.plan import FleetPlan

# The planner's phases the incident records measure (their ledger phases: planner/measure.py LEDGER_PHASES).
RECORDED = ("cordon", "replace", "health_gate")


def planner_inputs(
    plan: FleetPlan,
    failures: int,
    hits: list[dict[str, Any]],
    records: dict[str, IncidentRecord],
    precursors: dict[str, Any] | None = None,
    stops: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The run's figures as the goodput planner reads them (``hyperpod-recovery goodput --from``: the schema
    is PlannerInputs, docs/goodput.md), complete (a figure the run has none of is the planner's default,
    saying so), each saying whether the run measured it or the plan gave it."""
    run = f"fleet drill {plan.nodes} nodes x {plan.days:g} days"
    ran_again = [hit for hit in hits if hit["restarted_at"] is not None]

    def figure(value: float, provenance: str, what: str) -> dict[str, Any]:
        return {"value": round(value, 1), "provenance": provenance, "source": f"{run}: {what}"}

    layer: dict[str, Any] = {
        "nodes": figure(plan.nodes, "measured", "the cluster"),
        "failure_rate": {
            "failures": max(1, failures),
            "node_days": plan.nodes * plan.days,
            "provenance": "measured",
            "source": f"{run}: the trace",
        },
        "checkpoint_interval_seconds": figure(plan.checkpoint_interval_seconds, "given", "the jobs' checkpoint interval"),
        "checkpoint_cost_seconds": figure(plan.checkpoint_cost_seconds, "given", "the jobs' blocking checkpoint cost"),
        "spare_nodes": figure(plan.spares, "given", "the spare nodes"),
        "job_sizes": sorted({plan.mix.nodes_each, plan.nodes}, reverse=True),
    }
    if ran_again:
        per_hit = f"mean per failure over {len(ran_again)} that hit a job"
        recorded = _recorded_per_hit(records, len(ran_again))
        pipeline = fmean(hit["pipeline"] for hit in ran_again)
        rest = max(0.0, pipeline - sum(recorded.values()))
        layer["phases_seconds"] = {
            "detect": figure(fmean(hit["detection"] for hit in ran_again), "measured", f"the failure to its execution's start, {per_hit}"),
            **{phase: figure(seconds, "measured", f"the incidents' {phase} phase, {per_hit}") for phase, seconds in recorded.items()},
            "rejoin": figure(
                fmean(hit["provisioning_wait"] for hit in ran_again), "measured", f"the wait for HyperPod's repair, {per_hit}"
            ),
            "restart": figure(
                plan.restart_seconds + rest,
                "given",
                f"the job's modelled start-up {plan.restart_seconds:g} s and the pipeline's other steps {rest:.1f} s, {per_hit}",
            ),
        }
    if plan.planned_swaps and precursors and precursors["recall"] > 0:
        layer |= _swap_figures(run, precursors, stops or [], plan)
    return combine([layer, defaults_layer()]).model_dump(mode="json")


def _swap_figures(run: str, precursors: dict[str, Any], stops: list[dict[str, Any]], plan: FleetPlan) -> dict[str, Any]:
    """Issue 50: the trace's precursor figures (given: ASSUMPTIONS) and what the run's swaps measured."""
    signals = precursors["announced"] + precursors["false_alarms"]
    swaps = [stop for stop in stops if stop["kind"] in ("swap", "false_alarm") and stop["restarted_at"] is not None]
    figures: dict[str, Any] = {
        "precursor_recall": {"value": precursors["recall"], "provenance": "given", "source": f"{run}: --recall"},
        "precursor_lead_seconds": {
            "value": precursors["lead_median_seconds"],
            "provenance": "given",
            "source": f"{run}: the lead's median",
        },
        "precursor_lead_shape": precursors["lead_sigma"],
    }
    if signals:
        figures["precursor_false_positive"] = {
            "value": round(min(0.99, precursors["false_alarms"] / signals), 4),
            "provenance": "measured",
            "source": f"{run}: {precursors['false_alarms']} false alarms of {signals} signals",
        }
    if swaps:
        figures["swap_lost_seconds"] = {
            "value": round(fmean(stop["lost_work"] for stop in swaps), 1),
            "provenance": "measured",
            "source": f"{run}: the work past the commit, mean over {len(swaps)} planned swaps",
        }
        figures["swap_restart_seconds"] = {
            "value": round(plan.restart_seconds + fmean(stop["downtime"] for stop in swaps), 1),
            "provenance": "given",
            "source": f"{run}: the job's modelled start-up {plan.restart_seconds:g} s and the swap's measured downtime",
        }
    return figures


def _recorded_per_hit(records: dict[str, IncidentRecord], hits: int) -> dict[str, float]:
    """Cordon, replace and health gate: their seconds over the node incidents that recovered, per failure."""
    totals = dict.fromkeys(RECORDED, 0.0)
    for record in records.values():
        if record.workflow == "node" and record.outcome == "recovered":
            for phase, seconds in phase_seconds(record).items():
                if phase in totals:
                    totals[phase] += seconds
    return {phase: total / hits for phase, total in totals.items()}


def planned(report: dict[str, Any]) -> GoodputPlan:
    """The planner's plan of the run: what ``hyperpod-recovery goodput --from <report>`` computes."""
    return plan_goodput(PlannerInputs.model_validate(report["goodput_inputs"]))


def measured_split(job: dict[str, Any], run_seconds: float) -> tuple[float, float, float]:
    """(checkpoint, rework, recovery): a job's measured losses as shares of the run, the planner's split."""
    lost = job["seconds_lost"]
    recovery = lost["detection"] + lost["pipeline"] + lost["provisioning_wait"] + lost["restart"]
    return lost["checkpoint_cost"] / run_seconds, lost["lost_work"] / run_seconds, recovery / run_seconds


def format_goodput(report: dict[str, Any]) -> list[str]:
    """The planner's ETTR beside the run's, split alike, per job size; then what to change."""
    plan = planned(report)
    run_seconds = report["plan"]["days"] * 86_400.0
    by_size = {advice.job_nodes: advice for advice in plan.job_sizes}
    lines = [
        "the goodput planner on this run's inputs (hyperpod-recovery goodput --from <this report> prints the same):",
        f"  {ettr_line(plan.ettr)}  [job of {plan.ettr.job_nodes:,} nodes, R {minutes(plan.ettr.recovery_seconds)}, "
        f"{plan.ettr.failures_per_day * report['plan']['days']:.1f} failures expected]",
    ]
    for job in report["jobs"]:
        checkpoint, rework, recovery = measured_split(job, run_seconds)
        advice = by_size.get(job["nodes"])
        modelled = f"; planned {pct(advice.ettr)}" if advice is not None else ""
        lines.append(
            f"  job {job['job']} measured ETTR {pct(job['ettr'])}{modelled}: checkpoint {pct(checkpoint)} | rework {pct(rework)} | "
            f"recovery {pct(recovery)} ({job['hits']} hits)"
        )
    swaps = swaps_lines(plan.planned_swaps) if plan.planned_swaps is not None else []
    return [*lines, *swaps, *change_lines(plan.changes), *ceiling_lines(plan.ceilings)]
