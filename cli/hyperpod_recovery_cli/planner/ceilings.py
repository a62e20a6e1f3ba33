"""The ceiling each assumption sets: the ETTR a job would reach if that one loss were its only one, so that an
assumption (a 5-minute restart, a blocking save, no spare) is not read as a result; and the ETTR at several
recalls of planned swaps, as given and with the plan's recommended spares and interval."""

from __future__ import annotations

import math

from hyperpod_recovery_cli.planner import formulas as f
from hyperpod_recovery_cli.planner.estimate import always_seconds, best_interval_for, effect_of, estimate, no_spare_share
from hyperpod_recovery_cli.planner.model import (
    REPAIR_PHASES,
    Ceiling,
    IntervalAdvice,
    PlannerInputs,
    RecallEstimate,
    SparesAdvice,
)
from hyperpod_recovery_cli.planner.sentences import minutes, pct
from hyperpod_recovery_cli.planner.swaps import SwapEffect, precursors_of

CEILING = (
    "each loss alone, every other away: a recovery phase of t per failure alone gives e^(−t/M) (Daly's ETTR with "
    "τ → 0, δ = 0); checkpoints and rework alone, Daly's ETTR with R = 0; planned swaps alone, 1 − swaps·C/M"
)
CEILING_ASSUMES = [
    "failures arrive as a Poisson process, nodes independent: M = 1/(N·r_f)",
    "the losses multiply (each is a share of what the others leave); the last line is all of them together",
]
# The recalls the plan shows ETTR at (0 first: no planned swaps).
RECALLS = (0.0, 0.25, 0.5, 0.75)


def ceilings(inputs: PlannerInputs, interval: IntervalAdvice, spares: SparesAdvice, effect: SwapEffect) -> list[Ceiling]:
    """Per assumption, the ETTR it alone allows; then the estimate with a spare for every failure and the best interval."""
    job = inputs.jobs[0]
    mttf = f.job_mttf_minutes(job, inputs.failure_rate.per_node_day)
    tau, delta = inputs.checkpoint_interval_seconds.value / 60, inputs.checkpoint_cost_seconds.value / 60
    phases = {phase: figure.value for phase, figure in inputs.phases_seconds.items()}
    repair = sum(phases[phase] for phase in REPAIR_PHASES)
    best = interval.best_seconds / 60

    def alone(seconds: float) -> float:
        return math.exp(-seconds / 60 / mttf)

    found = [
        (
            f"checkpoints and rework at the interval now (every {minutes(tau * 60)}, {minutes(delta * 60)} blocking)",
            _saves(tau, delta, mttf),
        ),
        (f"checkpoints and rework at the best interval (every {minutes(best * 60)})", _saves(best, delta, mttf)),
        (f"detection, {minutes(phases['detect'])} per failure", alone(phases["detect"])),
        (f"cordon, {minutes(phases['cordon'])} per failure", alone(phases["cordon"])),
        (f"restart, {minutes(phases['restart'])} per failure", alone(phases["restart"])),
        (f"repair wait without spares (replace + rejoin + health gate), {minutes(repair)} per failure", alone(repair)),
    ]
    if spares.spares_given:
        share = no_spare_share(inputs)
        found.append((f"repair wait with {spares.spares_given} spare(s): {pct(share)} of failures find none", alone(share * repair)))
    if effect.swaps_per_failure > 0:
        unforeseen = effect.mttf_unforeseen(mttf)
        found += [
            (
                f"planned swaps' own cost: {effect.swaps_per_failure * f.MINUTES_PER_DAY / mttf:.2f} a day "
                f"(foreseen and false) x {minutes(effect.swap_minutes * 60)}",
                1 - effect.swap_loss(mttf),
            ),
            (
                f"checkpoints and rework at the best interval, the {pct(effect.saved_share)} of failures swapped first losing none",
                _saves(f.best_interval(delta, unforeseen) if delta > 0 else best, delta, unforeseen),
            ),
        ]
    precursors, recovery = precursors_of(inputs), always_seconds(inputs)
    # (the better of the best interval and the one now: with δ = 0 "best" is only "as often as the storage allows")
    together = max(
        effect_of(inputs, job, interval_, precursors, spares=1).ettr(interval_, delta, recovery / 60, mttf)
        for interval_ in (best_interval_for(inputs, precursors, spares=1), tau)
    )
    found.append((f"all together, with a spare for every failure (R {minutes(recovery)}) and the best interval", together))
    return [_ceiling(said, value) for said, value in found]


def _ceiling(said: str, value: float) -> Ceiling:
    return Ceiling(model=CEILING, assumptions=CEILING_ASSUMES, assumption=said, ettr=value, points=100 * (1 - value))


def _saves(tau: float, delta: float, mttf: float) -> float:
    return f.daly_ettr(tau, delta, 0.0, mttf)


def recalls(inputs: PlannerInputs, recommended_spares: int) -> list[RecallEstimate]:
    """ETTR at each recall in RECALLS (the other precursor figures as given or assumed): with the inputs' spares and
    interval, and with the recommended spares and the best interval for that recall."""
    rows = []
    for recall in RECALLS:
        precursors = precursors_of(inputs, recall=recall)
        assert precursors is not None  # (a recall given)
        best = best_interval_for(inputs, precursors, spares=recommended_spares)
        now = effect_of(inputs, inputs.jobs[0], inputs.checkpoint_interval_seconds.value / 60, precursors).decision
        recommended = effect_of(inputs, inputs.jobs[0], best, precursors, spares=recommended_spares).decision
        rows.append(
            RecallEstimate(
                recall=recall,
                action="leave" if now is None else now.action,
                recommended_action="leave" if recommended is None else recommended.action,
                ettr=estimate(inputs, precursors=precursors),
                recommended_ettr=estimate(inputs, tau=best, spares=recommended_spares, precursors=precursors),
                recommended_interval_seconds=best * 60,
                recommended_spares=recommended_spares,
                lead_seconds=precursors.lead_seconds,
                false_positive=precursors.false_positive,
                swap_lost_seconds=precursors.swap_lost_seconds,
            )
        )
    return rows
