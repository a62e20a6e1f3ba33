"""The goodput planner: from a cluster's failure rate, its measured recovery phases and a job's
checkpointing, the ETTR to expect, what each phase costs, the checkpoint interval that maximizes
ETTR, the spares to keep, and per job size whether to shrink or wait. Pure: inputs in, plan out.
"""

from __future__ import annotations

import math

from hyperpod_recovery.domain.elastic.decide import Estimate, shrink_wins
from hyperpod_recovery_cli.planner import defaults
from hyperpod_recovery_cli.planner import formulas as f
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
    PlannerInputs,
    Provenance,
    SparesAdvice,
)
from hyperpod_recovery_cli.planner.sentences import minutes

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
    ettr = _ettr(job, rate, tau, delta, recovery)
    interval = _interval(tau, delta, recovery, mttf)
    spares = _spares(inputs, rate, ettr)
    job_sizes = [_job_size(inputs, size, rate, tau, delta, recovery) for size in inputs.jobs]
    return GoodputPlan(
        inputs=inputs,
        ettr=ettr,
        phases=_phase_costs(inputs, ettr, mttf),
        interval=interval,
        spares=spares,
        job_sizes=job_sizes,
        changes=changes(inputs, ettr, interval, spares, job_sizes[0]),
        recovery_curve=_recovery_curve(tau, delta, recovery, mttf),
        interval_curve=_interval_curve(tau, delta, recovery, mttf),
        warnings=_warnings(inputs, job, tau, delta, recovery, mttf),
    )


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
    return _always_seconds(inputs) + no_spare_share(inputs, spares) * waited


def _always_seconds(inputs: PlannerInputs) -> float:
    """The phases every failure goes through, spare or not."""
    return sum(figure.value for phase, figure in inputs.phases_seconds.items() if phase not in REPAIR_PHASES)


def _ettr(job: int, rate: float, tau: float, delta: float, recovery: float) -> EttrEstimate:
    mttf = f.job_mttf_minutes(job, rate)
    checkpoint, rework, lost_to_recovery = f.first_order_losses(tau, delta, recovery, mttf)
    return EttrEstimate(
        model=f"{DALY}; shown split by {FIRST_ORDER}",
        assumptions=DALY_ASSUMES + FIRST_ORDER_ASSUMES[1:3],
        job_nodes=job,
        mttf_hours=mttf / 60,
        failures_per_day=f.MINUTES_PER_DAY / mttf,
        interval_seconds=tau * 60,
        cost_seconds=delta * 60,
        recovery_seconds=recovery * 60,
        ettr=f.daly_ettr(tau, delta, recovery, mttf),
        first_order_ettr=f.first_order_ettr(tau, delta, recovery, mttf),
        checkpoint_loss=checkpoint,
        rework_loss=rework,
        recovery_loss=lost_to_recovery,
    )


def _phase_costs(inputs: PlannerInputs, ettr: EttrEstimate, mttf: float) -> list[PhaseCost]:
    """Each phase's share of the expected recovery (a repair phase's only for the failures that find no
    spare), and what planning again with it one minute shorter (not below 0) gives."""
    tau, delta = ettr.interval_seconds / 60, ettr.cost_seconds / 60
    waiting = no_spare_share(inputs)
    costs = []
    for phase, figure in inputs.phases_seconds.items():
        shorter = inputs.model_copy(
            update={"phases_seconds": inputs.phases_seconds | {phase: figure.model_copy(update={"value": max(0.0, figure.value - 60)})}}
        )
        shorter_ettr = f.daly_ettr(tau, delta, expected_recovery_seconds(shorter) / 60, mttf)
        share = waiting if phase in REPAIR_PHASES else 1.0
        costs.append(
            PhaseCost(
                model=PHASE_COST,
                assumptions=FIRST_ORDER_ASSUMES,
                phase=phase,
                seconds=figure.value,
                provenance=figure.provenance,
                source=figure.source,
                ettr_points=100 * share * figure.value / 60 / mttf,
                minute_less_points=100 * (shorter_ettr - ettr.ettr),
            )
        )
    return sorted(costs, key=lambda cost: RECOVERY_PHASES.index(cost.phase))


def _interval(tau: float, delta: float, recovery: float, mttf: float) -> IntervalAdvice:
    best = f.best_interval(delta, mttf) if delta > 0 else mttf * 1e-7
    return IntervalAdvice(
        model=INTERVAL,
        assumptions=INTERVAL_ASSUMES,
        young_seconds=60 * f.young_interval(delta, mttf),
        daly_seconds=60 * f.daly_interval(delta, mttf),
        best_seconds=60 * best,
        ettr_now=f.daly_ettr(tau, delta, recovery, mttf),
        ettr_at_best=f.daly_ettr(best, delta, recovery, mttf),
    )


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


def _spares(inputs: PlannerInputs, rate: float, ettr: EttrEstimate) -> SparesAdvice:
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
        ettr_with_spare=f.daly_ettr(
            ettr.interval_seconds / 60,
            ettr.cost_seconds / 60,
            _always_seconds(inputs) / 60,
            ettr.mttf_hours * 60,
        ),
    )


def _job_size(inputs: PlannerInputs, nodes: int, rate: float, tau: float, delta: float, recovery: float) -> JobSizeAdvice:
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
        ettr=f.daly_ettr(tau, delta, recovery, mttf),
        wait_seconds=wait.seconds,
        grow_back_seconds=grow_back.seconds,
        action=action,
        why=why,
    )


def _recovery_curve(tau: float, delta: float, recovery: float, mttf: float) -> Curve:
    top = max(2 * recovery, 30.0)
    xs = [top * i / (CURVE_POINTS - 1) for i in range(CURVE_POINTS)]
    return Curve(
        model=DALY,
        assumptions=DALY_ASSUMES,
        x_label="recovery time per failure (min)",
        points=[CurvePoint(x=x, ettr=f.daly_ettr(tau, delta, x, mttf)) for x in xs],
        marked_x=recovery,
        marked_ettr=f.daly_ettr(tau, delta, recovery, mttf),
    )


def _interval_curve(tau: float, delta: float, recovery: float, mttf: float) -> Curve:
    best = f.best_interval(delta, mttf) if delta > 0 else tau
    low, high = min(tau, best) / 4, max(tau, best) * 3
    ratio = (high / low) ** (1 / (CURVE_POINTS - 1))
    xs = [low * ratio**i for i in range(CURVE_POINTS)]
    return Curve(
        model=DALY,
        assumptions=DALY_ASSUMES,
        x_label="checkpoint interval (min)",
        points=[CurvePoint(x=x, ettr=f.daly_ettr(x, delta, recovery, mttf)) for x in xs],
        marked_x=tau,
        marked_ettr=f.daly_ettr(tau, delta, recovery, mttf),
        best_x=best if delta > 0 else None,
        best_ettr=f.daly_ettr(best, delta, recovery, mttf) if delta > 0 else None,
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
    tau, delta, mttf = ettr.interval_seconds / 60, ettr.cost_seconds / 60, ettr.mttf_hours * 60

    def with_recovery(seconds: float) -> float:
        return f.daly_ettr(tau, delta, seconds / 60, mttf)

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
                with_recovery(expected_recovery_seconds(inputs, spares=spares.p99_spares)),
            )
        )
    if job.action == "shrink":
        found.append(
            change(
                "shrink",
                "waits for its replacement",
                f"shrinks to {job.job_nodes - 1} of {job.job_nodes} nodes meanwhile",
                'the job\'s opt-in, resume=elastic (docs/runbook.md, "When a job runs again")',
                with_recovery(expected_recovery_seconds(inputs, shrink=True)),
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
                with_recovery(expected_recovery_seconds(shorter)),
            )
        )
    return sorted((c for c in found if c.gain_points >= WORTH_POINTS), key=lambda c: -c.gain_points)
