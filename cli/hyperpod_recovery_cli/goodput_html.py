"""The goodput plan as one self-contained HTML page: the figures and where they came from, the two
curves (ETTR against recovery time, ETTR against checkpoint interval) as inline SVG with the
measured point marked, and every model with its assumptions. No script, font or stylesheet is
fetched: it opens offline, from a file.

Each curve's SVG carries class "curve" and data-x-label; its marked point class "measured" with
data-x and data-ettr, so a test can find what was drawn.
"""

from __future__ import annotations

from html import escape

from hyperpod_recovery_cli.planner.model import Curve, GoodputPlan, Modelled
from hyperpod_recovery_cli.planner.sentences import (
    CEILINGS,
    NOTHING_TO_CHANGE,
    WHAT_TO_CHANGE,
    change_sentence,
    recall_rows,
    recalls_heading,
    swaps_lines,
)
from hyperpod_recovery_cli.planner.sentences import minutes as _minutes
from hyperpod_recovery_cli.planner.sentences import pct as _pct

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 320, 60, 20, 20, 46
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1000px;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f3f3f3}.num{text-align:right}.warn{color:#a50026}.model{color:#555;font-size:90%}"
    "svg text{font-size:11px;fill:#333}.head{font-size:1.4em}"
)


def _table(head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _changes(plan: GoodputPlan) -> str:
    """The terminal's "what to change" block, in its sentences."""
    if not plan.changes:
        return f"<h2>What to change</h2><p>{escape(NOTHING_TO_CHANGE)}</p>"
    items = "".join(f'<li class="change">{escape(c.kind.replace("_", " "))}: {escape(change_sentence(c))}</li>' for c in plan.changes)
    return f"<h2>What to change</h2><p>{escape(WHAT_TO_CHANGE)}</p><ul>{items}</ul>" + _model(plan.changes[0])


def _swaps(plan: GoodputPlan) -> str:
    """Planned swaps as counted (when the inputs give a recall), and ETTR at several recalls, in the terminal's words."""
    html = ""
    if plan.planned_swaps is not None:
        lines = "".join(f"<li>{escape(line.strip())}</li>" for line in swaps_lines(plan.planned_swaps))
        html += f'<h2>Planned swaps</h2><ul class="swaps">{lines}</ul>' + _model(plan.planned_swaps)
    if plan.recalls:
        head, *rows = recall_rows(plan.recalls)
        html += f"<h2>Planned swaps at several recalls</h2><p>{escape(recalls_heading(plan.recalls))}</p>" + _table(head, rows)
    return html


def _ceilings(plan: GoodputPlan) -> str:
    """The ceiling each assumption sets: one row each, the ETTR it alone allows and the points it costs."""
    if not plan.ceilings:
        return ""
    rows = "".join(
        f'<tr class="ceiling" data-points="{c.points:.4f}"><td>{escape(c.assumption)}</td><td class="num">{_pct(c.ettr)}</td>'
        f'<td class="num">{-c.points:+.2f}</td></tr>'
        for c in plan.ceilings
    )
    table = f"<table><tr><th>assumption</th><th>ETTR ceiling</th><th>points</th></tr>{rows}</table>"
    return f"<h2>The ceiling each assumption sets</h2><p>{escape(CEILINGS)}</p>{table}" + _model(plan.ceilings[0])


def _model(modelled: Modelled) -> str:
    assumptions = "".join(f"<li>{escape(a)}</li>" for a in modelled.assumptions)
    return f'<div class="model"><b>model:</b> {escape(modelled.model)}<ul>{assumptions}</ul></div>'


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    step = (high - low) / count
    return [low + step * i for i in range(count + 1)]


def chart(curve: Curve) -> str:
    """A line of ETTR (%) against the curve's x, its marked point a red dot with its value, its best (if any) a green one."""
    xs = [p.x for p in curve.points]
    ys = [*(100 * p.ettr for p in curve.points), 100 * curve.marked_ettr, *([100 * curve.best_ettr] if curve.best_ettr is not None else [])]
    x_low, x_high = min(*xs, curve.marked_x), max(*xs, curve.marked_x)
    y_low, y_high = min(ys), max(ys)
    if y_high - y_low < 0.5:  # a flat curve: keep a readable scale around it
        y_low, y_high = y_low - 0.25, y_high + 0.25
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x_low) / (x_high - x_low or 1) * plot_w

    def py(y: float) -> float:
        return TOP + (y_high - y) / (y_high - y_low) * plot_h

    parts = [
        f'<svg class="curve" data-x-label="{escape(curve.x_label)}" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>',
    ]
    for y in _ticks(y_low, y_high):
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.1f}</text>')
    for x in _ticks(x_low, x_high):
        parts.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{x:.0f}</text>')
    path = " ".join(f"{'M' if i == 0 else 'L'}{px(p.x):.1f},{py(100 * p.ettr):.1f}" for i, p in enumerate(curve.points))
    parts.append(f'<path d="{path}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    if curve.best_x is not None and curve.best_ettr is not None:
        bx, by = px(curve.best_x), py(100 * curve.best_ettr)
        parts.append(f'<circle class="best" data-x="{curve.best_x:.4f}" cx="{bx:.1f}" cy="{by:.1f}" r="5" fill="#2ca02c"/>')
        parts.append(f'<text x="{bx:.1f}" y="{by + 18:.1f}" text-anchor="middle">best: {curve.best_x:.1f}</text>')
    mx, my = px(curve.marked_x), py(100 * curve.marked_ettr)
    parts.append(
        f'<circle class="measured" data-x="{curve.marked_x:.4f}" data-ettr="{curve.marked_ettr:.6f}" cx="{mx:.1f}" cy="{my:.1f}" r="5" '
        'fill="#d62728"/>'
    )
    anchor = "end" if mx > LEFT + plot_w * 0.7 else "start"
    shift = -8 if anchor == "end" else 8
    parts.append(f'<text x="{mx + shift:.1f}" y="{my - 8:.1f}" text-anchor="{anchor}">now: {_pct(curve.marked_ettr)}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle">{escape(curve.x_label)}</text>')
    parts.append(f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" transform="rotate(-90 14 {TOP + plot_h / 2})">ETTR (%)</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_plan(plan: GoodputPlan) -> str:
    inputs, ettr, interval, spares = plan.inputs, plan.ettr, plan.interval, plan.spares
    title = f"hyperpod-recovery goodput: {ettr.job_nodes:,}-node job"
    figures = [
        ["cluster nodes", f"{inputs.nodes.value:,}", inputs.nodes.provenance, inputs.nodes.source],
        ["failure rate", inputs.failure_rate.described(), inputs.failure_rate.provenance, inputs.failure_rate.source],
        [
            "checkpoint interval",
            _minutes(inputs.checkpoint_interval_seconds.value),
            inputs.checkpoint_interval_seconds.provenance,
            inputs.checkpoint_interval_seconds.source,
        ],
        [
            "checkpoint cost (blocking)",
            _minutes(inputs.checkpoint_cost_seconds.value),
            inputs.checkpoint_cost_seconds.provenance,
            inputs.checkpoint_cost_seconds.source,
        ],
    ]
    for name, share in (("precursor recall", inputs.precursor_recall), ("precursor false-positive rate", inputs.precursor_false_positive)):
        if share is not None:
            figures.append([name, _pct(share.value), share.provenance, share.source])
    for name, figure in (
        ("precursor lead time", inputs.precursor_lead_seconds),
        ("a swap's work lost past the commit", inputs.swap_lost_seconds),
        ("a swap's restart", inputs.swap_restart_seconds),
    ):
        if figure is not None:
            figures.append([name, _minutes(figure.value), figure.provenance, figure.source])
    if inputs.precursor_lead_shape:
        figures.append(["precursor lead spread (lognormal σ)", f"{inputs.precursor_lead_shape:g}", "given", ""])
    phases = [
        [p.phase, _minutes(p.seconds), f"{p.ettr_points:.3f}", f"+{p.minute_less_points:.3f}", p.provenance, p.source] for p in plan.phases
    ]
    jobs = [[f"{j.job_nodes:,}", f"{j.mttf_hours:.1f} h", _pct(j.ettr), j.action, j.why] for j in plan.job_sizes]
    warnings = "".join(f'<li class="warn">{escape(w)}</li>' for w in plan.warnings)
    kept = (
        f"; with the {spares.spares_given} kept now, {_pct(spares.no_spare_probability)} of failures find none"
        if spares.spares_given is not None and spares.no_spare_probability is not None
        else ""
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title><style>{STYLE}</style></head><body>'
        f"<h1>{escape(title)}</h1>"
        f'<p class="head">ETTR <b>{_pct(ettr.ettr)}</b> (Daly) · first order {_pct(ettr.first_order_ettr)}: '
        f"checkpoint {_pct(ettr.checkpoint_loss)} · rework {_pct(ettr.rework_loss)} · recovery {_pct(ettr.recovery_loss)}</p>"
        f"<p>job MTTF {ettr.mttf_hours:.2f} h · {ettr.failures_per_day:.2f} failures/day · recovery {_minutes(ettr.recovery_seconds)} "
        "per failure</p>"
        + _model(ettr)
        + "<h2>Figures</h2>"
        + _table(["figure", "value", "provenance", "source"], figures)
        + "<h2>Recovery phases</h2>"
        + _table(["phase", "time", "ETTR cost (pts)", "1 min less buys (pts)", "provenance", "source"], phases)
        + _model(plan.phases[0])
        + "<h2>ETTR against recovery time</h2>"
        + chart(plan.recovery_curve)
        + "<h2>ETTR against checkpoint interval</h2>"
        + chart(plan.interval_curve)
        + f"<p>Young {_minutes(interval.young_seconds)} · Daly {_minutes(interval.daly_seconds)} · best {_minutes(interval.best_seconds)}: "
        f"ETTR {_pct(interval.ettr_at_best)} ({100 * (interval.ettr_at_best - interval.ettr_now):+.2f} pts)</p>"
        + _model(interval)
        + "<h2>Spares</h2>"
        + f"<p>keep <b>{spares.p99_spares}</b> (99 % of failures find one): {spares.expected_in_repair:.2f} nodes in repair on average, "
        f"{spares.p99_in_repair} at P99{escape(kept)}; repair window {_minutes(spares.repair_seconds)} "
        f"({escape(spares.repair_provenance)}: {escape(spares.repair_source)}); with a spare for every failure, "
        f"ETTR {_pct(spares.ettr_with_spare)} ({100 * (spares.ettr_with_spare - ettr.ettr):+.2f} pts)</p>"
        + _model(spares)
        + "<h2>Shrink or wait, per job size</h2>"
        + _table(["job nodes", "MTTF", "ETTR", "action", "why"], jobs)
        + _model(plan.job_sizes[0])
        + _swaps(plan)
        + _changes(plan)
        + _ceilings(plan)
        + (f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else "")
        + "</body></html>\n"
    )
