"""The planner's estimates of one job's ETTR with one thing changed (the interval, the spares, the shrink, the
planned swaps), and what one failure costs: shared by the plan (plan.py) and its ceilings (ceilings.py)."""

from __future__ import annotations

from hyperpod_recovery_cli.planner import formulas as f
from hyperpod_recovery_cli.planner.model import REPAIR_PHASES, PlannerInputs, Provenance
from hyperpod_recovery_cli.planner.swaps import Precursors, SwapEffect, precursors_of, swap_effect


def no_spare_share(inputs: PlannerInputs, spares: int | None = None) -> float:
    """The share of failures that find no spare free: every one without spares; with ``spares`` (default:
    the inputs'), those that find the others in repair holding them all (Poisson arrivals see time averages)."""
    given = inputs.spare_nodes.value if spares is None and inputs.spare_nodes is not None else spares
    if not given:
        return 1.0
    seconds, _, _ = repair_window(inputs)
    in_repair = inputs.nodes.value * inputs.failure_rate.per_node_day * seconds / 86_400
    return max(0.0, 1 - f.poisson_cdf(given - 1, in_repair))


def expected_recovery_seconds(inputs: PlannerInputs, *, spares: int | None = None, shrink: bool = False) -> float:
    """What one failure costs the job, on average: every phase, but the repair phases only for the failures
    that find no spare (one that finds a spare runs again on it at once, as the pipeline resubmits it). With
    ``shrink``, a job that finds none runs on one node less meanwhile instead of waiting: T/n of its
    throughput, and one more restart to grow back (the elastic rule's terms)."""
    repair = sum(inputs.phases_seconds[phase].value for phase in REPAIR_PHASES)
    waited = repair / inputs.jobs[0] + inputs.phases_seconds["restart"].value if shrink else repair
    return always_seconds(inputs) + no_spare_share(inputs, spares) * waited


def always_seconds(inputs: PlannerInputs) -> float:
    """The phases every failure goes through, spare or not."""
    return sum(figure.value for phase, figure in inputs.phases_seconds.items() if phase not in REPAIR_PHASES)


def repair_window(inputs: PlannerInputs) -> tuple[float, Provenance, str]:
    """(seconds, provenance, source) of how long a failed node's place stays empty: given, or the
    sum of its repair phases (measured only when each of them was)."""
    if inputs.repair_seconds is not None:
        return inputs.repair_seconds.value, inputs.repair_seconds.provenance, inputs.repair_seconds.source
    figures = [inputs.phases_seconds[phase] for phase in REPAIR_PHASES]
    return sum(fig.value for fig in figures), weakest({fig.provenance for fig in figures}), "replace + rejoin + health gate"


def weakest(provenances: set[Provenance]) -> Provenance:
    """What a figure made of others is: measured only if all of them were; an assumption if one was."""
    return "default" if "default" in provenances else "given" if "given" in provenances else "measured"


def effect_of(inputs: PlannerInputs, job: int, tau: float, precursors: Precursors | None, *, spares: int | None = None) -> SwapEffect:
    """Planned swaps' effect on a job of ``job`` nodes checkpointing every ``tau`` minutes; a spare fits when any is kept."""
    kept = spares if spares is not None else inputs.spare_nodes.value if inputs.spare_nodes is not None else 0
    return swap_effect(
        precursors,
        job_nodes=job,
        tau=tau,
        delta=inputs.checkpoint_cost_seconds.value / 60,
        detect_seconds=inputs.phases_seconds["detect"].value,
        restart_seconds=inputs.phases_seconds["restart"].value,
        repair_seconds=sum(inputs.phases_seconds[phase].value for phase in REPAIR_PHASES),
        spare_fits=kept > 0,
    )


def estimate(
    inputs: PlannerInputs,
    *,
    tau: float | None = None,
    spares: int | None = None,
    shrink: bool = False,
    precursors: Precursors | bool | None = True,
    job: int | None = None,
) -> float:
    """Daly's ETTR of ``inputs`` (the largest job's, or ``job``'s) with one thing changed: the interval (minutes),
    the spares, the shrink, the precursors (True: the inputs' own)."""
    size = inputs.jobs[0] if job is None else job
    interval = inputs.checkpoint_interval_seconds.value / 60 if tau is None else tau
    found = precursors_of(inputs) if precursors is True else precursors if isinstance(precursors, Precursors) else None
    mttf = f.job_mttf_minutes(size, inputs.failure_rate.per_node_day)
    recovery = expected_recovery_seconds(inputs, spares=spares, shrink=shrink) / 60
    effect = effect_of(inputs, size, interval, found, spares=spares)
    return effect.ettr(interval, inputs.checkpoint_cost_seconds.value / 60, recovery, mttf)


def best_interval_for(inputs: PlannerInputs, precursors: Precursors | None, *, spares: int | None = None) -> float:
    """The interval (minutes) maximizing Daly's ETTR over the failures no planned swap foresees (at the interval now)."""
    tau, delta = inputs.checkpoint_interval_seconds.value / 60, inputs.checkpoint_cost_seconds.value / 60
    mttf = f.job_mttf_minutes(inputs.jobs[0], inputs.failure_rate.per_node_day)
    unforeseen = effect_of(inputs, inputs.jobs[0], tau, precursors, spares=spares).mttf_unforeseen(mttf)
    return f.best_interval(delta, unforeseen) if delta > 0 else unforeseen * 1e-7
