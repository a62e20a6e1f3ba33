"""The goodput planner: from a cluster's failure rate, its measured recovery phases and a job's
checkpointing, the ETTR to expect, what each phase costs, the checkpoint interval that maximizes
ETTR, the spares to keep, and per job size whether to shrink or wait. Pure: inputs in, plan out.
"""

from __future__ import annotations

import math

from hyperpod_recovery.domain.elastic.decide import Estimate, shrink_wins
from hyperpod_recovery_cli.planner import defaults
from hyperpod_recovery_cli.planner import formulas as f
from hyperpod_recovery_cli.planner.ceilings import ceilings, recalls
from hyperpod_recovery_cli.planner.estimate import (
    always_seconds,
    best_interval_for,
    effect_of,
    estimate,
    expected_recovery_seconds,
    no_spare_share,
    repair_window,
)
from hyperpod_recovery_cli.planner.model import (
    RECOVERY_PHASES,
    REPAIR_PHASES,
    Change,
    ChangeKind,
    Curve,
    CurvePoint,
    EttrEstimate,
    GoodputPlan,
    IntervalAdvice,
    JobSizeAdvice,
    PhaseCost,
    PlannedSwaps,
    PlannerInputs,
    SparesAdvice,
)
from hyperpod_recovery_cli.planner.sentences import minutes
from hyperpod_recovery_cli.planner.swaps import NO_SWAPS, SWAPS, SWAPS_ASSUMES, Precursors, SwapEffect, precursors_of

SPARES_PERCENTILE = 0.99
# The first-order decomposition holds while what one failure costs is small against M (Daly 2006).
FIRST_ORDER_SHARE = 0.1
# Meta measured a 1,024-GPU job's MTTF at 7.9 h where the node rate predicts 28.8 h: below this
# many GPUs the per-node model is optimistic (Kokolis et al., HPCA 2025).
SMALL_JOB_GPUS = 512
CURVE_POINTS = 61

FAILURES = "failures arrive as a Poisson process, nodes independent: M = 1/(N·r_f)"
NO_QUEUE = "no scheduler queue time, no job-level failure beyond the node rate"
DALY = "Daly (2006) exact expectation: ETTR = τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1))"
DALY_ASSUMES = [
    FAILURES,
    "every failure costs the recovery R, then work resumes from the last checkpoint; R is the phases' sum, the repair "
    "phases (replace, rejoin, health gate) only for the failures that find no spare",
    "failures during recovery and checkpoints are counted (exponential model)",
    "δ is the blocking part of one checkpoint",
    NO_QUEUE,
]
FIRST_ORDER = "first-order decomposition (Kokolis et al., HPCA 2025): lost ≈ δ/(τ+δ) + (τ/2)/M + R/M"
FIRST_ORDER_ASSUMES = [FAILURES, "losses add up; no failure during a recovery", "valid while τ + δ + R ≪ M", NO_QUEUE]
PHASE_COST = (
    "first order: a phase of t costs t/M of wall-clock (a repair phase: for the failures that find no spare); "
    "one minute less: the plan again with that phase a minute shorter, Daly's ETTR difference"
)
INTERVAL = "Young (1974) sqrt(2δM); Daly (2006) higher-order estimate; numeric maximum of Daly's ETTR (recommended)"
INTERVAL_ASSUMES = [FAILURES, "R does not move the optimum (it scales wall time by e^{R/M})", "δ fixed per checkpoint"]
SPARES = (
    "Poisson tail of concurrent repairs: nodes in repair ~ Poisson(N·r_f·T_repair); a failure finds a spare when the "
    "others in repair are fewer than the spares (Poisson arrivals see time averages)"
)
SPARES_ASSUMES = [
    "each node fails at r_f, independently (no rack- or switch-wide events)",
    "a failed node's place stays empty for T_repair, then its replacement takes it",
    "spares = 1 + the 99th percentile of nodes in repair: 99 % of failures find one free",
    "a job that finds a spare restarts on it at once: its recovery loses the repair phases",
]
SHRINK = "the elastic recovery's shrink-or-wait rule (domain/elastic/decide.py shrink_wins): shrink when T·n/N > R"
SHRINK_ASSUMES = [
    "one node lost per failure (k = 1); the job reshards to any smaller size",
    "T = the failed node's replacement: replace + rejoin + health gate",
    "R = one restart of the job at full size (the restart phase), about the same at the smaller size",
]


def plan_goodput(inputs: PlannerInputs) -> GoodputPlan:
    """The plan for the largest of ``inputs``' jobs (each job size gets its own line), over the whole cluster's spares."""
    rate = inputs.failure_rate.per_node_day
    job = inputs.jobs[0]
    tau, delta, recovery = (
        inputs.checkpoint_interval_seconds.value / 60,
        inputs.checkpoint_cost_seconds.value / 60,
        expected_recovery_seconds(inputs) / 60,
    )
    mttf = f.job_mttf_minutes(job, rate)
    precursors = precursors_of(inputs)
    effect = effect_of(inputs, job, tau, precursors)
    ettr = _ettr(job, rate, tau, delta, recovery, effect)
    interval = _interval(inputs, tau, recovery, mttf, precursors)
    spares = _spares(inputs, rate, ettr, precursors)
    job_sizes = [_job_size(inputs, size, rate, tau, delta, recovery, precursors) for size in inputs.jobs]
    return GoodputPlan(
        inputs=inputs,
        ettr=ettr,
        phases=_phase_costs(inputs, ettr, mttf, precursors),
        interval=interval,
        spares=spares,
        job_sizes=job_sizes,
        changes=changes(inputs, ettr, interval, spares, job_sizes[0]),
        recovery_curve=_recovery_curve(tau, delta, recovery, mttf, effect),
        interval_curve=_interval_curve(inputs, tau, recovery, mttf, precursors),
        warnings=_warnings(inputs, job, tau, delta, recovery, mttf),
        planned_swaps=None if precursors is None else planned_swaps(inputs, precursors, effect, mttf),
        recalls=recalls(inputs, spares.p99_spares),
        ceilings=ceilings(inputs, interval, spares, effect),
    )


def planned_swaps(inputs: PlannerInputs, precursors: Precursors, effect: SwapEffect, mttf: float) -> PlannedSwaps:
    assert effect.decision is not None  # (precursors given)
    recall = inputs.precursor_recall
    per_day = f.MINUTES_PER_DAY / mttf
    false_alarms = precursors.recall * precursors.false_positive / (1 - precursors.false_positive) if effect.swaps_per_failure else 0.0
    assumed = [
        name
        for name, figure in (
            ("lead time", inputs.precursor_lead_seconds),
            ("false-positive rate", inputs.precursor_false_positive),
            ("work lost past the commit", inputs.swap_lost_seconds),
        )
        if figure is None or figure.provenance == "default"
    ]
    return PlannedSwaps(
        model=SWAPS,
        assumptions=SWAPS_ASSUMES,
        recall=precursors.recall,
        recall_provenance=recall.provenance if recall is not None else "default",
        lead_seconds=precursors.lead_seconds,
        lead_shape=precursors.lead_shape,
        false_positive=precursors.false_positive,
        swap_lost_seconds=precursors.swap_lost_seconds,
        swap_restart_seconds=(
            precursors.swap_restart_seconds if precursors.swap_restart_seconds is not None else inputs.phases_seconds["restart"].value
        ),
        action=effect.decision.action,
        decision=effect.decision.sentence,
        before_commit_share=effect.before_commit_share,
        saved_share=effect.saved_share,
        swaps_per_day=effect.swaps_per_failure * per_day,
        false_alarms_per_day=false_alarms * per_day,
        swap_seconds=effect.swap_minutes * 60,
        assumed=assumed,
    )


def _ettr(job: int, rate: float, tau: float, delta: float, recovery: float, effect: SwapEffect = NO_SWAPS) -> EttrEstimate:
    mttf = f.job_mttf_minutes(job, rate)
    unforeseen = effect.mttf_unforeseen(mttf)
    checkpoint, rework, lost_to_recovery = f.first_order_losses(tau, delta, recovery, unforeseen)
    swap_loss = effect.swap_loss(mttf)
    swapping = effect is not NO_SWAPS and effect.swaps_per_failure > 0
    return EttrEstimate(
        model=f"{DALY}; shown split by {FIRST_ORDER}" + (f"; with {SWAPS}" if swapping else ""),
        assumptions=DALY_ASSUMES + FIRST_ORDER_ASSUMES[1:3] + (SWAPS_ASSUMES if swapping else []),
        job_nodes=job,
        mttf_hours=mttf / 60,
        failures_per_day=f.MINUTES_PER_DAY / mttf,
        interval_seconds=tau * 60,
        cost_seconds=delta * 60,
        recovery_seconds=recovery * 60,
        ettr=effect.ettr(tau, delta, recovery, mttf),
        first_order_ettr=max(0.0, (1 - (recovery + tau / 2) / unforeseen - swap_loss) / (1 + delta / tau)),
        checkpoint_loss=checkpoint,
        rework_loss=rework,
        recovery_loss=lost_to_recovery,
        swap_loss=swap_loss,
    )


def _phase_costs(inputs: PlannerInputs, ettr: EttrEstimate, mttf: float, precursors: Precursors | None) -> list[PhaseCost]:
    """Each phase's share of the expected recovery (a repair phase's only for the failures that find no
    spare), and what planning again with it one minute shorter (not below 0) gives."""
    tau = ettr.interval_seconds / 60
    unforeseen = effect_of(inputs, ettr.job_nodes, tau, precursors).mttf_unforeseen(mttf)
    waiting = no_spare_share(inputs)
    costs = []
    for phase, figure in inputs.phases_seconds.items():
        shorter = inputs.model_copy(
            update={"phases_seconds": inputs.phases_seconds | {phase: figure.model_copy(update={"value": max(0.0, figure.value - 60)})}}
        )
        shorter_ettr = estimate(shorter, precursors=precursors or False)
        share = waiting if phase in REPAIR_PHASES else 1.0
        costs.append(
            PhaseCost(
                model=PHASE_COST,
                assumptions=FIRST_ORDER_ASSUMES,
                phase=phase,
                seconds=figure.value,
                provenance=figure.provenance,
                source=figure.source,
                ettr_points=100 * share * figure.value / 60 / unforeseen,
                minute_less_points=100 * (shorter_ettr - ettr.ettr),
            )
        )
    return sorted(costs, key=lambda cost: RECOVERY_PHASES.index(cost.phase))


def _interval(inputs: PlannerInputs, tau: float, recovery: float, mttf: float, precursors: Precursors | None) -> IntervalAdvice:
    delta = inputs.checkpoint_cost_seconds.value / 60
    best = best_interval_for(inputs, precursors)
    # (the failures a planned swap takes first lose no rework: the intervals are over the others)
    unforeseen = effect_of(inputs, inputs.jobs[0], tau, precursors).mttf_unforeseen(mttf)
    return IntervalAdvice(
        model=INTERVAL,
        assumptions=INTERVAL_ASSUMES,
        young_seconds=60 * f.young_interval(delta, unforeseen),
        daly_seconds=60 * f.daly_interval(delta, unforeseen),
        best_seconds=60 * best,
        ettr_now=estimate(inputs, precursors=precursors or False),
        ettr_at_best=estimate(inputs, tau=best, precursors=precursors or False),
    )


def _spares(inputs: PlannerInputs, rate: float, ettr: EttrEstimate, precursors: Precursors | None) -> SparesAdvice:
    seconds, provenance, source = repair_window(inputs)
    in_repair = inputs.nodes.value * rate * seconds / 86_400
    given = inputs.spare_nodes.value if inputs.spare_nodes is not None else None
    p99_in_repair = f.poisson_quantile(in_repair, SPARES_PERCENTILE)
    return SparesAdvice(
        model=SPARES,
        assumptions=SPARES_ASSUMES,
        repair_seconds=seconds,
        repair_provenance=provenance,
        repair_source=source,
        expected_in_repair=in_repair,
        p99_in_repair=p99_in_repair,
        p99_spares=p99_in_repair + 1 if in_repair > 0 else 0,
        spares_given=given,
        # the failing node finds none when the others in repair already hold every spare
        no_spare_probability=None if given is None else max(0.0, 1 - f.poisson_cdf(given - 1, in_repair)),
        ettr_with_spare=effect_of(inputs, ettr.job_nodes, ettr.interval_seconds / 60, precursors, spares=1).ettr(
            ettr.interval_seconds / 60,
            ettr.cost_seconds / 60,
            always_seconds(inputs) / 60,
            ettr.mttf_hours * 60,
        ),
    )


def _job_size(
    inputs: PlannerInputs, nodes: int, rate: float, tau: float, delta: float, recovery: float, precursors: Precursors | None
) -> JobSizeAdvice:
    repair = [inputs.phases_seconds[phase] for phase in REPAIR_PHASES]
    restart = inputs.phases_seconds["restart"]
    wait = Estimate(
        round(sum(fig.value for fig in repair)), "measured" if all(fig.provenance == "measured" for fig in repair) else "parameter"
    )
    grow_back = Estimate(round(restart.value), "measured" if restart.provenance == "measured" else "parameter")
    mttf = f.job_mttf_minutes(nodes, rate)
    if nodes == 1:
        action, why = "wait", "a one-node job has no smaller size to run at"
    else:
        gain = wait.seconds * (nodes - 1) / nodes
        shrinks = shrink_wins(nodes, nodes - 1, wait, grow_back)
        action = "shrink" if shrinks else "wait"
        why = f"T·n/N = {gain:.0f} s {'>' if shrinks else '≤'} R = {grow_back.seconds} s (on {nodes - 1} of {nodes} nodes meanwhile)"
    return JobSizeAdvice(
        model=SHRINK,
        assumptions=SHRINK_ASSUMES,
        job_nodes=nodes,
        mttf_hours=mttf / 60,
        ettr=effect_of(inputs, nodes, tau, precursors).ettr(tau, delta, recovery, mttf),
        wait_seconds=wait.seconds,
        grow_back_seconds=grow_back.seconds,
        action=action,
        why=why,
    )


def _recovery_curve(tau: float, delta: float, recovery: float, mttf: float, effect: SwapEffect) -> Curve:
    top = max(2 * recovery, 30.0)
    xs = [top * i / (CURVE_POINTS - 1) for i in range(CURVE_POINTS)]
    return Curve(
        model=DALY,
        assumptions=DALY_ASSUMES,
        x_label="recovery time per failure (min)",
        points=[CurvePoint(x=x, ettr=effect.ettr(tau, delta, x, mttf)) for x in xs],
        marked_x=recovery,
        marked_ettr=effect.ettr(tau, delta, recovery, mttf),
    )


def _interval_curve(inputs: PlannerInputs, tau: float, recovery: float, mttf: float, precursors: Precursors | None) -> Curve:
    delta = inputs.checkpoint_cost_seconds.value / 60
    best = best_interval_for(inputs, precursors) if delta > 0 else tau
    low, high = min(tau, best) / 4, max(tau, best) * 3
    ratio = (high / low) ** (1 / (CURVE_POINTS - 1))
    xs = [low * ratio**i for i in range(CURVE_POINTS)]
    at = {x: estimate(inputs, tau=x, precursors=precursors or False) for x in [*xs, tau, best]}
    return Curve(
        model=DALY,
        assumptions=DALY_ASSUMES,
        x_label="checkpoint interval (min)",
        points=[CurvePoint(x=x, ettr=at[x]) for x in xs],
        marked_x=tau,
        marked_ettr=at[tau],
        best_x=best if delta > 0 else None,
        best_ettr=at[best] if delta > 0 else None,
    )


def _warnings(inputs: PlannerInputs, job: int, tau: float, delta: float, recovery: float, mttf: float) -> list[str]:
    warnings = []
    if tau + delta + recovery > FIRST_ORDER_SHARE * mttf:
        warnings.append(
            f"τ + δ + R = {tau + delta + recovery:.0f} min is more than a tenth of M = {mttf:.0f} min: "
            "the first-order split is approximate; Daly's ETTR stays valid"
        )
    if delta >= 2 * mttf:
        warnings.append(f"a checkpoint (δ = {delta:.1f} min) takes twice M or more: Daly's interval is M itself")
    if job * inputs.gpus_per_node < SMALL_JOB_GPUS:
        warnings.append(
            f"a job of {job * inputs.gpus_per_node} GPUs: below {SMALL_JOB_GPUS} the per-node model is optimistic "
            "(Meta measured 7.9 h MTTF at 1,024 GPUs where it predicts 28.8 h)"
        )
    assumed: list[str] = [phase for phase, fig in inputs.phases_seconds.items() if fig.provenance == "default"]
    assumed += [
        name
        for name, fig in (("checkpoint interval", inputs.checkpoint_interval_seconds), ("checkpoint cost", inputs.checkpoint_cost_seconds))
        if fig.provenance == "default"
    ]
    if assumed:
        warnings.append(f"neither measured nor given, assumed: {', '.join(assumed)} (see their sources)")
    if inputs.failure_rate.provenance == "default":
        warnings.append(f"failure rate assumed: {inputs.failure_rate.source or inputs.failure_rate.described()}")
    if math.isclose(delta, 0.0):
        warnings.append("a checkpoint that costs nothing: checkpoint as often as the storage allows")
    return warnings


CHANGES = "each change alone, planned again with the same models: Daly's ETTR with that setting changed, minus ETTR now"
# Below this gain a change is not worth a line (a hundredth of a point, the tables' precision).
WORTH_POINTS = 0.005


def changes(inputs: PlannerInputs, ettr: EttrEstimate, interval: IntervalAdvice, spares: SparesAdvice, job: JobSizeAdvice) -> list[Change]:
    """What to change, each alone, with the ETTR it buys: the checkpoint interval, the spares kept, the
    shrink opt-in of the largest job, the detection; the most ETTR first, none that buys under 0.005 points."""

    def change(kind: ChangeKind, now: str, to: str, how: str, value: float) -> Change:
        return Change(
            model=CHANGES, assumptions=DALY_ASSUMES, kind=kind, now=now, to=to, how=how, ettr=value, gain_points=100 * (value - ettr.ettr)
        )

    found = [
        change(
            "checkpoint_interval",
            f"every {minutes(ettr.interval_seconds)}",
            f"every {minutes(interval.best_seconds)}",
            "the job's checkpoint interval (numeric maximum of Daly's ETTR)",
            interval.ettr_at_best,
        )
    ]
    kept = spares.spares_given or 0
    if spares.p99_spares > kept:
        found.append(
            change(
                "spares",
                f"{kept} spare node(s)",
                f"{spares.p99_spares} spare node(s)",
                "idle nodes in the job's instance group (99 % of failures find one)",
                estimate(inputs, spares=spares.p99_spares),
            )
        )
    if job.action == "shrink":
        found.append(
            change(
                "shrink",
                "waits for its replacement",
                f"shrinks to {job.job_nodes - 1} of {job.job_nodes} nodes meanwhile",
                'the job\'s opt-in, resume=elastic (docs/runbook.md, "When a job runs again")',
                estimate(inputs, shrink=True),
            )
        )
    detect = inputs.phases_seconds["detect"].value
    measured = defaults.PHASES["detect"]
    if detect > measured.value:
        shorter = inputs.model_copy(update={"phases_seconds": inputs.phases_seconds | {"detect": measured}})
        found.append(
            change(
                "detection",
                f"detect in {minutes(detect)}",
                f"detect in {minutes(measured.value)} ({measured.source.split(':', 1)[0]})",
                "the job reports its progress, so that Detect Hung Jobs finds a silent hang (docs/progress.md)",
                estimate(shorter),
            )
        )
    if inputs.precursor_recall is None:
        assumed = precursors_of(inputs, recall=defaults.PRECURSOR_RECALL.value)
        assert assumed is not None  # (a recall given)
        found.append(
            change(
                "planned_swaps",
                "no planned swaps",
                f"planned swaps at {100 * assumed.recall:.0f} % recall, {minutes(assumed.lead_seconds)} lead, "
                f"{100 * assumed.false_positive:.0f} % false alarms (all assumed: no published figure for GPUs)",
                "the at-risk signals' enforce switch; measure recall and precision first (hyperpod-recovery verdicts)",
                estimate(inputs, precursors=assumed),
            )
        )
    return sorted((c for c in found if c.gain_points >= WORTH_POINTS), key=lambda c: -c.gain_points)
